/*
 * cvt_ckpt.c - dtype conversion of a checkpoint's storages through the
 * model: a storage is converted as a whole, so every tensor viewing it
 * (tied weights, views, a Parameter and its inner tensor) keeps viewing
 * one storage, now of the new dtype, at the same offsets and strides in
 * elements.  cvt_stream.c makes the new bytes as the writer reads them
 * (the mount writes them into a file, cvt_storage_write()); because the
 * storages are re-typed (ckpt_storage.retyped), ckpt_write() writes a new
 * data.pkl with their new storage classes and rebuild calls
 * (ckpt_retype.c).
 */
#include "cvt/cvt.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diag/diag.h"
#include "util/io.h"

#define CHUNK	(UINT64_C(1) << 18)	/* elements per read: 2 MiB of f64 */

/*
 * One tensor over a storage, folded into what is known of the storage:
 * *@dt the dtype seen so far, *@floating whether any is floating.
 * Returns why the storage cannot be converted, or NULL.
 */
static const char *judge(const struct ckpt_tensor *t,
			 const struct ckpt_dtype **dt, bool *floating)
{
	bool fl = t->dtype->cls == CKPT_DT_FLOAT;

	*floating |= fl;
	if (t->kind != CKPT_T_STRIDED)
		return fl ? "not a plain tensor (a storage saved on its own)"
			  : "also viewed by a tensor that is not floating";
	if (!cvt_supported(t->dtype))
		return fl ? "a floating dtype this conversion does not know"
			  : "also viewed by a tensor that is not floating";
	if (t->storage->nbytes % t->dtype->size)
		return "its storage is not a whole number of elements";
	if (*dt && *dt != t->dtype)
		return "its storage is viewed as two dtypes";
	*dt = t->dtype;
	return NULL;
}

static const char *call_change(const struct ckpt *c,
			       const struct ckpt_tensor *t,
			       const struct ckpt_dtype *to);

const struct ckpt_dtype *cvt_storage_dtype(const struct ckpt *c,
					   const struct ckpt_storage *s,
					   const char **why)
{
	const struct ckpt_dtype *dt = NULL;
	const char *bad = NULL;
	bool floating = false;

	for (uint32_t i = 0; i < c->ntensors; i++)
		if (c->tensors[i]->storage == s && !bad)
			bad = judge(c->tensors[i], &dt, &floating);
	*why = floating ? bad : NULL;
	return floating && !bad ? dt : NULL;
}

const struct ckpt_dtype *cvt_storage_plan(const struct ckpt *c,
					  const struct ckpt_storage *s,
					  const struct ckpt_dtype *to,
					  const char **why)
{
	const struct ckpt_dtype *dt = NULL;
	const char *bad = NULL;
	bool floating = false;

	for (uint32_t i = 0; i < c->ntensors && !bad; i++) {
		const struct ckpt_tensor *t = c->tensors[i];

		if (t->storage != s)
			continue;
		bad = judge(t, &dt, &floating);
		if (!bad)
			bad = call_change(c, t, to);
	}
	if (!bad && !floating)
		bad = "no floating tensor views its storage";
	*why = bad;
	return bad ? NULL : dt;
}

int cvt_storage_write(struct ckpt *c, struct ckpt_storage *s,
		      const struct ckpt_dtype *from,
		      const struct ckpt_dtype *to, enum cvt_flavour fl, int fd,
		      uint64_t off, struct diag *d)
{
	uint64_t n = s->nbytes / from->size, src_off;
	bool big = c->byteorder && !strcmp(c->byteorder, "big");
	unsigned char *in, *out;
	int src, rc = 0;

	rc = ckpt_storage_data(c, s, &src, &src_off, d);
	if (rc)
		return rc;
	in = malloc(CHUNK * from->size);
	out = malloc(CHUNK * to->size);
	if (!in || !out) {
		rc = diag_nomem(d);
		goto out;
	}
	for (uint64_t i = 0; i < n && !rc; i += CHUNK) {
		uint64_t k = n - i < CHUNK ? n - i : CHUNK;

		rc = io_pread_full(src, in, k * from->size,
				   src_off + i * from->size);
		if (rc) {
			diag_errno(d, rc, "storage '%s': %s", s->key,
				   rc == -ENODATA ? "ends early" :
				   strerror(-rc));
			break;
		}
		cvt_elems(from, to, big, fl, in, out, k);
		rc = io_pwrite_full(fd, out, k * to->size, off + i * to->size);
		if (rc)
			diag_errno(d, rc, "storage '%s' converted: %s", s->key,
				   strerror(-rc));
	}
out:
	free(in);
	free(out);
	return rc;
}

/* The storage half of a re-type: its dtype, size and where it lies. */
static void retype_storage(struct ckpt_storage *s,
			   const struct ckpt_dtype *from,
			   const struct ckpt_dtype *to, int fd, uint64_t off)
{
	cvt_storage_set(s, s->nbytes / from->size, to, fd, off);
}

void cvt_storage_set(struct ckpt_storage *s, uint64_t n,
		     const struct ckpt_dtype *to, int fd, uint64_t off)
{
	ckpt_storage_uninflate(s);
	s->retyped = to;
	/* torch.save writes the new dtypes as UntypedStorage of bytes */
	s->untyped = !to->storage;
	s->dtype = to->storage ? to : ckpt_dtype_bytes();
	s->nbytes = n * to->size;
	s->numel = s->untyped ? s->nbytes : n;
	s->fd = fd;
	s->data_off = off;
	s->modified = true;
}

static void retype_tensor(struct ckpt_tensor *t, const struct ckpt_dtype *to)
{
	t->dtype = to;
}

uint32_t cvt_storage_retype(struct ckpt *c, struct ckpt_storage *s,
			    const struct ckpt_dtype *from,
			    const struct ckpt_dtype *to, int fd, uint64_t off)
{
	uint32_t n = 0;

	retype_storage(s, from, to, fd, off);
	for (uint32_t i = 0; i < c->ntensors; i++)
		if (c->tensors[i]->storage == s) {
			retype_tensor(c->tensors[i], to);
			n++;
		}
	return n;
}

/* What cvt_select() learns about each storage, in one pass. */
struct seen {
	const struct ckpt_dtype *dt;
	const char *bad;	/* why it cannot be converted */
	const struct ckpt_tensor *bad_t;	/* the tensor that said so */
	bool floating;
	const struct ckpt_node *yes, *no;	/* a path matching the glob,
						   and one that does not */
};

/* -EINVAL naming the tensor at @n (or its storage) and @why. */
static int refuse(struct diag *d, const struct ckpt_node *n,
		  const struct ckpt_storage *s, const char *why)
{
	char *path = n ? ckpt_node_path(n) : NULL;
	int rc;

	if (n && !path)
		return diag_nomem(d);
	rc = diag_set(d, -EINVAL, DIAG_NO_OFFSET, "%s (storage '%s'): cannot "
		      "convert it: %s", path ? path : "a tensor no key shows",
		      s->key, why);
	free(path);
	return rc;
}

/* -EINVAL: @no, which --only does not match, shares a storage with @yes. */
static int refuse_tie(struct diag *d, const struct ckpt_node *no,
		      const struct ckpt_node *yes,
		      const struct ckpt_storage *s)
{
	char *a = ckpt_node_path(no), *b = ckpt_node_path(yes);
	int rc;

	if (!a || !b)
		rc = diag_nomem(d);
	else
		rc = diag_set(d, -EINVAL, DIAG_NO_OFFSET, "%s shares storage "
			      "'%s' with %s, which --only matches: converting "
			      "one would change the other", a, s->key, b);
	free(a);
	free(b);
	return rc;
}

/* Each shown tensor's paths against the glob: s->yes / s->no. */
static int match_paths(struct ckpt *c, struct seen *sn, const char *glob,
		       struct diag *d)
{
	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct ckpt_node *n = c->nodes[i];
		struct seen *x;
		char *path;
		bool m;

		if (n->kind != CKPT_N_TENSOR || n->dead || !n->tensor ||
		    !n->tensor->storage)
			continue;
		path = ckpt_node_path(n);
		if (!path)
			return diag_nomem(d);
		m = !fnmatch(glob, path, 0);
		free(path);
		x = &sn[n->tensor->storage->index];
		if (m && !x->yes)
			x->yes = n;
		if (!m && !x->no)
			x->no = n;
	}
	return 0;
}

/* The node showing tensor @t, for messages; NULL if none does. */
static const struct ckpt_node *node_of(const struct ckpt *c,
				       const struct ckpt_tensor *t)
{
	for (uint32_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i]->kind == CKPT_N_TENSOR &&
		    c->nodes[i]->tensor == t && !c->nodes[i]->dead)
			return c->nodes[i];
	for (uint32_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i]->kind == CKPT_N_TENSOR && t->storage &&
		    c->nodes[i]->tensor && !c->nodes[i]->dead &&
		    c->nodes[i]->tensor->storage == t->storage)
			return c->nodes[i];
	return NULL;
}

/*
 * A change between _rebuild_tensor_v2 and _v3 (to or from float8) needs
 * the rebuild call rewritten: refused where ckpt_retype.c cannot.
 */
static const char *call_change(const struct ckpt *c,
			       const struct ckpt_tensor *t,
			       const struct ckpt_dtype *to)
{
	if (!to->storage && t->requires_grad && !t->parameter)
		return "torch cannot load a float8 tensor that requires grad "
		       "(its torch.save writes one)";
	if (t->dtype == to || (t->dtype->storage && to->storage))
		return NULL;
	if (c->format == CKPT_LEGACY)
		return "a legacy file's tensor cannot become float8 here "
		       "(ptrepack it to the zip format first)";
	if (t->x->cls || t->x->state)
		return "a tensor with python attributes cannot change to or "
		       "from float8";
	return NULL;
}

int cvt_select(struct ckpt *c, const struct ckpt_dtype *to, const char *glob,
	       const struct ckpt_dtype ***plan, struct diag *d)
{
	struct seen *sn = calloc(c->nstorages + 1, sizeof(*sn));
	const struct ckpt_dtype **p = calloc(c->nstorages + 1, sizeof(*p));
	int rc = 0;

	*plan = NULL;
	if (!sn || !p) {
		rc = diag_nomem(d);
		goto out;
	}
	for (uint32_t i = 0; i < c->ntensors; i++) {
		const struct ckpt_tensor *t = c->tensors[i];
		struct seen *x;

		if (!t->storage)
			continue;
		x = &sn[t->storage->index];
		if (!x->bad)
			x->bad = judge(t, &x->dt, &x->floating);
		if (!x->bad && to)
			x->bad = call_change(c, t, to);
		if (x->bad && !x->bad_t)
			x->bad_t = t;
	}
	if (glob)
		rc = match_paths(c, sn, glob, d);
	for (uint32_t k = 0; k < c->nstorages && !rc; k++) {
		struct seen *x = &sn[k];
		struct ckpt_storage *s = c->storages[k];

		if (!x->floating || (glob && !x->yes))
			continue;
		if (x->bad)
			rc = refuse(d, node_of(c, x->bad_t), s, x->bad);
		else if (glob && x->no && x->dt != to)
			rc = refuse_tie(d, x->no, x->yes, s);
		else if (x->dt != to)
			p[k] = x->dt;
	}
	if (!rc) {
		*plan = p;
		p = NULL;
	}
out:
	free(sn);
	free(p);
	return rc;
}

int cvt_tmpfile(const char *near, struct diag *d)
{
	size_t n = strlen(near);
	char *base = strdup(near), *tmp;
	int fd;

	/* a directory output (OUT/): beside the directory */
	while (base && n > 1 && base[n - 1] == '/')
		base[--n] = 0;
	tmp = base ? io_beside(base, ".ptfs-cvt.XXXXXX") : NULL;
	free(base);
	if (!tmp)
		return diag_nomem(d);
	fd = mkstemp(tmp);
	if (fd < 0)
		fd = diag_errno(d, -errno, "cannot create a temporary file "
				"beside %s: %s", near, strerror(errno));
	else
		unlink(tmp);
	free(tmp);
	return fd;
}
