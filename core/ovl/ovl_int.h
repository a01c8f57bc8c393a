/*
 * ovl_int.h - what the overlay's files share: the journal's records
 * (ovl_journal.c) and the replay of them (ovl.c).  Not for callers.
 */
#ifndef PT_OVL_OVL_INT_H
#define PT_OVL_OVL_INT_H

#include "ovl.h"
#include "diag/diag.h"

#define OVL_JOURNAL	"journal"
#define OVL_MAGIC	"ptfs-journal-1"
#define JR_MAXF		6		/* fields of one record */
#define JR_MAX		(16u << 20)	/* bytes of one record */

/* Journal operations (the first byte of a record's payload). */
enum {
	JR_HEAD = 'H',		/* magic, size, mtime s, mtime ns */
	JR_MKDIR = 'M',		/* dir path, name */
	JR_CREATE = 'C',	/* dir path, name, storage index */
	JR_UNLINK = 'U',	/* dir path, name (file, link or empty dir) */
	JR_RENAME = 'R',	/* dir path, name, new dir path, new name */
	JR_VALUE = 'V',		/* path, new text */
	JR_XATTR = 'X',		/* path, xattr name, value */
	JR_COMMIT = 'K',	/* size, mtime s, mtime ns of the new file */
};

struct jrec {
	char op;
	int nf;
	const char *f[JR_MAXF];	/* not NUL-terminated in general */
	uint32_t len[JR_MAXF];
};

/* Create the journal with its header record (the overlay dir exists). */
int jr_create(struct ovl *v, struct diag *d);

/* Append @r and fdatasync it.  0 or -errno with @d set. */
int jr_append(struct ovl *v, const struct jrec *r, struct diag *d);

/*
 * Read the whole journal of @v (v->jfd open): its records, the header
 * first, into *@recs (fields point into *@buf; free both).  A torn tail
 * (a record cut short or with a bad CRC: the crash came while it was being
 * written) ends the journal and is cut off the file.  0 or -errno.
 */
int jr_load(struct ovl *v, struct jrec **recs, size_t *nrecs,
	    unsigned char **buf, struct diag *d);

/* A decimal field as a number; false if it is not one. */
bool jr_num(const struct jrec *r, int i, uint64_t *out);

#endif
