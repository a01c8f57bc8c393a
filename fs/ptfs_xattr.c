/*
 * ptfs_xattr.c - a tensor's metadata as extended attributes in the user.
 * namespace, values as short text (documented in ptfs(5)):
 *
 *   user.dtype           float32, bfloat16, qint8 ... (torch's names)
 *   user.shape           2,3   ("" for a 0-d tensor)
 *   user.stride          3,1   (elements)
 *   user.storage_offset  0     (elements)
 *   user.storage         storage key (.ptfs/storages/<key>)
 *   user.device          the location it was saved on: cpu, cuda:0, mps
 *   user.requires_grad   true | false
 *   user.parameter       true | false (an nn.Parameter)
 *   user.layout          strided | quantized | meta | storage | numpy
 *   user.byteorder       little | big
 *   user.type            python type of any node: Tensor, OrderedDict, int
 *   user.class           a tensor subclass: "module.Name"
 *   user.attr.NAME       each python attribute of a subclass or a
 *                        Parameter (torch 2.x state): a short repr()
 *   KEY.npy and KEY.txt show KEY's attributes (read-only)
 *   quantized tensors add user.qscheme and user.q_scale + user.q_zero_point
 *   (per tensor) or user.q_axis (per channel); conj/neg views add user.conj
 *   or user.neg.
 */
#include "ptfs.h"

#include "pickle/pkl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct xbuf {
	char *p;
	size_t size, len;
	bool overflow;
};

static void put(struct xbuf *x, const char *name, const char *value)
{
	size_t n = strlen(name) + 1, v = strlen(value) + 1;

	if (x->len + n + v > x->size) {
		x->overflow = true;
		return;
	}
	memcpy(x->p + x->len, name, n);
	memcpy(x->p + x->len + n, value, v);
	x->len += n + v;
}

static void put_dims(struct xbuf *x, const char *name, const int64_t *v,
		     int n)
{
	char buf[CKPT_MAX_DIMS * 21 + 1];
	size_t k = 0;

	buf[0] = 0;
	for (int i = 0; i < n && k < sizeof(buf); i++)
		k += snprintf(buf + k, sizeof(buf) - k, "%s%" PRId64,
			      i ? "," : "", v[i]);
	put(x, name, buf);
}

/* user.attr.NAME for each str key of a state dict: its value's repr(). */
static void state_xattrs(const struct pkl_value *st, struct xbuf *x)
{
	struct pkl_value **kv;
	size_t n;

	if (!st)
		return;
	kv = st->kind == PKL_DICT ? st->u.items.v : st->u.call.x->dict;
	n = st->kind == PKL_DICT ? st->u.items.n : st->u.call.x->ndict;
	for (size_t i = 0; i + 1 < n; i += 2) {
		char name[256], *val;
		size_t len;

		if (kv[i]->kind != PKL_STR || kv[i]->u.s.n > 200 ||
		    memchr(kv[i]->u.s.p, 0, kv[i]->u.s.n))
			continue;
		snprintf(name, sizeof(name), "user.attr.%s", kv[i]->u.s.p);
		val = ckpt_repr(kv[i + 1], 200, &len);
		if (val && !memchr(val, 0, len))
			put(x, name, val);
		free(val);
	}
}

static void put_u64(struct xbuf *x, const char *name, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	put(x, name, buf);
}

static const char *tf(bool b)
{
	return b ? "true" : "false";
}

static void tensor_xattrs(const struct ptfs *fs, const struct ckpt_tensor *t,
			  struct xbuf *x)
{
	char num[40];

	put(x, "user.dtype", t->dtype->name);
	put_dims(x, "user.shape", t->shape, t->ndim);
	put_dims(x, "user.stride", t->stride, t->ndim);
	put_u64(x, "user.storage_offset", t->offset);
	if (t->storage)
		put(x, "user.storage", t->storage->key);
	put(x, "user.device", t->device ? t->device : "cpu");
	put(x, "user.requires_grad", tf(t->requires_grad));
	put(x, "user.parameter", tf(t->parameter));
	put(x, "user.layout", t->kind == CKPT_T_QUANTIZED ? "quantized" :
	    t->kind == CKPT_T_META ? "meta" :
	    t->kind == CKPT_T_INLINE ? "numpy" :
	    t->kind == CKPT_T_STORAGE ? "storage" : "strided");
	put(x, "user.byteorder", fs->byteorder);
	if (t->cls)
		put(x, "user.class", t->cls);
	state_xattrs(t->state, x);
	if (t->conj)
		put(x, "user.conj", "true");
	if (t->neg)
		put(x, "user.neg", "true");
	if (!t->qscheme)
		return;
	put(x, "user.qscheme", t->qscheme);
	if (t->qscales) {
		snprintf(num, sizeof(num), "%" PRId64, t->axis);
		put(x, "user.q_axis", num);
		return;
	}
	put(x, "user.q_scale", ckpt_float_repr(t->scale, num, sizeof(num)));
	snprintf(num, sizeof(num), "%" PRId64, t->zero_point);
	put(x, "user.q_zero_point", num);
}

long ptfs_xattrs(const struct ptfs *fs, fuse_ino_t ino, char *buf,
		 size_t size)
{
	struct xbuf x = { buf, size, 0, false };
	struct ptfs_ino i;

	if (ptfs_ino_get(fs, ino, &i))
		return -ENOENT;
	if (i.kind == PTFS_NODE || i.kind == PTFS_ROOT) {
		/* a bare-tensor root is a directory; its entry has them.
		   A wrapper subclass is a directory with a tensor too */
		if (i.node->tensor && i.kind == PTFS_NODE)
			tensor_xattrs(fs, i.node->tensor, &x);
		if (i.kind == PTFS_NODE || fs->c->root->kind == CKPT_N_DIR ||
		    fs->c->root->kind == CKPT_N_SEQ)
			put(&x, "user.type", i.node->type);
	} else if (i.kind == PTFS_VIEW && !i.node->pending) {
		/* a view shows its tensor's metadata */
		tensor_xattrs(fs, i.node->tensor, &x);
		put(&x, "user.type", i.node->type);
	} else if (i.kind == PTFS_STORAGE) {
		put(&x, "user.dtype", i.storage->dtype->name);
		put_u64(&x, "user.numel", i.storage->numel);
		put(&x, "user.device", i.storage->location);
		put(&x, "user.byteorder", fs->byteorder);
	}
	return x.overflow ? -ERANGE : (long)x.len;
}
