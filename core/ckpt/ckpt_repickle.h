/*
 * ckpt_repickle.h - what the two halves of the repickler share (internal
 * to core/ckpt): ckpt_repickle.c writes the object tree, edited
 * containers from the model; ckpt_repickle_pid.c writes what names a
 * storage (its new key, persistent ids, the offsets of cut storages, the
 * tensors made from new files) and plans --clone's cuts;
 * ckpt_repickle_val.c writes the values edited through their files.
 */
#ifndef PT_CKPT_REPICKLE_H
#define PT_CKPT_REPICKLE_H

#include "ckpt_int.h"

#include "pickle/pkl_emit.h"

#define BATCH		1000		/* items per SETITEMS/APPENDS */
#define SYNTH_KEY	(UINT64_C(1) << 32)	/* memo keys for new objects */
#define KEY_MEMO	(3 * SYNTH_KEY)		/* + storage index: its key */
#define FRESH_MEMO	(4 * SYNTH_KEY)		/* + count: rp_memo_fresh() */

/* One write of data.pkl. */
struct wb {
	struct ckpt *c;
	struct diag *d;
	struct pkl_emit *e;
	struct ckpt_node **dirty;	/* pickle value id -> edited dir */
	uint32_t *out;		/* storage index -> new key + 1, 0 unused */
	struct ckpt_storage **order;	/* storages in first-use order */
	uint32_t nout;
	/*
	 * Argument tuples of strided rebuild calls, (pid, offset, size,
	 * stride, ...), whose offset may be rewritten: by pickle value id,
	 * the tensor's item size, 0 for other values.  Only allocated for a
	 * legacy file (a 6-tuple persistent id may name a view into its
	 * storage) or when storages are cut (--clone).
	 */
	uint8_t *args;
	uint64_t *cut;		/* storage index -> bytes cut from its front */
	uint64_t *keep;		/* storage index -> bytes kept, when cut */
	bool *trim;		/* storage index -> it is cut */
	bool in_args;		/* writing the pid of such a tuple */
	uint64_t nfresh;	/* memo_fresh() keys used */
	bool retyped;		/* some storage has a new dtype (core/cvt) */
	/* the pickle being written from, in a model of several (a shard's,
	   a DCP value's: emit_in_doc()); NULL: c->doc */
	const struct ckpt_vdoc *vdoc;
	const uint8_t *part;	/* ckpt_repickle.part */
};

/* A str, bytes or tuple the repickler makes, memoized under a key of its
   own, as pickle memoizes every one it writes. */
int rp_memo_fresh(struct wb *w);
/* The new key of storage @s, numbered on first use. */
uint32_t rp_out_key(struct wb *w, struct ckpt_storage *s);
/* pkl_emit's persistent id hook (@wbp: the struct wb). */
int rp_hook_persid(struct pkl_emit *e, const struct pkl_value *pid,
		   void *wbp);
/* Argument tuple @v of a rebuild call whose offset changes: 1 when
   written, 0 when it needs no change, or -errno. */
int rp_emit_args(struct wb *w, const struct pkl_value *v);
int rp_emit_bool(struct pkl_emit *e, bool b);
/* Value node @n, edited: from its text (ckpt_repickle_val.c). */
int rp_emit_value_file(struct wb *w, const struct ckpt_node *n);
/* Which argument tuples rp_emit_args() may rewrite, and per storage the
   persistent ids naming it (@npid) and those in such tuples (@nargs). */
void rp_scan_args(struct wb *w, uint32_t *npid, uint32_t *nargs);
/* --clone: which storages to cut, and where (w->trim, cut, keep). */
int rp_plan_clone(struct wb *w, uint8_t pct, uint32_t *ntrimmed);

#endif
