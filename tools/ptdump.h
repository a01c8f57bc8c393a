/*
 * ptdump.h - what the parts of ptdump share: the options, the error line,
 * and the three dumps (the object tree in ptdump.c, the pickle listing in
 * ptdump_pkl.c, the zip records in ptdump_rec.c).
 */
#ifndef PT_TOOLS_PTDUMP_H
#define PT_TOOLS_PTDUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt/ckpt.h"

/* A list of counts given on the command line ("5,0"). */
struct slab_list {
	int n;
	uint64_t v[CKPT_MAX_DIMS];
};

/* --start, --count, --stride as given (a list may be empty: defaults). */
struct slab_args {
	struct slab_list start, count, stride;
	bool on;		/* one of them was given */
};

/* A hyperslab of one tensor, checked against its shape. */
struct slab {
	int ndim;
	uint64_t start[CKPT_MAX_DIMS], count[CKPT_MAX_DIMS];
	uint64_t stride[CKPT_MAX_DIMS];
	int64_t shape[CKPT_MAX_DIMS];	/* = count, as a shape */
	uint64_t numel;
};

struct dump_opts {
	bool json;
	bool annotate;		/* --pickle: pickletools -a */
	bool no_crc;		/* --records: do not read the data */
	const char *values;	/* --values KEY, or NULL */
	long long head;		/* --head N: elements shown; -1 all */
	struct slab_args slab;	/* --start/--count/--stride */
	const char *name;	/* the file as messages name it */
};

/* "ptdump: FILE: offset 0xOFF: MESSAGE" on stderr. */
void dump_error(const char *path, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * List @count pickles that follow one another in @p[0..@len) (the legacy
 * stream has five, data.pkl one) the way `python3 -m pickletools` lists
 * each; positions start at @base, the first byte is at @file_off in the
 * file (for error lines).  Returns 0, or -1 after printing the error.
 */
int dump_pickles(FILE *out, const struct dump_opts *o, const char *path,
		 const unsigned char *p, size_t len, uint64_t base, int count,
		 uint64_t file_off);

/* ptdump_rec.c: the records of the zip archive @path.  0, or CLI_ERROR. */
int dump_records(const char *path, const struct dump_opts *o);

/* ptdump_val.c: --values of one tensor.  0, or CLI_ERROR. */
int dump_values(const char *path, const struct dump_opts *o);

/* ptdump_slab.c: "5,0" into @l; false when it is not a list of counts. */
bool slab_parse_list(const char *arg, struct slab_list *l);
/*
 * ptdump_slab.c: the slab @a selects in @t (the lists apply to the
 * leading dimensions; start 0, stride 1 and as many as fit by default).
 * 0, or -EINVAL/-ERANGE with the reason in @err ("--start: dimension 0
 * has 4 elements, index 5 is past it").
 */
int slab_setup(const struct ckpt_tensor *t, const struct slab_args *a,
	       struct slab *s, char *err, size_t errlen);
/*
 * Elements [@e0, @e0 + @n) of slab @s of @t (row-major over the slab)
 * into @buf (@n * itemsize bytes), reading only their bytes.  0 or -errno
 * with @d set.
 */
int slab_read(struct ckpt *c, const struct ckpt_tensor *t,
	      const struct slab *s, uint64_t e0, uint64_t n, void *buf,
	      struct diag *d);

#endif
