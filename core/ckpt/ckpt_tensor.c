/*
 * ckpt_tensor.c - check a tensor's view against its storage, so that every
 * later read is in bounds without further checks: sizes and strides not
 * negative, numel and byte counts without overflow, and the furthest
 * element, offset + sum((size_k - 1) * stride_k), inside the storage
 * (torch-format.md section 5).  Also locates storage records lazily.
 */
#include "ckpt_int.h"

#include <errno.h>

const struct ckpt_tensor_ext ckpt_no_ext;

bool ckpt_tensor_c_strides(struct ckpt_tensor *t)
{
	int64_t acc = 1, *stride = ckpt_tensor_stride(t);

	for (int i = t->ndim; i-- > 0;) {
		stride[i] = acc;
		if (t->shape[i] > 0 &&
		    __builtin_mul_overflow(acc, t->shape[i], &acc))
			return false;
	}
	return true;
}

int ckpt_tensor_check(struct ckpt *c, struct ckpt_tensor *t, struct diag *d)
{
	(void)c;
	uint64_t off = t->pkl_off, numel = 1, last, cap, step, nbytes;
	const int64_t *stride = ckpt_tensor_stride(t);
	int64_t expect = 1;

	t->contiguous = true;
	for (int i = t->ndim; i-- > 0;) {
		if (t->shape[i] < 0)
			return diag_corrupt(d, off, "tensor size %lld in "
					    "dimension %d", (long long)
					    t->shape[i], i);
		if (stride[i] < 0)
			return diag_unsupported(d, off, "negative stride %lld "
						"in dimension %d",
						(long long)stride[i], i);
		if (__builtin_mul_overflow(numel, (uint64_t)t->shape[i],
					   &numel))
			return diag_corrupt(d, off, "tensor element count "
					    "overflows");
		if (t->shape[i] != 1 && stride[i] != expect)
			t->contiguous = false;
		if (__builtin_mul_overflow(expect, t->shape[i], &expect))
			expect = INT64_MAX;
	}
	t->numel = numel;
	if (!numel)
		t->contiguous = true;	/* as torch says for empty tensors */
	if (__builtin_mul_overflow(numel, (uint64_t)t->dtype->size, &nbytes) ||
	    nbytes > (UINT64_C(1) << 62))
		return diag_corrupt(d, off, "tensor byte size overflows");
	if (!t->storage)
		return 0;
	cap = t->storage->nbytes / t->dtype->size;
	if (!numel) {
		if (t->offset > cap)
			return diag_corrupt(d, off, "tensor offset %llu past "
					    "storage '%s'", (unsigned long long)
					    t->offset, t->storage->key);
		return 0;
	}
	last = t->offset;
	for (int i = 0; i < t->ndim; i++) {
		if (__builtin_mul_overflow((uint64_t)(t->shape[i] - 1),
					   (uint64_t)stride[i], &step) ||
		    __builtin_add_overflow(last, step, &last))
			return diag_corrupt(d, off, "tensor extent overflows");
	}
	if (last >= cap)
		return diag_corrupt(d, off, "tensor reaches element %llu of "
				    "storage '%s', which has %llu",
				    (unsigned long long)last, t->storage->key,
				    (unsigned long long)cap);
	return 0;
}

int ckpt_record_locate(struct ckpt *c, struct ptz_entry *e, struct diag *d)
{
	int rc = 0;

	/* once located, data_off never changes: an acquire load suffices */
	if (__atomic_load_n(&e->data_off, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&c->locate_lock);
	if (!__atomic_load_n(&e->data_off, __ATOMIC_RELAXED)) {
		struct ptz_entry tmp = *e;	/* readers load e->data_off
						   without the lock */

		rc = ptz_entry_locate(&c->zip, &tmp, d);
		if (!rc)
			__atomic_store_n(&e->data_off, tmp.data_off,
					 __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&c->locate_lock);
	return rc;
}

int ckpt_storage_locate(struct ckpt *c, struct ckpt_storage *s,
			struct diag *d)
{
	int rc;

	c = ckpt_storage_owner(c, s);	/* a shard of a folder */
	if (__atomic_load_n(&s->data_off, __ATOMIC_ACQUIRE) || !s->rec ||
	    s->fd != c->fd)
		return 0;
	rc = ckpt_record_locate(c, s->rec, d);
	if (!rc)
		__atomic_store_n(&s->data_off, s->rec->data_off,
				 __ATOMIC_RELEASE);
	return rc;
}
