/*
 * ovl_text.c - the text views (KEY.txt), rendered on demand by offset,
 * with what they learnt kept per node (struct ovl_texts, in the overlay:
 * the views read through it, and its edits make them stale).
 *
 * A text view's bytes are the tensor's elements formatted by
 * view_text_format(), about three times the tensor's size.  Nothing of it
 * is stored but, per view, the text offset at which every chunk of
 * CHUNK_ELEMS elements starts (8 bytes per 4096 elements), and the one
 * chunk formatted last (for the next read of a sequential reader).  The
 * marks are learnt by measuring (view_text_measure(): each element's
 * length counted, not printed, a few ns per float32 element), as far as
 * a read or a stat needs them; a read then formats only the chunks it
 * covers.  The first stat (the kernel asks for the size before any open:
 * the mount uses default_permissions) measures the whole view, a big one
 * in as many threads as there are CPUs (at most MEASURERS); the first
 * read of `head` formats one chunk.  It used to format every element
 * for the size (37 s for a 412 MB tensor before `head` got a byte).
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
#include <unistd.h>

#define CHUNK_ELEMS	(1u << 12)
/* a 16-byte storage viewed with stride 0 as 2^40 elements (tests/hostile)
   must not keep the daemon measuring for hours */
#define TEXT_MAX_ELEMS	(UINT64_C(1) << 28)
/* threads measuring a big view, each at least PART_MIN chunks */
#define MEASURERS	8
#define PART_MIN	64

int ovl_text_check(struct ovl *v, struct ckpt_node *n, struct diag *d)
{
	struct ovl_vsrc s;
	uint64_t numel;

	ovl_view_src(v, n, &s);
	numel = s.numel;

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

/* Chunk @j's elements (as @s shows them) into @in; how many, or -errno. */
static long long chunk_in(struct ovl *v, struct ckpt_node *n,
			  const struct ovl_vsrc *s, const struct ovl_text *e,
			  uint64_t j, unsigned char *in, struct diag *d)
{
	uint64_t first = j * CHUNK_ELEMS;
	uint64_t k = e->numel - first < CHUNK_ELEMS ? e->numel - first :
		     CHUNK_ELEMS;
	int rc = ovl_view_elems(v, n, s, in, first, k, d);

	return rc ? rc : (long long)k;
}

/* Make room for every mark of @e. */
static int marks_all(struct ovl_text *e, struct diag *d)
{
	uint64_t *m;

	if (e->cap >= e->nchunks + 1)
		return 0;
	m = realloc(e->marks, (e->nchunks + 1) * sizeof(*m));
	if (!m)
		return diag_nomem(d);
	e->marks = m;
	e->cap = e->nchunks + 1;
	return 0;
}

/* One measuring thread's share: chunks [j0, j1), each text's length
 * into marks[j + 1] (made offsets afterwards). */
struct part {
	struct ovl *v;
	struct ckpt_node *n;
	struct ovl_text *e;
	uint64_t j0, j1;
	unsigned char *in;
	struct diag d;
	int rc;
};

static void *measure_part(void *arg)
{
	struct part *p = arg;
	struct ovl_vsrc s;

	ovl_view_src(p->v, p->n, &s);
	for (uint64_t j = p->j0; j < p->j1; j++) {
		long long k = chunk_in(p->v, p->n, &s, p->e, j, p->in, &p->d);

		if (k < 0) {
			p->rc = (int)k;
			break;
		}
		p->e->marks[j + 1] = view_text_measure(s.dt, s.big, p->in,
						       (uint64_t)k);
	}
	return NULL;
}

/*
 * Every mark from nmarks on, the chunks shared among up to MEASURERS
 * threads (the one pass that a stat of a big view waits for; the
 * daemon's reads already run ovl_read() side by side).  A thread that
 * cannot start has its share done here.
 */
static int measure_rest(struct ovl *v, struct ckpt_node *n,
			struct ovl_text *e, struct diag *d)
{
	struct part p[MEASURERS];
	pthread_t tid[MEASURERS];
	bool started[MEASURERS] = { false };
	uint64_t j0 = e->nmarks - 1, left = e->nchunks - j0;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int np = cpus < 1 ? 1 : cpus > MEASURERS ? MEASURERS : (int)cpus;
	int rc = marks_all(e, d);

	if (rc)
		return rc;
	if ((uint64_t)np > left / PART_MIN)
		np = left / PART_MIN ? (int)(left / PART_MIN) : 1;
	for (int i = 0; i < np; i++) {
		p[i] = (struct part){ .v = v, .n = n, .e = e,
				      .j0 = j0 + left * i / np,
				      .j1 = j0 + left * (i + 1) / np };
		diag_init(&p[i].d, d->path);
		p[i].in = i ? malloc((size_t)CHUNK_ELEMS * 16) : v->texts.in;
		if (!p[i].in) {
			np = i;
			p[i - 1].j1 = j0 + left;	/* i >= 1 here */
			break;
		}
	}
	for (int i = 1; i < np; i++)
		started[i] = !pthread_create(&tid[i], NULL, measure_part, &p[i]);
	measure_part(&p[0]);
	for (int i = 1; i < np; i++) {
		if (started[i])
			pthread_join(tid[i], NULL);
		else
			measure_part(&p[i]);
		free(p[i].in);
	}
	for (int i = 0; i < np && !rc; i++)
		if (p[i].rc) {
			*d = p[i].d;
			rc = p[i].rc;
		}
	if (rc)
		return rc;
	for (uint64_t j = j0; j < e->nchunks; j++)
		e->marks[j + 1] += e->marks[j];
	e->nmarks = e->nchunks + 1;
	return 0;
}

/* Learn marks until one lies past @off or all are known (lock held). */
static int learn(struct ovl *v, struct ckpt_node *n, struct ovl_text *e,
		 uint64_t off, struct diag *d)
{
	struct ovl_vsrc s;
	uint64_t *m;

	ovl_view_src(v, n, &s);
	if (off == UINT64_MAX && e->nchunks + 1 - e->nmarks >= 2 * PART_MIN)
		return measure_rest(v, n, e, d);
	while (e->nmarks <= e->nchunks && e->marks[e->nmarks - 1] <= off) {
		uint64_t j = e->nmarks - 1;
		long long k = chunk_in(v, n, &s, e, j, v->texts.in, d);

		if (k < 0)
			return (int)k;
		if (e->nmarks == e->cap) {
			uint64_t cap = e->cap * 2 < e->nchunks + 1 ?
				       e->cap * 2 : e->nchunks + 1;

			m = realloc(e->marks, cap * sizeof(*m));
			if (!m)
				return diag_nomem(d);
			e->marks = m;
			e->cap = cap;
		}
		e->marks[j + 1] = e->marks[j] +
			view_text_measure(s.dt, s.big, v->texts.in,
					  (uint64_t)k);
		e->nmarks++;
	}
	return 0;
}

/* Chunk @j of @n formatted into v->texts.out (kept for the next read);
 * its length, or -errno (lock held). */
static long long format_chunk(struct ovl *v, struct ckpt_node *n,
			      const struct ovl_text *e, uint64_t j,
			      struct diag *d)
{
	struct ovl_texts *t = &v->texts;
	struct ovl_vsrc s;
	long long k;

	if (t->out_valid && t->out_node == n->id && t->out_chunk == j)
		return (long long)t->out_len;
	t->out_valid = false;
	ovl_view_src(v, n, &s);
	k = chunk_in(v, n, &s, e, j, t->in, d);
	if (k < 0)
		return k;
	t->out_len = view_text_format(s.dt, s.big, s.ndim, s.shape,
				      j * CHUNK_ELEMS, t->in, (uint64_t)k,
				      t->out);
	t->formatted += (uint64_t)k;
	t->out_node = n->id;
	t->out_chunk = j;
	t->out_valid = true;
	return (long long)t->out_len;
}

/* Start @e (the header's mark) unless it is started. */
static int start(struct ovl *v, struct ckpt_node *n, struct ovl_text *e,
		 struct diag *d)
{
	char line[CKPT_MAX_DIMS * 22 + 64];
	struct ovl_vsrc s;
	int rc;

	if (!v->texts.in) {
		v->texts.in = malloc((size_t)CHUNK_ELEMS * 16);
		v->texts.out = malloc((size_t)CHUNK_ELEMS * VIEW_TEXT_ELEM_MAX);
		if (!v->texts.in || !v->texts.out) {
			free(v->texts.in);
			free(v->texts.out);
			v->texts.in = NULL;
			v->texts.out = NULL;
			return diag_nomem(d);
		}
	}
	if (e->marks)
		return 0;
	rc = ovl_text_check(v, n, d);
	if (rc)
		return rc;
	ovl_view_src(v, n, &s);
	e->marks = malloc(16 * sizeof(*e->marks));
	if (!e->marks)
		return diag_nomem(d);
	v->texts.ncached++;
	e->cap = 16;
	e->marks[0] = view_text_header(s.dt, s.ndim, s.shape, line,
				       sizeof(line));
	e->nmarks = 1;
	e->numel = s.numel;
	e->nchunks = (s.numel + CHUNK_ELEMS - 1) / CHUNK_ELEMS;
	return 0;
}

/* The last mark at or before @off (the marks are sorted). */
static uint64_t find(const struct ovl_text *e, uint64_t off)
{
	uint64_t lo = 0, hi = e->nmarks;

	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (e->marks[mid] <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

long long ovl_text_read(struct ovl *v, struct ckpt_node *n, char *buf,
			 size_t size, uint64_t off, struct diag *d)
{
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
		struct ovl_vsrc s;

		ovl_view_src(v, n, &s);
		view_text_header(s.dt, s.ndim, s.shape, line, sizeof(line));
		done = e->marks[0] - off < size ? e->marks[0] - off : size;
		memcpy(buf, line + off, done);
	}
	if (done == size)
		goto out;
	rc = learn(v, n, e, off + done, d);
	if (rc)
		goto out;
	for (j = find(e, off + done); done < size && j < e->nchunks; j++) {
		uint64_t at = off + done;
		long long w;
		size_t from, k;

		/* the mark after chunk j, for the one after it */
		rc = learn(v, n, e, e->marks[j], d);
		if (rc)
			goto out;
		if (at >= e->marks[j + 1])
			break;		/* past the end */
		w = format_chunk(v, n, e, j, d);
		if (w < 0) {
			rc = w;
			goto out;
		}
		/* measured and formatted alike, or the text would tear */
		if ((uint64_t)w != e->marks[j + 1] - e->marks[j]) {
			rc = diag_errno(d, -EIO, "%s: text chunk %" PRIu64
					" is %lld bytes, measured %" PRIu64,
					n->name, j, w,
					e->marks[j + 1] - e->marks[j]);
			goto out;
		}
		from = at - e->marks[j];
		k = (size_t)w - from < size - done ? (size_t)w - from
						    : size - done;
		memcpy(buf + done, v->texts.out + from, k);
		done += k;
	}
out:
	pthread_mutex_unlock(&v->texts.lock);
	return rc ? rc : (long long)done;
}

int ovl_text_measure(struct ovl *v, struct ckpt_node *n, uint64_t *size,
		      struct diag *d)
{
	struct ovl_text *e;
	int rc;

	pthread_mutex_lock(&v->texts.lock);
	e = entry(v, n, d);
	rc = e ? start(v, n, e, d) : -ENOMEM;
	if (!rc)
		rc = learn(v, n, e, UINT64_MAX, d);
	if (!rc)
		*size = e->marks[e->nmarks - 1];
	pthread_mutex_unlock(&v->texts.lock);
	return rc;
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

uint64_t ovl_text_formatted(struct ovl *v)
{
	uint64_t k;

	pthread_mutex_lock(&v->texts.lock);
	k = v->texts.formatted;
	pthread_mutex_unlock(&v->texts.lock);
	return k;
}

static void drop(struct ovl *v, uint32_t i)
{
	v->texts.ncached--;
	free(v->texts.v[i].marks);
	memset(&v->texts.v[i], 0, sizeof(v->texts.v[i]));
	if (v->texts.out_node == i)
		v->texts.out_valid = false;
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
	free(v->texts.in);
	free(v->texts.out);
	v->texts.in = NULL;
	v->texts.out = NULL;
	v->texts.v = NULL;
	v->texts.n = 0;
	pthread_mutex_destroy(&v->texts.lock);
}
