/*
 * ckpt_retype.c - the rebuild calls data.pkl needs for tensors whose
 * storage was converted to another dtype (core/cvt, ckpt_storage.retyped).
 * torch.save rebuilds a tensor of a dtype with a storage class (float32,
 * bfloat16, ...) with _rebuild_tensor_v2 and a typed storage, and one of
 * the 2.x dtypes without (float8) with _rebuild_tensor_v3, an
 * UntypedStorage and the dtype (torch-format.md sections 4.2 and 4.3):
 *
 *   _rebuild_tensor_v2(pid, offset, size, stride, requires_grad, hooks
 *                      [, metadata])
 *   _rebuild_tensor_v3(pid, offset, size, stride, requires_grad, hooks,
 *                      dtype [, metadata])
 *
 * The persistent id itself is rewritten by ckpt_repickle.c's hook; here
 * the call around it, when it has to change.  torch 1.x's
 * _rebuild_tensor(pid, offset, size, stride) becomes v3 the same way.
 */
#include "ckpt_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pickle/pkl_emit.h"

static const char *const rebuild[] = {
	"_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3",
};

/* The storage a persistent id names (str key, or an int one). */
static struct ckpt_storage *storage_of(struct ckpt *c,
				       const struct pkl_value *pid)
{
	const struct pkl_value *t = pkl_call_args(pid);
	const char *key = as_str(arg(t, 2));
	char buf[32];
	int64_t k;

	if (!key && as_int(arg(t, 2), &k)) {
		snprintf(buf, sizeof(buf), "%lld", (long long)k);
		key = buf;
	}
	return key ? ckpt_storage_find(c->b, key) : NULL;
}

/* collections.OrderedDict(), the backward hooks torch.save writes */
static int emit_hooks(struct pkl_emit *e)
{
	int rc = pkl_emit_global(e, "collections", "OrderedDict");

	if (!rc)
		rc = pkl_emit_op(e, PKL_OP_EMPTY_TUPLE);
	return rc ? rc : pkl_emit_op(e, PKL_OP_REDUCE);
}

int ckpt_retype_call(struct ckpt *c, struct pkl_emit *e,
		     const struct pkl_value *v, struct diag *d)
{
	const struct pkl_value *f, *a, *pid, *meta;
	const struct ckpt_dtype *to;
	struct ckpt_storage *s;
	size_t which, n;
	bool v3;
	int rc;

	if (v->kind != PKL_CALL || !(f = v->u.call.func) ||
	    f->kind != PKL_GLOBAL || strcmp(f->u.global.module, "torch._utils"))
		return 0;
	for (which = 0; which < 3; which++)
		if (!strcmp(f->u.global.name, rebuild[which]))
			break;
	a = pkl_call_args(v);
	pid = arg(a, 0);
	if (which == 3 || !pid || pid->kind != PKL_PERSID ||
	    !(s = storage_of(c, pid)) || !(to = s->retyped))
		return 0;
	v3 = !to->storage;
	if (!v3 && which != 2)
		return 0;	/* the persistent id is all that changes */
	n = pkl_len(a);
	if (n < 4 || (which == 1 && n > 7) || (which == 2 && (n < 7 || n > 8)))
		return diag_unsupported(d, v->off, "cannot rewrite this "
					"tensor's rebuild call for %s",
					to->name);
	if (pkl_emit_memo_get(e, v->id))
		return 1;
	rc = pkl_emit_global(e, "torch._utils", rebuild[v3 ? 2 : 1]);
	if (!rc)
		rc = pkl_emit_mark(e);
	for (size_t i = 0; i < 4 && !rc; i++)
		rc = pkl_emit_value(e, pkl_item(a, i));
	if (!rc)
		rc = which ? pkl_emit_value(e, pkl_item(a, 4)) :
		     pkl_emit_op(e, PKL_OP_NEWFALSE);
	if (!rc)
		rc = which ? pkl_emit_value(e, pkl_item(a, 5)) : emit_hooks(e);
	if (!rc && v3)
		rc = pkl_emit_global(e, "torch", to->name);
	/* the metadata dict ({'neg': True}) follows the dtype in v3 */
	meta = which == 1 ? arg(a, 6) : which == 2 ? arg(a, 7) : NULL;
	if (!rc && meta)
		rc = pkl_emit_value(e, meta);
	if (!rc)
		rc = pkl_emit_op(e, PKL_OP_TUPLE);
	if (!rc)
		rc = pkl_emit_op(e, PKL_OP_REDUCE);
	if (!rc)
		rc = pkl_emit_memo_put(e, v->id);
	return rc ? rc : 1;
}
