/*
 * ptdump_slab.c - a hyperslab of a tensor, as h5dump -s/-c/-S select one:
 * in each dimension the elements start + i * stride for i < count, in
 * row-major order over the slab.  Only the slab's bytes are read.  The
 * slab of a strided tensor is itself a strided view of the storage
 * (strides multiplied, the offset moved to its first element), read
 * through ckpt_tensor_read() one run at a time: a run is what is dense in
 * the storage (a slab of whole rows of a contiguous tensor is one run), so
 * each read is a pread of the bytes wanted, never a span around them.  A
 * tensor whose bytes are not one storage's (a DCP tensor in chunks, numpy
 * data in the pickle) is read by its own row-major positions instead, run
 * by run, which its reader maps.
 */
#include "ckpt/ckpt.h"
#include "diag/diag.h"
#include "ptdump.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* "--start 5,0: ..." for a message. */
static void list_text(char *buf, size_t size, const uint64_t *v, int n)
{
	size_t k = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && k < size; i++)
		k += (size_t)snprintf(buf + k, size - k, "%s%" PRIu64,
				      i ? "," : "", v[i]);
}

/* See ptdump.h. */
bool slab_parse_list(const char *arg, struct slab_list *l)
{
	const char *p = arg;

	l->n = 0;
	for (;;) {
		char *end;
		unsigned long long v;

		if (*p < '0' || *p > '9' || l->n == CKPT_MAX_DIMS)
			return false;
		errno = 0;
		v = strtoull(p, &end, 10);
		if (errno || end == p || v > INT64_MAX)
			return false;
		l->v[l->n++] = v;
		if (!*end)
			return true;
		if (*end != ',')
			return false;
		p = end + 1;
	}
}

int slab_setup(const struct ckpt_tensor *t, const struct slab_args *a,
	       struct slab *s, char *err, size_t errlen)
{
	const char *what[] = { "--start", "--count", "--stride" };
	const struct slab_list *l[] = { &a->start, &a->count, &a->stride };
	char txt[256];

	if (!t->ndim)
		return snprintf(err, errlen, "a 0-d tensor has no dimensions "
				"to select in"), -EINVAL;
	for (int k = 0; k < 3; k++)
		if (l[k]->n > t->ndim) {
			list_text(txt, sizeof(txt), l[k]->v, l[k]->n);
			return snprintf(err, errlen, "%s %s: %d values for a "
					"tensor of %d dimension%s", what[k], txt,
					l[k]->n, t->ndim, t->ndim == 1 ? "" :
					"s"), -EINVAL;
		}
	s->ndim = t->ndim;
	s->numel = 1;
	for (int j = 0; j < t->ndim; j++) {
		uint64_t dim = (uint64_t)t->shape[j];
		uint64_t st = j < a->start.n ? a->start.v[j] : 0;
		uint64_t sd = j < a->stride.n ? a->stride.v[j] : 1;
		uint64_t cn;

		if (!sd)
			return snprintf(err, errlen, "--stride: dimension %d: "
					"a stride of 0", j), -EINVAL;
		if (j < a->count.n && !a->count.v[j])
			return snprintf(err, errlen, "--count: dimension %d: "
					"a count of 0", j), -EINVAL;
		if (st >= dim && (j < a->start.n || j < a->count.n))
			return snprintf(err, errlen, "--start: dimension %d "
					"has %" PRIu64 " element%s, index %"
					PRIu64 " is past it", j, dim,
					dim == 1 ? "" : "s", st), -ERANGE;
		cn = st < dim ? (dim - st - 1) / sd + 1 : 0;	/* all that fit */
		if (j < a->count.n) {
			if (a->count.v[j] > cn)
				return snprintf(err, errlen, "--count: "
						"dimension %d has %" PRIu64
						" element%s: %" PRIu64 " from "
						"%" PRIu64 " by %" PRIu64
						" go past it (%" PRIu64
						" fit)", j, dim, dim == 1 ?
						"" : "s", a->count.v[j], st,
						sd, cn), -ERANGE;
			cn = a->count.v[j];
		}
		s->start[j] = st;
		s->count[j] = cn;
		s->stride[j] = sd;
		s->shape[j] = (int64_t)cn;
		s->numel *= cn;
	}
	return 0;
}

/* The number of trailing elements of the slab that are adjacent in a
 * space whose strides are @str (dims whose count is 1 do not break it). */
static uint64_t run_len(const struct slab *s, const int64_t *str)
{
	uint64_t len = 1;

	for (int j = s->ndim - 1; j >= 0; j--) {
		if (s->count[j] != 1 && (uint64_t)str[j] != len)
			break;
		len *= s->count[j];
	}
	return len;
}

int slab_read(struct ckpt *c, const struct ckpt_tensor *t,
	      const struct slab *s, uint64_t e0, uint64_t n, void *buf,
	      struct diag *d)
{
	uint64_t isz = t->dtype->size, run;
	int64_t dims[2 * CKPT_MAX_DIMS], lstr[CKPT_MAX_DIMS];
	struct ckpt_tensor v = *t;
	unsigned char *out = buf;
	bool logical = t->kind == CKPT_T_INLINE ||
		       (t->storage && ckpt_storage_pieced(c, t->storage));

	if (logical) {	/* positions in @t's row-major order */
		int64_t m = 1;

		for (int j = s->ndim - 1; j >= 0; j--) {
			lstr[j] = m * (int64_t)s->stride[j];
			m *= t->shape[j];
		}
		run = run_len(s, lstr);
	} else {	/* the slab as a view of the storage */
		int64_t *str = dims + s->ndim, expect = 1;

		v.shape = dims;
		v.numel = s->numel;
		v.contiguous = true;
		for (int j = s->ndim - 1; j >= 0; j--) {
			dims[j] = s->shape[j];
			str[j] = ckpt_tensor_stride(t)[j] * (int64_t)s->stride[j];
			v.offset += s->start[j] * (uint64_t)
				    ckpt_tensor_stride(t)[j];
			if (dims[j] != 1 && str[j] != expect)
				v.contiguous = false;
			expect *= dims[j];
		}
		run = run_len(s, str);
	}
	while (n) {
		uint64_t k = run - e0 % run, pos = e0;
		long long got;

		if (k > n)
			k = n;
		if (logical) {	/* slab element e0 -> @t's element */
			uint64_t r = e0;

			pos = 0;
			for (int j = s->ndim - 1; j >= 0; j--) {
				uint64_t i = r % s->count[j];
				int64_t m = lstr[j] / (int64_t)s->stride[j];

				r /= s->count[j];
				pos += (s->start[j] + i * s->stride[j]) *
				       (uint64_t)m;
			}
		}
		got = ckpt_tensor_read(c, logical ? t : &v, out, k * isz,
				       pos * isz, d);
		if (got < 0)
			return (int)got;
		if ((uint64_t)got != k * isz)
			return diag_set(d, -EIO, DIAG_NO_OFFSET,
					"tensor data ends early");
		out += k * isz;
		e0 += k;
		n -= k;
	}
	return 0;
}
