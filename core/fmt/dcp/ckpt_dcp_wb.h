/*
 * ckpt_dcp_wb.h - what the write-backs into files holding tensors in
 * chunks share (ckpt_dcp_wbrun.c): a DCP directory's (ckpt_dcp_wb.c) and
 * a per-rank shard set's (core/fmt/ranks/ckpt_ranks_wb.c).  Both keep
 * every record where it is: a file touched is a clone of the old one
 * with the changed chunks' runs patched and each patched record's CRC-32
 * fixed where its zip keeps it (ptz_entry_put_crc()), so no offset moves.
 * Internal to core/fmt.
 *
 *   dcp_wb_plan()   which chunks' bytes differ from the staged storage's
 *                   (compared run by run), and so which files
 *   dcp_wb_clone()  a new file made the old one's clone (else a copy)
 *   dcp_wb_put()    a changed chunk's runs into a file, at any place
 *                   that holds that chunk (a DCP item, a rank's piece or
 *                   its replica)
 *   dcp_wb_crc()    a record's CRC-32, from its bytes in the new file
 */
#ifndef PT_FMT_DCP_CKPT_DCP_WB_H
#define PT_FMT_DCP_CKPT_DCP_WB_H

#include "ckpt_dcp.h"

#define DCP_WB_BUF	(1u << 20)	/* bytes compared or copied at once */

struct dcp_wb {
	struct ckpt *c;
	struct ckpt_dcp *p;
	struct diag *d;
	/* a storage no tensor of p->tens is over (a rank set's plain
	   tensor: one chunk, its whole record) counts as a 1-d tensor of
	   its elements; else it is refused */
	bool plain;
	uint8_t *fmark;		/* by file: a chunk of it changed */
	uint8_t *cmark;		/* by chunk: its bytes changed */
	unsigned char *a, *b;	/* DCP_WB_BUF each */
	uint64_t written;	/* bytes dcp_wb_put() wrote */
	/* the run walker's job */
	const struct ckpt_storage *s;	/* the staged storage */
	const struct dcp_chunk *ch;
	int out;		/* the file written */
	uint64_t at;		/* where the chunk's byte 0 lies in it */
	const char *out_name;	/* ... its name, for messages */
	struct ckpt_tensor one;	/* the 1-d tensor of a plain storage */
	int64_t one_shape[2];
};

/* Set @w up for @c (c->dcp); 0 or -ENOMEM with @d set.  dcp_wb_end() in
 * any case. */
int dcp_wb_begin(struct dcp_wb *w, struct ckpt *c, bool plain, struct diag *d);
void dcp_wb_end(struct dcp_wb *w);

/*
 * Mark the chunks whose bytes a staged storage changes (w->cmark) and
 * their items' files (w->fmark).  A storage retyped, or not the size of
 * the tensor over it, is refused (-ENOTSUP): the rules let none through.
 * 0 or -errno with w->d set.
 */
int dcp_wb_plan(struct dcp_wb *w);

/* The tensor over storage @i (its global shape), or NULL. */
const struct ckpt_tensor *dcp_wb_tensor(struct dcp_wb *w, uint32_t i);

/*
 * A new file @out (@out_name) made a clone of @from (@from_path, @size
 * bytes) where the file system shares blocks, else a copy.  0 or -errno
 * with w->d set (naming both).
 */
int dcp_wb_clone(struct dcp_wb *w, int out, int from, uint64_t size,
		 const char *from_path, const char *out_name);

/*
 * The staged bytes of chunk @k (of storage @i) into @out (@name), its
 * byte 0 at @at.  0 or -errno with w->d set.
 */
int dcp_wb_put(struct dcp_wb *w, uint32_t i, uint32_t k, int out,
	       uint64_t at, const char *name);

/*
 * Record @e of the zip @z, now in the new file @fd (@name: the archive
 * lies there where it lay in z->fd, from z->base on): its CRC-32 computed
 * from its bytes there and written into its local header, data
 * descriptor and central directory entry.  0 or -errno with w->d set.
 */
int dcp_wb_crc(struct dcp_wb *w, const struct ptz_reader *z,
	       struct ptz_entry *e, int fd, const char *name);

#endif
