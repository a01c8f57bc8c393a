/*
 * cvt_coded.c - coded tensors (ckpt_coded(): a GGUF Q8_0 or Q4_K tensor,
 * whose bytes are blocks, not elements) decoded into a floating dtype,
 * for a writer of another format (ptrepack x.gguf y.safetensors).
 *
 * The values are decoded to float32 by the format's decoder, then
 * converted by cvt_elems() as .to(dtype) converts float32, a bounded
 * number at a time, into one temporary file; each storage is re-typed
 * to them (as cvt_ckpt.c re-types one) and its tensor takes the values'
 * shape with C strides.  A coded tensor is alone on its storage (a flat
 * format's one tensor per storage): one that shares it is refused.
 */
#include "cvt/cvt.h"
#include "ckpt/ckpt_int.h"	/* ckpt_tensor_c_strides() */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diag/diag.h"
#include "util/io.h"

#define VALUES	(UINT64_C(1) << 18)	/* decoded at a time */

/* @t's values, converted to @to, into @fd at @off. */
static int decode_one(struct ckpt *c, const struct ckpt_tensor *t,
		      const struct ckpt_coded *k, const struct ckpt_dtype *to,
		      enum cvt_flavour fl, int fd, uint64_t off,
		      struct diag *d)
{
	const struct ckpt_dtype *f32 = ckpt_dtype_by_name("float32");
	float *val = malloc(VALUES * sizeof(*val));
	unsigned char *out = malloc(VALUES * to->size);
	int rc = val && out ? 0 : diag_nomem(d);

	for (uint64_t i = 0; i < k->numel && !rc; i += VALUES) {
		uint64_t n = k->numel - i < VALUES ? k->numel - i : VALUES;

		rc = ckpt_tensor_coded_values(c, t, k, val, i, n, d);
		if (rc)
			break;
		cvt_elems(f32, to, false, fl, val, out, n);
		rc = io_pwrite_full(fd, out, n * to->size, off + i * to->size);
		if (rc)
			diag_errno(d, rc, "%s values decoded: %s", k->name,
				   strerror(-rc));
	}
	free(val);
	free(out);
	return rc;
}

/* The tensor @t becomes its values: of @to, shape @k's, C strides. */
static void reshape(struct ckpt_tensor *t, const struct ckpt_coded *k,
		    const struct ckpt_dtype *to)
{
	t->ndim = (uint8_t)k->ndim;
	memcpy(t->shape, k->shape, (size_t)k->ndim * sizeof(*t->shape));
	ckpt_tensor_c_strides(t);	/* no overflow: numel is known */
	t->numel = k->numel;
	t->offset = 0;
	t->contiguous = true;
	t->dtype = to;
}

int cvt_decode(struct ckpt *c, const struct ckpt_dtype *to,
	       enum cvt_flavour fl, const char *near, int *tmpfd,
	       struct cvt_stats *st, struct diag *d)
{
	uint64_t off = 0;
	int fd = -1, rc = 0;

	*tmpfd = -1;
	memset(st, 0, sizeof(*st));
	for (uint32_t i = 0; i < c->ntensors && !rc; i++) {
		struct ckpt_tensor *t = c->tensors[i];
		struct ckpt_storage *s = t->storage;
		struct ckpt_coded k;

		if (!ckpt_coded(c, t, &k))
			continue;
		if (s->ntensors != 1) {
			rc = diag_set(d, -EINVAL, DIAG_NO_OFFSET, "storage "
				      "'%s': a %s tensor that shares its "
				      "storage cannot be decoded", s->key,
				      k.name);
			break;
		}
		if (fd < 0 && (fd = cvt_tmpfile(near, d)) < 0)
			return fd;
		rc = decode_one(c, t, &k, to, fl, fd, off, d);
		if (rc)
			break;
		st->tensors++;
		st->storages++;
		st->bytes_in += s->nbytes;
		cvt_storage_set(s, k.numel, to, fd, off);
		reshape(t, &k, to);
		st->bytes_out += s->nbytes;
		off += s->nbytes;
	}
	if (rc && fd >= 0)
		close(fd);
	else
		*tmpfd = fd;
	return rc;
}
