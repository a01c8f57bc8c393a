/*
 * ovl_view_apply.c - applying what was written into a tensor's .npy or
 * .txt view (staged by ovl_view.c, or a temporary file renamed onto the
 * view), in the overlay's usual order, data first, then the journal, then
 * memory:
 *   - new values for the same tensor go through ovl_replace_contents(),
 *     so other views, tied names and identity stay as they were;
 *   - a .npy of another dtype or shape (or one written as a new KEY.npy)
 *     becomes a new tensor: a new storage file "<i>", then one JR_TENSOR
 *     record that puts it in place and, for rsync's and sed -i's rename
 *     of a temporary file, also removes that file;
 *   - replay repeats JR_TENSOR records over the data already in place.
 */
#include "ovl_int.h"
#include "cvt/cvt.h"
#include "util/io.h"
#include "view/view.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK		(1u << 20)

static const char *vext(int view)
{
	return view == CKPT_V_NPY ? ".npy" : ".txt";
}

/*
 * Messages about what was written into a view name the view's file
 * ("model/fc.weight.npy: offset 0x8: ...") rather than the checkpoint:
 * set @d's path to "@dir/@key.npy" while the bytes are checked.  The FUSE
 * driver prints the message after this call returns, so the name lives
 * in the model's arena (only when something failed).
 */
struct label {
	const char *saved;
	char *name;
};

static void label_set(struct diag *d, struct label *l,
		      const struct ckpt_node *dir, const char *key, int view)
{
	char *p = dir ? ckpt_node_path(dir) : strdup("");
	const struct ckpt_node *k = dir ? ckpt_node_child(dir, key) : NULL;

	if (k)
		key = ovl_label(k);	/* a long key cut, as names.md does */
	l->saved = d->path;
	l->name = p ? malloc(strlen(p) + strlen(key) + 8) : NULL;
	if (l->name)
		sprintf(l->name, "%s%s%s%s", p, *p ? "/" : "", key, vext(view));
	free(p);
	if (l->name)
		d->path = l->name;
}

static void label_done(struct ovl *v, struct diag *d, struct label *l)
{
	if (l->name && d->path == l->name)
		d->path = d->err ? arena_strndup(&v->c->arena, l->name,
						 strlen(l->name)) : l->saved;
	if (!d->path)
		d->path = l->saved;
	free(l->name);
}

/* ---- applying a view's new bytes ---- */

/* Copy @len bytes at @off of @src into @dst at 0, swapping the byte
 * order of @dt's elements when @swap. */
static int copy_data(struct ovl *v, int src, uint64_t off, uint64_t len,
		     int dst, const struct ckpt_dtype *dt, bool swap,
		     struct diag *d)
{
	unsigned char *buf;
	size_t chunk = CHUNK - CHUNK % dt->size;
	int rc = 0;

	if (!swap || dt->size == 1) {
		rc = ovl_copy_range(src, off, dst, len);
		return rc ? ovl_sys_err(v, d, rc, "cannot copy new data") : 0;
	}
	buf = malloc(chunk);
	if (!buf)
		return diag_nomem(d);
	for (uint64_t pos = 0; pos < len && !rc; pos += chunk) {
		uint64_t k = len - pos < chunk ? len - pos : chunk;

		rc = io_pread_full(src, buf, k, off + pos);
		if (!rc) {
			view_swap(dt, buf, k / dt->size);
			rc = io_pwrite_full(dst, buf, k, pos);
		}
		if (rc)
			rc = ovl_sys_err(v, d, rc, "cannot copy new data");
	}
	free(buf);
	return rc;
}

/* New values for @x: parse the text at @src into @x's bytes, then
 * replace its contents with them. */
static int apply_text(struct ovl *v, struct ckpt_node *x, int src,
		      uint64_t len, struct diag *d)
{
	struct label l;
	const struct ckpt_dtype *dt = x->tensor->dtype;
	struct view_parser p;
	char *in = malloc(CHUNK);
	unsigned char *out = malloc((CHUNK / 2 + 2) * (size_t)dt->size);
	uint64_t at = 0;
	int tmp = -1, rc = in && out ? 0 : diag_nomem(d);

	if (!rc && (tmp = ovl_scratch_file(v, d)) < 0)
		rc = tmp;
	view_parser_init(&p, dt, ovl_view_big(v), ovl_view_numel(v, x));
	label_set(d, &l, x->parent, x->name, CKPT_V_TXT);
	for (uint64_t pos = 0; !rc && (pos < len || !pos); pos += CHUNK) {
		size_t k = len - pos < CHUNK ? len - pos : CHUNK, nout;
		bool last = pos + k >= len;

		rc = io_pread_full(src, in, k, pos);
		if (rc) {
			rc = ovl_sys_err(v, d, rc, "cannot read new text");
			break;
		}
		rc = view_parse(&p, in, k, last, out, &nout, d);
		if (rc)
			break;
		if ((rc = io_pwrite_full(tmp, out, nout, at)))
			rc = ovl_sys_err(v, d, rc, "cannot stage new values");
		at += nout;
		if (last)
			break;
	}
	label_done(v, d, &l);
	free(in);
	free(out);
	if (!rc)
		rc = ovl_replace_contents(v, x->tensor, tmp, 0, d);
	if (tmp >= 0)
		close(tmp);
	if (!rc)
		ovl_notify(v, x->tensor->storage, NULL);
	return rc;
}

/* The descriptor without its byte order: '<f4' and '>f4' are alike. */
static void descr_key(const char *s, char *out, size_t size)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < size; i++)
		out[i] = strchr("<>|=", s[i]) ? '?' : s[i];
	out[i] = 0;
}

/* Does .npy header @h describe @x's tensor (up to byte order)? */
static bool same_tensor(const struct ovl *v, const struct ckpt_node *x,
			const struct view_npy *h, bool *same_descr)
{
	const struct ckpt_tensor *t = x->tensor;
	char mine[64], a[64], b[64];

	descr_key(view_npy_descr(t->dtype, ovl_view_big(v), mine, sizeof(mine)), a,
		  sizeof(a));
	descr_key(h->descr, b, sizeof(b));
	*same_descr = !strcmp(a, b);
	if (!*same_descr)
		return false;
	if (t->fresh && !t->shape_set)
		return h->ndim == 1 && (uint64_t)h->shape[0] == ovl_view_numel(v, x);
	return h->ndim == t->ndim &&
	       !memcmp(h->shape, t->shape, t->ndim * sizeof(*t->shape));
}

/* Remove @s, a temporary file whose bytes became a view's (no record:
 * the caller journals it). */
static void consume(struct ckpt_node *s)
{
	if (s && s->parent && !s->dead) {
		ckpt_dir_remove(s->parent, s);
		s->dead = true;
	}
}

/*
 * Put tensor @t at @dir/@name: in @x's place when that is a tensor
 * (keeping whether it is a Parameter), else as pending node @x or a new
 * node.  Memory only.
 */
static int tensor_put(struct ovl *v, struct ckpt_node *dir, const char *name,
		      struct ckpt_node *x, struct ckpt_tensor *t,
		      struct ckpt_node *consumed, struct diag *d)
{
	struct ckpt_node *old = ckpt_node_child(dir, name);
	char *nm;

	if (old && old->kind == CKPT_N_TENSOR) {
		old->tensor = t;
		old->edited = true;
		old->type = t->parameter ? "Parameter" : "Tensor";
		consume(consumed);
		return 0;
	}
	if (old)
		return diag_errno(d, -EEXIST, "%s exists and is not a tensor",
				  name);
	nm = arena_strndup(&v->c->arena, name, strlen(name));
	if (!x)
		x = ckpt_node_fresh(v->c, CKPT_N_TENSOR, "Tensor");
	if (!nm || !x || ckpt_dir_insert(v->c, dir, x, nm))
		return diag_nomem(d);
	x->pending = false;
	x->dead = false;
	x->tensor = t;
	x->type = t->parameter ? "Parameter" : "Tensor";
	x->step = ckpt_dir_step(dir);
	consume(consumed);
	return 0;
}

/* A fresh tensor over data file "<index>" (there already) with @dt and
 * @shape; a Parameter and/or requiring grad as @flags say ("p", "g"). */
static int make_tensor(struct ovl *v, uint32_t index,
		       const struct ckpt_dtype *dt, int ndim,
		       const int64_t *shape, const char *flags,
		       struct ckpt_tensor **out, struct diag *d)
{
	struct ckpt_tensor *t;
	int rc = ovl_fresh_tensor(v, index, false, &t, d);

	if (rc)
		return rc;
	t->dtype = dt;
	t->ndim = ndim;
	memcpy(t->shape, shape, ndim * sizeof(*shape));
	t->shape_set = t->fixed = true;
	t->parameter = strchr(flags, 'p') != NULL;
	t->requires_grad = strchr(flags, 'g') != NULL;
	ckpt_tensor_fresh_sync(t);
	if (ckpt_tensor_fresh_fits(t))
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s/%u: %llu bytes do "
				    "not make a %s tensor of that shape",
				    v->dir, index,
				    (unsigned long long)t->storage->nbytes,
				    dt->name);
	*out = t;
	return 0;
}

static void shape_text(const int64_t *shape, int ndim, char *buf,
		       size_t size)
{
	size_t k = 0;

	buf[0] = 0;
	for (int i = 0; i < ndim && k < size; i++)
		k += snprintf(buf + k, size - k, "%s%lld", i ? "," : "",
			      (long long)shape[i]);
}

/*
 * A new tensor @dir/@name (replacing tensor @x there, or making pending
 * @x real) from the data of .npy @h in @src: data file, record, memory.
 */
static int apply_new(struct ovl *v, struct ckpt_node *dir, const char *name,
		     struct ckpt_node *x, const struct view_npy *h,
		     const struct ckpt_dtype *dt, int src,
		     struct ckpt_node *consumed, struct diag *d)
{
	const struct ckpt_tensor *old = x && !x->pending ? x->tensor : NULL;
	uint32_t index = v->c->nstorages;
	char idx[16], flags[4] = "", shape[CKPT_MAX_DIMS * 21 + 1];
	char *p1 = ckpt_node_path(dir), *p2 = NULL;
	struct jrec r = { .op = JR_TENSOR };
	struct ckpt_tensor *t;
	int fd, rc = p1 ? 0 : diag_nomem(d);

	/* the data file "<jid>.<index>" (named in the journal first),
	   whole, before the record that makes it a tensor */
	fd = rc ? -1 : ovl_data_open(v, index, ".tmp", O_RDWR | O_CREAT |
				     O_TRUNC, d);
	if (!rc && fd < 0)
		rc = fd;
	if (!rc)
		rc = copy_data(v, src, h->header_len, h->nbytes, fd, dt,
			       h->big != ovl_view_big(v), d);
	if (!rc)
		rc = ovl_data_finish(v, index, fd, d);
	if (fd >= 0)
		close(fd);
	if (rc)
		goto out;
	snprintf(idx, sizeof(idx), "%u", index);
	if (old && old->parameter)
		strcat(flags, "p");
	if (old && old->requires_grad)
		strcat(flags, "g");
	shape_text(h->shape, h->ndim, shape, sizeof(shape));
	r.nf = 6;
	r.f[0] = p1;
	r.f[1] = name;
	r.f[2] = idx;
	r.f[3] = dt->name;
	r.f[4] = shape;
	r.f[5] = flags;
	if (consumed) {
		p2 = ckpt_node_path(consumed->parent);
		if (!p2) {
			rc = diag_nomem(d);
			goto out;
		}
		r.f[r.nf++] = p2;
		r.f[r.nf++] = consumed->name;
	}
	for (int i = 0; i < r.nf; i++)
		r.len[i] = strlen(r.f[i]);
	rc = jr_append(v, &r, d);
	if (!rc)
		rc = make_tensor(v, index, dt, h->ndim, h->shape, flags, &t, d);
	if (!rc)
		rc = tensor_put(v, dir, name, x, t, consumed, d);
	if (!rc)
		ovl_notify(v, t->storage, NULL);
out:
	free(p1);
	free(p2);
	return rc;
}

/* @s is a new file of plain bytes (no dtype or shape set on it). */
static bool plain_file(const struct ckpt_node *s)
{
	const struct ckpt_tensor *t = s->tensor;

	return s->kind == CKPT_N_TENSOR && t && t->fresh && !t->fixed &&
	       !t->shape_set && !strcmp(t->dtype->name, "uint8");
}

/*
 * A .npy of dtype @dt for tensor @x of another dtype: refused (docs/
 * editing.md says why), with what to do instead.  @d names the view.
 */
static int refuse_dtype(const struct ckpt_node *x, const struct ckpt_dtype *dt,
			struct diag *d)
{
	const struct ckpt_dtype *has = x->tensor->dtype;

	if (cvt_supported(dt) && cvt_supported(has))
		return diag_errno(d, -EINVAL, "%s data, the tensor is %s: "
				  "refused, nothing changed; cast it first "
				  "(setfattr -n user.dtype -v %s %s) or save "
				  "%s data", dt->name, has->name, dt->name,
				  ovl_label(x), has->name);
	return diag_errno(d, -EINVAL, "%s data, the tensor is %s: refused, "
			  "nothing changed (a change of dtype is a cast, and "
			  "ptfs casts only floating dtypes); save %s data",
			  dt->name, has->name, has->name);
}

/* Tell that @x's new .npy gave it another shape than @was: a new
 * tensor, which the names in @tied (if any) do not see. */
static void tell_shape(struct ovl *v, const struct ckpt_node *x,
		       const char *was, const struct view_npy *h,
		       const char *tied)
{
	char now[CKPT_MAX_DIMS * 21 + 1];
	char *p = ckpt_node_path(x);

	shape_text(h->shape, h->ndim, now, sizeof(now));
	if (p)
		ovl_tell(v, "%s.npy: shape (%s) for a tensor of shape (%s): "
			 "%s is a new tensor of that shape%s%s", p, now, was,
			 p, tied ? "; these keep the old one: " : "",
			 tied ? tied : "");
	free(p);
}

/* The .npy at @src (@len bytes) is the new content of @dir/@name, which
 * is tensor @x, pending @x, or nothing yet. */
static int apply_npy(struct ovl *v, struct ckpt_node *dir, const char *name,
		     struct ckpt_node *x, int src, uint64_t len,
		     struct ckpt_node *consumed, struct diag *d)
{
	size_t want = len < (1u << 20) + 16 ? len : (1u << 20) + 16;
	unsigned char *buf = malloc(want ? want : 1);
	const struct ckpt_dtype *dt;
	struct label l;
	struct view_npy h;
	bool same_descr = false, same;
	char *tied, was[CKPT_MAX_DIMS * 21 + 1];
	int rc = buf ? 0 : diag_nomem(d);

	if (!rc && (rc = io_pread_full(src, buf, want, 0)))
		rc = ovl_sys_err(v, d, rc, "cannot read the new .npy");
	label_set(d, &l, dir, name, CKPT_V_NPY);
	if (!rc)
		rc = view_npy_parse(buf, want, &h, d);
	free(buf);
	if (!rc && h.fortran_order)
		rc = diag_set(d, -EINVAL, 0, "Fortran-order arrays are not "
			      "supported: save np.ascontiguousarray(a)");
	if (!rc && len - h.header_len != h.nbytes)
		rc = diag_set(d, -EINVAL, h.header_len, "the header says %llu "
			      "bytes of data, the file has %llu",
			      (unsigned long long)h.nbytes,
			      (unsigned long long)(len - h.header_len));
	same = !rc && x && !x->pending && same_tensor(v, x, &h, &same_descr);
	/* bfloat16 is shown as '<u2': written back, it stays bfloat16 */
	dt = rc ? NULL : same_descr ? x->tensor->dtype : h.dtype;
	/* another dtype: refused, unless @x is a new file of plain bytes */
	if (!rc && !same && x && !x->pending && !plain_file(x) &&
	    dt != x->tensor->dtype)
		rc = refuse_dtype(x, dt, d);
	if (!rc && !same)
		rc = ckpt_rule_dtype(v->c, dt, d);
	label_done(v, d, &l);
	if (rc)
		return rc;
	if (same) {
		const struct ckpt_tensor *t = x->tensor;
		int tmp = -1;

		/* new values: through the view, keeping identity */
		if (h.big != ovl_view_big(v) && t->dtype->size > 1) {
			tmp = ovl_scratch_file(v, d);
			rc = tmp < 0 ? tmp : copy_data(v, src, h.header_len,
							h.nbytes, tmp, t->dtype,
							true, d);
		}
		if (!rc)
			rc = ovl_replace_contents(v, t, tmp >= 0 ? tmp : src,
						  tmp >= 0 ? 0 : h.header_len,
						  d);
		if (tmp >= 0)
			close(tmp);
		if (!rc && consumed)
			rc = ovl_journal(v, JR_UNLINK, consumed->parent,
					 consumed->name, NULL, NULL, NULL, 0, d);
		if (!rc) {
			consume(consumed);
			ovl_notify(v, t->storage, NULL);
		}
		return rc;
	}
	if (!x || x->pending || plain_file(x))
		return apply_new(v, dir, name, x, &h, dt, src, consumed, d);
	/* another shape: a new tensor under this name only (told) */
	if ((rc = ckpt_rule_npy(v->c, ovl_label(x), true, d)))
		return rc;
	tied = ovl_names_over(v, x->tensor->storage, x, 4);
	shape_text(x->tensor->shape, x->tensor->ndim, was, sizeof(was));
	rc = apply_new(v, dir, name, x, &h, dt, src, consumed, d);
	if (!rc)
		tell_shape(v, x, was, &h, tied);
	free(tied);
	return rc;
}

/* Apply the view @n was being written through. */
int ovl_vstage_apply(struct ovl *v, struct ckpt_node *n, struct diag *d)
{
	struct ckpt_stage *st = n->ed->vstage;
	struct ckpt_node *dir = n->parent;
	int rc;

	if (n->dead && !n->pending)
		rc = diag_errno(d, -ENOENT, "%s was removed while its %s view "
				"was being written", ovl_label(n),
				vext(st->view));
	else if (!dir || dir->dead)
		rc = diag_errno(d, -ENOENT, "%s: its directory was removed",
				ovl_label(n));
	else if (st->view == CKPT_V_TXT)
		rc = apply_text(v, n, st->scratch->fd, st->len, d);
	else
		rc = apply_npy(v, dir, n->name, n, st->scratch->fd, st->len,
			       NULL, d);
	ovl_stage_free(&n->ed->vstage);
	n->ed->verr = rc;
	return rc;
}

/* ---- rename of a temporary file onto a view (rsync, sed -i) ---- */

/* KEY of "KEY.npy" (any length: a key shown cut) into *@key, malloc'd;
 * the view, or CKPT_V_RAW (then *@key is NULL). */
static int view_key(const char *nname, char **key)
{
	size_t kl;
	int view = ovl_view_name(nname, &kl);

	*key = view == CKPT_V_RAW ? NULL : strndup(nname, kl);
	return *key ? view : CKPT_V_RAW;
}

bool ovl_view_target(const struct ckpt_node *s, const struct ckpt_node *ndir,
		     const char *nname)
{
	char *key;
	int view = view_key(nname, &key);
	const struct ckpt_node *b;
	bool yes;

	if (view == CKPT_V_RAW || !plain_file(s)) {
		free(key);
		return false;
	}
	b = ckpt_node_child(ndir, key);
	free(key);
	if (!b)
		yes = view == CKPT_V_NPY;
	else
		yes = b->kind == CKPT_N_TENSOR && ovl_view_ok(b);
	return yes;
}

int ovl_view_rename(struct ovl *v, struct ckpt_node *s,
		    struct ckpt_node *ndir, const char *nname, struct diag *d)
{
	char *key, *nm;
	int view = view_key(nname, &key);
	struct ckpt_node *b = key ? ckpt_node_child(ndir, key) : NULL;
	const struct ckpt_storage *src = s->tensor->storage;
	int rc = key ? 0 : diag_nomem(d);

	if (!rc && (s->ed->stage || s->ed->vstage))
		rc = diag_errno(d, -EBUSY, "%s is still being written",
				ovl_label(s));
	/* a new key from a .npy: a name a key can have */
	if (!rc && !b)
		rc = ovl_key_name(v, ndir, key, &nm, d);
	if (!rc && view == CKPT_V_NPY)
		rc = apply_npy(v, ndir, key, b, src->fd, src->nbytes, s, d);
	else if (!rc)
		rc = apply_text(v, b, src->fd, src->nbytes, d);
	if (!rc && view == CKPT_V_TXT)
		rc = ovl_journal(v, JR_UNLINK, s->parent, s->name, NULL, NULL,
				 NULL, 0, d);
	if (!rc && view == CKPT_V_TXT)
		consume(s);
	free(key);
	return rc;
}

/* ---- replay ---- */

int ovl_replay_tensor(struct ovl *v, const struct jrec *r, struct diag *d)
{
	struct ckpt_node *dir = ovl_resolve(v, r->f[0], r->len[0]);
	struct ckpt_node *consumed = NULL;
	const struct ckpt_dtype *dt;
	struct ckpt_tensor *t;
	int64_t shape[CKPT_MAX_DIMS];
	char *name, dtn[32], flags[8];
	uint64_t index;
	int ndim, rc;

	if ((r->nf != 6 && r->nf != 8) || !dir ||
	    r->len[3] >= sizeof(dtn) || r->len[5] >= sizeof(flags) ||
	    !jr_num(r, 2, &index) || index > UINT32_MAX)
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s: bad tensor record",
				    v->jpath);
	memcpy(dtn, r->f[3], r->len[3]);
	dtn[r->len[3]] = 0;
	memcpy(flags, r->f[5], r->len[5]);
	flags[r->len[5]] = 0;
	dt = ckpt_dtype_by_name(dtn);
	ndim = ovl_parse_shape(r->f[4], r->len[4], shape);
	if (r->nf == 8) {
		struct ckpt_node *cdir = ovl_resolve(v, r->f[6], r->len[6]);
		char cname[256];

		if (cdir && r->len[7] < sizeof(cname)) {
			memcpy(cname, r->f[7], r->len[7]);
			cname[r->len[7]] = 0;
			consumed = ckpt_node_child(cdir, cname);
		}
		if (!consumed)
			return diag_corrupt(d, DIAG_NO_OFFSET, "%s: a tensor record "
					    "consumes a file that is not "
					    "there", v->jpath);
	}
	if (!dt || ndim < 0)
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s: bad tensor record",
				    v->jpath);
	/* the key may be longer than a file name (a key shown cut) */
	name = strndup(r->f[1], r->len[1]);
	if (!name)
		return diag_nomem(d);
	rc = make_tensor(v, (uint32_t)index, dt, ndim, shape, flags, &t, d);
	if (!rc)
		rc = tensor_put(v, dir, name, NULL, t, consumed, d);
	free(name);
	return rc;
}
