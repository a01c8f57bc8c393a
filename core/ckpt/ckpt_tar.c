/*
 * ckpt_tar.c - tar-era checkpoints (torch < 0.4; torch-format.md 7, "Tar
 * format"), read in place: ckpt_ustar.c locates the members, and storages
 * are read later with pread at known offsets, never extracted.
 *
 *   sys_info   pickle {'little_endian': True, ...}
 *   storages   pickle(count); per storage pickle((key, location, Class)),
 *              int64 LE numel, numel * itemsize bytes; then pickle(list of
 *              (view_key, root_key, offset, numel))
 *   tensors    pickle(count); per tensor pickle((key, storage_key, Class)),
 *              int32 LE ndim, 4 unused bytes, ndim int64 sizes, ndim int64
 *              strides, int64 storage offset (elements)
 *   pickle     the object; a persistent id is the decimal key of a tensor
 *              or storage (int(pid) is looked up), or ('module', ...)
 */
#include "ckpt_int.h"
#include "util/io.h"
#include "util/le.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PICKLE_MAX	(UINT64_C(1) << 30)	/* the main pickle */
#define SMALL_FIRST	4096			/* first read of a small pickle */

enum {
	M_SYS = CKPT_TAR_SYS, M_PICKLE = CKPT_TAR_PICKLE,
	M_STORAGES = CKPT_TAR_STORAGES, M_TENSORS = CKPT_TAR_TENSORS,
	M_N = CKPT_TAR_N,
};

/* a storage view: key names elements [off, off + numel) of root */
struct view {
	int64_t key;
	struct ckpt_storage *root;
	uint64_t off, numel;
	struct ckpt_tensor *as_tensor;	/* once a persistent id names it */
};

struct tkey {
	int64_t key;
	struct ckpt_tensor *t;
};

struct tar {
	struct ckpt *c;
	struct diag *d;
	struct ckpt_tar_member m[M_N];
	struct view *views;
	uint32_t nviews;
	struct tkey *tensors;	/* sorted by key once read */
	uint32_t ntensors;
	struct ckpt_tensor **stensor;	/* by storage index: a whole storage
					   a persistent id names */
};

/* ---- small pickles inside a member ---- */

/* The name of the member that holds file offset @pos, for findings. */
static const char *member_at(const struct tar *t, uint64_t pos)
{
	for (int k = 0; k < M_N; k++)
		if (t->m[k].found && pos >= t->m[k].off &&
		    pos < t->m[k].off + t->m[k].size)
			return ckpt_tar_names[k];
	return "tar";
}

/*
 * Parse the pickle at *@pos, which must end before @end; *@pos moves past
 * it.  Reads a little first and more when it is cut short.  torch.load
 * unpickles each of them: what one would run is a finding
 * (ckpt_scan.c), even when it cannot be read to its end.
 */
static int small_pickle(struct tar *t, uint64_t *pos, uint64_t end,
			struct pkl_doc **doc)
{
	uint64_t want = SMALL_FIRST;
	int rc;

	*doc = NULL;
	for (;;) {
		unsigned char *buf;
		struct diag tmp;
		uint64_t have = end - *pos;

		if (want > have)
			want = have;
		if (!want)
			return diag_corrupt(t->d, *pos, "pickle expected, but "
					    "the tar member ends");
		buf = malloc(want);
		if (!buf)
			return diag_nomem(t->d);
		rc = io_pread_diag(t->c->fd, buf, want, *pos, NULL, t->d);
		if (!rc) {
			diag_init(&tmp, t->d->path);
			rc = pkl_parse(buf, want, *pos, doc,
				       want < have ? &tmp : t->d);
			if (!rc && ckpt_scan_doc(t->c, *doc, member_at(t, *pos),
						 NULL))
				rc = diag_nomem(t->d);
			else if (rc && diag_failed(t->d))
				ckpt_scan_failed(t->c, buf, want, *pos,
						 member_at(t, *pos), NULL,
						 t->d);
		}
		free(buf);
		if (!rc) {
			*pos = (*doc)->end;
			return 0;
		}
		if (want == have || rc == -ENOMEM || diag_failed(t->d))
			return rc;
		if (want >= (UINT64_C(1) << 26))
			return diag_unsupported(t->d, *pos, "pickle larger "
						"than 64 MiB in a tar member");
		want *= 4;
	}
}

/* A count pickle: a non-negative int below @max. */
static int count(struct tar *t, uint64_t *pos, uint64_t end, uint64_t max,
		 uint64_t *out)
{
	struct pkl_doc *doc;
	uint64_t at = *pos;
	int64_t n;
	int rc = small_pickle(t, pos, end, &doc);

	if (rc)
		return rc;
	if (!as_int(doc->root, &n) || n < 0 || (uint64_t)n > max)
		rc = diag_corrupt(t->d, at, "bad count in a tar member");
	else
		*out = n;
	pkl_doc_free(doc);
	return rc;
}

static void key_str(int64_t key, char *buf, size_t size)
{
	snprintf(buf, size, "%lld", (long long)key);
}

/* ---- storages ---- */

static int storage_one(struct tar *t, uint64_t *pos, uint64_t end)
{
	struct ckpt_storage *s;
	const struct ckpt_dtype *dt;
	const struct pkl_value *tup, *cls;
	struct pkl_doc *doc;
	uint64_t at = *pos, numel, nbytes;
	unsigned char hdr[8];
	const char *loc;
	char key[24];
	int64_t k;
	int rc = small_pickle(t, pos, end, &doc);

	if (rc)
		return rc;
	tup = doc->root;
	cls = arg(tup, 2);
	loc = as_str(arg(tup, 1));
	if (pkl_len(tup) != 3 || !as_int(arg(tup, 0), &k) || !loc || !cls ||
	    cls->kind != PKL_GLOBAL) {
		rc = diag_corrupt(t->d, at, "storage header is not (key, "
				  "location, class)");
		goto out;
	}
	dt = ckpt_dtype_by_storage(cls->u.global.name);
	if (!dt) {
		rc = diag_unsupported(t->d, at, "unknown storage class %s.%s",
				      cls->u.global.module, cls->u.global.name);
		goto out;
	}
	if (end - *pos < 8) {
		rc = diag_corrupt(t->d, *pos, "storage '%lld' without its "
				  "size", (long long)k);
		goto out;
	}
	rc = io_pread_diag(t->c->fd, hdr, 8, *pos, NULL, t->d);
	if (rc)
		goto out;
	numel = le64(hdr);
	*pos += 8;
	if (__builtin_mul_overflow(numel, (uint64_t)dt->size, &nbytes) ||
	    nbytes > end - *pos) {
		rc = diag_corrupt(t->d, *pos - 8, "storage '%lld' of %llu "
				  "elements runs past the 'storages' member",
				  (long long)k, (unsigned long long)numel);
		goto out;
	}
	key_str(k, key, sizeof(key));
	rc = ckpt_storage_add(t->c->b, key, dt, loc, numel, at, &s);
	if (rc)
		goto out;
	s->data_off = *pos;
	*pos += nbytes;
out:
	pkl_doc_free(doc);
	return rc;
}

static struct view *find_view(const struct tar *t, int64_t key)
{
	for (uint32_t i = 0; i < t->nviews; i++)
		if (t->views[i].key == key)
			return &t->views[i];
	return NULL;
}

static struct ckpt_storage *find_storage(struct tar *t, int64_t key)
{
	char buf[24];

	key_str(key, buf, sizeof(buf));
	return ckpt_storage_find(t->c->b, buf);
}

/* The views list: (view_key, root_key, offset, numel) in elements. */
static int views(struct tar *t, uint64_t *pos, uint64_t end)
{
	struct pkl_doc *doc;
	uint64_t at = *pos;
	int rc = small_pickle(t, pos, end, &doc);

	if (rc)
		return rc;
	if (doc->root->kind != PKL_LIST) {
		rc = diag_corrupt(t->d, at, "storage views are not a list");
		goto out;
	}
	t->views = calloc(pkl_len(doc->root) + 1, sizeof(*t->views));
	if (!t->views) {
		rc = diag_nomem(t->d);
		goto out;
	}
	for (size_t i = 0; i < pkl_len(doc->root); i++) {
		const struct pkl_value *v = pkl_item(doc->root, i);
		struct view *w = &t->views[t->nviews];
		int64_t root, off, numel;

		if (pkl_len(v) != 4 || !as_int(arg(v, 0), &w->key) ||
		    !as_int(arg(v, 1), &root) || !as_int(arg(v, 2), &off) ||
		    !as_int(arg(v, 3), &numel) || off < 0 || numel < 0) {
			rc = diag_corrupt(t->d, v->off, "bad storage view");
			goto out;
		}
		w->root = find_storage(t, root);
		if (!w->root || find_storage(t, w->key) ||
		    find_view(t, w->key)) {
			rc = diag_corrupt(t->d, v->off, "storage view '%lld' "
					  "of storage '%lld': %s",
					  (long long)w->key, (long long)root,
					  w->root ? "key defined twice" :
					  "no such storage");
			goto out;
		}
		if ((uint64_t)off > w->root->numel ||
		    (uint64_t)numel > w->root->numel - (uint64_t)off) {
			rc = diag_corrupt(t->d, v->off, "storage view '%lld' "
					  "outside storage '%s'",
					  (long long)w->key, w->root->key);
			goto out;
		}
		w->off = off;
		w->numel = numel;
		t->nviews++;
	}
out:
	pkl_doc_free(doc);
	return rc;
}

static int read_storages(struct tar *t)
{
	uint64_t pos = t->m[M_STORAGES].off, end = pos + t->m[M_STORAGES].size;
	uint64_t n = 0;
	int rc = count(t, &pos, end, end - pos, &n);

	for (uint64_t i = 0; i < n && !rc; i++)
		rc = storage_one(t, &pos, end);
	if (!rc)
		rc = views(t, &pos, end);
	return rc;
}

/* ---- tensors ---- */

/* The view's check: the tensor's furthest element inside the view too. */
static int in_view(struct tar *t, const struct ckpt_tensor *x,
		   const struct view *w, uint64_t soff, uint64_t at)
{
	uint64_t last = soff;

	if (!x->numel)
		return soff <= w->numel ? 0 : diag_corrupt(t->d, at, "tensor "
			"offset past storage view '%lld'", (long long)w->key);
	for (int i = 0; i < x->ndim; i++)
		last += (uint64_t)(x->shape[i] - 1) *
			(uint64_t)ckpt_tensor_stride(x)[i];
	if (last >= w->numel)	/* no overflow: checked against the root */
		return diag_corrupt(t->d, at, "tensor reaches element %llu of "
				    "storage view '%lld', which has %llu",
				    (unsigned long long)last, (long long)w->key,
				    (unsigned long long)w->numel);
	return 0;
}

static int tensor_one(struct tar *t, uint64_t *pos, uint64_t end)
{
	struct pkl_doc *doc;
	struct ckpt_storage *s;
	struct ckpt_tensor *x;
	const struct view *w = NULL;
	unsigned char hdr[8], *dims = NULL;
	uint64_t at = *pos, need;
	int64_t key, skey, soff;
	int32_t ndim;
	int rc = small_pickle(t, pos, end, &doc);

	if (rc)
		return rc;
	if (pkl_len(doc->root) != 3 || !as_int(arg(doc->root, 0), &key) ||
	    !as_int(arg(doc->root, 1), &skey)) {
		rc = diag_corrupt(t->d, at, "tensor header is not (key, "
				  "storage key, class)");
		goto out;
	}
	s = find_storage(t, skey);
	if (!s && (w = find_view(t, skey)))
		s = w->root;
	if (!s) {
		rc = diag_corrupt(t->d, at, "tensor '%lld' names storage "
				  "'%lld', which is not there", (long long)key,
				  (long long)skey);
		goto out;
	}
	if (end - *pos < 8) {
		rc = diag_corrupt(t->d, *pos, "tensor '%lld' cut short",
				  (long long)key);
		goto out;
	}
	rc = io_pread_diag(t->c->fd, hdr, 8, *pos, NULL, t->d);
	if (rc)
		goto out;
	/* an int32, then 4 bytes torch skips: ndim was once 8 bytes */
	ndim = (int32_t)le32(hdr);
	if (ndim < 0 || ndim > CKPT_MAX_DIMS) {
		rc = diag_corrupt(t->d, *pos, "tensor '%lld' has %d dimensions",
				  (long long)key, (int)ndim);
		goto out;
	}
	need = 16 * (uint64_t)ndim + 8;
	if (end - *pos - 8 < need) {
		rc = diag_corrupt(t->d, *pos, "tensor '%lld' cut short",
				  (long long)key);
		goto out;
	}
	dims = malloc(need);
	x = ckpt_tensor_new(t->c->b, ndim);
	if (!dims || !x) {
		rc = diag_nomem(t->d);
		goto out;
	}
	rc = io_pread_diag(t->c->fd, dims, need, *pos + 8, NULL, t->d);
	if (rc)
		goto out;
	for (int i = 0; i < ndim; i++) {
		x->shape[i] = (int64_t)le64(dims + 8 * i);
		ckpt_tensor_stride(x)[i] = (int64_t)le64(dims + 8 * (ndim + i));
	}
	soff = (int64_t)le64(dims + 16 * ndim);
	*pos += 8 + need;
	if (soff < 0) {
		rc = diag_corrupt(t->d, at, "tensor '%lld' has storage offset "
				  "%lld", (long long)key, (long long)soff);
		goto out;
	}
	x->kind = CKPT_T_STRIDED;
	x->storage = s;
	x->dtype = s->dtype;
	x->offset = (uint64_t)soff + (w ? w->off : 0);
	x->pkl_off = at;
	rc = ckpt_tensor_check(t->c, x, t->d);
	if (!rc && w)
		rc = in_view(t, x, w, (uint64_t)soff, at);
	if (rc)
		goto out;
	s->ntensors++;
	t->tensors[t->ntensors].key = key;
	t->tensors[t->ntensors++].t = x;
out:
	free(dims);
	pkl_doc_free(doc);
	return rc;
}

static int by_key(const void *a, const void *b)
{
	int64_t x = ((const struct tkey *)a)->key;
	int64_t y = ((const struct tkey *)b)->key;

	return x < y ? -1 : x > y;
}

static int read_tensors(struct tar *t)
{
	uint64_t pos = t->m[M_TENSORS].off, end = pos + t->m[M_TENSORS].size;
	uint64_t n = 0;
	/* each tensor takes at least 8 + 8 bytes and a pickle */
	int rc = count(t, &pos, end, (end - pos) / 16, &n);

	if (rc)
		return rc;
	t->tensors = calloc(n + 1, sizeof(*t->tensors));
	if (!t->tensors)
		return diag_nomem(t->d);
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = tensor_one(t, &pos, end);
	if (rc)
		return rc;
	qsort(t->tensors, t->ntensors, sizeof(*t->tensors), by_key);
	for (uint32_t i = 1; i < t->ntensors; i++)
		if (t->tensors[i].key == t->tensors[i - 1].key)
			return diag_corrupt(t->d, t->tensors[i].t->pkl_off,
					    "tensor '%lld' defined twice",
					    (long long)t->tensors[i].key);
	return 0;
}

/* ---- the main pickle ---- */

/* A whole storage (or view) that a persistent id names, as a tensor. */
static int storage_tensor(struct tar *t, struct ckpt_storage *s,
			  struct view *w, uint64_t at, struct ckpt_tensor **out)
{
	struct ckpt_tensor **slot = w ? &w->as_tensor : &t->stensor[s->index];
	struct ckpt_tensor *x;
	int rc;

	if (*slot) {
		*out = *slot;
		return 0;
	}
	x = ckpt_tensor_new(t->c->b, 1);
	if (!x)
		return diag_nomem(t->d);
	x->kind = CKPT_T_STORAGE;
	x->storage = s;
	x->dtype = s->dtype;
	x->offset = w ? w->off : 0;
	x->shape[0] = (int64_t)(w ? w->numel : s->numel);
	ckpt_tensor_stride(x)[0] = 1;
	x->pkl_off = at;
	rc = ckpt_tensor_check(t->c, x, t->d);
	if (rc)
		return rc;
	s->ntensors++;
	*slot = *out = x;
	return 0;
}

/* b->persid: int(pid) names a tensor, else a storage or storage view. */
static int persid(struct ckpt_build *b, const struct pkl_value *pid,
		  struct ckpt_tensor **out)
{
	struct tar *t = b->persid_arg;
	const char *s = as_str(pkl_call_args(pid));
	struct tkey want, *hit;
	struct ckpt_storage *st;
	struct view *w = NULL;
	char *end;
	long long k;

	if (!s)
		return diag_corrupt(t->d, pid->off, "persistent id is not a "
				    "key");
	errno = 0;
	k = strtoll(s, &end, 10);
	if (end == s || *end || errno)
		return diag_corrupt(t->d, pid->off, "persistent id '%.32s' is "
				    "not a key", s);
	want.key = k;
	hit = bsearch(&want, t->tensors, t->ntensors, sizeof(want), by_key);
	if (hit) {
		*out = hit->t;
		return 0;
	}
	st = find_storage(t, k);
	if (!st && (w = find_view(t, k)))
		st = w->root;
	if (!st)
		return diag_corrupt(t->d, pid->off, "persistent id '%lld' "
				    "names no tensor or storage", k);
	return storage_tensor(t, st, w, pid->off, out);
}

static int main_pickle(struct tar *t)
{
	struct ckpt *c = t->c;
	const struct ckpt_tar_member *m = &t->m[M_PICKLE];
	int rc;

	if (m->size > PICKLE_MAX)
		return diag_unsupported(t->d, m->off, "pickle larger than "
					"1 GiB");
	c->pkl = malloc(m->size + 1);
	if (!c->pkl)
		return diag_nomem(t->d);
	c->pkl_len = m->size;
	c->pkl_off = m->off;
	rc = io_pread_diag(t->c->fd, c->pkl, m->size, m->off, NULL, t->d);
	c->pkl_label = ckpt_tar_names[M_PICKLE];
	if (!rc && (rc = pkl_parse(c->pkl, c->pkl_len, m->off, &c->doc,
				   t->d)))
		return ckpt_scan_failed(c, c->pkl, c->pkl_len, m->off,
					c->pkl_label, NULL, t->d);
	if (rc)
		return rc;
	t->stensor = calloc(c->nstorages + 1, sizeof(*t->stensor));
	if (!t->stensor)
		return diag_nomem(t->d);
	c->b->persid = persid;
	c->b->persid_arg = t;
	rc = ckpt_build_model(c, t->d);
	c->b->persid = NULL;
	c->b->persid_arg = NULL;
	return rc;
}

/* sys_info, when there: refuse a big-endian writer's storages. */
static int sys_info(struct tar *t)
{
	const struct ckpt_tar_member *m = &t->m[M_SYS];
	const struct pkl_value *info;
	struct pkl_doc *doc;
	uint64_t pos = m->off;
	int rc;

	if (!m->found)
		return 0;
	rc = small_pickle(t, &pos, m->off + m->size, &doc);
	if (rc)
		return rc;
	info = doc->root;
	for (size_t i = 0; info->kind == PKL_DICT && i + 1 < info->u.items.n;
	     i += 2) {
		const char *k = as_str(info->u.items.v[i]);
		const struct pkl_value *v = info->u.items.v[i + 1];

		if (k && !strcmp(k, "little_endian") && v->kind == PKL_BOOL &&
		    !v->u.i)
			rc = diag_unsupported(t->d, m->off, "big-endian tar-era "
					      "checkpoint");
	}
	pkl_doc_free(doc);
	return rc;
}

int ckpt_tar_open(struct ckpt *c, struct diag *d)
{
	struct tar t = { .c = c, .d = d };
	int rc = ckpt_tar_members(c, t.m, d);

	if (!rc)
		rc = sys_info(&t);
	if (!rc)
		rc = ckpt_build_begin(c, d);
	if (!rc)
		rc = read_storages(&t);
	if (!rc)
		rc = read_tensors(&t);
	if (!rc)
		rc = main_pickle(&t);
	free(t.views);
	free(t.tensors);
	free(t.stensor);
	return rc;
}
