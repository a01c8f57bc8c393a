/*
 * ckpt_scan.c - what a pickle makes torch.load run, read from its graph
 * without running anything: the findings ptls --check and ptverify
 * report (c->globals).  A plain torch.load imports every GLOBAL and
 * calls every REDUCE, so the graph says it all, as long as it is read
 * for what each opcode does at load time and not for what the model
 * makes of it:
 *
 *   node / note              finding                          kind
 *   GLOBAL m n               outside the allowlist            GLOBAL
 *   STACK_GLOBAL of values   "global name computed at load    COMPUTED
 *     that are no str          time" (PKL_G_COMPUTED)
 *   REDUCE/NEWOBJ/OBJ of a   "calls a value made at load      CALL
 *     value that is no         time"
 *     GLOBAL
 *   _rebuild_from_type_v2    "given M.N as its function":     CALL
 *     (func, type, args, st)   it calls func(*args)
 *   _rebuild_tensor(_v2/_v3) "given ... as its storage"       CALL
 *     of a non-persistent id
 *   BINPERSID / PERSID       not ('storage', ...) or          PERSID
 *                            ('module', ...), or built by a
 *                            call
 *   BUILD on a global        "sets that value's attributes"   OPCODE
 *     (PKL_SCAN note)
 *
 * Globals are listed whether the root reaches them or not: an unpickler
 * runs every opcode it reads.  Memo keys, escapes and integers are read
 * as CPython reads them (pkl_text.c), so a GET finds what torch's GET
 * finds.  A pickle that fails is parsed again in PKL_SCAN mode, which
 * keeps what came before the failure (ckpt_scan_failed()).
 */
#include "ckpt_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHY_MAX		200	/* bytes of a finding's text */
#define REPR_MAX	60	/* of a value shown in it */

struct scan {
	struct ckpt *c;
	const struct pkl_doc *doc;
	const char *pickle;
	ckpt_allow_fn allowed;
	int rc;
};

static bool is_global(const struct pkl_value *v)
{
	return v && v->kind == PKL_GLOBAL && v->how != PKL_G_COMPUTED;
}

static bool allowed(const struct scan *s, const struct pkl_value *g)
{
	return s->allowed(g->u.global.module, g->u.global.name);
}

static void add(struct scan *s, int kind, const struct pkl_value *at,
		const char *module, const char *name, const char *why)
{
	if (!s->rc && ckpt_unsafe_add(s->c, kind, s->pickle, at->off, module,
				      name, why))
		s->rc = -ENOMEM;
}

/* @v as a few words: "posix.system", "the result of a call of X", "a
 * str" ... into @buf. */
static const char *shown(const struct pkl_value *v, char *buf, size_t size)
{
	const struct pkl_value *f;

	if (!v)
		return snprintf(buf, size, "nothing"), buf;
	switch (v->kind) {
	case PKL_GLOBAL:
		snprintf(buf, size, "%s%.*s.%.*s", v->how == PKL_G_COMPUTED ?
			 "a computed global " : "", REPR_MAX,
			 v->u.global.module, REPR_MAX, v->u.global.name);
		return buf;
	case PKL_CALL:
		f = v->u.call.func;
		if (is_global(f))
			snprintf(buf, size, "the result of %.*s.%.*s(...)",
				 REPR_MAX, f->u.global.module, REPR_MAX,
				 f->u.global.name);
		else
			snprintf(buf, size, "the result of a call");
		return buf;
	case PKL_PERSID:
		return snprintf(buf, size, "a persistent id"), buf;
	default:
		snprintf(buf, size, "a %s", pkl_kind_name(v->kind));
		return buf;
	}
}

/* Does @v hold a call, @depth tuples deep?  The call, or NULL. */
static const struct pkl_value *call_in(const struct pkl_value *v, int depth)
{
	if (!v || depth > 8)
		return NULL;
	if (v->kind == PKL_CALL || v->kind == PKL_PERSID)
		return v;
	if (v->kind == PKL_TUPLE || v->kind == PKL_LIST)
		for (size_t i = 0; i < v->u.items.n; i++) {
			const struct pkl_value *k = call_in(v->u.items.v[i],
							    depth + 1);
			if (k)
				return k;
		}
	return NULL;
}

static bool is_text(const struct pkl_value *v, const char *s)
{
	return v && (v->kind == PKL_STR || v->kind == PKL_STRING ||
		     v->kind == PKL_BYTES) && !strcmp(v->u.s.p, s);
}

/* torch's persistent ids: ('storage', cls, key, location, numel[, view])
 * in every format, ('module', cls, file, source) in a legacy stream, a
 * key (str) in a tar-era one. */
static void persid(struct scan *s, const struct pkl_value *v)
{
	const struct pkl_value *id = pkl_call_args(v), *k;
	char why[WHY_MAX], what[160];

	/* a tar-era pickle's ids are its keys: looked up, never called */
	if (id && (id->kind == PKL_STR || id->kind == PKL_STRING ||
		   id->kind == PKL_INT))
		return;
	if (!id || id->kind != PKL_TUPLE || !id->u.items.n ||
	    (!is_text(id->u.items.v[0], "storage") &&
	     !is_text(id->u.items.v[0], "module"))) {
		snprintf(why, sizeof(why), "persistent id %s is not torch's "
			 "('storage', ...) tuple", shown(id, what,
							 sizeof(what)));
		add(s, CKPT_U_PERSID, v, NULL, NULL, why);
		return;
	}
	if ((k = call_in(id, 0))) {
		snprintf(why, sizeof(why), "persistent id built from %s: "
			 "torch.load runs it to make the id",
			 shown(k, what, sizeof(what)));
		add(s, CKPT_U_PERSID, v, NULL, NULL, why);
	}
}

static void call(struct scan *s, const struct pkl_value *v)
{
	const struct pkl_value *f = v->u.call.func, *a = pkl_call_args(v);
	const struct pkl_value *a0 = pkl_item(a, 0);
	char why[WHY_MAX], what[160];

	/* what a call of an unsafe global returns is that global's: it is
	   named already (ShardedTensor's getattr(cls, name)(...)) */
	if (f && f->kind == PKL_CALL && is_global(f->u.call.func) &&
	    !allowed(s, f->u.call.func))
		return;
	if (!is_global(f)) {
		snprintf(why, sizeof(why), "calls %s, a value made at load "
			 "time, not a named global", shown(f, what,
							   sizeof(what)));
		add(s, CKPT_U_CALL, v, NULL, NULL, why);
		return;
	}
	if (!strcmp(f->u.global.module, "torch._tensor") &&
	    !strcmp(f->u.global.name, "_rebuild_from_type_v2") &&
	    (!is_global(a0) || !allowed(s, a0))) {
		snprintf(why, sizeof(why), "torch._tensor._rebuild_from_type_"
			 "v2 given %s as its function: torch.load calls it "
			 "with the arguments that follow",
			 shown(a0, what, sizeof(what)));
		add(s, CKPT_U_CALL, v, NULL, NULL, why);
		return;
	}
	if (!strcmp(f->u.global.module, "torch._utils") &&
	    !strncmp(f->u.global.name, "_rebuild_tensor", 15) &&
	    (!a0 || a0->kind != PKL_PERSID)) {
		snprintf(why, sizeof(why), "torch._utils.%s given %s as its "
			 "storage, not a persistent id", f->u.global.name,
			 shown(a0, what, sizeof(what)));
		add(s, CKPT_U_CALL, v, NULL, NULL, why);
	}
}

/* A computed global: named by what computes it when its note was
 * kept, else by what it is. */
static void computed(struct scan *s, const struct pkl_value *g)
{
	const struct pkl_value *by = NULL;
	char why[WHY_MAX], what[160];

	for (uint32_t i = 0; i < s->doc->nnotes && i < PKL_MAX_NOTES; i++)
		if (s->doc->notes[i].off == g->off &&
		    s->doc->notes[i].what == pkl_note_computed)
			by = s->doc->notes[i].v;
	snprintf(why, sizeof(why), "STACK_GLOBAL of %s: what torch.load "
		 "imports is known only once that ran", by ? shown(by, what,
		 sizeof(what)) : "values that are no str");
	add(s, CKPT_U_COMPUTED, g, g->u.global.module, g->u.global.name,
	    why);
}

static void node(const struct pkl_value *v, void *arg)
{
	struct scan *s = arg;

	switch (v->kind) {
	case PKL_GLOBAL:
		if (v->how == PKL_G_COMPUTED)
			computed(s, v);
		else if (!allowed(s, v))
			add(s, CKPT_U_GLOBAL, v, v->u.global.module,
			    v->u.global.name, NULL);
		break;
	case PKL_CALL:
		call(s, v);
		break;
	case PKL_PERSID:
		persid(s, v);
		break;
	default:		/* folded calls are torch's form, checked */
		break;
	}
}

/* What else a PKL_SCAN parse noted (BUILD on a global). */
static void note(struct scan *s, const struct pkl_note *n)
{
	char why[WHY_MAX], what[160];

	if (n->what == pkl_note_computed)	/* with its global */
		return;
	snprintf(why, sizeof(why), "%s (%s)", n->what,
		 shown(n->v, what, sizeof(what)));
	add(s, CKPT_U_OPCODE, &(struct pkl_value){ .off = n->off }, NULL, NULL,
	    why);
}

int ckpt_scan_doc(struct ckpt *c, const struct pkl_doc *doc,
		  const char *pickle, ckpt_allow_fn allowed_fn)
{
	struct scan s = { c, doc, pickle, allowed_fn ? allowed_fn :
			  ckpt_global_allowed, 0 };

	pkl_doc_each(pkl_doc_all(doc), node, &s);
	for (uint32_t i = 0; i < doc->nnotes && i < PKL_MAX_NOTES; i++)
		note(&s, &doc->notes[i]);
	if (doc->nnotes > PKL_MAX_NOTES)
		add(&s, CKPT_U_OPCODE, &(struct pkl_value){
			.off = doc->notes[PKL_MAX_NOTES - 1].off }, NULL,
		    NULL, "more opcodes the model does not show than ptfs "
		    "lists, after this one");
	return s.rc;
}

int ckpt_scan_failed(struct ckpt *c, const unsigned char *buf, size_t len,
		     uint64_t base, const char *pickle, ckpt_allow_fn allow,
		     struct diag *d)
{
	struct pkl_doc *doc = NULL;
	struct diag tmp;

	diag_init(&tmp, d->path);
	pkl_parse_with(buf, len, base, PKL_SCAN, &doc, &tmp);
	if (doc && ckpt_scan_doc(c, doc, pickle, allow))
		diag_nomem(d);
	pkl_doc_free(doc);
	return d->err;
}

int ckpt_scan_src(struct ckpt *c, const struct pkl_src *src, uint64_t base,
		  uint64_t len, const char *pickle, ckpt_allow_fn allow,
		  struct diag *d)
{
	struct pkl_doc *doc = NULL;
	struct diag tmp;

	diag_init(&tmp, d->path);
	pkl_parse_src(src, base, len, PKL_SCAN, &doc, &tmp);
	if (doc && ckpt_scan_doc(c, doc, pickle, allow))
		diag_nomem(d);
	pkl_doc_free(doc);
	return d->err;
}
