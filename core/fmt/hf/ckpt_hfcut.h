/*
 * ckpt_hfcut.h - a checkpoint cut into the shards of a Hugging Face
 * folder as save_pretrained cuts a state dict (ckpt_hfout.c): what the
 * folder writer writes and the mount's computed folder (ckpt_hfimage.c)
 * serves, decided in one place.  Internal to core/fmt/hf.
 */
#ifndef PT_FMT_HF_CKPT_HFCUT_H
#define PT_FMT_HF_CKPT_HFCUT_H

#include "ckpt/ckpt_stint.h"

#define HF_INDEX	"model.safetensors.index.json"
#define HF_ONE		"model.safetensors"

struct hf_cut {
	/* in */
	struct ckpt *c;
	const struct ckpt_write_opts *o;	/* max_shard, note, st_drop */
	struct diag *d;
	/* out */
	struct st_flat f;	/* the flat map (tie_first_seen) */
	uint32_t *shard;	/* by flat entry: its shard; UINT32_MAX: a
				   tie, left out (o->note was told) */
	uint32_t nshards;
	uint64_t total;		/* the index's total_size */
	uint64_t params;	/* ... and total_parameters */
};

/* Flatten h->c and cut it (h->f.drop_tensors may be set first).  0 or
 * -errno with h->d set; released either way on error. */
int hf_cut_make(struct hf_cut *h);
void hf_cut_release(struct hf_cut *h);

/* Shard @k's file name (model.safetensors when there is one) into @buf
 * (at least 64 bytes). */
const char *hf_shard_name(const struct hf_cut *h, uint32_t k, char *buf,
			  size_t size);

/* The index's text (json.dumps(index, indent=2, sort_keys=True) + "\n")
 * appended to @b.  0 or -ENOMEM with h->d set. */
int hf_index_text(const struct hf_cut *h, struct sbuf *b);

/* Is @name a file the cut's folder holds itself (a shard, an index)? */
bool hf_cut_ours(const struct hf_cut *h, const char *name);

#endif
