/*
 * cvt_dequant.c - scaled float8 weights back to a wider dtype (ptrepack
 * --dequant), bit for bit what torch gives for
 *
 *   (w.float() * scale_expanded).to(dtype)
 *
 * where scale_expanded repeats each scale over its block (the pairs and
 * their checks: cvt_scale.c).  The product is float32 (the float8 value
 * widened exactly, as .float() does), then rounded by cvt_elems(), so
 * infinities and NaN come out as torch's: one float32 multiply per
 * element on the same hardware, done once per code and block (a table of
 * 256, below).  One thing torch does not pin down: when weight and scale
 * are both NaN, x86 gives the first operand's NaN, and torch 2.14's CPU
 * kernel gives the weight's or the scale's by the element's lane in its
 * 16-wide loop (the compiler's choice of operand order per lane); we
 * give the weight's, as its scalar path does.  It shows only in float16
 * (the sign) and float32 (the payload): every NaN is 0x7fc0 in bfloat16.
 */
#include "cvt/cvt_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cvt/cvt.h"
#include "diag/diag.h"

#define CHUNK	(UINT64_C(1) << 20)	/* float8 codes per read */

/*
 * The weights made when read (ckpt_made, ckpt_model.h): each dequantized
 * weight's storage is re-typed in place with no bytes anywhere, and the
 * writer's reads of it come here; its float8 bytes are read through a
 * copy of the storage and tensor as they were (any format's own reads,
 * a shard's, a DCP tensor's chunks), CHUNK elements at a time.
 */
struct cvt_made {
	struct ckpt_made hooks;	/* c->made */
	struct ckpt *c;
	const struct ckpt_dtype *to;
	struct cvt_pair *v;		/* the pairs */
	struct ckpt_storage *raw_s;	/* their weights' storages as they */
	struct ckpt_tensor *raw_t;	/* were, and tensors over those */
	uint32_t n, nst;
	uint32_t *by;		/* by storage index: pair + 1, or 0 */
	uint32_t cur;		/* the pair whose scales sc holds, + 1 */
	uint64_t row;		/* the block row tab is for, + 1 */
	const struct ckpt_dtype *lut_of;
	float lut[256], x[256];
	float *sc;
	unsigned char *tab;	/* per block of the row: 256 results */
	uint8_t *in, *out;
};

static const struct ckpt_tensor *made_tensor(void *arg,
					     const struct ckpt_storage *s)
{
	struct cvt_made *m = arg;
	uint32_t k = s->index < m->nst ? m->by[s->index] : 0;

	return k && m->v[k - 1].w->tensor->storage == s ?
	       m->v[k - 1].w->tensor : NULL;
}

/* Pair @k's scales in m->sc and its float8's widening in m->lut. */
static int made_load(struct cvt_made *m, uint32_t k, struct diag *d)
{
	const struct ckpt_dtype *f32 = ckpt_dtype_by_name("float32");
	const struct cvt_pair *p = &m->v[k];
	const struct ckpt_tensor *s = p->s->tensor;
	uint64_t len = s->numel * sizeof(float);
	uint8_t codes[256];
	long long got;
	float *sc;
	unsigned char *tab;

	if (m->cur == k + 1)
		return 0;
	sc = realloc(m->sc, len + 1);
	if (sc)
		m->sc = sc;
	tab = sc ? realloc(m->tab, p->sc * 256 * m->to->size) : NULL;
	if (!tab)
		return diag_nomem(d);
	m->tab = tab;
	m->row = 0;
	got = ckpt_tensor_read(m->c, s, sc, len, 0, d);
	if (got >= 0 && (uint64_t)got != len)
		got = diag_corrupt(d, DIAG_NO_OFFSET, "%s ends early",
				   p->s->name);
	if (got < 0)
		return (int)got;
	if (m->lut_of != p->from) {
		for (unsigned i = 0; i < 256; i++)
			codes[i] = (uint8_t)i;
		cvt_elems(p->from, f32, false, CVT_TORCH2, codes, m->lut, 256);
		m->lut_of = p->from;
	}
	m->cur = k + 1;
	return 0;
}

/*
 * Block row @br of pair @p: for each of its blocks the 256 float8 codes
 * times the block's scale, in float32, rounded to m->to.  A block's
 * elements are then a lookup each, bit for bit what the multiply and
 * cvt_elems() give one by one (each code meets the same scale).
 */
static void made_tables(struct cvt_made *m, const struct cvt_pair *p,
			uint64_t br)
{
	const struct ckpt_dtype *f32 = ckpt_dtype_by_name("float32");
	size_t one = 256 * m->to->size;

	for (uint64_t j = 0; j < p->sc; j++) {
		float s = m->sc[br * p->sc + j];

		for (unsigned i = 0; i < 256; i++)
			m->x[i] = m->lut[i] * s;
		cvt_elems(f32, m->to, false, CVT_TORCH2, m->x, m->tab + j * one,
			  256);
	}
	m->row = br + 1;
}

/* Elements [@e0, @e0 + @n) of @p's weight (@w, float8 codes), scaled and
 * rounded, into @out. */
static void made_run(struct cvt_made *m, const struct cvt_pair *p,
		     const uint8_t *w, uint64_t e0, uint64_t n, void *out)
{
	uint64_t r = e0 / p->cols, col = e0 % p->cols;
	unsigned char *o = out;

	while (n) {
		uint64_t end = p->cols - col < n ? p->cols : col + n;

		if (m->row != r / p->bm + 1)
			made_tables(m, p, r / p->bm);
		n -= end - col;
		while (col < end) {
			uint64_t b = col / p->bn, stop = (b + 1) * p->bn;
			const unsigned char *t = m->tab + b * 256 * m->to->size;

			if (stop > end)
				stop = end;
			/* memcpy: @out need not be aligned; each is one move */
			if (m->to->size == 2)
				for (; col < stop; col++, o += 2)
					memcpy(o, t + 2 * *w++, 2);
			else
				for (; col < stop; col++, o += 4)
					memcpy(o, t + 4 * *w++, 4);
		}
		r++;
		col = 0;
	}
}

static long long made_read(void *arg, const struct ckpt_tensor *t, void *buf,
			   uint64_t len, uint64_t pos, struct diag *d)
{
	struct cvt_made *m = arg;
	uint32_t k = m->by[t->storage->index] - 1;
	const struct cvt_pair *p = &m->v[k];
	uint64_t osz = m->to->size, numel = p->rows * p->cols, done = 0;
	int rc = made_load(m, k, d);

	if (rc)
		return rc;
	if (pos >= numel * osz)
		return 0;
	if (len > numel * osz - pos)
		len = numel * osz - pos;
	while (done < len) {
		uint64_t e0 = (pos + done) / osz, skip = (pos + done) % osz;
		uint64_t ne = (skip + len - done + osz - 1) / osz, n;
		long long got;

		ne = ne < CHUNK ? ne : CHUNK;
		got = ckpt_tensor_read(m->c, &m->raw_t[k], m->in, ne, e0, d);
		if (got >= 0 && (uint64_t)got != ne)
			got = diag_corrupt(d, DIAG_NO_OFFSET, "%s ends early",
					   p->w->name);
		if (got < 0)
			return got;
		n = ne * osz - skip < len - done ? ne * osz - skip : len - done;
		if (!skip && n == ne * osz) {	/* whole elements: in place */
			made_run(m, p, m->in, e0, ne, (char *)buf + done);
		} else {
			made_run(m, p, m->in, e0, ne, m->out);
			memcpy((unsigned char *)buf + done, m->out + skip, n);
		}
		done += n;
	}
	return (long long)len;
}

const struct ckpt_dtype *cvt_dequant_dtype(const char *name)
{
	static const char *const names[][3] = {
		{ "bf16", "bfloat16", "bfloat16" },
		{ "fp16", "float16", "float16" },
		{ "fp32", "float32", "float32" },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (!strcmp(name, names[i][0]) || !strcmp(name, names[i][1]))
			return ckpt_dtype_by_name(names[i][2]);
	return NULL;
}

void cvt_made_free(struct cvt_made *m)
{
	if (!m)
		return;
	if (m->c->made == &m->hooks)
		m->c->made = NULL;
	for (uint32_t i = 0; i < m->n; i++)
		ckpt_storage_uninflate(&m->raw_s[i]);
	free(m->v);
	free(m->raw_s);
	free(m->raw_t);
	free(m->by);
	free(m->sc);
	free(m->tab);
	free(m->in);
	free(m->out);
	free(m);
}

/* What -v says of @p. */

static void tell(const struct cvt_scale_opt *o, const struct cvt_pair *p)
{
	char what[400], a[64], b[64];
	char *path;

	if (!o->say || !(path = ckpt_node_path(p->w)))
		return;
	if (p->sr == 1 && p->sc == 1)
		snprintf(b, sizeof(b), "one scale");
	else if (p->bm == 1 && p->bn == p->cols)
		snprintf(b, sizeof(b), "a scale per row");
	else
		snprintf(b, sizeof(b), "a scale per %llux%llu block",
			 (unsigned long long)p->bm, (unsigned long long)p->bn);
	snprintf(what, sizeof(what), "%s %s x %s (%s) -> %s; %s%s%s dropped",
		 p->from->name, cvt_scale_shape(p->w->tensor, a, sizeof(a)),
		 p->s->name, b, o->to->name, p->s->name, p->in ? " and " : "",
		 p->in ? p->in->name : "");
	o->say(o->say_arg, path, what);
	free(path);
}

/* The pairs as made-when-read weights of @c: *@out. */
static int made_new(struct ckpt *c, const struct ckpt_dtype *to,
		    struct cvt_pair *v, uint32_t n, struct cvt_made **out,
		    struct diag *d)
{
	struct cvt_made *m = calloc(1, sizeof(*m));

	if (m) {
		m->v = v;
		m->n = n;
		m->nst = c->nstorages;
		m->raw_s = calloc(n + 1, sizeof(*m->raw_s));
		m->raw_t = calloc(n + 1, sizeof(*m->raw_t));
		m->by = calloc(m->nst + 1, sizeof(*m->by));
		m->in = malloc(CHUNK);
		m->out = malloc(CHUNK * to->size);
	}
	if (!m || !m->raw_s || !m->raw_t || !m->by || !m->in || !m->out) {
		if (m)
			cvt_made_free(m);
		else
			free(v);
		return diag_nomem(d);
	}
	m->c = c;
	m->to = to;
	m->hooks = (struct ckpt_made){ made_tensor, made_read, m };
	for (uint32_t i = 0; i < n; i++) {
		struct ckpt_tensor *w = v[i].w->tensor;

		/* the record as it was; an inflated copy is made again for
		   it (the re-type below drops the storage's) */
		m->raw_s[i] = *w->storage;
		m->raw_s[i].zdone = false;
		m->raw_t[i] = *w;
		m->raw_t[i].storage = &m->raw_s[i];
		m->by[w->storage->index] = i + 1;
	}
	*out = m;
	return 0;
}

/*
 * A weight's bytes found now, while it is still float8: a DCP chunk is
 * checked against its tensor's dtype when it is first found, and once
 * the tensor is re-typed it would be refused (as ptrepack --no-crc, and
 * a mount, which read nothing first, were).  One place
 * (ckpt_storage_data()) or each piece (ckpt_pieced_where() walks them,
 * reading no data).  0 or -errno with @d set.
 */
static int pieces_found(struct ckpt *c, const struct ckpt_tensor *t,
			struct diag *d)
{
	uint64_t size = ckpt_tensor_nbytes(t), pos = 0, off, len;
	int fd, rc = 0;

	if (!ckpt_storage_pieced(c, t->storage))
		return ckpt_storage_data(c, t->storage, &fd, &off, d);
	t = ckpt_pieced_tensor(c, t->storage);
	while (!rc && t && pos < size) {
		rc = ckpt_pieced_where(c, t, pos, &fd, &off, &len, d);
		pos += len ? len : size - pos;
	}
	return rc;
}

int cvt_dequant(struct ckpt *c, const struct cvt_scale_opt *o,
		struct cvt_made **made, struct cvt_scale_stats *st,
		struct diag *d)
{
	struct cvt_made *m = NULL;
	struct cvt_pair *v = NULL;
	uint32_t n = 0;
	int rc;

	*made = NULL;
	memset(st, 0, sizeof(*st));
	rc = cvt_scale_collect(c, cvt_scale_pair, o, sizeof(*v), (void **)&v,
			       &n, d);
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = pieces_found(c, v[i].w->tensor, d);
	if (rc || !n) {
		free(v);
		return rc;
	}
	rc = made_new(c, o->to, v, n, &m, d);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < n; i++) {
		struct ckpt_storage *s = v[i].w->tensor->storage;

		tell(o, &v[i]);
		st->weights++;
		st->bytes_in += s->nbytes;
		/* no bytes anywhere: fd -1 fails any read that bypasses
		   c->made */
		cvt_storage_retype(c, s, v[i].from, o->to, -1, 0);
		st->bytes_out += s->nbytes;
		ckpt_node_drop(c, v[i].s->parent, v[i].s);
		st->scales++;
		if (v[i].in && !v[i].in->dead) {
			ckpt_node_drop(c, v[i].in->parent, v[i].in);
			st->scales++;
		}
	}
	c->made = &m->hooks;
	*made = m;
	return 0;
}
