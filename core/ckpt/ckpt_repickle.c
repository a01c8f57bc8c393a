/*
 * ckpt_repickle.c - a new data.pkl for write-back (torch-format.md section
 * 9.2): the object tree emitted as protocol 2 by pkl_emit.c, with the
 * containers that edits changed written from the tree, the rest as they
 * were parsed.  What names a storage (new keys "0".."N-1" in first-use
 * order, so storages nothing uses any more are left out; persistent ids;
 * tensors made from new files) is ckpt_repickle_pid.c's.  ckpt_write.c
 * lays the archive out around it.
 */
#include "ckpt_repickle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle/pkl_int.h"

static int emit_node(struct wb *w, struct ckpt_node *n);

/* Edited containers are written from the tree, the rest as they were. */
static int hook_value(struct pkl_emit *e, const struct pkl_value *v,
		      void *wbp)
{
	struct wb *w = wbp;
	struct ckpt_node *n;
	int rc;

	if (w->vdoc || !w->c->doc)
		return 0;	/* no edits there, no legacy views */
	n = v->id < w->c->doc->nnodes ? w->dirty[v->id] : NULL;
	if (w->args && v->id < w->c->doc->nnodes && w->args[v->id])
		return rp_emit_args(w, v);
	if (w->retyped && (rc = ckpt_retype_call(w->c, e, v, w->d)))
		return rc;
	if (!n)
		return 0;
	if (pkl_emit_memo_get(e, v->id))
		return 1;
	rc = emit_node(w, n);
	return rc ? rc : 1;
}

/* Does directory @dir hold a tensor its format made, with no pickle value
 * (a rank set's DTensor as full_tensor() gives it)?  Then the directory is
 * written from the tree, that tensor from the model. */
static bool holds_made(const struct ckpt_node *dir)
{
	for (uint32_t i = 0; i < dir->dir->nkids; i++) {
		const struct ckpt_node *k = dir->dir->kids[i];

		if (k && !ckpt_is_row(k) && k->kind == CKPT_N_TENSOR &&
		    !k->val)
			return true;
	}
	return false;
}

/* Tensor node @n written from the model, once (then fetched, as pickle
   does with a tensor that two keys name). */
static int emit_fresh_node(struct wb *w, const struct ckpt_node *n)
{
	int rc;

	if (pkl_emit_memo_get(w->e, SYNTH_KEY + n->id))
		return 0;
	if (n->tensor->dtype->bits)	/* read from safetensors as bytes */
		return diag_unsupported(w->d, DIAG_NO_OFFSET, "%s: torch has "
					"no dtype for safetensors' %s (kept as "
					"its bytes)", n->name,
					n->tensor->dtype->st);
	rc = ckpt_emit_tensor(w->e, n->tensor, rp_out_key(w, n->tensor->storage),
			      KEY_MEMO + n->tensor->storage->index);
	return rc ? rc : pkl_emit_memo_put(w->e, SYNTH_KEY + n->id);
}

/* The key a child is written under: its own, or its (new) name. */
static int emit_key(struct wb *w, const struct ckpt_node *k)
{
	char *buf;
	long n;
	int rc;

	/* keys no pickle made (a safetensors file's) are written anew */
	if (k->key && w->c->doc && !ckpt_node_rekeyed(k))
		return pkl_emit_value(w->e, k->key);
	buf = malloc(strlen(k->name) + 1);
	if (!buf)
		return diag_nomem(w->d);
	n = ckpt_name_unescape(k->name, buf);
	rc = n < 0 ? diag_set(w->d, -EINVAL, DIAG_NO_OFFSET, "name '%s' is "
			      "not a valid key", k->name) :
	     pkl_emit_str(w->e, buf, n);
	free(buf);
	return rc ? rc : rp_memo_fresh(w);
}

/*
 * MARK k v k v ... SETITEMS for the children reached by @step; with
 * @half, only those whose half of a (dict, slots) state is @want.
 */
static int emit_items_in(struct wb *w, const struct ckpt_node *dir, int step,
			 bool pairs, const uint8_t *half, uint8_t want)
{
	uint32_t end = dir->dir->nkids, in_batch = 0;
	int rc = 0;

	for (uint32_t i = 0; i <= end && !rc; i++) {
		struct ckpt_node *k = i < end ? dir->dir->kids[i] : NULL;

		if (i < end && (!k || k->step != step ||
				(half && half[i] != want) ||
				(w->part && dir == w->c->root && !w->part[i])))
			continue;
		if (in_batch && (!k || in_batch == BATCH)) {
			rc = pkl_emit_op(w->e, pairs ? PKL_OP_SETITEMS : PKL_OP_APPENDS);
			in_batch = 0;
		}
		if (!k || rc)
			continue;
		if (!in_batch++)
			rc = pkl_emit_mark(w->e);
		if (!rc && pairs)
			rc = emit_key(w, k);
		if (!rc)
			rc = emit_node(w, k);
	}
	return rc;
}

/* MARK k v k v ... SETITEMS for all the children reached by @step. */
static int emit_items(struct wb *w, const struct ckpt_node *dir, int step,
		      bool pairs)
{
	return emit_items_in(w, dir, step, pairs, NULL, 0);
}

/* A tuple or list of the children in slot order. */
static int emit_seq_items(struct wb *w, const struct ckpt_node *dir)
{
	int rc = pkl_emit_mark(w->e);

	for (uint32_t i = 0; i < dir->dir->nkids && !rc; i++)
		if (dir->dir->kids[i])
			rc = emit_node(w, dir->dir->kids[i]);
	return rc ? rc : pkl_emit_op(w->e, PKL_OP_TUPLE);
}

/* Is @name (a child's file name) a key of state dict @v? */
static bool state_has(const struct pkl_value *v, const char *name)
{
	for (size_t i = 0; v->kind == PKL_DICT && i < v->u.items.n; i += 2) {
		const struct pkl_value *key = v->u.items.v[i];
		char *esc;
		bool same;

		if (ckpt_name_is_key(key)) {
			if (!strcmp(key->u.s.p, name))
				return true;
			continue;
		}
		esc = ckpt_name_escape(key);
		same = esc && !strcmp(esc, name);
		free(esc);
		if (same)
			return true;
	}
	return false;
}

/*
 * One half of a (dict, slots) state: the attribute children that
 * @half puts in it; None when the original half @v was None and nothing
 * is in it now.
 */
static int emit_state_half(struct wb *w, const struct ckpt_node *dir,
			   const struct pkl_value *v, const uint8_t *half,
			   uint8_t want)
{
	bool any = false;
	int rc;

	for (uint32_t i = 0; i < dir->dir->nkids && !any; i++)
		any = half[i] == want && dir->dir->kids[i] &&
		      dir->dir->kids[i]->step == CKPT_S_ATTR;
	if ((!v || v->kind != PKL_DICT) && !any)
		return pkl_emit_op(w->e, PKL_OP_NONE);
	rc = pkl_emit_op(w->e, PKL_OP_EMPTY_DICT);
	if (!rc)
		rc = pkl_emit_memo_put(w->e, v && v->kind == PKL_DICT ? v->id :
				       2 * SYNTH_KEY + 2 * dir->id + want);
	return rc ? rc : emit_items_in(w, dir, CKPT_S_ATTR, true, half, want);
}

/*
 * The (dict, slots) state of a class with __slots__ (copyreg's
 * _reduce_ex and object.__reduce_ex__(2) give it; either half may be
 * None).  Each attribute goes where pickle would put it, found by its
 * name, not by where it sits in the directory (a slot moved away and
 * back is last there): a name of the slots at open is a slot, a name of
 * the dict at open an attribute of the dict; a name of neither (made by
 * an edit) goes to the slots half, which pickle's load sets with
 * setattr(): into its slot if the class has one of that name, else into
 * the instance's __dict__, as an assignment in python would.
 */
static int emit_slots_state(struct wb *w, const struct ckpt_node *dir,
			    const struct pkl_value *st)
{
	const struct pkl_value *d0 = pkl_item(st, 0), *d1 = pkl_item(st, 1);
	uint8_t *half = malloc(dir->dir->nkids + 1);
	int rc;

	if (!half)
		return diag_nomem(w->d);
	for (uint32_t i = 0; i < dir->dir->nkids; i++) {
		const struct ckpt_node *k = dir->dir->kids[i];

		half[i] = !k || !state_has(d0, k->name) ||
			  state_has(d1, k->name);
	}
	rc = emit_state_half(w, dir, d0, half, 0);
	if (!rc)
		rc = emit_state_half(w, dir, d1, half, 1);
	free(half);
	if (!rc)
		rc = pkl_emit_op(w->e, PKL_OP_TUPLE2);
	return rc ? rc : pkl_emit_memo_put(w->e, st->id);
}

/* BUILD's state of an object, from its attribute children. */
static int emit_state(struct wb *w, const struct ckpt_node *dir,
		      const struct pkl_value *st)
{
	int rc;

	/* the tree shows only these two forms as directories (object()) */
	if (ckpt_state_is_slots(st)) {
		rc = emit_slots_state(w, dir, st);
		return rc ? rc : pkl_emit_op(w->e, PKL_OP_BUILD);
	}
	if (st && st->kind != PKL_DICT)
		return diag_unsupported(w->d, st->off, "cannot rewrite the "
					"state of '%s', a %s: it is a %s, "
					"not a dict", dir->name, dir->type,
					pkl_kind_name(st->kind));
	rc = pkl_emit_op(w->e, PKL_OP_EMPTY_DICT);
	if (!rc && st)
		rc = pkl_emit_memo_put(w->e, st->id);
	if (!rc)
		rc = emit_items(w, dir, CKPT_S_ATTR, true);
	return rc ? rc : pkl_emit_op(w->e, PKL_OP_BUILD);
}

/* An edited directory whose pickle value is a call (object, dict type). */
static int emit_call_dir(struct wb *w, const struct ckpt_node *dir)
{
	const struct pkl_value *v = dir->val, *st = pkl_call_x(v)->state;
	const struct pkl_value *f = v->u.call.func;
	bool keep_args = true, has_attr = false;
	int rc;

	if (!strncmp(dir->type, "sparse", 6) || !strcmp(dir->type, "set") ||
	    !strcmp(dir->type, "frozenset") || !strcmp(dir->type, "torch.Size"))
		keep_args = false;
	for (uint32_t i = 0; i < dir->dir->nkids; i++)
		has_attr |= dir->dir->kids[i] &&
			    dir->dir->kids[i]->step == CKPT_S_ATTR;
	rc = pkl_emit_value(w->e, f);
	if (rc)
		return rc;
	if (!keep_args) {
		/* set([...]) / torch.Size((...)): the items are the argument */
		if (!strcmp(dir->type, "torch.Size"))
			rc = emit_seq_items(w, dir);
		else if (!(rc = pkl_emit_op(w->e, PKL_OP_EMPTY_LIST)) &&
			 !(rc = pkl_emit_memo_put(w->e, SYNTH_KEY + dir->id)))
			rc = emit_items(w, dir, CKPT_S_INDEX, false);
		if (!rc)
			rc = pkl_emit_op(w->e, PKL_OP_TUPLE1);
		if (!rc)
			rc = pkl_emit_op(w->e, PKL_OP_REDUCE);
		return rc ? rc : pkl_emit_memo_put(w->e, v->id);
	}
	/* dict types hold their items through SETITEMS, not their args */
	if (ckpt_dict_type(dir->type) && strcmp(dir->type, "defaultdict"))
		rc = pkl_emit_op(w->e, PKL_OP_EMPTY_TUPLE);
	else
		rc = pkl_emit_value(w->e, pkl_call_args(v));
	if (!rc)
		rc = pkl_emit_op(w->e, v->how == PKL_NEWOBJ ? PKL_OP_NEWOBJ :
				 PKL_OP_REDUCE);
	if (!rc)
		rc = pkl_emit_memo_put(w->e, v->id);
	if (!rc)
		rc = emit_items(w, dir, CKPT_S_INDEX, false);
	if (!rc)
		rc = emit_items(w, dir, CKPT_S_KEY, true);
	/* an object's state is its attribute children; a dict's (the
	   _metadata of a state_dict) is not shown and stays as it was */
	if (rc || (!st && !has_attr))
		return rc;
	if (!ckpt_dict_type(dir->type))
		return emit_state(w, dir, st);
	rc = pkl_emit_value(w->e, st);
	return rc ? rc : pkl_emit_op(w->e, PKL_OP_BUILD);
}

/*
 * A wrapper's state from its children, in the form it came (the tree's
 * add_state()): a dict, a (dict, slots) pair, a tuple by position (whose
 * parts cannot be added or removed: ckpt_dir_parts_fixed()), or the one
 * entry "state".
 */
static int emit_wrapper_state(struct wb *w, const struct ckpt_node *dir,
			      const struct pkl_value *st)
{
	int rc;

	if (ckpt_state_is_slots(st))
		return emit_slots_state(w, dir, st);
	if (st->kind == PKL_TUPLE) {
		rc = emit_seq_items(w, dir);
		return rc ? rc : pkl_emit_memo_put(w->e, st->id);
	}
	if (st->kind != PKL_DICT) {
		for (uint32_t i = 0; i < dir->dir->nkids; i++)
			if (dir->dir->kids[i] &&
			    dir->dir->kids[i]->step == CKPT_S_PART)
				return emit_node(w, dir->dir->kids[i]);
		return diag_unsupported(w->d, st->off, "the state of '%s' is "
					"gone", dir->name);
	}
	rc = pkl_emit_op(w->e, PKL_OP_EMPTY_DICT);
	if (!rc)
		rc = pkl_emit_memo_put(w->e, st->id);
	return rc ? rc : emit_items(w, dir, CKPT_S_ATTR, true);
}

/*
 * An edited wrapper subclass: _rebuild_from_type_v2(func, cls, args,
 * state) with the state written from its children (the call's own args
 * hold it; there is no BUILD).
 */
static int emit_wrapper_dir(struct wb *w, const struct ckpt_node *dir)
{
	const struct pkl_value *v = dir->val, *a = pkl_call_args(v);
	const struct pkl_value *st = pkl_item(a, 3);
	int rc = pkl_emit_value(w->e, v->u.call.func);

	if (!rc)
		rc = pkl_emit_mark(w->e);
	for (size_t i = 0; i < 3 && !rc; i++)
		rc = pkl_emit_value(w->e, pkl_item(a, i));
	if (!rc)
		rc = emit_wrapper_state(w, dir, st);
	if (!rc)
		rc = pkl_emit_op(w->e, PKL_OP_TUPLE);
	if (!rc)
		rc = pkl_emit_memo_put(w->e, a->id);
	if (!rc)
		rc = pkl_emit_op(w->e, PKL_OP_REDUCE);
	return rc ? rc : pkl_emit_memo_put(w->e, v->id);
}

/* An edited or new directory, from its children. */
static int emit_dir(struct wb *w, const struct ckpt_node *dir)
{
	const struct pkl_value *v = dir->val;
	int rc;

	if (!v && dir->kind == CKPT_N_SEQ) {	/* a DCP directory's list */
		rc = pkl_emit_op(w->e, PKL_OP_EMPTY_LIST);
		if (!rc)
			rc = pkl_emit_memo_put(w->e, SYNTH_KEY + dir->id);
		return rc ? rc : emit_items(w, dir, CKPT_S_INDEX, false);
	}
	if (!v || v->kind == PKL_DICT) {
		rc = pkl_emit_op(w->e, PKL_OP_EMPTY_DICT);
		if (!rc)
			rc = pkl_emit_memo_put(w->e, v ? v->id :
					       SYNTH_KEY + dir->id);
		return rc ? rc : emit_items(w, dir, CKPT_S_KEY, true);
	}
	switch (v->kind) {
	case PKL_LIST:
		rc = pkl_emit_op(w->e, PKL_OP_EMPTY_LIST);
		if (!rc)
			rc = pkl_emit_memo_put(w->e, v->id);
		return rc ? rc : emit_items(w, dir, CKPT_S_INDEX, false);
	case PKL_TUPLE:
		rc = emit_seq_items(w, dir);
		return rc ? rc : pkl_emit_memo_put(w->e, v->id);
	case PKL_SET:
	case PKL_FROZENSET:
		rc = pkl_emit_global(w->e, "__builtin__", v->kind == PKL_SET ?
				     "set" : "frozenset");
		if (!rc)
			rc = pkl_emit_op(w->e, PKL_OP_EMPTY_LIST);
		if (!rc)
			rc = emit_items(w, dir, CKPT_S_INDEX, false);
		if (!rc)
			rc = pkl_emit_op(w->e, PKL_OP_TUPLE1);
		if (!rc)
			rc = pkl_emit_op(w->e, PKL_OP_REDUCE);
		return rc ? rc : pkl_emit_memo_put(w->e, v->id);
	case PKL_CALL:
		if (dir->tensor)
			return emit_wrapper_dir(w, dir);
		return emit_call_dir(w, dir);
	default:
		return diag_unsupported(w->d, v->off, "cannot rewrite %s",
					dir->name);
	}
}

/*
 * Node @n of a model made of several pickles (ckpt_int.h), as its own
 * pickle @vd has it: its value ids memoized in a range of their own, the
 * storage keys of its persistent ids found under its prefix: ptrepack
 * of a folder or DCP directory into one file, and a sharded folder's
 * shard written anew (ckpt_hfsave.c).  An edit below a shard's top level
 * cannot be written this way: the mount refuses those (ovl_hf.c).
 */
static int emit_in_doc(struct wb *w, struct ckpt_node *n,
		       const struct ckpt_vdoc *vd)
{
	const struct ckpt_vdoc *was = w->vdoc;
	uint64_t base = (uint64_t)(8 + (vd - w->c->vdocs)) << 32;
	bool dir = n->kind == CKPT_N_DIR || n->kind == CKPT_N_SEQ;
	int rc;

	if ((dir && !ckpt_dir_clean(n)) || n->edited ||
	    (n->kind == CKPT_N_TENSOR && n->tensor->fresh))
		return diag_unsupported(w->d, DIAG_NO_OFFSET, "%s: an edit of "
					"%s cannot be written", n->name,
					ckpt_fmt(w->c)->files);
	/* a legacy shard's views: from the model, offsets folded in */
	if (n->kind == CKPT_N_TENSOR && vd->format == CKPT_LEGACY) {
		if (n->tensor->kind != CKPT_T_STRIDED)
			return diag_unsupported(w->d, DIAG_NO_OFFSET, "%s: "
						"only plain tensors of a "
						"legacy shard are converted",
						n->name);
		return emit_fresh_node(w, n);
	}
	base = pkl_emit_doc(w->e, base);
	w->vdoc = vd;
	rc = pkl_emit_value(w->e, n->val);
	w->vdoc = was;
	pkl_emit_doc(w->e, base);
	return rc;
}

static int emit_node(struct wb *w, struct ckpt_node *n)
{
	const struct ckpt_vdoc *vd = n->val && n->kind != CKPT_N_LINK ?
				     ckpt_node_vdoc(w->c, n) : NULL;

	if (vd)
		return emit_in_doc(w, n, vd);
	switch (n->kind) {
	case CKPT_N_DIR:
	case CKPT_N_SEQ:
		if (!n->val)
			return emit_dir(w, n);
		if (w->dirty[n->val->id] == n) {
			if (pkl_emit_memo_get(w->e, n->val->id))
				return 0;
			return emit_dir(w, n);
		}
		return pkl_emit_value(w->e, n->val);
	case CKPT_N_TENSOR:
		if (n->tensor->fresh || !n->val)
			return emit_fresh_node(w, n);
		return pkl_emit_value(w->e, n->val);
	case CKPT_N_VALUE:
		if (n->edited)
			return rp_emit_value_file(w, n);
		return pkl_emit_value(w->e, n->val);
	case CKPT_N_LINK:
		return emit_node(w, n->target);
	default:
		return pkl_emit_value(w->e, n->val);
	}
}

/*
 * The pickle's root: the checkpoint's, or what ptrepack IN OUT KEYPATH...
 * asked for: one node as it is (torch.save(ck[KEY]): its container type,
 * state and ties within it), several as a dict of them keyed by their
 * paths (EMPTY_DICT MARK key value ... SETITEMS, as pickle writes one).
 */
static int emit_root(struct wb *w, struct ckpt_node *const *roots,
		     const char *const *keys, uint32_t n)
{
	int rc;

	if (!n)
		return emit_node(w, w->c->root);
	if (n == 1)
		return emit_node(w, roots[0]);
	rc = pkl_emit_op(w->e, PKL_OP_EMPTY_DICT);
	if (!rc)
		rc = rp_memo_fresh(w);
	if (!rc)
		rc = pkl_emit_mark(w->e);
	for (uint32_t i = 0; i < n && !rc; i++) {
		rc = pkl_emit_str(w->e, keys[i], strlen(keys[i]));
		if (!rc)
			rc = rp_memo_fresh(w);
		if (!rc)
			rc = emit_node(w, roots[i]);
	}
	return rc ? rc : pkl_emit_op(w->e, PKL_OP_SETITEMS);
}

int ckpt_repickle(struct ckpt *c, struct ckpt_repickle *r, struct diag *d)
{
	struct ckpt_node *const *roots = r->roots;
	const char *const *keys = r->root_keys;
	uint32_t nroots = r->nroots;
	struct pkl_emit_hooks h = {
		.value = hook_value, .persid = rp_hook_persid,
	};
	struct wb w = { .c = c, .d = d, .part = r->part };
	uint8_t pct = r->clone_pct;
	uint32_t ns = c->nstorages + 1;
	uint32_t nv = c->doc ? c->doc->nnodes : 0;	/* none: safetensors */
	int rc;

	if ((rc = ckpt_whole(c, d)))
		return rc;
	if (ckpt_can(c, CKPT_CAP_MANY) && pct)
		return diag_unsupported(d, DIAG_NO_OFFSET, "--clone cuts the "
					"storages of one file, not of %s",
					ckpt_fmt(c)->files);
	if (!c->doc)
		pct = 0;	/* every storage is one whole tensor's */
	memset(r, 0, sizeof(*r));
	w.dirty = calloc(nv + 1, sizeof(*w.dirty));
	w.out = calloc(ns, sizeof(*w.out));
	w.order = calloc(ns, sizeof(*w.order));
	if (!w.dirty || !w.out || !w.order)
		goto nomem;
	if (c->format == CKPT_LEGACY || pct) {
		w.args = calloc(nv + 1, 1);
		if (!w.args)
			goto nomem;
	}
	if (pct) {
		w.cut = calloc(ns, sizeof(*w.cut));
		w.keep = calloc(ns, sizeof(*w.keep));
		w.trim = calloc(ns, sizeof(*w.trim));
		if (!w.cut || !w.keep || !w.trim)
			goto nomem;
		rc = rp_plan_clone(&w, pct, &r->ntrimmed);
		if (rc)
			goto out;
	} else if (w.args) {
		uint32_t *np = calloc(ns, sizeof(*np)), *na = calloc(ns,
								      sizeof(*na));

		if (np && na)
			rp_scan_args(&w, np, na);
		free(np);
		free(na);
		if (!np || !na)
			goto nomem;
	}
	for (uint32_t i = 0; i < c->nnodes; i++) {
		struct ckpt_node *n = c->nodes[i];

		if ((n->kind == CKPT_N_DIR || n->kind == CKPT_N_SEQ) &&
		    n->val && (!ckpt_dir_clean(n) || holds_made(n)) &&
		    !ckpt_node_vdoc(c, n) && !w.dirty[n->val->id])
			w.dirty[n->val->id] = n;
	}
	for (uint32_t i = 0; i < c->nstorages; i++)
		w.retyped |= c->storages[i]->retyped != NULL;
	h.arg = &w;
	rc = pkl_emit_init(&w.e, nv, &h, d);
	if (!rc)
		rc = emit_root(&w, roots, keys, nroots);
	if (!rc)
		rc = pkl_emit_finish(w.e, &r->pkl, &r->len);
	if (!rc) {
		r->order = w.order;
		r->nout = w.nout;
		r->trim = w.trim;
		r->cut = w.cut;
		r->keep = w.keep;
		w.order = NULL;
		w.trim = NULL;
		w.cut = w.keep = NULL;
	}
	goto out;
nomem:
	rc = diag_nomem(d);
out:
	pkl_emit_free(w.e);
	free(w.dirty);
	free(w.out);
	free(w.order);
	free(w.args);
	free(w.cut);
	free(w.keep);
	free(w.trim);
	return rc;
}

void ckpt_repickle_release(struct ckpt_repickle *r)
{
	free(r->pkl);
	free(r->order);
	free(r->trim);
	free(r->cut);
	free(r->keep);
	memset(r, 0, sizeof(*r));
}
