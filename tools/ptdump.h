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

struct dump_opts {
	bool json;
	bool annotate;		/* --pickle: pickletools -a */
	bool no_crc;		/* --records: do not read the data */
	const char *values;	/* --values KEY, or NULL */
	long long head;		/* --head N: elements shown; -1 all */
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

#endif
