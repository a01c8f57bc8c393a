/*
 * ovl_view.c - the .npy and .txt views of a tensor, read and written
 * through the overlay (docs/views.md says what users see).
 *
 * A view is never stored: its bytes are made from the tensor on demand
 * (the .npy header from dtype and shape, then the tensor's own bytes; the
 * text rendered by core/view).  What is written into a view is staged
 * whole in a scratch file (node->ed->vstage) and applied at close(), in the
 * overlay's usual order (ovl_view_apply.c).  This file has the reading
 * and the staging.
 *
 * A coded tensor (ckpt_coded(): a GGUF Q8_0 tensor) is its bytes, and its
 * views are its values: float32 of the coding's shape, decoded from the
 * bytes as they stand (edits included) at each read.  They are read-only:
 * values written would have to be coded again, which is no edit of bytes.
 */
#define _GNU_SOURCE 1	/* O_TMPFILE */
#include "ovl_int.h"
#include "util/io.h"
#include "view/view.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK		(1u << 20)
#define TEXT_ELEMS	(1u << 14)	/* elements rendered at a time */
/*
 * A text view is rendered whole into a temporary file, up to
 * VIEW_TEXT_ELEM_MAX bytes per element: a 16-byte storage viewed with
 * stride 0 as 2^40 elements (tests/hostile) would fill the disk.
 */
#define TEXT_MAX_ELEMS	(UINT64_C(1) << 28)

/* Is @n's tensor coded (its views its decoded values)? */
static bool coded(const struct ovl *v, const struct ckpt_node *n,
		  struct ckpt_coded *k)
{
	return !n->pending && n->kind == CKPT_N_TENSOR &&
	       ckpt_coded(v->c, n->tensor, k);
}

struct bytes {
	struct ovl *v;
	struct ckpt_node *n;
	struct diag *d;
};

static long long node_bytes(void *arg, void *buf, uint64_t len, uint64_t pos)
{
	struct bytes *b = arg;

	return ovl_read(b->v, b->n, buf, len, pos, b->d);
}

/* Values [@first, @first + @n) of coded @n's tensor as float32. */
static int coded_values(struct ovl *v, struct ckpt_node *n,
			const struct ckpt_coded *k, float *dst, uint64_t first,
			uint64_t cnt, struct diag *d)
{
	struct bytes b = { v, n, d };

	return ckpt_coded_values(k, node_bytes, &b, dst, first, cnt, d);
}

static int coded_refused(const struct ckpt_node *n, const struct ckpt_coded *k,
			 struct diag *d)
{
	return diag_errno(d, -EPERM, "%s: its views are its %s values "
			  "decoded, read-only (write the tensor's own bytes)",
			  ovl_label(n), k->name);
}

bool ovl_view_big(const struct ovl *v)
{
	return v->c->byteorder && !strcmp(v->c->byteorder, "big");
}

void ovl_view_src(const struct ovl *v, const struct ckpt_node *n,
		  struct ovl_vsrc *s)
{
	const struct ckpt_tensor *t = n->tensor;

	s->coded = coded(v, n, &s->k);
	if (s->coded) {
		s->dt = ckpt_dtype_by_name("float32");
		s->big = false;
		s->ndim = s->k.ndim;
		s->shape = s->k.shape;
		s->numel = s->k.numel;
		return;
	}
	s->dt = t->dtype;
	s->big = ovl_view_big(v);
	s->numel = ovl_view_numel(v, n);
	s->flat = (int64_t)s->numel;
	s->ndim = t->ndim;
	s->shape = t->shape;
	if (t->fresh && !t->shape_set) {
		s->ndim = 1;
		s->shape = &s->flat;
	}
}

int ovl_view_elems(struct ovl *v, struct ckpt_node *n,
		   const struct ovl_vsrc *s, void *buf, uint64_t first,
		   uint64_t cnt, struct diag *d)
{
	long long got;

	if (s->coded)
		return coded_values(v, n, &s->k, buf, first, cnt, d);
	got = ovl_read(v, n, buf, cnt * s->dt->size, first * s->dt->size, d);
	if (got < 0)
		return (int)got;
	if ((uint64_t)got != cnt * s->dt->size)
		return diag_errno(d, -EIO, "%s: short read", ovl_label(n));
	return 0;
}

bool ovl_view_ok(const struct ckpt_node *n)
{
	if (n->pending)
		return true;
	return n->kind == CKPT_N_TENSOR && n->tensor &&
	       n->tensor->kind != CKPT_T_META;
}

int ovl_view_name(const char *name, size_t *keylen)
{
	size_t n = strlen(name);

	if (n <= 4 || name[n - 4] != '.')
		return CKPT_V_RAW;
	*keylen = n - 4;
	if (!strcmp(name + n - 3, "npy"))
		return CKPT_V_NPY;
	if (!strcmp(name + n - 3, "txt"))
		return CKPT_V_TXT;
	return CKPT_V_RAW;
}

/* Elements @n's file holds now (a new file may have grown or shrunk). */
uint64_t ovl_view_numel(const struct ovl *v, const struct ckpt_node *n)
{
	return ovl_size(v, n) / n->tensor->dtype->size;
}

size_t ovl_npy_header(const struct ovl *v, const struct ckpt_node *n,
		      unsigned char *buf)
{
	struct ovl_vsrc s;

	ovl_view_src(v, n, &s);
	return view_npy_header(s.dt, s.big, s.ndim, s.shape, buf);
}

uint64_t ovl_npy_size(const struct ovl *v, const struct ckpt_node *n)
{
	unsigned char h[VIEW_NPY_HEADER_MAX];
	struct ckpt_coded k;

	if (n->ed->vstage && n->ed->vstage->view == CKPT_V_NPY)
		return n->ed->vstage->len;
	if (n->pending)
		return 0;
	if (coded(v, n, &k))
		return ovl_npy_header(v, n, h) + k.numel * 4;
	return ovl_npy_header(v, n, h) + ovl_view_numel(v, n) * n->tensor->dtype->size;
}

static long long stage_read(struct ovl *v, const struct ckpt_stage *st,
			    void *buf, uint64_t len, uint64_t off,
			    struct diag *d)
{
	int rc;

	if (off >= st->len)
		return 0;
	if (len > st->len - off)
		len = st->len - off;
	rc = io_pread_full(st->scratch->fd, buf, len, off);
	return rc ? ovl_sys_err(v, d, rc, "read") : (long long)len;
}

/* Bytes [@pos, @pos + @len) of coded @n's values (float32, host order:
 * little-endian, as the header says), after @done bytes of header. */
static long long coded_read(struct ovl *v, struct ckpt_node *n,
			    const struct ckpt_coded *k, char *buf,
			    uint64_t len, uint64_t pos, struct diag *d,
			    uint64_t done)
{
	uint64_t total = k->numel * 4, first, cnt;
	float *val;
	int rc;

	if (pos >= total)
		return (long long)done;
	len = len < total - pos ? len : total - pos;
	first = pos / 4;
	cnt = (pos + len + 3) / 4 - first;
	if (!(val = malloc(cnt * sizeof(*val))))
		return diag_nomem(d);
	rc = coded_values(v, n, k, val, first, cnt, d);
	if (!rc)
		memcpy(buf, (char *)val + pos % 4, len);
	free(val);
	return rc ? rc : (long long)(done + len);
}

long long ovl_npy_read(struct ovl *v, struct ckpt_node *n, void *buf,
		       uint64_t len, uint64_t off, struct diag *d)
{
	unsigned char h[VIEW_NPY_HEADER_MAX];
	uint64_t hl, k = 0;
	struct ckpt_coded ck;
	long long got;

	if (n->ed->vstage && n->ed->vstage->view == CKPT_V_NPY)
		return stage_read(v, n->ed->vstage, buf, len, off, d);
	if (n->pending)
		return 0;
	hl = ovl_npy_header(v, n, h);
	if (off < hl) {
		k = hl - off < len ? hl - off : len;
		memcpy(buf, h + off, k);
	}
	if (k == len)
		return k;
	if (coded(v, n, &ck))
		return coded_read(v, n, &ck, (char *)buf + k, len - k,
				  off + k - hl, d, k);
	got = ovl_read(v, n, (char *)buf + k, len - k, off + k - hl, d);
	return got < 0 ? got : got + (long long)k;
}

int ovl_locate(struct ovl *v, struct ckpt_node *n, int view, uint64_t off,
	       struct ovl_loc *loc, struct diag *d)
{
	unsigned char h[VIEW_NPY_HEADER_MAX];
	uint64_t hl;
	int rc;

	if (!view)
		return ovl_data_locate(v, n, off, loc, d);
	loc->fd = -1;
	loc->pos = off;
	/* being written */
	if (n->ed->vstage && n->ed->vstage->view == view) {
		loc->fd = n->ed->vstage->scratch->fd;
		loc->size = n->ed->vstage->len;
	} else if (view == CKPT_V_TXT || n->pending) {
		loc->size = 0;		/* formatted (fs/), or not yet there */
	} else if (coded(v, n, &(struct ckpt_coded){ 0 })) {
		loc->size = ovl_npy_size(v, n);	/* decoded at each read */
	} else {
		hl = ovl_npy_header(v, n, h);
		loc->size = ovl_npy_size(v, n);
		if (off >= hl) {	/* past the header: the tensor's bytes */
			rc = ovl_data_locate(v, n, off - hl, loc, d);
			if (rc)
				return rc;
			loc->size = ovl_npy_size(v, n);
		}
	}
	loc->len = off < loc->size ? loc->size - off : 0;
	return 0;
}

int ovl_text_render(struct ovl *v, struct ckpt_node *n, int fd,
		    uint64_t *size, struct diag *d)
{
	struct ovl_vsrc s;
	char line[CKPT_MAX_DIMS * 22 + 64];
	unsigned char *in;
	char *out;
	uint64_t pos;
	int rc;

	ovl_view_src(v, n, &s);
	in = malloc((size_t)TEXT_ELEMS * s.dt->size);
	out = malloc((size_t)TEXT_ELEMS * VIEW_TEXT_ELEM_MAX);
	rc = in && out ? 0 : diag_nomem(d);
	if (!rc && s.numel > TEXT_MAX_ELEMS)
		rc = diag_set(d, -EFBIG, DIAG_NO_OFFSET, "%s: %" PRIu64 " "
			      "elements, too many for a text view (at most "
			      "%" PRIu64 ")", ovl_label(n), s.numel,
			      TEXT_MAX_ELEMS);
	pos = view_text_header(s.dt, s.ndim, s.shape, line, sizeof(line));
	if (!rc && (rc = io_pwrite_full(fd, line, pos, 0)))
		rc = ovl_sys_err(v, d, rc, "cannot render the text view");
	for (uint64_t e = 0; e < s.numel && !rc; e += TEXT_ELEMS) {
		uint64_t m = s.numel - e < TEXT_ELEMS ? s.numel - e : TEXT_ELEMS;
		size_t w;

		if ((rc = ovl_view_elems(v, n, &s, in, e, m, d)))
			break;
		w = view_text_format(s.dt, s.big, s.ndim, s.shape, e, in, m,
				     out);
		rc = io_pwrite_full(fd, out, w, pos);
		if (rc)
			rc = ovl_sys_err(v, d, rc, "cannot render the text view");
		pos += w;
	}
	free(in);
	free(out);
	if (!rc)
		*size = pos;
	return rc;
}

/* ---- staging what is written into a view ---- */

int ovl_scratch_file(struct ovl *v, struct diag *d)
{
	int fd, rc = ovl_ensure_dir(v, d);

	if (rc)
		return rc;
	fd = openat(v->dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	return fd >= 0 ? fd : ovl_sys_err(v, d, -errno,
					  "cannot make a scratch file");
}

/* Copy the first @keep bytes of what view @view of @n shows into @fd. */
static int view_copy(struct ovl *v, struct ckpt_node *n, int view, int fd,
		     uint64_t keep, uint64_t *len, struct diag *d)
{
	char *buf;
	int rc = 0;

	if (view == CKPT_V_TXT) {
		rc = ovl_text_render(v, n, fd, len, d);
		if (!rc && keep < *len) {
			*len = keep;
			if (ftruncate(fd, keep))
				rc = ovl_sys_err(v, d, -errno, "truncate");
		}
		return rc;
	}
	*len = ovl_npy_size(v, n) < keep ? ovl_npy_size(v, n) : keep;
	buf = malloc(CHUNK);
	if (!buf)
		return diag_nomem(d);
	for (uint64_t pos = 0; pos < *len && !rc; pos += CHUNK) {
		uint64_t k = *len - pos < CHUNK ? *len - pos : CHUNK;
		long long got = ovl_npy_read(v, n, buf, k, pos, d);

		rc = got < 0 ? (int)got : io_pwrite_full(fd, buf, got, pos);
	}
	free(buf);
	return rc;
}

/* Start staging a new view @view of @n, holding its first @keep bytes. */
static int vstage_start(struct ovl *v, struct ckpt_node *n, int view,
			uint64_t keep, struct diag *d)
{
	struct ckpt_stage *st;
	uint64_t len = 0;
	int fd, rc;

	if (n->ed->stage)
		return diag_errno(d, -EBUSY, "%s is being rewritten; close it "
				  "first", ovl_label(n));
	if (!ckpt_node_ed(v->c, n))
		return diag_nomem(d);
	if (!n->pending && (!n->tensor->storage ||
			    n->tensor->kind == CKPT_T_INLINE))
		return diag_errno(d, -EPERM, "%s has no storage to write",
				  ovl_label(n));
	fd = ovl_scratch_file(v, d);
	if (fd < 0)
		return fd;
	rc = keep && !n->pending ? view_copy(v, n, view, fd, keep, &len, d) : 0;
	st = rc ? NULL : calloc(1, sizeof(*st));
	if (!rc && (!st || !(st->scratch = calloc(1, sizeof(*st->scratch)))))
		rc = diag_nomem(d);
	if (rc) {
		free(st);
		close(fd);
		return rc;
	}
	st->scratch->fd = fd;
	st->len = len;
	st->view = view;
	n->ed->vstage = st;
	return 0;
}

long long ovl_view_write(struct ovl *v, struct ckpt_node *n, int view,
			 const void *buf, uint64_t len, uint64_t off,
			 struct diag *d)
{
	struct ckpt_stage *st = n->ed->vstage;
	struct ckpt_coded ck;
	int rc = ovl_check_writable(v, d);

	if (!rc && coded(v, n, &ck))
		rc = coded_refused(n, &ck, d);
	if (!rc)
		rc = view == CKPT_V_NPY ? ckpt_rule_npy(v->c, ovl_label(n),
							false, d) :
		     ckpt_rule_shape(v->c, ovl_label(n), d);
	if (rc)
		return rc;
	if (st && st->view != view)
		return diag_errno(d, -EBUSY, "%s: its other view is being "
				  "written", ovl_label(n));
	if (!st && view == CKPT_V_NPY) {
		unsigned char h[VIEW_NPY_HEADER_MAX];
		uint64_t hl = ovl_npy_header(v, n, h), k = 0;
		long long w;

		/* in place: the data part goes into the tensor */
		if (off < hl) {
			k = hl - off < len ? hl - off : len;
			if (memcmp(h + off, buf, k))
				return diag_errno(d, -EINVAL, "%s.npy: a .npy "
						  "header can only be replaced "
						  "with the whole file (truncate "
						  "it first, as cp and np.save "
						  "do)", ovl_label(n));
		}
		if (k == len)
			return k;
		w = ovl_write(v, n, (const char *)buf + k, len - k,
			      off + k - hl, d);
		return w < 0 ? w : w + (long long)k;
	}
	if (!st) {
		rc = vstage_start(v, n, view, UINT64_MAX, d);
		if (rc)
			return rc;
		st = n->ed->vstage;
	}
	rc = io_pwrite_full(st->scratch->fd, buf, len, off);
	if (rc)
		return ovl_sys_err(v, d, rc, "write");
	if (off + len > st->len)
		st->len = off + len;
	st->written = true;
	return len;
}

int ovl_view_truncate(struct ovl *v, struct ckpt_node *n, int view,
		      uint64_t size, struct diag *d)
{
	struct ckpt_coded k;
	int rc = ovl_check_writable(v, d);

	if (!rc && coded(v, n, &k))
		rc = coded_refused(n, &k, d);
	if (!rc)
		rc = view == CKPT_V_NPY ? ckpt_rule_npy(v->c, ovl_label(n),
							false, d) :
		     ckpt_rule_shape(v->c, ovl_label(n), d);
	if (rc)
		return rc;
	if (n->ed->vstage && n->ed->vstage->view != view)
		return diag_errno(d, -EBUSY, "%s: its other view is being "
				  "written", ovl_label(n));
	if (!n->ed->vstage) {
		/* rsync --inplace ends with a truncate to the same size */
		if (view == CKPT_V_NPY && size == ovl_npy_size(v, n))
			return 0;
		rc = vstage_start(v, n, view, size, d);
		if (rc)
			return rc;
	}
	if (ftruncate(n->ed->vstage->scratch->fd, size))
		return ovl_sys_err(v, d, -errno, "truncate");
	n->ed->vstage->len = size;
	return 0;
}

int ovl_view_flush(struct ovl *v, struct ckpt_node *n, struct diag *d)
{
	if (n->ed->vstage && n->ed->vstage->written)
		return ovl_vstage_apply(v, n, d);
	/*
	 * np.save writes the data through a dup'd descriptor (tofile) and
	 * ignores that close()'s error: the close of the file it opened
	 * must fail too.  Logged once already, so @d stays clear.
	 */
	return n->ed->verr;
}

int ovl_view_release(struct ovl *v, struct ckpt_node *n, struct diag *d)
{
	int rc;

	if (n->ed->verr)	/* then its own: ckpt_no_edit's is 0 */
		n->ed->verr = 0;	/* the last close: nobody is left */
	if (!n->ed->vstage)
		return 0;
	if (n->pending && !n->ed->vstage->written) {
		/* created and closed unwritten (touch): nothing to make */
		ovl_stage_free(&n->ed->vstage);
		return 0;
	}
	rc = ovl_vstage_apply(v, n, d);
	n->ed->verr = 0;	/* it had a vstage: its own */
	return rc;
}

int ovl_view_create(struct ovl *v, struct ckpt_node *dir, const char *key,
		    struct ckpt_node **out, struct diag *d)
{
	struct ckpt_node *n;
	char *nm;
	int rc = ovl_dir_editable(v, dir, d);

	if (!rc)
		rc = ckpt_rule_add(v->c, key, d);
	if (!rc)
		rc = ovl_key_name(v, dir, key, &nm, d);
	if (rc)
		return rc;
	n = ckpt_node_fresh(v->c, CKPT_N_TENSOR, "Tensor");
	if (!n)
		return diag_nomem(d);
	n->pending = true;
	n->dead = true;		/* in no directory until close() */
	n->parent = dir;
	n->name = nm;
	rc = vstage_start(v, n, CKPT_V_NPY, 0, d);
	if (rc)
		return rc;
	*out = n;
	return 0;
}

