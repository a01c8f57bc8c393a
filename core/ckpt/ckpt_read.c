/*
 * ckpt_read.c - the bytes of a tensor in row-major order, exactly what
 * t.contiguous() holds, read with pread only (so any number of threads may
 * read at once).  A view is a set of runs: the trailing dimensions that
 * are laid out densely form one run of R elements, and the leading ones
 * are walked like an odometer.  When the runs for one request lie within
 * GATHER_SPAN bytes of storage, that span is read once and gathered in
 * memory; otherwise each run (coalesced with its neighbours) is one pread.
 * A deflated storage is read from its inflated copy (ckpt_inflate.c).
 */
#include "ckpt_int.h"
#include "util/io.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GATHER_SPAN	(8u << 20)

struct runs {
	const struct ckpt_tensor *t;
	int k;			/* dims [k, ndim) form one dense run */
	uint64_t len;		/* elements per run */
	uint64_t within;	/* position inside the current run */
	int64_t idx[CKPT_MAX_DIMS];	/* odometer over dims [0, k) */
	uint64_t base;		/* storage element of the run's start */
};

static void runs_start(struct runs *r, const struct ckpt_tensor *t,
		       uint64_t e0)
{
	int64_t expect = 1;
	uint64_t run;

	r->t = t;
	r->k = t->ndim;
	for (int j = t->ndim - 1; j >= 0; j--) {
		if (t->shape[j] != 1 && ckpt_tensor_stride(t)[j] != expect)
			break;
		expect *= t->shape[j];
		r->k = j;
	}
	r->len = 1;
	for (int j = r->k; j < t->ndim; j++)
		r->len *= t->shape[j];
	run = e0 / r->len;
	r->within = e0 % r->len;
	r->base = t->offset;
	for (int j = r->k - 1; j >= 0; j--) {
		r->idx[j] = run % t->shape[j];
		run /= t->shape[j];
		r->base += r->idx[j] * ckpt_tensor_stride(t)[j];
	}
}

/* The next run of at most @n elements: storage element *@at, *@cnt long. */
static void runs_next(struct runs *r, uint64_t n, uint64_t *at, uint64_t *cnt)
{
	const struct ckpt_tensor *t = r->t;

	*at = r->base + r->within;
	*cnt = r->len - r->within < n ? r->len - r->within : n;
	r->within += *cnt;
	if (r->within < r->len)
		return;
	r->within = 0;
	for (int j = r->k - 1; j >= 0; j--) {
		r->base += ckpt_tensor_stride(t)[j];
		if (++r->idx[j] < t->shape[j])
			return;
		r->base -= ckpt_tensor_stride(t)[j] * t->shape[j];
		r->idx[j] = 0;
	}
}

/* The storage elements [*@lo, *@hi) that elements [e0, e0 + n) touch. */
static void span_of(const struct ckpt_tensor *t, uint64_t e0, uint64_t n,
		    uint64_t *lo, uint64_t *hi)
{
	uint64_t at, cnt;
	struct runs r;

	*lo = UINT64_MAX;
	*hi = 0;
	runs_start(&r, t, e0);
	for (; n; n -= cnt) {
		runs_next(&r, n, &at, &cnt);
		*lo = at < *lo ? at : *lo;
		*hi = at + cnt > *hi ? at + cnt : *hi;
	}
}

/*
 * Gather elements [e0, e0 + n) of @t into @out (n * itemsize bytes), its
 * storage's byte 0 being at @base of @fd.
 */
static int gather(const struct ckpt_tensor *t, int fd, uint64_t base,
		  uint64_t e0, uint64_t n, unsigned char *out, struct diag *d)
{
	uint64_t isz = t->dtype->size, lo, hi, at, cnt, left;
	struct runs r;
	unsigned char *span;
	int rc = 0;

	span_of(t, e0, n, &lo, &hi);
	if (hi > lo)	/* write-back compares what is marked (ckpt_patch.c) */
		ckpt_dirty_mark(t->storage, base + lo * isz, (hi - lo) * isz);
	if ((hi - lo) * isz <= GATHER_SPAN && (span = malloc((hi - lo) * isz))) {
		rc = io_pread_diag(fd, span, (hi - lo) * isz, base + lo * isz, "tensor data", d);
		runs_start(&r, t, e0);
		for (left = n; left && !rc; left -= cnt, out += cnt * isz) {
			runs_next(&r, left, &at, &cnt);
			memcpy(out, span + (at - lo) * isz, cnt * isz);
		}
		free(span);
		return rc;
	}
	/* NEEDSWORK: a huge transposed view reads one element per pread */
	runs_start(&r, t, e0);
	for (left = n; left && !rc;) {
		uint64_t start, total = 0;

		runs_next(&r, left, &start, &cnt);
		total = cnt;
		left -= cnt;
		while (left) {	/* coalesce runs that follow each other */
			struct runs save = r;

			runs_next(&r, left, &at, &cnt);
			if (at != start + total) {
				r = save;
				break;
			}
			total += cnt;
			left -= cnt;
		}
		rc = io_pread_diag(fd, out, total * isz, base + start * isz, "tensor data", d);
		out += total * isz;
	}
	return rc;
}

long long ckpt_tensor_read(struct ckpt *c, const struct ckpt_tensor *t,
			   void *buf, uint64_t len, uint64_t pos,
			   struct diag *d)
{
	uint64_t isz = t->dtype->size, size = ckpt_tensor_size(t), e0, e1;
	uint64_t base;
	unsigned char *tmp;
	int fd, rc;

	if (pos >= size)
		return 0;
	if (len > size - pos)
		len = size - pos;
	if (t->kind == CKPT_T_INLINE) {
		memcpy(buf, t->x->inline_data + pos, len);
		return len;
	}
	if (ckpt_storage_pieced(c, t->storage))	/* a DCP tensor's chunks */
		return ckpt_pieced_read(c, t, buf, len, pos, d);
	rc = ckpt_storage_data(c, t->storage, &fd, &base, d);
	if (rc)
		return rc;
	if (t->contiguous) {
		rc = io_pread_diag(fd, buf, len, base + t->offset * isz + pos, "tensor data", d);
		return rc ? rc : (long long)len;
	}
	e0 = pos / isz;
	e1 = (pos + len + isz - 1) / isz;
	if (pos % isz == 0 && len % isz == 0) {
		rc = gather(t, fd, base, e0, e1 - e0, buf, d);
		return rc ? rc : (long long)len;
	}
	tmp = malloc((e1 - e0) * isz);	/* an unaligned read: dd bs=3 */
	if (!tmp)
		return diag_nomem(d);
	rc = gather(t, fd, base, e0, e1 - e0, tmp, d);
	if (!rc)
		memcpy(buf, tmp + pos % isz, len);
	free(tmp);
	return rc ? rc : (long long)len;
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off,
		      struct diag *d)
{
	int rc = io_pwrite_full(fd, buf, len, off);

	if (rc)
		return diag_errno(d, rc, "write at offset %llu: %s",
				  (unsigned long long)off, strerror(-rc));
	return 0;
}

/*
 * Scatter elements [e0, e0 + n) from @in into @t's storage: the mirror of
 * gather().  Within GATHER_SPAN the span is read, patched and written
 * back once; beyond it each run is one pwrite.
 */
static int scatter(const struct ckpt_tensor *t, uint64_t e0, uint64_t n,
		   const unsigned char *in, struct diag *d)
{
	uint64_t isz = t->dtype->size, lo, hi, at, cnt, left;
	uint64_t base = t->storage->data_off;
	int fd = t->storage->fd;
	struct runs r;
	unsigned char *span;
	int rc = 0;

	span_of(t, e0, n, &lo, &hi);
	if (hi > lo)	/* write-back compares what is marked (ckpt_patch.c) */
		ckpt_dirty_mark(t->storage, base + lo * isz, (hi - lo) * isz);
	if ((hi - lo) * isz <= GATHER_SPAN && (span = malloc((hi - lo) * isz))) {
		rc = io_pread_diag(fd, span, (hi - lo) * isz, base + lo * isz, "tensor data", d);
		runs_start(&r, t, e0);
		for (left = n; left && !rc; left -= cnt, in += cnt * isz) {
			runs_next(&r, left, &at, &cnt);
			memcpy(span + (at - lo) * isz, in, cnt * isz);
		}
		if (!rc)
			rc = pwrite_all(fd, span, (hi - lo) * isz,
					base + lo * isz, d);
		free(span);
		return rc;
	}
	runs_start(&r, t, e0);
	for (left = n; left && !rc; left -= cnt, in += cnt * isz) {
		runs_next(&r, left, &at, &cnt);
		rc = pwrite_all(fd, in, cnt * isz, base + at * isz, d);
	}
	return rc;
}

long long ckpt_tensor_write(struct ckpt *c, const struct ckpt_tensor *t,
			    const void *buf, uint64_t len, uint64_t pos,
			    struct diag *d)
{
	uint64_t isz = t->dtype->size, size = ckpt_tensor_size(t), e0, e1;
	unsigned char *tmp;
	int rc;

	if (pos >= size || len > size - pos)
		return diag_set(d, -EFBIG, DIAG_NO_OFFSET, "write past the end "
				"of the tensor (%llu bytes)",
				(unsigned long long)size);
	if (t->kind == CKPT_T_INLINE || t->kind == CKPT_T_META ||
	    t->storage->fd == ckpt_storage_owner(c, t->storage)->fd)
		return diag_set(d, -EPERM, DIAG_NO_OFFSET, "tensor cannot be "
				"written");
	if (t->contiguous) {
		ckpt_dirty_mark(t->storage, t->storage->data_off +
				t->offset * isz + pos, len);
		rc = pwrite_all(t->storage->fd, buf, len, t->storage->data_off +
				t->offset * isz + pos, d);
		return rc ? rc : (long long)len;
	}
	e0 = pos / isz;
	e1 = (pos + len + isz - 1) / isz;
	if (pos % isz == 0 && len % isz == 0) {
		rc = scatter(t, e0, e1 - e0, buf, d);
		return rc ? rc : (long long)len;
	}
	/* partial elements at the edges: read them, patch, write back */
	tmp = malloc((e1 - e0) * isz);
	if (!tmp)
		return diag_nomem(d);
	rc = gather(t, t->storage->fd, t->storage->data_off, e0, e1 - e0, tmp,
		    d);
	if (!rc) {
		memcpy(tmp + pos % isz, buf, len);
		rc = scatter(t, e0, e1 - e0, tmp, d);
	}
	free(tmp);
	return rc ? rc : (long long)len;
}

uint64_t ckpt_tensor_size(const struct ckpt_tensor *t)
{
	return t->kind == CKPT_T_META ? 0 : ckpt_tensor_nbytes(t);
}
