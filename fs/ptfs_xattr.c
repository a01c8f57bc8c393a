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
 *   user.key             the whole escaped key of an entry whose name is
 *                        over 255 bytes and so shown cut (names.md)
 *   user.class           a tensor subclass: "module.Name"
 *   user.attr.NAME       each python attribute of a subclass or a
 *                        Parameter (torch 2.x state): a short repr()
 *                        (names the kernel cannot ask for, over 255
 *                        bytes with the prefix, are left out)
 *   user.st_dtype        a safetensors file's tensor: its dtype there (F32)
 *   user.st_shape        and its shape there (F4, F6: not user.shape)
 *   user.shard           a sharded folder's tensor: the file it is read
 *                        from, as the index names it
 *   user.dcp.chunks      a DCP directory's tensor: its chunks, a line each:
 *                        "offsets=0,4 sizes=8,4 file=__1_0.distcp
 *                        offset=1261 length=1577" (left out over 64 KiB)
 *   user.meta.KEY        on the root of a safetensors file: each entry of
 *                        its __metadata__ (names over 255 bytes, values
 *                        over 64 KiB and either holding a NUL are left
 *                        out: the whole header is .ptfs/header.json)
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

#define ATTR_PREFIX	"user.attr."
#define META_PREFIX	"user.meta."
#define XATTR_VALUE_MAX	65536	/* the kernel's XATTR_SIZE_MAX */

/*
 * Attributes are produced one at a time and handed to a callback: nothing
 * here gathers them into a buffer, so their number and size (chosen by
 * whoever wrote the file) bound no array.  The first callback that returns
 * non-zero stops the walk.
 */
struct xwalk {
	ptfs_xattr_fn *fn;
	void *arg;
	int rc;
};

static void put(struct xwalk *x, const char *name, const char *value)
{
	if (!x->rc)
		x->rc = x->fn(name, value, x->arg);
}

static void put_dims(struct xwalk *x, const char *name, const int64_t *v,
		     int n)
{
	char buf[CKPT_MAX_DIMS * 21 + 1];
	size_t k = 0;

	buf[0] = 0;
	/* ndim <= CKPT_MAX_DIMS (ckpt_build.c), and snprintf is bounded */
	for (int i = 0; i < n && k < sizeof(buf); i++)
		k += snprintf(buf + k, sizeof(buf) - k, "%s%" PRId64,
			      i ? "," : "", v[i]);
	put(x, name, buf);
}

/*
 * user.attr.NAME for each str key of a state dict: its value's repr().
 * A name the kernel could not ask for (over XATTR_NAME_MAX with the
 * prefix, or holding a NUL) is not listed: cp -a would fail on it.
 */
static void state_xattrs(const struct pkl_value *st, struct xwalk *x)
{
	struct pkl_value **kv;
	size_t n;

	if (!st)
		return;
	kv = st->kind == PKL_DICT ? st->u.items.v : pkl_call_x(st)->dict;
	n = st->kind == PKL_DICT ? st->u.items.n : pkl_call_x(st)->ndict;
	for (size_t i = 0; i + 1 < n && !x->rc; i += 2) {
		char name[PTFS_XATTR_NAME_MAX + 1], *val;
		size_t len;

		if (kv[i]->kind != PKL_STR ||
		    kv[i]->u.s.n > PTFS_XATTR_NAME_MAX - strlen(ATTR_PREFIX) ||
		    memchr(kv[i]->u.s.p, 0, kv[i]->u.s.n))
			continue;
		snprintf(name, sizeof(name), ATTR_PREFIX "%s", kv[i]->u.s.p);
		val = ckpt_repr(kv[i + 1], 200, &len);
		if (val && !memchr(val, 0, len))
			put(x, name, val);
		free(val);
	}
}

/* user.meta.KEY for each __metadata__ entry the kernel can pass whole. */
static void meta_xattrs(const struct ckpt *c, struct xwalk *x)
{
	for (uint32_t i = 0; i < c->nmeta && !x->rc; i++) {
		const struct ckpt_meta *m = &c->meta[i];
		char name[PTFS_XATTR_NAME_MAX + 1];

		if (m->removed ||
		    m->klen > PTFS_XATTR_NAME_MAX - strlen(META_PREFIX) ||
		    memchr(m->key, 0, m->klen) || m->vlen > XATTR_VALUE_MAX ||
		    memchr(m->val, 0, m->vlen))
			continue;
		snprintf(name, sizeof(name), META_PREFIX "%s", m->key);
		put(x, name, m->val);
	}
}

static void put_u64(struct xwalk *x, const char *name, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	put(x, name, buf);
}

static const char *tf(bool b)
{
	return b ? "true" : "false";
}

/* user.dcp.chunks: a DCP tensor's chunks, one line each (left out when
 * the list is over what the kernel passes). */
static void put_attr(void *arg, const char *name, const char *value)
{
	put(arg, name, value);
}

static void tensor_xattrs(const struct ptfs *fs, const struct ckpt_tensor *t,
			  struct xwalk *x)
{
	const char *dev;
	char num[40];

	put(x, "user.dtype", t->dtype->name);
	put_dims(x, "user.shape", t->shape, t->ndim);
	put_dims(x, "user.stride", ckpt_tensor_stride(t), t->ndim);
	put_u64(x, "user.storage_offset", t->offset);
	if (t->storage)
		put(x, "user.storage", t->storage->key);
	dev = ckpt_tensor_device(t);
	put(x, "user.device", dev ? dev : "cpu");
	put(x, "user.requires_grad", tf(t->requires_grad));
	put(x, "user.parameter", tf(t->parameter));
	put(x, "user.layout", t->kind == CKPT_T_QUANTIZED ? "quantized" :
	    t->kind == CKPT_T_META ? "meta" :
	    t->kind == CKPT_T_INLINE ? "numpy" :
	    t->kind == CKPT_T_STORAGE ? "storage" : "strided");
	put(x, "user.byteorder", fs->byteorder);
	/* the format's own: user.st_dtype, user.shard, user.dcp.chunks */
	ckpt_tensor_attrs(fs->c, t, put_attr, x);
	if (t->x->cls)
		put(x, "user.class", t->x->cls);
	state_xattrs(t->x->state, x);
	if (t->conj)
		put(x, "user.conj", "true");
	if (t->neg)
		put(x, "user.neg", "true");
	if (!t->x->qscheme)
		return;
	put(x, "user.qscheme", t->x->qscheme);
	if (t->x->qscales) {
		snprintf(num, sizeof(num), "%" PRId64, t->x->axis);
		put(x, "user.q_axis", num);
		return;
	}
	put(x, "user.q_scale", ckpt_float_repr(t->x->scale, num, sizeof(num)));
	snprintf(num, sizeof(num), "%" PRId64, t->x->zero_point);
	put(x, "user.q_zero_point", num);
}

int ptfs_xattr_each(const struct ptfs *fs, fuse_ino_t ino,
		    ptfs_xattr_fn *fn, void *arg)
{
	struct xwalk x = { fn, arg, 0 };
	struct ptfs_ino i;

	if (ptfs_ino_get(fs, ino, &i))
		return -ENOENT;
	if (i.kind == PTFS_NODE || i.kind == PTFS_ROOT) {
		/* a bare-tensor root is a directory; its entry has them.
		   A wrapper subclass is a directory with a tensor too */
		if (i.node->tensor && i.kind == PTFS_NODE)
			tensor_xattrs(fs, i.node->tensor, &x);
		if (i.kind == PTFS_NODE || ckpt_node_is_dir(fs->c->root))
			put(&x, "user.type", i.node->type);
		/* the whole name of a key shown cut (ptfs_names.c) */
		if (i.kind == PTFS_NODE && strlen(i.node->name) > CKPT_NAME_MAX)
			put(&x, "user.key", i.node->name);
		if (i.kind == PTFS_ROOT)
			meta_xattrs(fs->c, &x);
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
	return x.rc;
}
