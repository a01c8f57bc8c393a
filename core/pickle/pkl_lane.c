/*
 * pkl_lane.c - torch.save's tensor rebuild call read and folded in one
 * step (PKL_FOLD).  The general loop makes nine values or more for such a
 * call, and pkl_fold_try() gives back all but the storage key's str and
 * the call; on 100,000 tensors that was most of the parse.  Here the
 * bytes of the usual form are decoded first, changing nothing, and only
 * if each is what the loop and the fold would have accepted is the result
 * made: the key's str, the folded call, their memo entries, and the ids
 * the loop would have given (the values it makes and releases still take
 * theirs, so that pkl_unfold() and write-back find the same numbering).
 * Anything else (another opcode, a memo key that is not new or not in
 * the dense array, a shared value not made yet, a limit near) is left to
 * the loop, which then also reports the errors.  Decoding may grow the
 * memo's dense array, which the loop would do alike for the same puts.
 * The lane runs once the loop has folded a call: the two globals it
 * compares by node come from that fold.
 *
 *   opcode                          value               memo
 *   BINGET g                        _rebuild_tensor_v2  p->g_rebuild
 *   MARK MARK
 *   BINGET                          'storage'           STR
 *   BINGET                          storage class       GLOBAL
 *   BINUNICODE key  BINPUT k1       the key             kept
 *   BINGET                          location            STR
 *   <int> TUPLE BINPUT k2           numel >= 0, pid     released
 *   BINPERSID
 *   <int>                           offset >= 0
 *   <dims> <dims>                   size, stride        released
 *   NEWFALSE | NEWTRUE              requires_grad
 *   BINGET o                        OrderedDict         p->g_odict
 *   EMPTY_TUPLE REDUCE BINPUT k3    the hooks           released
 *   TUPLE BINPUT k4                 the arguments       released
 *   REDUCE                          the call: folded
 *
 * <int>: BININT1 (its shared node must exist), BININT2 or BININT.
 * <dims>: EMPTY_TUPLE, or up to three <int> and TUPLE1/2/3, or MARK, up
 * to PKL_FOLD_DIMS <int> and TUPLE, each but () then BINPUT.  Every
 * BINGET/BINPUT may be LONG_BINGET/LONG_BINPUT.
 */
#ifndef PT_INTERNAL
#define PT_INTERNAL 1
#endif
#include "pkl_int.h"

#include "diag/diag.h"
#include "util/le.h"

#include <errno.h>
#include <string.h>

#define NPUTS		6	/* k1, k2, size, stride, k3, k4 */

struct lane {
	struct pkl_parser *p;
	const unsigned char *b;
	size_t pos, len;	/* in b, as p->pos and p->len */
	struct pkl_value *tag, *cls, *loc, *hooks;
	const unsigned char *key;
	uint32_t keyn;
	uint64_t key_off, pid_off, call_off;
	uint32_t put[NPUTS];	/* k1 first; the others are released */
	unsigned nput;
	unsigned fresh;		/* values the loop makes and releases */
	union pkl_fold_room room;
};

/* The next opcode if it is @op (consumed), else false. */
static bool op(struct lane *l, unsigned char op)
{
	if (l->pos >= l->len || l->b[l->pos] != op)
		return false;
	l->pos++;
	return true;
}

/* Opcode @op and its @k argument bytes, consumed; else NULL. */
static const unsigned char *op_arg(struct lane *l, unsigned char op, size_t k)
{
	const unsigned char *a = l->b + l->pos + 1;

	if (l->pos >= l->len || l->b[l->pos] != op || l->len - l->pos - 1 < k)
		return NULL;
	l->pos += 1 + k;
	return a;
}

/* A memo key: BIN@short's 1-byte one or LONG_BIN@short's 4-byte one. */
static bool memo_key(struct lane *l, unsigned char bin, unsigned char lng,
		     uint32_t *key)
{
	const unsigned char *a;

	if ((a = op_arg(l, bin, 1)))
		*key = a[0];
	else if ((a = op_arg(l, lng, 4)))
		*key = le32(a);
	return a;
}

/* BINGET or LONG_BINGET of a live value, else NULL. */
static struct pkl_value *get(struct lane *l)
{
	struct pkl_value *v;
	uint32_t key;

	if (!memo_key(l, OP_BINGET, OP_LONG_BINGET, &key))
		return NULL;
	v = pkl_memo_get(&l->p->memo, key);
	return v == &pkl_gone ? NULL : v;
}

/*
 * BINPUT or LONG_BINPUT of a key that is new and in the dense array, so
 * that the put cannot fail.  The array grows here as the loop's put of
 * the key would grow it (the loop runs these very opcodes if the lane
 * gives up); keys it does not cover are left to the loop.
 */
static bool put(struct lane *l)
{
	struct pkl_memo *m = &l->p->memo;
	uint32_t key;

	if (!memo_key(l, OP_BINPUT, OP_LONG_BINPUT, &key) ||
	    pkl_memo_cover(m, key) || key >= m->dcap || m->dense[key])
		return false;
	for (unsigned i = 0; i < l->nput; i++)
		if (l->put[i] == key)
			return false;
	l->put[l->nput++] = key;
	return true;
}

static bool is_int_op(const struct lane *l)
{
	unsigned char c = l->pos < l->len ? l->b[l->pos] : 0;

	return c == OP_BININT1 || c == OP_BININT2 || c == OP_BININT;
}

/* <int> into *@v. */
static bool integer(struct lane *l, int64_t *v)
{
	const unsigned char *a;

	if ((a = op_arg(l, OP_BININT1, 1))) {
		*v = a[0];
		return l->p->shared[a[0]];	/* else the loop makes it */
	}
	l->fresh++;
	if ((a = op_arg(l, OP_BININT2, 2)))
		*v = le16(a);
	else if ((a = op_arg(l, OP_BININT, 4)))
		*v = (int32_t)le32(a);
	return a;
}

/* <dims> into @d: how many, or -1. */
static int dims(struct lane *l, int64_t *d)
{
	static const unsigned char tuple_n[] = {
		0, OP_TUPLE1, OP_TUPLE2, OP_TUPLE3
	};
	bool mark;
	int n = 0;

	if (op(l, OP_EMPTY_TUPLE))
		return l->p->shared[PKL_SHARED_TUPLE] ? 0 : -1;
	mark = op(l, OP_MARK);
	while (n < PKL_FOLD_DIMS && is_int_op(l))
		if (!integer(l, &d[n++]))
			return -1;
	if (!n || !(mark ? op(l, OP_TUPLE) : n <= 3 && op(l, tuple_n[n])) ||
	    !put(l))
		return -1;
	l->fresh++;
	return n;
}

static bool is_storage_tag(const struct pkl_value *v)
{
	return v && v->kind == PKL_STR && v->u.s.n == 7 &&
	       !memcmp(v->u.s.p, "storage", 7);
}

/* The call at l->pos decoded into @l, nothing changed; false if not. */
static bool decode(struct lane *l)
{
	struct pkl_parser *p = l->p;
	struct pkl_fold *r = &l->room.f;
	int64_t stride[PKL_FOLD_DIMS];
	const unsigned char *a;
	int nd;

	if (get(l) != p->g_rebuild || !op(l, OP_MARK) || !op(l, OP_MARK) ||
	    !is_storage_tag(l->tag = get(l)) || !(l->cls = get(l)) ||
	    l->cls->kind != PKL_GLOBAL)
		return false;
	l->key_off = p->base + l->pos;
	if (!(a = op_arg(l, OP_BINUNICODE, 4)))
		return false;
	l->keyn = le32(a);
	if (l->len - l->pos < l->keyn)
		return false;
	l->key = l->b + l->pos;
	l->pos += l->keyn;
	if (!pkl_utf8_valid(l->key, l->keyn) ||
	    !put(l) || !(l->loc = get(l)) || l->loc->kind != PKL_STR ||
	    !integer(l, &r->numel) || r->numel < 0 || !op(l, OP_TUPLE) ||
	    !put(l))
		return false;
	l->pid_off = p->base + l->pos;
	if (!op(l, OP_BINPERSID) || !integer(l, &r->offset) || r->offset < 0)
		return false;
	l->fresh += 2;		/* the persistent id and its tuple */
	nd = dims(l, r->dims);
	if (nd < 0 || dims(l, stride) != nd)
		return false;
	memcpy(r->dims + nd, stride, (size_t)nd * sizeof(*stride));
	r->ndim = (uint8_t)nd;
	r->requires_grad = op(l, OP_NEWTRUE);
	if (!(r->requires_grad ? p->shared[PKL_SHARED_TRUE] != NULL :
	      op(l, OP_NEWFALSE) && p->shared[PKL_SHARED_FALSE]) ||
	    (l->hooks = get(l)) != p->g_odict || !op(l, OP_EMPTY_TUPLE) ||
	    !p->shared[PKL_SHARED_TUPLE] || !op(l, OP_REDUCE) || !put(l) ||
	    !op(l, OP_TUPLE) || !put(l))
		return false;
	l->fresh += 2;		/* the hooks' call, the argument tuple */
	l->call_off = p->base + l->pos;
	if (!op(l, OP_REDUCE) || l->call_off - l->pid_off > UINT32_MAX)
		return false;
	r->pid_back = (uint32_t)(l->call_off - l->pid_off);
	return true;
}

/*
 * What the loop's limits and pkl_fold_try()'s memo_forget() would say:
 * room on the stack, for marks, values and memo entries, and the
 * released entries in pkl_fold_window().
 */
static bool within_limits(const struct lane *l)
{
	const struct pkl_parser *p = l->p;
	uint32_t hi = l->put[l->nput - 1];
	uint32_t lo = pkl_fold_window(hi);

	if (p->n + 16 > PKL_MAX_STACK || p->nmarks + 3 > PKL_MAX_MARKS ||
	    (uint64_t)p->doc->nnodes + l->fresh + 2 > PKL_MAX_NODES ||
	    (uint64_t)p->memo.count + l->nput >
	    (uint64_t)PKL_MAX_MEMO + p->doc->nnodes)
		return false;
	for (unsigned i = 1; i < l->nput; i++)
		if (l->put[i] < lo || l->put[i] > hi)
			return false;
	return true;
}

/* Make what decode() found: the key's str and the folded call. */
static int make(struct lane *l, struct pkl_fold_kind *kind)
{
	struct pkl_parser *p = l->p;
	struct pkl_fold *r = &l->room.f;
	char *s = pkl_dup0(p, l->key, l->keyn);
	struct pkl_value *key, *call;
	int rc = 0;

	p->off = l->key_off;
	if (!s)
		return diag_nomem(p->d);
	if (!(key = pkl_mk(p, PKL_STR)))
		return p->rc;
	key->u.s.p = s;
	key->u.s.n = l->keyn;
	key->refs = 1;			/* its memo entry */
	p->doc->nnodes += l->fresh;	/* their ids, as the loop gives */
	p->off = l->call_off;
	if (!(call = pkl_mk(p, PKL_CALL)))
		return p->rc;
	call->how = PKL_REDUCE;
	call->u.call.func = p->g_rebuild;
	r->kind = kind;
	r->key = key;
	rc = pkl_fold_set(p, call, r);
	if (rc)
		return rc;
	/* new keys the dense array covers, within the limit: no failure */
	p->memo.limit = PKL_MAX_MEMO + p->doc->nnodes;
	for (unsigned i = 0; i < l->nput; i++)
		(void)pkl_memo_put(&p->memo, l->put[i], i ? &pkl_gone : key);
	p->last_put = l->put[l->nput - 1];
	p->g_rebuild->refs |= PKL_R_AGAIN;	/* each fetched by a GET */
	p->g_odict->refs |= PKL_R_AGAIN;
	l->tag->refs |= PKL_R_AGAIN;
	l->cls->refs |= PKL_R_AGAIN;
	l->loc->refs |= PKL_R_AGAIN;
	rc = pkl_push(p, call);
	p->pos = l->pos;
	p->doc->nlane++;
	return rc ? rc : 1;
}

int pkl_lane(struct pkl_parser *p)
{
	struct lane l = {
		.p = p, .b = p->buf, .pos = p->pos - 1, .len = p->len,
	};
	struct pkl_fold_kind *kind;
	int rc = 0;

	if (!p->g_rebuild || !p->g_odict || !decode(&l) ||
	    !within_limits(&l))
		return 0;
	kind = pkl_fold_kind_of(p, l.cls, l.loc, l.hooks, &rc);
	return kind ? make(&l, kind) : rc;
}
