/*
 * ckpt_gguf.c - a GGUF file as the model (gguf_parse.c reads its header):
 *
 *   GGUF                        the model
 *   tensor info i               storage i (key "i") over its data bytes,
 *                               one contiguous tensor over all of it,
 *                               the root's child i, named as in the file
 *   F32 F16 F64 I8..I64         their torch dtypes, shape in torch order
 *                               (ne reversed); in a big-endian file the
 *                               elements are big-endian (c->byteorder)
 *   BF16                        bfloat16, in a little-endian file
 *   a block type (Q8_0, Q4_K,   uint8 bytes, shaped as gguf-py's reader
 *   ...), BF16 in a big-endian  shapes them: torch order with the last
 *   file                        size in bytes (ne[0] / block * bytes);
 *                               their values are coded (ckpt_fmt_gguf.c)
 *   key/values                  c->meta, typed ("u32"), as text
 *
 * gguf-py writes a big-endian file's BF16 and block data unswapped, as
 * its quantizer made them (gguf_types.h): so those stay bytes, decoded
 * little-endian, and only the plain types follow the file's byte order.
 */
#include "ckpt/ckpt_int.h"
#include "gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Does @t's data read as its torch dtype in this file? */
bool gguf_plain(const struct gguf *g, const struct gguf_tensor *t)
{
	return t->type->torch && (!g->big || strcmp(t->type->name, "BF16"));
}

static int tensor(struct ckpt *c, const struct gguf *g,
		  const struct gguf_tensor *gt, uint32_t i, struct diag *d)
{
	bool plain = gguf_plain(g, gt);
	const struct ckpt_dtype *dt = plain ?
		ckpt_dtype_by_name(gt->type->torch) : ckpt_dtype_bytes();
	struct ckpt_storage *s;
	struct ckpt_tensor *t;
	char key[24];
	int rc;

	if (!dt)
		return diag_corrupt(d, gt->at, "tensor '%s': no dtype for %s",
				    gt->name, gt->type->name);
	snprintf(key, sizeof(key), "%" PRIu32, i);
	rc = ckpt_storage_add(c->b, key, dt, "cpu", gt->nbytes / dt->size,
			      gt->at, &s);
	if (rc)
		return rc;
	s->data_off = g->data + gt->off;
	t = ckpt_tensor_new(c->b, (int)gt->ndim);
	if (!t)
		return diag_nomem(d);
	for (uint32_t k = 0; k < gt->ndim; k++)
		t->shape[k] = (int64_t)gt->ne[gt->ndim - 1 - k];
	if (!plain && gt->ndim)
		t->shape[gt->ndim - 1] = (int64_t)(gt->ne[0] / gt->type->block *
						   gt->type->bytes);
	if (!plain && !gt->ndim) {	/* a 0-d BF16 of a big-endian file */
		t->ndim = 1;
		t->shape[0] = (int64_t)gt->nbytes;
	}
	if (!ckpt_tensor_c_strides(t))
		return diag_corrupt(d, gt->at, "tensor '%s': strides overflow",
				    gt->name);
	t->kind = CKPT_T_STRIDED;
	t->storage = s;
	t->dtype = dt;
	t->pkl_off = gt->at;
	rc = ckpt_tensor_check(c, t, d);
	if (!rc)
		s->ntensors++;
	return rc;
}

/* The key/values as c->meta, each value's text in the arena, all of
 * them within GGUF_META_MAX (later ones cut). */
static int meta(struct ckpt *c, const struct gguf *g, struct diag *d)
{
	size_t total = 0;

	c->meta = arena_alloc(&c->arena, (g->nkv + 1) * sizeof(*c->meta));
	if (!c->meta)
		return diag_nomem(d);
	for (uint64_t i = 0; i < g->nkv; i++) {
		const struct gguf_kv *kv = &g->kv[i];
		struct ckpt_meta *m = &c->meta[i];
		char *text, type[32];
		size_t len;
		int rc = gguf_kv_text(g, c->fd, kv, GGUF_META_MAX - total,
				      &text, &len, d);

		if (rc)
			return rc;
		total += len < GGUF_META_MAX - total ? len : GGUF_META_MAX -
			 total;
		m->key = kv->key;
		m->klen = kv->klen;
		m->val = arena_strndup(&c->arena, text, len);
		m->vlen = len;
		free(text);
		if (kv->type == GGUF_ARRAY)
			snprintf(type, sizeof(type), "array[%s]",
				 gguf_type_name(kv->atype));
		else
			snprintf(type, sizeof(type), "%s",
				 gguf_type_name(kv->type));
		m->type = arena_strndup(&c->arena, type, strlen(type));
		if (!m->val || !m->type)
			return diag_nomem(d);
		c->nmeta++;
	}
	c->meta_given = true;
	return 0;
}

static const char *name_of(void *arg, uint32_t i, size_t *len)
{
	const struct gguf *g = arg;

	*len = g->t[i].nlen;
	return g->t[i].name;
}

int ckpt_gguf_open(struct ckpt *c, struct diag *d)
{
	struct gguf *g = arena_alloc(&c->arena, sizeof(*g));
	int rc;

	if (!g)
		return diag_nomem(d);
	rc = gguf_parse(c, c->fd, c->file_size, g, d);
	if (rc)
		return rc;
	if (g->nt > UINT32_MAX / 2)
		return diag_unsupported(d, 8, "%" PRIu64 " tensors: more than "
					"ptfs holds", g->nt);
	c->gguf = g;
	c->hdr_len = g->info_end;
	c->data_end = g->data_end;
	if (g->big && !(c->byteorder = strdup("big")))
		return diag_nomem(d);
	rc = ckpt_build_begin(c, d);
	for (uint64_t i = 0; i < g->nt && !rc; i++)
		rc = tensor(c, g, &g->t[i], (uint32_t)i, d);
	if (!rc)
		rc = ckpt_flat_root(c, name_of, g, (uint32_t)g->nt, d);
	if (!rc)
		rc = meta(c, g, d);
	return rc;
}
