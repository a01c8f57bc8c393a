/*
 * ckpt_repickle_pid.c - the storages in a new data.pkl (torch-format.md
 * section 9.2): each storage's new key "0".."N-1" in first-use order,
 * memoized as torch's persistent_id memoizes it; every persistent id
 * rewritten with it (and a new class and numel for a re-typed or cut
 * storage); the argument tuples whose offset moves (a legacy view, a cut
 * storage); a tensor made from a new file as torch.save writes one; and
 * --clone's plan of which storages to cut.  ckpt_repickle.c writes the
 * tree around them.
 */
#include "ckpt_repickle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle/pkl_int.h"

/*
 * pickle memoizes every str and tuple it writes, even those it never
 * fetches again; so does the repickler for the ones it makes (a new key
 * name, an edited str, a persistent id), under keys of their own, or
 * data.pkl would come out shorter than torch's and move every record.
 */
int rp_memo_fresh(struct wb *w)
{
	return pkl_emit_memo_put(w->e, FRESH_MEMO + w->nfresh++);
}

/* The new key of @s, numbered on first use. */
uint32_t rp_out_key(struct wb *w, struct ckpt_storage *s)
{
	if (!w->out[s->index]) {
		w->order[w->nout] = s;
		w->out[s->index] = ++w->nout;
	}
	return w->out[s->index] - 1;
}

/*
 * Storage @s's new key, as torch's persistent_id gives it: one str object
 * per storage (id_map.setdefault), which pickle memoizes the first time
 * and fetches with BINGET after.  Without the memo our data.pkl came out
 * 2 bytes a storage shorter than torch's, and moved every record after it.
 */
static int emit_storage_key(struct pkl_emit *e, uint32_t key, uint64_t memo)
{
	char buf[16];
	int rc;

	if (pkl_emit_memo_get(e, memo))
		return 0;
	snprintf(buf, sizeof(buf), "%u", key);
	rc = pkl_emit_str(e, buf, strlen(buf));
	return rc ? rc : pkl_emit_memo_put(e, memo);
}

static int emit_key_str(struct wb *w, struct ckpt_storage *s)
{
	return emit_storage_key(w->e, rp_out_key(w, s), KEY_MEMO + s->index);
}

/* The storage a persistent id's tuple names (str key, or a legacy int). */
static struct ckpt_storage *pid_storage(struct wb *w,
					const struct pkl_value *t)
{
	const char *key = as_str(arg(t, 2));
	const char *pre = w->vdoc ? w->vdoc->key_prefix : "";
	struct ckpt_storage *s;
	char buf[32], *full;
	int64_t k;

	if (!key && as_int(arg(t, 2), &k)) {
		snprintf(buf, sizeof(buf), "%lld", (long long)k);
		key = buf;
	}
	if (!key || !*pre)
		return key ? ckpt_storage_find(w->c->b, key) : NULL;
	/* a shard's or a DCP value's key, as the model renamed it */
	full = malloc(strlen(pre) + strlen(key) + 1);
	if (!full)
		return NULL;	/* then "cannot rewrite this persistent id" */
	strcpy(stpcpy(full, pre), key);
	s = ckpt_storage_find(w->c->b, full);
	free(full);
	return s;
}

/*
 * The element offset a legacy 6-tuple's view metadata (view_key, offset,
 * numel) adds, 0 without one; -1 when it is malformed.
 */
static int64_t pid_view(const struct pkl_value *t)
{
	const struct pkl_value *view = arg(t, 5);
	int64_t off;

	if (!view || view->kind == PKL_NONE)
		return 0;
	return as_int(arg(view, 1), &off) && off >= 0 ? off : -1;
}

/*
 * ('storage', <class>, key, location, numel) for an existing storage: the
 * new key, and the new numel of a storage that is cut.  A legacy 6-tuple
 * loses its view metadata: the view's offset moves into the tensor's
 * (rp_emit_args()), so it can only be converted inside a tensor.
 */
int rp_hook_persid(struct pkl_emit *e, const struct pkl_value *pid,
		   void *wbp)
{
	struct wb *w = wbp;
	const struct pkl_value *t = pkl_call_args(pid);
	struct ckpt_storage *s;
	size_t n = pkl_len(t);
	int rc;

	/*
	 * A legacy module's class: torch.load of a zip knows only storage
	 * ids, and torch.save of a zip pickles a class by reference, so the
	 * class GLOBAL goes in its place (its source text is dropped, as a
	 * zip has no place for it).
	 */
	if (ckpt_module_class(pid)) {
		rc = pkl_emit_value(e, ckpt_module_class(pid));
		return rc ? rc : 1;
	}
	s = pid_storage(w, t);
	if (!s || (n != 5 && n != 6) || (n == 6 && pid_view(t) < 0))
		return diag_unsupported(w->d, pid->off, "cannot rewrite this "
					"persistent id");
	if (!w->in_args && n == 6 && pid_view(t))
		return diag_unsupported(w->d, pid->off, "a legacy storage "
					"view saved on its own: cannot convert "
					"it");
	if (!w->in_args && w->trim && w->trim[s->index])
		return diag_unsupported(w->d, pid->off, "storage '%s' is used "
					"outside a tensor: cannot cut it",
					s->key);
	rc = pkl_emit_mark(e);
	for (size_t i = 0; i < 5 && !rc; i++) {
		if (i == 2)
			rc = emit_key_str(w, s);
		else if (i == 1 && s->retyped)
			rc = s->untyped ? pkl_emit_global(e, "torch.storage",
							  "UntypedStorage")
				: pkl_emit_global(e, "torch", s->dtype->storage);
		else if (i == 4 && s->retyped)
			rc = pkl_emit_int(e, (int64_t)s->numel);
		else if (i == 4 && w->trim && w->trim[s->index])
			rc = pkl_emit_int(e, w->keep[s->index] /
					  s->dtype->size);
		else
			rc = pkl_emit_value(e, pkl_item(t, i));
	}
	if (!rc)
		rc = pkl_emit_op(e, PKL_OP_TUPLE);
	/* persistent_id returns a new tuple each time */
	return rc ? rc : rp_memo_fresh(w);
}

/*
 * A rebuild call's argument tuple (pid, offset, ...) whose offset changes:
 * by the view offset of a legacy persistent id, and by what was cut from
 * the front of its storage.  Written as pickle writes a tuple, and
 * memoized under its own id so that references to it stay references.
 * Returns 1 when written, 0 when the tuple needs no change.
 */
int rp_emit_args(struct wb *w, const struct pkl_value *v)
{
	const struct pkl_value *pid = pkl_item(v, 0), *t = pkl_call_args(pid);
	struct ckpt_storage *s = pid_storage(w, t);
	uint64_t tsize = w->args[v->id], off_b, cut, view, noff;
	size_t n = pkl_len(v);
	bool trimmed;
	int64_t soff;
	int rc;

	if (!s || !as_int(pkl_item(v, 1), &soff) || soff < 0 ||
	    pid_view(t) < 0)
		return 0;	/* rp_hook_persid() names the problem */
	trimmed = w->trim && w->trim[s->index];
	cut = trimmed ? w->cut[s->index] : 0;
	/* in the pickle's item size: a storage may since be re-typed */
	view = (uint64_t)pid_view(t) * tsize;
	if (!trimmed && !view)
		return 0;	/* only the pid changes: rp_hook_persid() */
	/* ckpt_tensor_check() bounded offset and view by the storage */
	off_b = (uint64_t)soff * tsize + view;
	noff = off_b >= cut ? (off_b - cut) / tsize : 0;
	/* only an empty tensor can start outside what is kept */
	if (trimmed && noff > w->keep[s->index] / tsize)
		noff = w->keep[s->index] / tsize;
	rc = n > 3 ? pkl_emit_mark(w->e) : 0;
	w->in_args = true;
	if (!rc)
		rc = pkl_emit_value(w->e, pid);
	w->in_args = false;
	if (!rc)
		rc = pkl_emit_int(w->e, (int64_t)noff);
	for (size_t i = 2; i < n && !rc; i++)
		rc = pkl_emit_value(w->e, pkl_item(v, i));
	if (!rc)
		rc = pkl_emit_op(w->e, n > 3 ? PKL_OP_TUPLE :
				 (unsigned char)(PKL_OP_TUPLE1 + n - 1));
	if (!rc)
		rc = pkl_emit_memo_put(w->e, v->id);
	return rc ? rc : 1;
}

static int emit_int_tuple(struct pkl_emit *e, const int64_t *v, int n)
{
	int rc = pkl_emit_mark(e);

	for (int i = 0; i < n && !rc; i++)
		rc = pkl_emit_int(e, v[i]);
	return rc ? rc : pkl_emit_op(e, PKL_OP_TUPLE);
}

int rp_emit_bool(struct pkl_emit *e, bool b)
{
	return pkl_emit_op(e, b ? PKL_OP_NEWTRUE : PKL_OP_NEWFALSE);
}

/* collections.OrderedDict(): the backward hooks argument */
static int emit_hooks(struct pkl_emit *e)
{
	int rc = pkl_emit_global(e, "collections", "OrderedDict");

	if (!rc)
		rc = pkl_emit_op(e, PKL_OP_EMPTY_TUPLE);
	return rc ? rc : pkl_emit_op(e, PKL_OP_REDUCE);
}

/* A tensor made from a new file, or a DCP item's (ckpt_int.h says how). */
int ckpt_emit_tensor(struct pkl_emit *e, const struct ckpt_tensor *t,
		     uint32_t key, uint64_t key_memo)
{
	const struct ckpt_dtype *dt = t->dtype;
	bool v3 = !dt->storage;
	int rc = 0;

	if (t->parameter)
		rc = pkl_emit_global(e, "torch._utils", "_rebuild_parameter");
	if (!rc && t->parameter)
		rc = pkl_emit_mark(e);
	if (!rc)
		rc = pkl_emit_global(e, "torch._utils", v3 ?
				     "_rebuild_tensor_v3" : "_rebuild_tensor_v2");
	if (!rc)
		rc = pkl_emit_mark(e);
	/* the persistent id */
	if (!rc)
		rc = pkl_emit_mark(e);
	if (!rc)
		rc = pkl_emit_str(e, "storage", 7);
	if (!rc)
		rc = v3 ? pkl_emit_global(e, "torch.storage", "UntypedStorage")
			: pkl_emit_global(e, "torch", dt->storage);
	if (!rc)
		rc = emit_storage_key(e, key, key_memo);
	if (!rc)
		rc = pkl_emit_str(e, "cpu", 3);
	if (!rc)
		rc = pkl_emit_int(e, v3 ? t->storage->nbytes :
				  t->storage->nbytes / dt->size);
	if (!rc)
		rc = pkl_emit_op(e, PKL_OP_TUPLE);
	if (!rc)
		rc = pkl_emit_op(e, PKL_OP_BINPERSID);
	/* offset, size, stride, requires_grad, hooks[, dtype] */
	if (!rc)
		rc = pkl_emit_int(e, (int64_t)t->offset);
	if (!rc)
		rc = emit_int_tuple(e, t->shape, t->ndim);
	if (!rc)
		rc = emit_int_tuple(e, ckpt_tensor_stride(t), t->ndim);
	if (!rc)
		rc = rp_emit_bool(e, t->requires_grad && !t->parameter);
	if (!rc)
		rc = emit_hooks(e);
	if (!rc && v3)
		rc = pkl_emit_global(e, "torch", dt->name);
	if (!rc)
		rc = pkl_emit_op(e, PKL_OP_TUPLE);
	if (!rc)
		rc = pkl_emit_op(e, PKL_OP_REDUCE);
	if (!rc && t->parameter) {
		rc = rp_emit_bool(e, t->requires_grad);
		if (!rc)
			rc = emit_hooks(e);
		if (!rc)
			rc = pkl_emit_op(e, PKL_OP_TUPLE);
		if (!rc)
			rc = pkl_emit_op(e, PKL_OP_REDUCE);
	}
	return rc;
}

/* The item size of a strided rebuild call's tensor, 0 if @v is none. */
static unsigned rebuild_itemsize(const struct pkl_value *v)
{
	static const char *const fn[] = {
		"_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3",
		"_rebuild_qtensor",
	};
	const struct pkl_value *f = v->u.call.func, *a = pkl_call_args(v);
	const struct pkl_value *pid = arg(a, 0), *cls, *dt;
	const struct ckpt_dtype *t = NULL;
	int64_t off;
	size_t i;

	if (!f || f->kind != PKL_GLOBAL ||
	    strcmp(f->u.global.module, "torch._utils"))
		return 0;
	for (i = 0; i < 4 && strcmp(f->u.global.name, fn[i]); i++)
		;
	if (i == 4 || !pid || pid->kind != PKL_PERSID ||
	    !as_int(arg(a, 1), &off))
		return 0;
	if (i == 2) {
		dt = arg(a, 6);
		if (dt && dt->kind == PKL_GLOBAL &&
		    !strcmp(dt->u.global.module, "torch"))
			t = ckpt_dtype_by_name(dt->u.global.name);
	} else {
		cls = arg(pkl_call_args(pid), 1);
		if (cls && cls->kind == PKL_GLOBAL)
			t = ckpt_dtype_by_storage(cls->u.global.name);
	}
	return t ? t->size : 0;
}

/*
 * Find the argument tuples whose offset rp_emit_args() may rewrite, and
 * count per storage the persistent ids naming it (@npid) and how many of
 * those tuples do (@nargs): a storage is cut only when every id naming it,
 * reachable or not, sits in such a tuple.
 */
void rp_scan_args(struct wb *w, uint32_t *npid, uint32_t *nargs)
{
	for (const struct pkl_chunk *ch = pkl_doc_all(w->c->doc)->chunks; ch;
	     ch = ch->next)
		for (uint32_t i = 0; i < ch->n; i++) {
			const struct pkl_value *v = &ch->v[i], *a;
			struct ckpt_storage *s;
			unsigned size;

			if (v->kind == PKL_PERSID) {
				s = pid_storage(w, pkl_call_args(v));
				if (s)
					npid[s->index]++;
				continue;
			}
			if (v->kind != PKL_CALL || !(size = rebuild_itemsize(v)))
				continue;
			a = pkl_call_args(v);
			if (a->id >= w->c->doc->nnodes || w->args[a->id])
				continue;
			w->args[a->id] = (uint8_t)size;
			s = pid_storage(w, pkl_call_args(arg(a, 0)));
			if (s)
				nargs[s->index]++;
		}
}

/*
 * --clone: cut a storage to the span [lo, hi) of bytes its tensors reach
 * when that span is at most @pct % of it (torch.save writes a whole
 * storage for the smallest view of it).  Every tensor keeps its view, so
 * views that shared the storage still share the cut one.
 */
int rp_plan_clone(struct wb *w, uint8_t pct, uint32_t *ntrimmed)
{
	struct ckpt *c = w->c;
	uint32_t ns = c->nstorages, *npid, *nargs;
	uint64_t *lo, *hi;
	uint8_t *tsz;
	int rc = 0;

	npid = calloc(ns + 1, sizeof(*npid));
	nargs = calloc(ns + 1, sizeof(*nargs));
	lo = malloc((ns + 1) * sizeof(*lo));
	hi = calloc(ns + 1, sizeof(*hi));
	tsz = calloc(ns + 1, sizeof(*tsz));
	if (!npid || !nargs || !lo || !hi || !tsz) {
		rc = diag_nomem(w->d);
		goto out;
	}
	rp_scan_args(w, npid, nargs);
	for (uint32_t i = 0; i < ns; i++)
		lo[i] = UINT64_MAX;
	for (uint32_t i = 0; i < c->ntensors; i++) {
		const struct ckpt_tensor *t = c->tensors[i];
		uint32_t k = t->storage ? t->storage->index : 0;
		uint64_t last = t->offset, a, b;

		if (!t->storage)
			continue;
		if (t->kind != CKPT_T_STRIDED && t->kind != CKPT_T_QUANTIZED) {
			lo[k] = 0;	/* a storage saved on its own: all of it */
			hi[k] = t->storage->nbytes;
			continue;
		}
		if (tsz[k] && tsz[k] != t->dtype->size)
			tsz[k] = UINT8_MAX;	/* two item sizes: leave it */
		else
			tsz[k] = t->dtype->size;
		if (!t->numel)
			continue;
		for (int j = 0; j < t->ndim; j++)
			last += (uint64_t)(t->shape[j] - 1) *
				ckpt_tensor_stride(t)[j];
		a = t->offset * t->dtype->size;
		b = (last + 1) * t->dtype->size;
		lo[k] = a < lo[k] ? a : lo[k];
		hi[k] = b > hi[k] ? b : hi[k];
	}
	for (uint32_t k = 0; k < ns; k++) {
		struct ckpt_storage *s = c->storages[k];
		uint64_t span;

		if (lo[k] == UINT64_MAX)
			lo[k] = hi[k] = 0;	/* only empty tensors */
		span = hi[k] - lo[k];
		if (s->fresh || !tsz[k] || tsz[k] == UINT8_MAX ||
		    npid[k] > nargs[k] || span >= s->nbytes ||
		    span * 100 > s->nbytes * pct || lo[k] % tsz[k] ||
		    span % s->dtype->size)
			continue;
		w->trim[k] = true;
		w->cut[k] = lo[k];
		w->keep[k] = span;
		++*ntrimmed;
	}
out:
	free(npid);
	free(nargs);
	free(lo);
	free(hi);
	free(tsz);
	return rc;
}
