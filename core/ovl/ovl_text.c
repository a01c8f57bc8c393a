/*
 * ovl_text.c - the text views (KEY.txt), rendered on demand by offset,
 * with what they learnt kept per node (struct ovl_texts, in the overlay:
 * the views read through it, and its edits make them stale).
 *
 * A text view's bytes are the tensor's elements formatted by
 * view_text_format(), about three times the tensor's size.  They used to
 * be rendered whole into a temporary file in $TMPDIR on first use and kept
 * until the next edit, so reading the text views of a large model filled
 * the disk.  Now nothing is stored but, per view, the text offset at which
 * every chunk of CHUNK_ELEMS elements starts (8 bytes per 4096
 * elements), learnt while formatting: a read formats the chunks it covers
 * (finding the first from the marks, extending them as far as needed).
 * The size (a stat, and the kernel's permission check before an open:
 * the mount uses default_permissions) formats everything once, in
 * memory; after that any read costs the one or two chunks it covers.
 * NEEDSWORK: so `head` of a big tensor's view still waits for one whole
 * formatting pass (about 0.5 us per float32 element, snprintf's %.9g).
 * Edits drop the marks (ovl_texts_drop(); the caller makes sure no read
 * runs then).
 *
 *   text   = header line, then chunk 0, chunk 1, ...
 *   mark[j] = offset of chunk j's first byte (mark[0] = header length)
 */
#include "ovl_int.h"

#include "diag/diag.h"
#include "view/view.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_ELEMS	(1u << 12)
/* a 16-byte storage viewed with stride 0 as 2^40 elements (tests/hostile)
   must not keep the daemon formatting for hours */
#define TEXT_MAX_ELEMS	(UINT64_C(1) << 28)

/* The tensor's shape as the text shows it (a new file: flat). */
static int text_shape(struct ovl *v, const struct ckpt_node *n,
		      int64_t *flat, const int64_t **shape, uint64_t *numel)
{
	const struct ckpt_tensor *t = n->tensor;

	*numel = ovl_size(v, n) / t->dtype->size;
	*flat = (int64_t)*numel;
	*shape = t->shape;
	if (t->fresh && !t->shape_set) {
		*shape = flat;
		return 1;
	}
	return t->ndim;
}

int ovl_text_check(struct ovl *v, struct ckpt_node *n, struct diag *d)
{
	uint64_t numel = ovl_size(v, n) / n->tensor->dtype->size;

	if (numel > TEXT_MAX_ELEMS)
		return diag_set(d, -EFBIG, DIAG_NO_OFFSET, "%s: %" PRIu64
				" elements, too many for a text view (at most %"
				PRIu64 ")", n->name, numel, TEXT_MAX_ELEMS);
	return 0;
}

/* The text entry of @n, made on first use (v->texts.lock held). */
static struct ovl_text *entry(struct ovl *v, const struct ckpt_node *n,
			       struct diag *d)
{
	if (n->id >= v->texts.n) {
		uint32_t cap = v->c->nnodes > n->id ? v->c->nnodes :
			       n->id + 1;
		struct ovl_text *t = realloc(v->texts.v, cap * sizeof(*t));

		if (!t) {
			diag_nomem(d);
			return NULL;
		}
		memset(t + v->texts.n, 0, (cap - v->texts.n) * sizeof(*t));
		v->texts.v = t;
		v->texts.n = cap;
	}
	return &v->texts.v[n->id];
}

/*
 * Format chunk @j of @n into @out (CHUNK_ELEMS * VIEW_TEXT_ELEM_MAX
 * bytes, @in CHUNK_ELEMS elements); its length, or -errno.  Learns the
 * next mark.
 */
static long long chunk(struct ovl *v, struct ckpt_node *n,
		       struct ovl_text *e, uint64_t j, unsigned char *in,
		       char *out, struct diag *d)
{
	const struct ckpt_dtype *dt = n->tensor->dtype;
	const int64_t *shape;
	uint64_t numel, first = j * CHUNK_ELEMS, k;
	int64_t flat;
	int ndim = text_shape(v, n, &flat, &shape, &numel);
	long long got;
	size_t w;

	k = numel - first < CHUNK_ELEMS ? numel - first : CHUNK_ELEMS;
	got = ovl_read(v, n, in, k * dt->size, first * dt->size, d);
	if (got < 0)
		return got;
	if ((uint64_t)got != k * dt->size)
		return diag_errno(d, -EIO, "%s: short read", n->name);
	w = view_text_format(dt, v->c->byteorder && !strcmp(v->c->byteorder, "big"), ndim, shape,
			     first, in, k, out);
	if (j + 1 == e->nmarks) {
		uint64_t *m = realloc(e->marks, (e->nmarks + 1) * sizeof(*m));

		if (!m)
			return diag_nomem(d);
		e->marks = m;
		m[e->nmarks] = m[e->nmarks - 1] + w;
		e->nmarks++;
	}
	return (long long)w;
}

/* Start @e (the header's mark) unless it is started. */
static int start(struct ovl *v, struct ckpt_node *n, struct ovl_text *e,
		 struct diag *d)
{
	char line[CKPT_MAX_DIMS * 22 + 64];
	const int64_t *shape;
	uint64_t numel;
	int64_t flat;
	int ndim, rc;

	if (e->marks)
		return 0;
	rc = ovl_text_check(v, n, d);
	if (rc)
		return rc;
	ndim = text_shape(v, n, &flat, &shape, &numel);
	e->marks = malloc(sizeof(*e->marks));
	if (!e->marks)
		return diag_nomem(d);
	v->texts.ncached++;
	e->marks[0] = view_text_header(n->tensor->dtype, ndim, shape, line,
				       sizeof(line));
	e->nmarks = 1;
	e->nchunks = (numel + CHUNK_ELEMS - 1) / CHUNK_ELEMS;
	return 0;
}

long long ovl_text_read(struct ovl *v, struct ckpt_node *n, char *buf,
			 size_t size, uint64_t off, struct diag *d)
{
	unsigned char *in = NULL;
	char *out = NULL;
	struct ovl_text *e;
	long long rc = 0;
	size_t done = 0;
	uint64_t j;

	pthread_mutex_lock(&v->texts.lock);
	e = entry(v, n, d);
	rc = e ? start(v, n, e, d) : -ENOMEM;
	if (rc)
		goto out;
	if (off < e->marks[0]) {
		char line[CKPT_MAX_DIMS * 22 + 64];
		const int64_t *shape;
		uint64_t numel;
		int64_t flat;
		int ndim = text_shape(v, n, &flat, &shape, &numel);

		view_text_header(n->tensor->dtype, ndim, shape, line,
				 sizeof(line));
		done = e->marks[0] - off < size ? e->marks[0] - off : size;
		memcpy(buf, line + off, done);
	}
	in = malloc((size_t)CHUNK_ELEMS * n->tensor->dtype->size);
	out = malloc((size_t)CHUNK_ELEMS * VIEW_TEXT_ELEM_MAX);
	if (!in || !out) {
		rc = diag_nomem(d);
		goto out;
	}
	/* the last known mark at or before @off (the marks are sorted) */
	j = 0;
	{
		uint64_t lo = 0, hi = e->nmarks;

		while (hi - lo > 1) {
			uint64_t mid = lo + (hi - lo) / 2;

			if (e->marks[mid] <= off + done)
				lo = mid;
			else
				hi = mid;
		}
		j = lo;
	}
	for (; done < size && j < e->nchunks; j++) {
		uint64_t at = off + done;
		long long w = chunk(v, n, e, j, in, out, d);

		if (w < 0) {
			rc = w;
			goto out;
		}
		if (at >= e->marks[j] + (uint64_t)w)
			continue;	/* still before @off: learning marks */
		{
			size_t from = at - e->marks[j], k = (size_t)w - from;

			if (k > size - done)
				k = size - done;
			memcpy(buf + done, out + from, k);
			done += k;
		}
	}
out:
	pthread_mutex_unlock(&v->texts.lock);
	free(in);
	free(out);
	return rc ? rc : (long long)done;
}

int ovl_text_measure(struct ovl *v, struct ckpt_node *n, uint64_t *size,
		      struct diag *d)
{
	struct ovl_text *e;
	long long rc;
	char dummy;

	/* a read at the far end learns every mark */
	rc = ovl_text_read(v, n, &dummy, 1, UINT64_MAX - 1, d);
	if (rc < 0)
		return (int)rc;
	pthread_mutex_lock(&v->texts.lock);
	e = &v->texts.v[n->id];
	*size = e->marks ? e->marks[e->nmarks - 1] : 0;
	pthread_mutex_unlock(&v->texts.lock);
	return 0;
}

bool ovl_text_known(struct ovl *v, const struct ckpt_node *n,
		     uint64_t *size)
{
	bool known = false;

	pthread_mutex_lock(&v->texts.lock);
	if (n->id < v->texts.n && v->texts.v[n->id].marks &&
	    v->texts.v[n->id].nmarks == v->texts.v[n->id].nchunks + 1) {
		*size = v->texts.v[n->id].marks[v->texts.v[n->id].nmarks - 1];
		known = true;
	}
	pthread_mutex_unlock(&v->texts.lock);
	return known;
}

static void drop(struct ovl *v, uint32_t i)
{
	v->texts.ncached--;
	free(v->texts.v[i].marks);
	v->texts.v[i].marks = NULL;
	v->texts.v[i].nmarks = v->texts.v[i].nchunks = 0;
}

void ovl_texts_drop_storage(struct ovl *v, const struct ckpt_storage *s)
{
	for (uint32_t i = 0; v->texts.ncached && i < v->texts.n; i++) {
		const struct ckpt_node *n = i < v->c->nnodes &&
					    !ckpt_is_row(v->c->nodes[i]) ?
					    v->c->nodes[i] : NULL;

		if (v->texts.v[i].marks &&
		    (!n || n->kind != CKPT_N_TENSOR || !n->tensor ||
		     n->tensor->storage == s))
			drop(v, i);
	}
}

void ovl_texts_drop(struct ovl *v)
{
	for (uint32_t i = 0; v->texts.ncached && i < v->texts.n; i++)
		if (v->texts.v[i].marks)
			drop(v, i);
}

uint64_t ovl_view_size(struct ovl *v, struct ckpt_node *n, int view,
		       bool measure)
{
	struct diag d;
	uint64_t size = 0, len;
	uint8_t staged;

	if (view == CKPT_V_NPY)
		return ovl_npy_size(v, n);
	if (ovl_view_staged(n, &staged, &len) && staged == CKPT_V_TXT)
		return len;
	if (!measure)
		return ovl_text_known(v, n, &size) ? size : 0;
	diag_init(&d, v->c->path);
	/* a failure shows as size 0 here; the read reports it */
	if (ovl_text_measure(v, n, &size, &d))
		return 0;
	return size;
}

void ovl_texts_free(struct ovl *v)
{
	ovl_texts_drop(v);
	free(v->texts.v);
	v->texts.v = NULL;
	v->texts.n = 0;
	pthread_mutex_destroy(&v->texts.lock);
}
