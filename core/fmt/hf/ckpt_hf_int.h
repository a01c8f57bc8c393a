/*
 * ckpt_hf_int.h - a Hugging Face folder's open, close and shards as its
 * descriptor (ckpt_fmt_hf.c) and its own files use them.  Internal to
 * core/fmt/hf; ckpt_hf.h is what the layers above read.
 */
#ifndef PT_FMT_HF_CKPT_HF_INT_H
#define PT_FMT_HF_CKPT_HF_INT_H

#include "ckpt/ckpt_int.h"

/*
 * ckpt_shards.c: open the Hugging Face index of the folder c->fd (@is_dir)
 * or the index file c->path, and every shard it names, as one model.
 */
int ckpt_hf_open(struct ckpt *c, bool is_dir, struct diag *d);
/* ckpt_shards.c: close the shards and the folder (ckpt_close()). */
void ckpt_hf_close(struct ckpt *c);
/* ckpt_shards.c: 0, or -ENOTSUP with @d set when shards of @c's index
 * are absent: whatever is written of it would load but lack tensors. */
int ckpt_hf_whole(const struct ckpt *c, struct diag *d);
/* ckpt_shards.c: the shard node @n was read from (of c->hf->shards), or
 * UINT32_MAX (the root, or made by an edit). */
uint32_t ckpt_hf_node_shard(const struct ckpt *c, const struct ckpt_node *n);
/* ckpt_shards.c: the checkpoint whose file holds @s's bytes: a shard. */
struct ckpt *ckpt_hf_owner(struct ckpt *c, const struct ckpt_storage *s);

#endif
