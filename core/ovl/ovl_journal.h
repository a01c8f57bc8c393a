/*
 * ovl_journal.h - the overlay's journal (ovl_journal.c): its records and
 * their operations, reading it back one record at a time, appending.
 * Internal to core/ovl: part of ovl_int.h, which includes it.
 */
#ifndef PT_OVL_OVL_JOURNAL_H
#define PT_OVL_OVL_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct diag;
struct ovl;

#define OVL_JOURNAL	"ptfs.journal"
#define OVL_MAGIC	"ptfs-journal-2"
#define JR_MAXF		16		/* fields of one record */
#define JR_MAX		(16u << 20)	/* bytes of one record's payload */
#define JR_HDR		16		/* length, CRC, sequence number */

/* Journal operations (the first byte of a record's payload). */
enum {
	JR_HEAD = 'H',		/* magic, journal id, made-the-directory
				   (0/1), then the checkpoint's identity:
				   dev, ino, size, mtime s, mtime ns, ctime
				   s, ctime ns, CRC-32 of its central
				   directory (struct ovl_ident) */
	JR_DATA = 'D',		/* storage index: data file "<jid>.<i>" (and
				   its "<jid>.<i>.tmp") may exist from now
				   on; the manifest clean-up goes by.  With
				   a dtype as second field: its converted
				   copies "<jid>.<i>.<dtype>" (and .tmp) */
	JR_TEMP = 'W',		/* absolute path of a write-back's temporary
				   file, journaled before it is created */
	JR_MKDIR = 'M',		/* dir path, name */
	JR_CREATE = 'C',	/* dir path, name, storage index */
	JR_UNLINK = 'U',	/* dir path, name (file, link or empty dir) */
	JR_RENAME = 'R',	/* dir path, name, new dir path, new name */
	JR_VALUE = 'V',		/* path, new text */
	JR_XATTR = 'X',		/* path, xattr name, value */
	JR_TENSOR = 'T',	/* dir path, name, storage index, dtype, shape,
				   flags [, dir path, name of a file it
				   consumed]: a new tensor from a .npy */
	JR_RETYPE = 'Y',	/* storage index, dtype from, dtype to: its
				   data is "<jid>.<i>.<to>" now, converted
				   (ovl_retype.c) */
	JR_COMMIT = 'K',	/* dev, ino, size, mtime s, mtime ns of the
				   new file, just before its rename; all 0:
				   the JR_INPLACE before it given up, its
				   file renamed over (ovl_inplace.c) */
	JR_REVERT = 'Z',	/* key paths (1 to JR_MAXF): made what the
				   checkpoint holds there (ovl_undo.c) */
	JR_NEWFILE = 'N',	/* name in the folder, dev, ino: a new shard
				   file a sharded folder's write-back made
				   (O_EXCL) just before; the next mount
				   removes it unless the index names it */
	JR_RETIRE = 'O',	/* name in the folder, dev, ino: a shard the
				   write-back replaces, removed once its new
				   index is in place (JR_COMMIT matched) */
	JR_SWAP = 'S',		/* the plan of a write-back that keeps its
				   files' names (a rank set), one line per
				   file: "TDEV TINO ODEV OINO TLEN FLEN
				   TEMPFINAL" (ckpt_fsave.h): its commit
				   point.  The next mount renames each
				   temporary still there over its file
				   (ovl_many.c), then forgets the overlay */
	JR_INPLACE = 'P',	/* dev, ino, size of the checkpoint, then
				   the plan: "entry storage|- crc\n" per
				   changed record (ovl_inplace.c); journaled
				   before its first byte is patched, done
				   at the JR_COMMIT after it */
};

struct jrec {
	char op;
	int nf;
	const char *f[JR_MAXF];	/* not NUL-terminated in general */
	uint32_t len[JR_MAXF];
	uint64_t off;		/* where the record starts */
};

/* Streaming reader: one record in memory at a time. */
struct jr_reader {
	int fd;
	uint64_t size;		/* of the file when reading started */
	uint64_t pos;		/* next record */
	uint64_t seq;		/* its expected sequence number */
	bool torn;		/* stopped at a torn tail, at pos */
	unsigned char *buf;
	size_t cap;
};

void jr_reader_init(struct jr_reader *rd, int fd, uint64_t size);
void jr_reader_release(struct jr_reader *rd);

/*
 * The next record into @r (its fields point into the reader's buffer,
 * valid until the next call): 1, or 0 at the end (rd->torn set when the
 * end is a torn tail at rd->pos: a crash during an append), or -EILSEQ
 * with @d set when the journal @name is damaged (a bad record with a
 * valid one after it), or another -errno.
 */
int jr_next(struct jr_reader *rd, struct jrec *r, const char *name,
	    struct diag *d);

/* Record @r with sequence number @seq as bytes (malloc'd); -E2BIG,
 * -ENOMEM. */
int jr_encode(const struct jrec *r, uint64_t seq, unsigned char **out,
	      size_t *outlen);

/* Create the journal with its header record (the overlay dir is open). */
int jr_create(struct ovl *v, struct diag *d);

/* Append @r and fdatasync it.  0 or -errno with @d set. */
int jr_append(struct ovl *v, const struct jrec *r, struct diag *d);

/* Add NUL-terminated @s as the next field of @r. */
static inline void jr_field(struct jrec *r, const char *s)
{
	r->f[r->nf] = s;
	r->len[r->nf++] = strlen(s);
}

#endif
