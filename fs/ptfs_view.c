/*
 * ptfs_view.c - the text views (KEY.txt), rendered on demand by offset.
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
 * ptfs mounts with default_permissions) formats everything once, in
 * memory; after that any read costs the one or two chunks it covers.
 * NEEDSWORK: so `head` of a big tensor's view still waits for one whole
 * formatting pass (about 0.5 us per float32 element, snprintf's %.9g).
 * Edits drop the marks (the lock is held for writing then).
 *
 *   text   = header line, then chunk 0, chunk 1, ...
 *   mark[j] = offset of chunk j's first byte (mark[0] = header length)
 */
#include "ptfs.h"

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
static int text_shape(struct ptfs *fs, const struct ckpt_node *n,
		      int64_t *flat, const int64_t **shape, uint64_t *numel)
{
	const struct ckpt_tensor *t = n->tensor;

	*numel = ovl_size(fs->ovl, n) / t->dtype->size;
	*flat = (int64_t)*numel;
	*shape = t->shape;
	if (t->fresh && !t->shape_set) {
		*shape = flat;
		return 1;
	}
	return t->ndim;
}

int ptfs_text_check(struct ptfs *fs, struct ckpt_node *n, struct diag *d)
{
	uint64_t numel = ovl_size(fs->ovl, n) / n->tensor->dtype->size;

	if (numel > TEXT_MAX_ELEMS)
		return diag_set(d, -EFBIG, DIAG_NO_OFFSET, "%s: %" PRIu64
				" elements, too many for a text view (at most %"
				PRIu64 ")", n->name, numel, TEXT_MAX_ELEMS);
	return 0;
}

/* The text entry of @n, made on first use (text_lock held). */
static struct ptfs_text *entry(struct ptfs *fs, const struct ckpt_node *n,
			       struct diag *d)
{
	if (n->id >= fs->ntexts) {
		uint32_t cap = fs->c->nnodes > n->id ? fs->c->nnodes :
			       n->id + 1;
		struct ptfs_text *t = realloc(fs->texts, cap * sizeof(*t));

		if (!t) {
			diag_nomem(d);
			return NULL;
		}
		memset(t + fs->ntexts, 0, (cap - fs->ntexts) * sizeof(*t));
		fs->texts = t;
		fs->ntexts = cap;
	}
	return &fs->texts[n->id];
}

/*
 * Format chunk @j of @n into @out (CHUNK_ELEMS * VIEW_TEXT_ELEM_MAX
 * bytes, @in CHUNK_ELEMS elements); its length, or -errno.  Learns the
 * next mark.
 */
static long long chunk(struct ptfs *fs, struct ckpt_node *n,
		       struct ptfs_text *e, uint64_t j, unsigned char *in,
		       char *out, struct diag *d)
{
	const struct ckpt_dtype *dt = n->tensor->dtype;
	const int64_t *shape;
	uint64_t numel, first = j * CHUNK_ELEMS, k;
	int64_t flat;
	int ndim = text_shape(fs, n, &flat, &shape, &numel);
	long long got;
	size_t w;

	k = numel - first < CHUNK_ELEMS ? numel - first : CHUNK_ELEMS;
	got = ovl_read(fs->ovl, n, in, k * dt->size, first * dt->size, d);
	if (got < 0)
		return got;
	if ((uint64_t)got != k * dt->size)
		return diag_errno(d, -EIO, "%s: short read", n->name);
	w = view_text_format(dt, !strcmp(fs->byteorder, "big"), ndim, shape,
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
static int start(struct ptfs *fs, struct ckpt_node *n, struct ptfs_text *e,
		 struct diag *d)
{
	char line[CKPT_MAX_DIMS * 22 + 64];
	const int64_t *shape;
	uint64_t numel;
	int64_t flat;
	int ndim, rc;

	if (e->marks)
		return 0;
	rc = ptfs_text_check(fs, n, d);
	if (rc)
		return rc;
	ndim = text_shape(fs, n, &flat, &shape, &numel);
	e->marks = malloc(sizeof(*e->marks));
	if (!e->marks)
		return diag_nomem(d);
	fs->ncached++;
	e->marks[0] = view_text_header(n->tensor->dtype, ndim, shape, line,
				       sizeof(line));
	e->nmarks = 1;
	e->nchunks = (numel + CHUNK_ELEMS - 1) / CHUNK_ELEMS;
	return 0;
}

long long ptfs_text_read(struct ptfs *fs, struct ckpt_node *n, char *buf,
			 size_t size, uint64_t off, struct diag *d)
{
	unsigned char *in = NULL;
	char *out = NULL;
	struct ptfs_text *e;
	long long rc = 0;
	size_t done = 0;
	uint64_t j;

	pthread_mutex_lock(&fs->text_lock);
	e = entry(fs, n, d);
	rc = e ? start(fs, n, e, d) : -ENOMEM;
	if (rc)
		goto out;
	if (off < e->marks[0]) {
		char line[CKPT_MAX_DIMS * 22 + 64];
		const int64_t *shape;
		uint64_t numel;
		int64_t flat;
		int ndim = text_shape(fs, n, &flat, &shape, &numel);

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
		long long w = chunk(fs, n, e, j, in, out, d);

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
	pthread_mutex_unlock(&fs->text_lock);
	free(in);
	free(out);
	return rc ? rc : (long long)done;
}

int ptfs_text_measure(struct ptfs *fs, struct ckpt_node *n, uint64_t *size,
		      struct diag *d)
{
	struct ptfs_text *e;
	long long rc;
	char dummy;

	/* a read at the far end learns every mark */
	rc = ptfs_text_read(fs, n, &dummy, 1, UINT64_MAX - 1, d);
	if (rc < 0)
		return (int)rc;
	pthread_mutex_lock(&fs->text_lock);
	e = &fs->texts[n->id];
	*size = e->marks ? e->marks[e->nmarks - 1] : 0;
	pthread_mutex_unlock(&fs->text_lock);
	return 0;
}

bool ptfs_text_known(struct ptfs *fs, const struct ckpt_node *n,
		     uint64_t *size)
{
	bool known = false;

	pthread_mutex_lock(&fs->text_lock);
	if (n->id < fs->ntexts && fs->texts[n->id].marks &&
	    fs->texts[n->id].nmarks == fs->texts[n->id].nchunks + 1) {
		*size = fs->texts[n->id].marks[fs->texts[n->id].nmarks - 1];
		known = true;
	}
	pthread_mutex_unlock(&fs->text_lock);
	return known;
}

static void drop(struct ptfs *fs, uint32_t i)
{
	fs->ncached--;
	free(fs->texts[i].marks);
	fs->texts[i].marks = NULL;
	fs->texts[i].nmarks = fs->texts[i].nchunks = 0;
}

void ptfs_texts_drop_storage(struct ptfs *fs, const struct ckpt_storage *s)
{
	for (uint32_t i = 0; fs->ncached && i < fs->ntexts; i++) {
		const struct ckpt_node *n = i < fs->c->nnodes &&
					    !ckpt_is_row(fs->c->nodes[i]) ?
					    fs->c->nodes[i] : NULL;

		if (fs->texts[i].marks &&
		    (!n || n->kind != CKPT_N_TENSOR || !n->tensor ||
		     n->tensor->storage == s))
			drop(fs, i);
	}
}

void ptfs_texts_drop(struct ptfs *fs)
{
	for (uint32_t i = 0; fs->ncached && i < fs->ntexts; i++)
		if (fs->texts[i].marks)
			drop(fs, i);
}

uint64_t ptfs_view_size(struct ptfs *fs, struct ckpt_node *n, int view,
			bool measure)
{
	struct diag d;
	uint64_t size = 0, len;
	uint8_t staged;

	if (view == CKPT_V_NPY)
		return ovl_npy_size(fs->ovl, n);
	if (ovl_view_staged(n, &staged, &len) && staged == CKPT_V_TXT)
		return len;
	if (!measure)
		return ptfs_text_known(fs, n, &size) ? size : 0;
	diag_init(&d, fs->c->path);
	/* a failure shows as size 0 here; the read reports it */
	if (ptfs_text_measure(fs, n, &size, &d))
		return 0;
	return size;
}
