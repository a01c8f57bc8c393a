/*
 * cvt_stream.c - ptrepack --dtype's storages converted as the writer
 * reads them: each storage of the plan is re-typed in the model with no
 * bytes anywhere (fd -1), and c->made (struct ckpt_made, ckpt_model.h)
 * answers every read of it by reading its old elements through a copy of
 * the storage as it was (an inflated record's, a shard's reads all work)
 * and converting them, CHUNK elements at a time, straight into the
 * caller's buffer (the writer's output buffer).
 *
 * Why not a temporary file, as before: the converted bytes were written
 * into one beside OUT and then copied into OUT, through the page cache
 * twice, at 0.09x cp's throughput on 1 GB (docs/benchmarks.md, issue
 * 43).  Now they are written once, direct where seqout can.
 */
#include "cvt/cvt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "diag/diag.h"

#define CHUNK	(UINT64_C(1) << 19)	/* elements per read: 2 MiB of f32 */

struct cvt_conv {
	struct ckpt_made hooks;	/* c->made */
	struct ckpt *c;
	const struct ckpt_dtype *to;
	enum cvt_flavour fl;
	bool big;		/* the checkpoint's byte order */
	uint32_t n, nst;
	uint32_t *by;		/* by storage index: entry + 1, or 0 */
	const struct ckpt_dtype **from;	/* each entry's old dtype */
	struct ckpt_storage *raw;	/* each storage as it was */
	struct ckpt_tensor *whole;	/* a tensor over all of it, of @to */
	int64_t *dims;		/* whole[i]'s size and stride */
	unsigned char *in, *out;	/* CHUNK old elements, CHUNK new */
};

static const struct ckpt_tensor *conv_tensor(void *arg,
					     const struct ckpt_storage *s)
{
	struct cvt_conv *v = arg;
	uint32_t k = s->index < v->nst ? v->by[s->index] : 0;

	/* the raw copies have the same index: identity tells them apart */
	return k && v->whole[k - 1].storage == s ? &v->whole[k - 1] : NULL;
}

/* Bytes [@pos, @pos + @len) of @t (any tensor over a converted storage,
 * row-major), converted, into @buf: as ckpt_tensor_read(). */
static long long conv_read(void *arg, const struct ckpt_tensor *t, void *buf,
			   uint64_t len, uint64_t pos, struct diag *d)
{
	struct cvt_conv *v = arg;
	uint32_t k = v->by[t->storage->index] - 1;
	const struct ckpt_dtype *from = v->from[k];
	uint64_t osz = v->to->size, isz = from->size, done = 0;
	uint64_t size = ckpt_tensor_size(t);
	struct ckpt_tensor raw = *t;	/* its old elements, where they were */

	raw.dtype = from;
	raw.storage = &v->raw[k];
	if (pos >= size)
		return 0;
	if (len > size - pos)
		len = size - pos;
	while (done < len) {
		uint64_t e0 = (pos + done) / osz, skip = (pos + done) % osz;
		uint64_t ne = (skip + len - done + osz - 1) / osz, n;
		long long got;

		ne = ne < CHUNK ? ne : CHUNK;
		got = ckpt_tensor_read(v->c, &raw, v->in, ne * isz, e0 * isz,
				       d);
		if (got >= 0 && (uint64_t)got != ne * isz)
			got = diag_corrupt(d, DIAG_NO_OFFSET, "storage '%s' "
					   "ends early", t->storage->key);
		if (got < 0)
			return got;
		n = ne * osz - skip < len - done ? ne * osz - skip : len - done;
		if (!skip && n == ne * osz) {	/* whole elements: in place */
			cvt_elems(from, v->to, v->big, v->fl, v->in,
				  (unsigned char *)buf + done, ne);
		} else {
			cvt_elems(from, v->to, v->big, v->fl, v->in, v->out,
				  ne);
			memcpy((unsigned char *)buf + done, v->out + skip, n);
		}
		done += n;
	}
	return (long long)len;
}

void cvt_conv_free(struct cvt_conv *v)
{
	if (!v)
		return;
	if (v->c->made == &v->hooks)
		v->c->made = NULL;
	for (uint32_t i = 0; i < v->n; i++)
		ckpt_storage_uninflate(&v->raw[i]);
	free(v->by);
	free(v->from);
	free(v->raw);
	free(v->whole);
	free(v->dims);
	free(v->in);
	free(v->out);
	free(v);
}

/* The storages of @plan as entries of a new @*out, not yet re-typed. */
static int conv_new(struct ckpt *c, const struct ckpt_dtype *to,
		    const struct ckpt_dtype *const *plan, uint32_t n,
		    enum cvt_flavour fl, struct cvt_conv **out,
		    struct diag *d)
{
	struct cvt_conv *v = calloc(1, sizeof(*v));
	size_t widest = 1;

	for (uint32_t k = 0; k < c->nstorages; k++)
		if (plan[k] && plan[k]->size > widest)
			widest = plan[k]->size;
	if (v) {
		v->c = c;
		v->n = n;
		v->nst = c->nstorages;
		v->by = calloc(v->nst + 1, sizeof(*v->by));
		v->from = calloc(n, sizeof(*v->from));
		v->raw = calloc(n, sizeof(*v->raw));
		v->whole = calloc(n, sizeof(*v->whole));
		v->dims = calloc(2 * (size_t)n, sizeof(*v->dims));
		v->in = malloc(CHUNK * widest);
		v->out = malloc(CHUNK * to->size);
	}
	if (!v || !v->by || !v->from || !v->raw || !v->whole || !v->dims ||
	    !v->in || !v->out) {
		if (v)
			v->n = 0;	/* no raw copy to uninflate */
		cvt_conv_free(v);
		return diag_nomem(d);
	}
	v->to = to;
	v->fl = fl;
	v->big = c->byteorder && !strcmp(c->byteorder, "big");
	v->hooks = (struct ckpt_made){ conv_tensor, conv_read, v };
	n = 0;
	for (uint32_t k = 0; k < c->nstorages; k++) {
		struct ckpt_storage *s = c->storages[k];

		if (!plan[k])
			continue;
		v->from[n] = plan[k];
		/* the record as it was; an inflated copy is made again for
		   it (the re-type drops the storage's) */
		v->raw[n] = *s;
		v->raw[n].zdone = false;
		v->by[k] = n + 1;
		n++;
	}
	*out = v;
	return 0;
}

/* whole[i]: storage @s (re-typed) as one contiguous 1-d tensor. */
static void conv_whole(struct cvt_conv *v, uint32_t i, struct ckpt *c,
		       struct ckpt_storage *s)
{
	struct ckpt_tensor *w = &v->whole[i];
	uint64_t n = s->nbytes / v->to->size;

	for (uint32_t j = 0; j < c->ntensors && !w->x; j++)
		if (c->tensors[j]->storage == s)
			*w = *c->tensors[j];	/* its x, never NULL */
	w->kind = CKPT_T_STRIDED;
	w->contiguous = true;
	w->fresh = w->shape_set = w->x_own = false;
	w->ndim = 1;
	w->dtype = v->to;
	w->storage = s;
	w->offset = 0;
	w->shape = &v->dims[2 * i];
	w->shape[0] = (int64_t)n;
	w->shape[1] = 1;
	w->numel = n;
}

int cvt_ckpt(struct ckpt *c, const struct ckpt_dtype *to,
	     const struct ckpt_dtype *const *plan, enum cvt_flavour fl,
	     struct cvt_conv **conv, struct cvt_stats *st, struct diag *d)
{
	struct cvt_stats none;
	struct cvt_conv *v = NULL;
	uint32_t n = 0;
	int rc;

	*conv = NULL;
	st = st ? st : &none;
	memset(st, 0, sizeof(*st));
	for (uint32_t k = 0; k < c->nstorages; k++)
		n += plan[k] != NULL;
	if (!n)
		return 0;
	if (c->made)	/* one set of made storages at a time */
		return diag_set(d, -EBUSY, DIAG_NO_OFFSET, "--dtype: the "
				"checkpoint is being converted already");
	rc = conv_new(c, to, plan, n, fl, &v, d);
	if (rc)
		return rc;
	for (uint32_t k = 0; k < c->nstorages; k++) {
		struct ckpt_storage *s = c->storages[k];

		if (!plan[k])
			continue;
		st->storages++;
		st->bytes_in += s->nbytes;
		/* no bytes anywhere: fd -1 fails any read that bypasses
		   c->made */
		cvt_storage_set(s, s->nbytes / plan[k]->size, to, -1, 0);
		st->bytes_out += s->nbytes;
	}
	for (uint32_t i = 0; i < c->ntensors; i++) {
		struct ckpt_tensor *t = c->tensors[i];

		if (t->storage && plan[t->storage->index]) {
			t->dtype = to;
			st->tensors += t->shown;
		}
	}
	for (uint32_t k = 0; k < c->nstorages; k++)
		if (plan[k])
			conv_whole(v, v->by[k] - 1, c, c->storages[k]);
	c->made = &v->hooks;
	*conv = v;
	return 0;
}
