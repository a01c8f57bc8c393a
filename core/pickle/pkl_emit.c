/*
 * pkl_emit.c - write a value graph as a protocol 2 pickle, the way
 * CPython's C pickler (Modules/_pickle.c, used by pickle.dumps and
 * torch.save) does, so that a parsed torch data.pkl comes back byte for
 * byte: the same memo numbering (BINPUT after each object Python memoizes,
 * before a container's items), the same batches, the same forms for what
 * protocol 2 has no opcode for (bytes, sets).  Only opcodes torch's
 * weights-only loader knows are written (torch-format.md section 6), plus
 * LONG4/BINSTRING when a value needs them.
 *
 * VALUE          | WRITTEN AS                                     | MEMO
 * None, bool     | NONE, NEWTRUE, NEWFALSE                        | no
 * int            | BININT1, BININT2, BININT, LONG1 (LONG4)        | no
 * float          | BINFLOAT (big-endian)                          | no
 * str            | BINUNICODE                                     | yes
 * py2 str        | SHORT_BINSTRING, BINSTRING                     | yes
 * bytes          | GLOBAL _codecs encode, latin-1 str, 'latin1',  | yes
 *                | TUPLE2, REDUCE                                 |
 * tuple          | EMPTY_TUPLE; items TUPLE1-3; MARK items TUPLE  | not ()
 * list, dict     | EMPTY_LIST/_DICT, APPEND(S)/SETITEM(S) batches | yes
 * set, frozenset | GLOBAL __builtin__ set, [items] TUPLE1, REDUCE | yes
 * global         | GLOBAL module\nname\n                          | yes
 * call           | func args REDUCE/NEWOBJ, items, state BUILD    | yes
 * persistent id  | the id, BINPERSID                              | no
 */
#ifndef PT_INTERNAL
#define PT_INTERNAL 1
#endif
#include "pkl_emit.h"
#include "pkl_int.h"

#include "diag/diag.h"
#include "util/le.h"
#include "util/utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BATCH		1000u		/* pickle's _BATCHSIZE */
#define MEMO_BUSY	UINT32_MAX	/* being written, not yet memoized */
#define MEMO_AGAIN	(UINT32_MAX - 1)	/* a second copy being written */
#define MEMO_MAX	(UINT32_MAX - 3)

/* Open addressing: u64 key (or the hash of @s) -> memo index + 1. */
struct memo_ent {
	uint64_t key;
	const char *s;		/* globals: "module\nname" in e->names */
	size_t n;
	uint32_t val;		/* 0: empty slot */
};

struct memo_tab {
	struct memo_ent *e;
	size_t cap, count;	/* cap: 0 or a power of two */
	uint64_t seed;		/* hostile names must not pick their slots */
};

struct pkl_emit {
	unsigned char *buf;
	size_t len, cap;
	int err;		/* the first failure; sticky */
	struct diag *d;
	struct pkl_emit_hooks h;
	uint32_t *vmemo;	/* [nvalues]: memo index + 1, 0, MEMO_BUSY */
	uint32_t nvalues;
	uint32_t nmemo;		/* memo entries written */
	uint32_t latin1;	/* memo index + 1 of bytes' 'latin1' */
	unsigned depth;
	struct memo_tab keys;	/* caller keys and ids >= nvalues */
	uint64_t base;		/* added to value ids: pkl_emit_doc() */
	struct memo_tab globals;
	struct arena names;
};

/* The memo key of value @v: its id in its document's range. */
static uint64_t vkey(const struct pkl_emit *e, const struct pkl_value *v)
{
	return e->base + v->id;
}

static int fail(struct pkl_emit *e, int rc)
{
	if (!e->err)
		e->err = rc;
	return e->err;
}

/* ---- output ---- */

/*
 * The next @n bytes of output, to be filled in; NULL after a failure.
 * Writers fill the buffer in place: no local arrays, whose sanitizer
 * redzones would swell every frame of the recursion.
 */
static unsigned char *room(struct pkl_emit *e, size_t n)
{
	if (e->err)
		return NULL;
	if (n > e->cap - e->len) {
		size_t cap = e->cap * 2 > e->len + n ? e->cap * 2 : e->len + n;
		unsigned char *nb = realloc(e->buf, cap);

		if (!nb) {
			fail(e, diag_nomem(e->d));
			return NULL;
		}
		e->buf = nb;
		e->cap = cap;
	}
	e->len += n;
	return e->buf + e->len - n;
}

/* An opcode with an @nb-byte little-endian argument @arg. */
static int out_op(struct pkl_emit *e, unsigned char op, uint64_t arg,
		  size_t nb)
{
	unsigned char *b = room(e, 1 + nb);

	if (b) {
		b[0] = op;
		for (size_t i = 0; i < nb; i++)
			b[1 + i] = (unsigned char)(arg >> 8 * i);
	}
	return e->err;
}

/* ---- memo ---- */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The slot of @key (and string @s, for globals), or the empty one for it. */
static struct memo_ent *tab_slot(const struct memo_tab *t, uint64_t key,
				 const char *s, size_t n)
{
	size_t i = mix(key ^ t->seed) & (t->cap - 1);

	while (t->e[i].val && (t->e[i].key != key ||
			       (s && (t->e[i].n != n ||
				      memcmp(t->e[i].s, s, n)))))
		i = (i + 1) & (t->cap - 1);
	return &t->e[i];
}

/* Move the entries into a table twice the size. */
static int tab_grow(struct pkl_emit *e, struct memo_tab *t)
{
	struct memo_tab nt = { .cap = t->cap ? 2 * t->cap : 64,
			       .seed = t->seed };

	nt.e = calloc(nt.cap, sizeof(*nt.e));
	if (!nt.e)
		return fail(e, diag_nomem(e->d));
	for (size_t i = 0; i < t->cap; i++) {
		size_t j = mix(t->e[i].key ^ t->seed) & (nt.cap - 1);

		if (!t->e[i].val)
			continue;
		while (nt.e[j].val)
			j = (j + 1) & (nt.cap - 1);
		nt.e[j] = t->e[i];
	}
	nt.count = t->count;
	free(t->e);
	*t = nt;
	return 0;
}

static uint32_t tab_get(const struct memo_tab *t, uint64_t key,
			const char *s, size_t n)
{
	return t->cap ? tab_slot(t, key, s, n)->val : 0;
}

static int tab_put(struct pkl_emit *e, struct memo_tab *t, uint64_t key,
		   const char *s, size_t n, uint32_t val)
{
	struct memo_ent *slot;

	/* keep the load under 1/2 so probes stay short */
	if (2 * (t->count + 1) > t->cap && tab_grow(e, t) < 0)
		return e->err;
	slot = tab_slot(t, key, s, n);
	if (!slot->val)
		t->count++;
	*slot = (struct memo_ent){ key, s, n, val };
	return 0;
}

static uint32_t memo_of(const struct pkl_emit *e, uint64_t key)
{
	if (key < e->nvalues)
		return e->vmemo[key];
	return tab_get(&e->keys, key, NULL, 0);
}

static int memo_set(struct pkl_emit *e, uint64_t key, uint32_t val)
{
	if (key < e->nvalues) {
		e->vmemo[key] = val;
		return 0;
	}
	return tab_put(e, &e->keys, key, NULL, 0, val);
}

/*
 * BINPUT the top of the stack under the next index.  Returns that index + 1
 * (the form the memo tables hold), 0 after a failure.
 */
static uint32_t put_next(struct pkl_emit *e)
{
	uint32_t i = e->nmemo;

	if (i >= MEMO_MAX) {
		fail(e, diag_unsupported(e->d, DIAG_NO_OFFSET,
					 "more than %u memo entries",
					 MEMO_MAX));
		return 0;
	}
	if (i < 256 ? out_op(e, OP_BINPUT, i, 1)
		    : out_op(e, OP_LONG_BINPUT, i, 4))
		return 0;
	return ++e->nmemo;
}

static int get(struct pkl_emit *e, uint32_t val)
{
	return val <= 256 ? out_op(e, OP_BINGET, val - 1, 1)
			  : out_op(e, OP_LONG_BINGET, val - 1, 4);
}

bool pkl_emit_memo_get(struct pkl_emit *e, uint64_t key)
{
	uint32_t val = e->err ? 0 : memo_of(e, key);

	if (!val || val == MEMO_BUSY || val == MEMO_AGAIN)
		return false;
	get(e, val);
	return true;
}

int pkl_emit_memo_put(struct pkl_emit *e, uint64_t key)
{
	uint32_t val = put_next(e);

	return val ? memo_set(e, key, val) : e->err;
}

/* ---- scalars and primitives ---- */

int pkl_emit_mark(struct pkl_emit *e)
{
	return out_op(e, OP_MARK, 0, 0);
}

int pkl_emit_op(struct pkl_emit *e, unsigned char opcode)
{
	return out_op(e, opcode, 0, 0);
}

int pkl_emit_int(struct pkl_emit *e, int64_t i)
{
	uint64_t u = (uint64_t)i;
	unsigned char *b;
	size_t n = 8;

	if (i >= 0 && i <= 0xff)
		return out_op(e, OP_BININT1, u, 1);
	if (i >= 0 && i <= 0xffff)
		return out_op(e, OP_BININT2, u, 2);
	if (i >= INT32_MIN && i <= INT32_MAX)
		return out_op(e, OP_BININT, u, 4);
	/* LONG1: drop high bytes while the next one down holds the sign */
	while (n > 1 && (u >> (8 * n - 9) == 0 ||
			 (i < 0 && ~u >> (8 * n - 9) == 0)))
		n--;
	b = room(e, 2 + n);
	if (b) {
		b[0] = OP_LONG1;
		b[1] = (unsigned char)n;
		for (size_t k = 0; k < n; k++)
			b[2 + k] = (unsigned char)(u >> 8 * k);
	}
	return e->err;
}

int pkl_emit_float(struct pkl_emit *e, double f)
{
	unsigned char *b = room(e, 9);
	uint64_t u = f64_bits(f);

	if (b) {
		b[0] = OP_BINFLOAT;
		for (int i = 0; i < 8; i++)
			b[1 + i] = (unsigned char)(u >> (56 - 8 * i));
	}
	return e->err;
}

/* A counted string: opcode, @lb-byte length, bytes. */
static int counted(struct pkl_emit *e, unsigned char op, size_t lb,
		   const char *s, size_t n)
{
	unsigned char *b;

	if (!out_op(e, op, n, lb) && (b = room(e, n)) && n)
		memcpy(b, s, n);
	return e->err;
}

int pkl_emit_str(struct pkl_emit *e, const char *s, size_t n)
{
	if (n > UINT32_MAX)
		return fail(e, diag_unsupported(e->d, DIAG_NO_OFFSET,
						"str of %zu bytes", n));
	return counted(e, OP_BINUNICODE, 4, s, n);
}

/*
 * GLOBAL, or BINGET when this (module, name) was written before, as the
 * pickler's memo does for a class object.  The line is written first and
 * taken back if the memo knows it: that is the lookup key, no copy needed.
 * Returns the memo index + 1, 0 after a failure.
 */
static uint32_t global(struct pkl_emit *e, const char *module,
		       const char *name, uint64_t off)
{
	size_t nm = strlen(module), nn = strlen(name), k = nm + nn + 2;
	uint64_t h = 0xcbf29ce484222325ull;	/* FNV-1a */
	unsigned char *line;
	uint32_t val;
	char *copy;

	if (memchr(module, '\n', nm) || memchr(name, '\n', nn)) {
		fail(e, diag_unsupported(e->d, off, "global name with a "
					 "newline"));
		return 0;
	}
	line = room(e, 1 + k);
	if (!line)
		return 0;
	line[0] = OP_GLOBAL;
	memcpy(line + 1, module, nm);
	line[1 + nm] = '\n';
	memcpy(line + 2 + nm, name, nn);
	line[k] = '\n';
	for (size_t i = 1; i <= k; i++)
		h = (h ^ line[i]) * 0x100000001b3ull;
	val = tab_get(&e->globals, h, (const char *)line + 1, k);
	if (val) {
		e->len -= 1 + k;
		return get(e, val) ? 0 : val;
	}
	copy = arena_alloc(&e->names, k);
	if (!copy) {
		fail(e, diag_nomem(e->d));
		return 0;
	}
	memcpy(copy, line + 1, k);
	val = put_next(e);
	if (!val || tab_put(e, &e->globals, h, copy, k, val) < 0)
		return 0;
	return val;
}

int pkl_emit_global(struct pkl_emit *e, const char *module, const char *name)
{
	global(e, module, name, DIAG_NO_OFFSET);
	return e->err;
}

/* ---- values ---- */

/*
 * Items of a list (@pairs false) or dict, in batches of 1000.  @exact
 * follows _pickle.c's batch_list_exact/batch_dict_exact (plain lists and
 * dicts): a lone item uses APPEND/SETITEM, otherwise every batch is MARK ..
 * APPENDS, and a dict whose size is a multiple of 1000 ends with an empty
 * MARK SETITEMS.  Otherwise (the items REDUCE's iterators give, as for
 * OrderedDict) pickle.py's _batch_appends: a batch of one is APPEND.
 */
static int items(struct pkl_emit *e, struct pkl_value *const *v, size_t n,
		 bool pairs, bool exact)
{
	size_t w = pairs ? 2 : 1, done = 0, k;

	if (!n)
		return 0;
	for (;;) {
		k = n - done < BATCH ? n - done : BATCH;
		if (!k && !exact)
			return 0;
		if (k == 1 && (!exact || n == 1)) {
			for (size_t j = 0; j < w; j++)
				pkl_emit_value(e, v[done * w + j]);
			return pkl_emit_op(e, pairs ? OP_SETITEM : OP_APPEND);
		}
		pkl_emit_mark(e);
		for (size_t j = 0; j < k * w; j++)
			if (pkl_emit_value(e, v[done * w + j]) < 0)
				return e->err;
		if (pkl_emit_op(e, pairs ? OP_SETITEMS : OP_APPENDS) < 0)
			return e->err;
		done += k;
		if (k < BATCH || (done == n && !pairs))
			return 0;
	}
}

/* bytes, as protocol 2 has no opcode for them: _codecs.encode(s, 'latin1') */
int pkl_emit_bytes(struct pkl_emit *e, const void *p, size_t n, uint64_t off)
{
	const unsigned char *s = p;
	size_t hi = 0;
	unsigned char *b;

	if (!n) {
		global(e, "__builtin__", "bytes", off);
		pkl_emit_op(e, OP_EMPTY_TUPLE);
		return pkl_emit_op(e, OP_REDUCE);
	}
	for (size_t i = 0; i < n; i++)
		hi += s[i] >> 7;
	if (n + hi > UINT32_MAX)
		return fail(e, diag_unsupported(e->d, off, "bytes of %zu "
						"bytes", n));
	global(e, "_codecs", "encode", off);
	out_op(e, OP_BINUNICODE, n + hi, 4);
	b = room(e, n + hi);
	for (size_t i = 0; b && i < n; i++)
		b += utf8_put(b, s[i]);	/* each byte a Latin-1 code point */
	put_next(e);
	/* the pickler's 'latin1' is one interned object: memoized once */
	if (e->latin1)
		get(e, e->latin1);
	else if (!pkl_emit_str(e, "latin1", 6))
		e->latin1 = put_next(e);
	pkl_emit_op(e, OP_TUPLE2);
	put_next(e);
	return pkl_emit_op(e, OP_REDUCE);
}

/* set/frozenset as protocol 2 pickles them: set([items]) */
static int set(struct pkl_emit *e, const struct pkl_value *v)
{
	global(e, "__builtin__", v->kind == PKL_SET ? "set" : "frozenset",
	       v->off);
	pkl_emit_op(e, OP_EMPTY_LIST);
	put_next(e);
	items(e, v->u.items.v, v->u.items.n, false, true);
	pkl_emit_op(e, OP_TUPLE1);
	put_next(e);
	return pkl_emit_op(e, OP_REDUCE);
}

/* A tuple's items (after a MARK when there are more than 3). */
static int tuple_items(struct pkl_emit *e, const struct pkl_value *v)
{
	size_t n = v->u.items.n;

	if (n > 3)
		pkl_emit_mark(e);
	for (size_t i = 0; i < n; i++)
		if (pkl_emit_value(e, v->u.items.v[i]) < 0)
			return e->err;
	return 0;
}

/*
 * The end of a tuple whose items are on the stack: TUPLE1-3 or TUPLE, or,
 * when a copy of it was memoized meanwhile (a cycle through the tuple),
 * what pickle writes instead: the items dropped (POP each, or POP_MARK)
 * and that copy fetched.
 */
static int tuple_end(struct pkl_emit *e, const struct pkl_value *v,
		     uint32_t copy)
{
	size_t n = v->u.items.n;

	if (copy) {
		if (n > 3)
			pkl_emit_op(e, OP_POP_MARK);
		for (size_t i = 0; n <= 3 && i < n; i++)
			pkl_emit_op(e, OP_POP);
		return get(e, copy);
	}
	if (n > 3)
		return pkl_emit_op(e, OP_TUPLE);
	return pkl_emit_op(e, (unsigned char)(OP_TUPLE1 + n - 1));
}

static int call(struct pkl_emit *e, const struct pkl_value *v)
{
	if (v->how == PKL_NEWOBJ_EX)
		return fail(e, diag_unsupported(e->d, v->off, "NEWOBJ_EX "
						"(keyword arguments) in "
						"protocol 2"));
	if (pkl_emit_value(e, v->u.call.func) < 0 ||
	    pkl_emit_value(e, pkl_call_args(v)) < 0)
		return e->err;
	/* OBJ and INST mean cls(*args), which REDUCE says too */
	return pkl_emit_op(e, v->how == PKL_NEWOBJ ? OP_NEWOBJ : OP_REDUCE);
}

/* What a call gathered after it was made: items, then BUILD's state. */
static int call_tail(struct pkl_emit *e, const struct pkl_value *v)
{
	const struct pkl_call_ext *x = pkl_call_x(v);

	items(e, x->list, x->nlist, false, false);
	items(e, x->dict, x->ndict / 2, true, false);
	if (x->state && !pkl_emit_value(e, x->state))
		pkl_emit_op(e, OP_BUILD);
	return e->err;
}

static int persid(struct pkl_emit *e, const struct pkl_value *v)
{
	int rc = e->h.persid ? e->h.persid(e, v, e->h.arg)
			     : pkl_emit_value(e, pkl_call_args(v));

	if (rc < 0)
		return fail(e, rc);
	return rc ? e->err : pkl_emit_op(e, OP_BINPERSID);
}

/*
 * Values Python memoizes only after writing their parts (tuples, calls,
 * bytes, sets) are marked busy meanwhile.  Reaching one again means a
 * cycle through it (a scheduler whose state holds a bound method of
 * itself: getattr(obj, name) with obj's state holding that very call).
 * pickle then writes the value a second time, inside, where everything
 * the cycle passes through is memoized by now, and at the end of the
 * first copy drops it (POP, or POP_MARK for a long tuple) and fetches
 * the second.  So do we, which gives CPython's bytes back.  A value
 * reached while its second copy is being written is a cycle no pickler
 * wrote (pickle would recurse forever), and is refused: each value is
 * written at most twice.
 */
static int compound(struct pkl_emit *e, const struct pkl_value *v)
{
	uint32_t was = memo_of(e, vkey(e, v)), copy;

	if (memo_set(e, vkey(e, v),
		     was == MEMO_BUSY ? MEMO_AGAIN : MEMO_BUSY) < 0)
		return e->err;
	switch (v->kind) {
	case PKL_TUPLE: tuple_items(e, v); break;
	case PKL_BYTES: pkl_emit_bytes(e, v->u.s.p, v->u.s.n, v->off); break;
	case PKL_CALL: call(e, v); break;
	default: set(e, v); break;
	}
	if (e->err)
		return e->err;
	copy = memo_of(e, vkey(e, v));
	if (copy == MEMO_BUSY || copy == MEMO_AGAIN)
		copy = 0;
	if (v->kind == PKL_TUPLE)
		return tuple_end(e, v, copy) < 0 || copy ? e->err :
		       pkl_emit_memo_put(e, vkey(e, v));
	if (copy) {
		pkl_emit_op(e, OP_POP);
		get(e, copy);
	} else if (pkl_emit_memo_put(e, vkey(e, v)) < 0) {
		return e->err;
	}
	return v->kind == PKL_CALL ? call_tail(e, v) : e->err;
}

/* Big ints and strings: the opcode whose length field fits. */
static int str_like(struct pkl_emit *e, const struct pkl_value *v)
{
	const char *s = v->u.s.p;
	size_t n = v->u.s.n;

	if (v->kind == PKL_BIGINT && n <= INT32_MAX)
		return n < 256 ? counted(e, OP_LONG1, 1, s, n)
			       : counted(e, OP_LONG4, 4, s, n);
	if (v->kind == PKL_STR && n <= UINT32_MAX) {
		counted(e, OP_BINUNICODE, 4, s, n);
		return pkl_emit_memo_put(e, vkey(e, v));
	}
	if (v->kind == PKL_STRING && n <= INT32_MAX) {
		if (n < 256)
			counted(e, OP_SHORT_BINSTRING, 1, s, n);
		else
			counted(e, OP_BINSTRING, 4, s, n);
		return pkl_emit_memo_put(e, vkey(e, v));
	}
	return fail(e, diag_unsupported(e->d, v->off, "%s of %zu bytes",
					pkl_kind_name(v->kind), n));
}

static int emit(struct pkl_emit *e, const struct pkl_value *v)
{
	uint32_t val;

	switch (v->kind) {
	case PKL_NONE:
		return pkl_emit_op(e, OP_NONE);
	case PKL_BOOL:
		return pkl_emit_op(e, v->u.i ? OP_NEWTRUE : OP_NEWFALSE);
	case PKL_INT:
		return pkl_emit_int(e, v->u.i);
	case PKL_FLOAT:
		return pkl_emit_float(e, v->u.f);
	case PKL_BIGINT:
	case PKL_STR:
	case PKL_STRING:
		return str_like(e, v);
	case PKL_TUPLE:
		if (!v->u.items.n)
			return pkl_emit_op(e, OP_EMPTY_TUPLE);
		return compound(e, v);
	case PKL_BYTES:
	case PKL_SET:
	case PKL_FROZENSET:
	case PKL_CALL:
		return compound(e, v);
	case PKL_LIST:
	case PKL_DICT:
		pkl_emit_op(e, v->kind == PKL_LIST ? OP_EMPTY_LIST
						   : OP_EMPTY_DICT);
		if (pkl_emit_memo_put(e, vkey(e, v)) < 0)
			return e->err;
		return items(e, v->u.items.v, pkl_len(v), v->kind == PKL_DICT,
			     true);
	case PKL_GLOBAL:
		val = global(e, v->u.global.module, v->u.global.name, v->off);
		return val ? memo_set(e, vkey(e, v), val) : e->err;
	case PKL_PERSID:
		return persid(e, v);
	default:
		return fail(e, diag_unsupported(e->d, v->off,
						"%s in protocol 2",
						pkl_kind_name(v->kind)));
	}
}

int pkl_emit_value(struct pkl_emit *e, const struct pkl_value *v)
{
	uint32_t val;
	int rc;

	if (e->err)
		return e->err;
	val = memo_of(e, vkey(e, v));
	if (val == MEMO_AGAIN)
		return fail(e, diag_unsupported(e->d, v->off, "cyclic %s "
						"that no pickler writes",
						pkl_kind_name(v->kind)));
	if (val && val != MEMO_BUSY)
		return get(e, val);
	if (e->depth >= PKL_EMIT_MAX_DEPTH)
		return fail(e, diag_unsupported(e->d, v->off, "nested deeper "
						"than %u", PKL_EMIT_MAX_DEPTH));
	e->depth++;
	rc = e->h.value ? e->h.value(e, v, e->h.arg) : 0;
	if (rc < 0)
		fail(e, rc);
	else if (!rc)
		emit(e, v);
	e->depth--;
	return e->err;
}

/* ---- lifecycle ---- */

int pkl_emit_init(struct pkl_emit **out, uint32_t nvalues,
		  const struct pkl_emit_hooks *h, struct diag *d)
{
	struct pkl_emit *e = calloc(1, sizeof(*e));

	*out = NULL;
	if (!e)
		return diag_nomem(d);
	e->d = d;
	if (h)
		e->h = *h;
	e->nvalues = nvalues;
	/* the heap address varies per run (ASLR): a cheap seed */
	e->keys.seed = e->globals.seed = mix((uintptr_t)e);
	e->vmemo = calloc(nvalues ? nvalues : 1, sizeof(*e->vmemo));
	e->cap = 4096;
	e->buf = malloc(e->cap);
	if (!e->vmemo || !e->buf) {
		pkl_emit_free(e);
		return diag_nomem(d);
	}
	out_op(e, OP_PROTO, 2, 1);
	*out = e;
	return 0;
}

uint64_t pkl_emit_doc(struct pkl_emit *e, uint64_t base)
{
	uint64_t was = e->base;

	e->base = base;
	return was;
}

struct diag *pkl_emit_diag(struct pkl_emit *e)
{
	return e->d;
}

int pkl_emit_finish(struct pkl_emit *e, unsigned char **out, size_t *len)
{
	*out = NULL;
	if (pkl_emit_op(e, OP_STOP) < 0)
		return e->err;
	*out = e->buf;
	*len = e->len;
	e->buf = NULL;
	e->len = e->cap = 0;
	return 0;
}

void pkl_emit_free(struct pkl_emit *e)
{
	if (!e)
		return;
	free(e->buf);
	free(e->vmemo);
	free(e->keys.e);
	free(e->globals.e);
	arena_release(&e->names);
	free(e);
}
