/*
 * test_pkl_fold.c - folding torch.save's tensor rebuild calls while
 * parsing (core/pickle/pkl_fold.c): what is folded and what is not, that
 * released nodes are reused, that pkl_unfolded() shows what an unfolded
 * parse made, that pkl_unfold() restores the very graph, and that a pickle
 * which refers again to a released value is parsed a second time, unfolded.
 * Also that a pickle read through a window (pkl_parse_src()) gives what
 * its whole bytes give, since the lane's tests make the pickles for both.
 */
#define _GNU_SOURCE	/* memmem */
#include "test_pkl.h"
#include "pickle/pkl_int.h"	/* struct pkl_chunk */
#include "zip/ptz.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#define REBUILD "ctorch._utils\n_rebuild_tensor_v2\n"
#define OD	"ccollections\nOrderedDict\n"

/*
 * 0: every tensor's location is the first one's 'cpu' (BINGET), as torch
 * writes it; K: each writes a str of its own, 'cuda:<i % K>', as torch
 * does for CUDA tensors.
 */
static int fresh_locs;
/* K: every K-th tensor requires grad (NEWTRUE); 1: all are 0-d, their
   size and stride () (EMPTY_TUPLE, not memoized, as Python writes it) */
static int grad_every, zero_dim;

/*
 * A state dict of @n tensors as torch.save writes it (protocol 2), each
 * {"tK": _rebuild_tensor_v2(('storage', FloatStorage, 'K', 'cpu', 300),
 * 2, (3, 100), (100, 1), False, OrderedDict())}; with @tail appended
 * before the final SETITEMS and STOP (for hostile additions).
 */
static unsigned char *state_dict(int n, const char *tail, size_t ntail,
				 size_t *len)
{
	unsigned char *b = malloc(4096 + (size_t)n * 256 + ntail), *p = b;
	unsigned memo = 0, m_rebuild = 0, m_tag = 0, m_cls = 0, m_cpu = 0;
	unsigned m_od = 0;

	cr_assert_not_null(b);
#define PUT(s) (memcpy(p, s, sizeof(s) - 1), p += sizeof(s) - 1)
#define BINPUT() (memo < 256 ? (*p++ = 'q', *p++ = (unsigned char)memo++) : \
		  (*p++ = 'r', memcpy(p, &memo, 4), p += 4, memo++))
#define BINGET(k) (*p++ = 'h', *p++ = (unsigned char)(k))
#define STR(s, k) (*p++ = 'X', *p++ = (unsigned char)(k), PUT("\0\0\0"), \
		   memcpy(p, s, k), p += (k))
	PUT("\x80\x02}");
	BINPUT();
	PUT("(");
	for (int i = 0; i < n; i++) {
		char key[16], name[16];
		int k = snprintf(key, sizeof(key), "%d", i);
		int kn = snprintf(name, sizeof(name), "t%d", i);

		STR(name, kn);
		BINPUT();
		if (!i) {
			PUT(REBUILD); m_rebuild = memo; BINPUT();
		} else {
			BINGET(m_rebuild);
		}
		PUT("((");
		if (!i) {
			STR("storage", 7); m_tag = memo; BINPUT();
			PUT("ctorch\nFloatStorage\n"); m_cls = memo; BINPUT();
		} else {
			BINGET(m_tag);
			BINGET(m_cls);
		}
		STR(key, k);
		BINPUT();
		if (fresh_locs) {
			char loc[16];
			int ln = snprintf(loc, sizeof(loc), "cuda:%d",
					  i % fresh_locs);

			STR(loc, ln);
			BINPUT();
		} else if (!i) {
			STR("cpu", 3); m_cpu = memo; BINPUT();
		} else {
			BINGET(m_cpu);
		}
		PUT("M\x2c\x01t");	/* numel 300, the persistent id's tuple */
		BINPUT();
		if (zero_dim) {
			PUT("QK\x02))");	/* pid, offset 2, (), () */
		} else {
			PUT("QK\x02K\x03Kd\x86");	/* pid, 2, (3, 100) */
			BINPUT();
			PUT("KdK\x01\x86");		/* stride (100, 1) */
			BINPUT();
		}
		if (grad_every && i % grad_every == 0)
			PUT("\x88");			/* True */
		else
			PUT("\x89");			/* False */
		if (!i) {
			PUT(OD); m_od = memo; BINPUT();
		} else {
			BINGET(m_od);
		}
		PUT(")R");
		BINPUT();
		PUT("t");
		BINPUT();
		PUT("R");
		BINPUT();
	}
	memcpy(p, tail, ntail);
	p += ntail;
	PUT("u.");
#undef PUT
#undef BINPUT
#undef BINGET
#undef STR
	*len = (size_t)(p - b);
	return b;
}

static struct pkl_doc *parse_flags(const unsigned char *b, size_t n,
				   unsigned flags)
{
	struct pkl_doc *doc = NULL;
	struct diag d;
	char line[320];

	diag_init(&d, "test.pkl");
	cr_assert_eq(pkl_parse_with(b, n, 0, flags, &doc, &d), 0, "%s",
		     diag_line(&d, line, sizeof(line)));
	return doc;
}

static size_t chunk_nodes(const struct pkl_doc *doc)
{
	size_t n = 0;

	for (const struct pkl_chunk *c = doc->chunks; c; c = c->next)
		n += c->n;
	return n;
}

/* For an int, bool, str or global @a: is @b (of its kind) the same? */
static bool same_leaf(const struct pkl_value *a, const struct pkl_value *b)
{
	switch (a->kind) {
	case PKL_INT: case PKL_BOOL: case PKL_EXT:
		cr_assert_eq(a->u.i, b->u.i, "id %u", a->id);
		return true;
	case PKL_FLOAT:
		cr_assert_eq(memcmp(&a->u.f, &b->u.f, sizeof(a->u.f)), 0);
		return true;
	case PKL_STR: case PKL_BYTES: case PKL_STRING: case PKL_BIGINT:
		cr_assert_eq(a->u.s.n, b->u.s.n);
		cr_assert_eq(memcmp(a->u.s.p, b->u.s.p, a->u.s.n), 0);
		return true;
	case PKL_GLOBAL:
		cr_assert_str_eq(a->u.global.module, b->u.global.module);
		cr_assert_str_eq(a->u.global.name, b->u.global.name);
		return true;
	default:
		return false;
	}
}

/* Are @a and @b the same value, compared as repr() would show them? */
static void same_value(const struct pkl_value *a, const struct pkl_value *b,
		       int depth)
{
	struct pkl_fold_view fa, fb;

	cr_assert_lt(depth, 16);
	a = pkl_unfolded(a, &fa);
	b = pkl_unfolded(b, &fb);
	cr_assert_eq(a->kind, b->kind);
	if (a->id != UINT32_MAX && b->id != UINT32_MAX)	/* not a view's */
		cr_assert_eq(a->off, b->off, "offsets %llu and %llu",
			     (unsigned long long)a->off,
			     (unsigned long long)b->off);
	if (same_leaf(a, b))
		return;
	switch (a->kind) {
	case PKL_TUPLE: case PKL_DICT:
		cr_assert_eq(a->u.items.n, b->u.items.n);
		for (size_t i = 0; i < a->u.items.n; i++)
			same_value(a->u.items.v[i], b->u.items.v[i],
				   depth + 1);
		break;
	case PKL_CALL: case PKL_PERSID:
		cr_assert_eq(a->how, b->how);
		if (a->u.call.func || b->u.call.func)
			same_value(a->u.call.func, b->u.call.func, depth + 1);
		same_value(pkl_call_args(a), pkl_call_args(b), depth + 1);
		break;
	default:
		break;
	}
}

static unsigned nfolded_calls(const struct pkl_doc *doc)
{
	unsigned n = 0;

	for (const struct pkl_chunk *c = doc->chunks; c; c = c->next)
		for (uint32_t i = 0; i < c->n; i++)
			n += c->v[i].kind == PKL_FOLDED;
	return n;
}

Test(pkl_fold, folds_every_plain_tensor_and_reuses_the_nodes)
{
	size_t n;
	unsigned char *b = state_dict(20, "", 0, &n);
	struct pkl_doc *whole = parse_flags(b, n, 0);
	struct pkl_doc *doc = parse_flags(b, n, PKL_FOLD);

	cr_assert_eq(doc->nfolded, 20);
	cr_assert_eq(nfolded_calls(doc), 20);
	cr_assert_eq(nfolded_calls(whole), 0);
	/* the same values, numbered alike */
	cr_assert_eq(doc->nnodes, whole->nnodes);
	same_value(doc->root, whole->root, 0);
	/* 9 nodes a tensor made, 5 of them given back and made again: the
	   chunks hold about half as many */
	cr_assert_lt(chunk_nodes(doc), chunk_nodes(whole) * 6 / 10,
		     "%zu nodes, %zu unfolded", chunk_nodes(doc),
		     chunk_nodes(whole));
	pkl_doc_free(doc);
	pkl_doc_free(whole);
	free(b);
	assert_no_leaks();
}

Test(pkl_fold, the_view_is_the_call_as_parsed)
{
	size_t n;
	unsigned char *b = state_dict(2, "", 0, &n);
	struct pkl_doc *doc = parse_flags(b, n, PKL_FOLD);
	const struct pkl_value *t1 = doc->root->u.items.v[3], *c, *a, *pid;
	struct pkl_fold_view fv;

	cr_assert_eq(t1->kind, PKL_FOLDED);
	c = pkl_unfolded(t1, &fv);
	cr_assert_eq(c->kind, PKL_CALL);
	cr_assert_eq(c->id, t1->id);
	cr_assert(pkl_is_global(c->u.call.func, "torch._utils",
				"_rebuild_tensor_v2"));
	a = pkl_call_args(c);
	cr_assert_eq(pkl_len(a), 6);
	pid = pkl_item(a, 0);
	cr_assert_eq(pid->kind, PKL_PERSID);
	cr_assert_str_eq(pkl_item(pkl_call_args(pid), 2)->u.s.p, "1");
	cr_assert_str_eq(pkl_item(pkl_call_args(pid), 3)->u.s.p, "cpu");
	cr_assert_eq(pkl_item(pkl_call_args(pid), 4)->u.i, 300);
	cr_assert_eq(pkl_item(a, 1)->u.i, 2);
	cr_assert_eq(pkl_item(pkl_item(a, 2), 1)->u.i, 100);
	cr_assert_eq(pkl_item(pkl_item(a, 3), 0)->u.i, 100);
	cr_assert_eq(pkl_item(a, 4)->u.i, 0);
	cr_assert(pkl_is_global(pkl_item(a, 5)->u.call.func, "collections",
				"OrderedDict"));
	pkl_doc_free(doc);
	free(b);
	assert_no_leaks();
}

Test(pkl_fold, unfold_gives_back_the_graph_as_parsed)
{
	size_t n;
	unsigned char *b = state_dict(5, "", 0, &n);
	struct pkl_doc *whole = parse_flags(b, n, 0);
	struct pkl_doc *doc = parse_flags(b, n, PKL_FOLD);
	struct diag d;

	diag_init(&d, "test.pkl");
	cr_assert_eq(pkl_unfold(doc, b, n, 0, &d), 0);
	cr_assert_eq(nfolded_calls(doc), 0);
	cr_assert_eq(doc->nfolded, 0);
	cr_assert_eq(pkl_doc_all(doc), doc->whole);
	same_value(doc->root, whole->root, 0);
	/* every node of the whole graph keeps its id */
	for (size_t i = 1; i < pkl_len(doc->root) * 2; i += 2) {
		const struct pkl_value *x = doc->root->u.items.v[i];
		const struct pkl_value *y = whole->root->u.items.v[i];

		cr_assert_eq(x->id, y->id);
		cr_assert_eq(pkl_call_args(x)->id, pkl_call_args(y)->id);
		cr_assert_eq(pkl_item(pkl_call_args(x), 2)->id,
			     pkl_item(pkl_call_args(y), 2)->id);
	}
	cr_assert_eq(pkl_unfold(doc, b, n, 0, &d), 0, "twice is fine");
	pkl_doc_free(doc);
	pkl_doc_free(whole);
	free(b);
	assert_no_leaks();
}

Test(pkl_fold, unfold_refuses_another_pickle)
{
	size_t n, m;
	unsigned char *b = state_dict(5, "", 0, &n), *o = state_dict(4, "",
								   0, &m);
	struct pkl_doc *doc = parse_flags(b, n, PKL_FOLD);
	struct diag d;

	diag_init(&d, "test.pkl");
	cr_assert_eq(pkl_unfold(doc, o, m, 0, &d), -ESTALE);
	cr_assert_eq(nfolded_calls(doc), 5, "nothing changed");
	pkl_doc_free(doc);
	free(b);
	free(o);
	assert_no_leaks();
}

/* A pickle that fetches a released tuple later (memo 8: tensor 0's size)
 * or BUILDs a folded call: the result is what an unfolded parse gives. */
Test(pkl_fold, a_second_reference_parses_again_unfolded)
{
	static const char tails[][11] = {
		"X\x01\0\0\0zh\x08",		/* fetch tensor 0's size */
		"X\x01\0\0\0zh\x0d}b",		/* BUILD tensor 0's call */
		"X\x01\0\0\0zh\x0d]a",		/* APPEND to it */
	};
	static const size_t ntails[] = { 8, 10, 10 };

	for (size_t k = 0; k < sizeof(tails) / sizeof(tails[0]); k++) {
		size_t n;
		unsigned char *b = state_dict(3, tails[k], ntails[k], &n);
		struct pkl_doc *whole = parse_flags(b, n, 0);
		struct pkl_doc *doc = parse_flags(b, n, PKL_FOLD);

		cr_assert_eq(doc->nfolded, 0, "tail %zu", k);
		cr_assert_eq(doc->nnodes, whole->nnodes);
		same_value(doc->root, whole->root, 0);
		pkl_doc_free(doc);
		pkl_doc_free(whole);
		free(b);
	}
	assert_no_leaks();
}

/* @b[0..*@n) with the first @old replaced by @new (a new buffer). */
static unsigned char *replaced(unsigned char *b, size_t *n, const char *old,
			       size_t nold, const char *new, size_t nnew)
{
	unsigned char *p = memmem(b, *n, old, nold), *c;
	size_t at;

	cr_assert_not_null(p);
	at = (size_t)(p - b);
	c = malloc(*n - nold + nnew);
	cr_assert_not_null(c);
	memcpy(c, b, at);
	memcpy(c + at, new, nnew);
	memcpy(c + at + nnew, b + at + nold, *n - at - nold);
	*n = *n - nold + nnew;
	free(b);
	return c;
}

/* DUP of the size tuple before it is used: it stays, nothing is folded. */
Test(pkl_fold, a_duplicated_argument_is_not_released)
{
	size_t n;
	unsigned char *b = state_dict(1, "", 0, &n);
	struct pkl_doc *doc, *whole;

	/* (3, 100) DUP POP: pushed twice, one popped: referred to once, but
	   the parser cannot know that */
	b = replaced(b, &n, "K\x03Kd\x86", 5, "K\x03Kd\x86" "20", 7);
	whole = parse_flags(b, n, 0);
	doc = parse_flags(b, n, PKL_FOLD);
	cr_assert_eq(doc->nfolded, 0);
	same_value(doc->root, whole->root, 0);
	pkl_doc_free(doc);
	pkl_doc_free(whole);
	free(b);
	assert_no_leaks();
}

/*
 * Eight dimensions (the most folded), none of them a shared small int, an
 * offset that is not either and a hooks' () of its own: 25 nodes to
 * release, one more than the first version had room for (ASan saw the
 * stack overflow); nine dimensions are not folded.
 */
Test(pkl_fold, eight_big_dimensions_fold_and_nine_do_not)
{
#define D256 "M\x00\x01"
	static const char size8[] = "(" D256 D256 D256 D256 D256 D256 D256
				    D256 "t";
	static const char size9[] = "(" D256 D256 D256 D256 D256 D256 D256
				    D256 D256 "t";

	for (int nine = 0; nine < 2; nine++) {
		const char *sz = nine ? size9 : size8;
		size_t n, nsz = nine ? sizeof(size9) - 1 : sizeof(size8) - 1;
		unsigned char *b = state_dict(1, "", 0, &n);
		struct pkl_doc *doc, *whole;

		b = replaced(b, &n, "K\x03Kd\x86", 5, sz, nsz);
		b = replaced(b, &n, "KdK\x01\x86", 5, sz, nsz);
		/* offset 256, and the hooks' () made by MARK TUPLE */
		b = replaced(b, &n, "QK\x02", 3, "QM\x00\x01", 4);
		b = replaced(b, &n, ")R", 2, "(tR", 3);
		whole = parse_flags(b, n, 0);
		doc = parse_flags(b, n, PKL_FOLD);
		cr_assert_eq(doc->nfolded, nine ? 0u : 1u);
		same_value(doc->root, whole->root, 0);
		pkl_doc_free(doc);
		pkl_doc_free(whole);
		free(b);
	}
	assert_no_leaks();
#undef D256
}

/*
 * torch writes a new str for each CUDA tensor's location: the calls still
 * share one kind (by the location's bytes), and the view shows each its
 * location.  Past PKL_FOLD_KINDS kinds the calls are not folded, and the
 * graph is the same either way.
 */
Test(pkl_fold, kinds_by_value_and_no_more_than_the_table_holds)
{
	const int nlocs[] = { 1, PKL_FOLD_KINDS + 6 }, n = 2 * PKL_FOLD_KINDS;

	for (int j = 0; j < 2; j++) {
		size_t len;
		unsigned char *b;
		struct pkl_doc *doc, *whole;
		/* 70 locations: the first 64 make the kinds, the tensors of
		   the other 6 are not folded (the last 58 are again) */
		unsigned want = (unsigned)n - (nlocs[j] == 1 ? 0u :
			(unsigned)(nlocs[j] - PKL_FOLD_KINDS));

		fresh_locs = nlocs[j];
		b = state_dict(n, "", 0, &len);
		fresh_locs = 0;
		whole = parse_flags(b, len, 0);
		doc = parse_flags(b, len, PKL_FOLD);
		cr_assert_eq(doc->nfolded, want, "%u folded, not %u",
			     doc->nfolded, want);
		same_value(doc->root, whole->root, 0);
		for (int i = 0; i < n; i++) {
			struct pkl_fold_view fv;
			const struct pkl_value *c, *pid;
			char loc[16];

			c = pkl_unfolded(doc->root->u.items.v[2 * i + 1], &fv);
			pid = pkl_item(pkl_call_args(c), 0);
			snprintf(loc, sizeof(loc), "cuda:%d", i % nlocs[j]);
			cr_assert_str_eq(pkl_item(pkl_call_args(pid), 3)->u.s.p,
					 loc);
		}
		pkl_doc_free(doc);
		pkl_doc_free(whole);
		free(b);
	}
	assert_no_leaks();
}

/* ---- the fast lane (pkl_lane.c) against the loop and pkl_fold_try() ---- */

/*
 * @a and @b the same graph node for node: ids, offsets, memo and GET
 * marks, values, and folded records.  @seen: ids compared already.
 */
static void same_node(const struct pkl_value *a, const struct pkl_value *b,
		      unsigned char *seen, int depth)
{
	cr_assert_lt(depth, 64);
	cr_assert_eq(a->id, b->id);
	cr_assert_eq(a->kind, b->kind, "id %u: kind %d, %d", a->id, a->kind,
		     b->kind);
	cr_assert_eq(a->how, b->how, "id %u", a->id);
	cr_assert_eq(a->refs, b->refs, "id %u: refs %u, %u", a->id, a->refs,
		     b->refs);
	cr_assert_eq(a->has_x, b->has_x, "id %u", a->id);
	cr_assert_eq(a->off, b->off, "id %u: off %llu, %llu", a->id,
		     (unsigned long long)a->off, (unsigned long long)b->off);
	if (seen[a->id]++)
		return;
	if (same_leaf(a, b))
		return;
	switch (a->kind) {
	case PKL_TUPLE: case PKL_LIST: case PKL_DICT: case PKL_SET:
	case PKL_FROZENSET:
		cr_assert_eq(a->u.items.n, b->u.items.n, "id %u", a->id);
		for (uint32_t i = 0; i < a->u.items.n; i++)
			same_node(a->u.items.v[i], b->u.items.v[i], seen,
				  depth + 1);
		break;
	case PKL_CALL: case PKL_PERSID:
		if (a->u.call.func || b->u.call.func)
			same_node(a->u.call.func, b->u.call.func, seen,
				  depth + 1);
		same_node(pkl_call_args(a), pkl_call_args(b), seen, depth + 1);
		break;
	case PKL_FOLDED: {
		const struct pkl_fold *x = a->u.fold.rec, *y = b->u.fold.rec;

		same_node(a->u.fold.func, b->u.fold.func, seen, depth + 1);
		same_node(x->kind->cls, y->kind->cls, seen, depth + 1);
		same_node(x->kind->hooks, y->kind->hooks, seen, depth + 1);
		cr_assert_eq(x->kind->loc_n, y->kind->loc_n);
		cr_assert_eq(memcmp(x->kind->loc, y->kind->loc, x->kind->loc_n),
			     0);
		same_node(x->key, y->key, seen, depth + 1);
		cr_assert_eq(x->numel, y->numel);
		cr_assert_eq(x->offset, y->offset);
		cr_assert_eq(x->pid_back, y->pid_back);
		cr_assert_eq(x->ndim, y->ndim);
		cr_assert_eq(x->requires_grad, y->requires_grad);
		cr_assert_eq(memcmp(x->dims, y->dims,
				    2 * x->ndim * sizeof(x->dims[0])), 0);
		break;
	}
	default:
		break;
	}
}

static unsigned window_same(const unsigned char *b, size_t n,
			    unsigned flags);

/*
 * Parse @b with the lane and without (and through windows: window_same());
 * the documents must be the same.
 * Returns how many calls the lane folded, or -1 if both parses failed
 * with the same error.
 */
static long lane_same(const unsigned char *b, size_t n)
{
	struct pkl_doc *fast = NULL, *slow = NULL;
	struct diag d1, d2;
	unsigned char *seen;
	char l1[320], l2[320];
	int r1, r2;
	long nlane;

	diag_init(&d1, "test.pkl");
	diag_init(&d2, "test.pkl");
	r1 = pkl_parse_with(b, n, 0, PKL_FOLD, &fast, &d1);
	r2 = pkl_parse_with(b, n, 0, PKL_FOLD | PKL_FOLD_SLOW, &slow, &d2);
	cr_assert_eq(r1, r2);
	if (r1) {
		cr_assert_str_eq(diag_line(&d1, l1, sizeof(l1)),
				 diag_line(&d2, l2, sizeof(l2)));
		return -1;
	}
	cr_assert_eq(fast->nnodes, slow->nnodes);
	cr_assert_eq(fast->nfolded, slow->nfolded);
	cr_assert_eq(fast->end, slow->end);
	cr_assert_eq(slow->nlane, 0);
	seen = calloc(fast->nnodes + 1u, 1);
	cr_assert_not_null(seen);
	same_node(fast->root, slow->root, seen, 0);
	free(seen);
	nlane = fast->nlane;
	pkl_doc_free(fast);
	pkl_doc_free(slow);
	window_same(b, n, PKL_FOLD);
	return nlane;
}

/* ---- a pickle read through a window (pkl_parse_src()) ---- */

struct mem_src {
	const unsigned char *b;
	size_t n;
	uint64_t base;
	unsigned reads;
};

static int mem_read(void *ctx, unsigned char *buf, size_t n, uint64_t off,
		    struct diag *d)
{
	struct mem_src *m = ctx;

	(void)d;
	cr_assert_geq(off, m->base);
	cr_assert_leq(off - m->base + n, m->n, "read past the pickle");
	memcpy(buf, m->b + (off - m->base), n);
	m->reads++;
	return 0;
}

/*
 * Parse @b whole and through windows of several sizes, down to one byte
 * (a refill inside nearly every opcode): the same document, or the same
 * error.  Returns the reads of the smallest window.
 */
static unsigned window_same(const unsigned char *b, size_t n, unsigned flags)
{
	static const size_t windows[] = { 1, 2, 3, 7, 64, 4096, 0 };
	struct pkl_doc *whole = NULL;
	struct diag d1;
	char l1[320], l2[320];
	unsigned reads1 = 0;
	int r1;

	diag_init(&d1, "test.pkl");
	r1 = pkl_parse_with(b, n, 1000, flags, &whole, &d1);
	for (size_t w = 0; w < sizeof(windows) / sizeof(windows[0]); w++) {
		struct mem_src m = { b, n, 1000, 0 };
		struct pkl_src src = { mem_read, &m, windows[w] };
		struct pkl_doc *doc = NULL;
		unsigned char *seen;
		struct diag d2;
		int r2;

		diag_init(&d2, "test.pkl");
		r2 = pkl_parse_src(&src, 1000, n, flags, &doc, &d2);
		cr_assert_eq(r1, r2, "window %zu: %d, not %d", windows[w], r2,
			     r1);
		if (w == 0)
			reads1 = m.reads;
		if (r1) {
			cr_assert_str_eq(diag_line(&d2, l2, sizeof(l2)),
					 diag_line(&d1, l1, sizeof(l1)));
			continue;
		}
		cr_assert_eq(doc->nnodes, whole->nnodes);
		cr_assert_eq(doc->nfolded, whole->nfolded);
		cr_assert_eq(doc->end, whole->end);
		cr_assert_eq(doc->proto, whole->proto);
		seen = calloc(whole->nnodes + 1u, 1);
		cr_assert_not_null(seen);
		same_node(doc->root, whole->root, seen, 0);
		free(seen);
		pkl_doc_free(doc);
	}
	pkl_doc_free(whole);
	return reads1;
}

/*
 * Every protocol's opcodes (protocol 0's two-line GLOBAL and INST among
 * them), torch's data.pkl folded and not, and the same cut short and with
 * bytes flipped: read through any window, what whole bytes give.
 */
Test(pkl_window, reads_what_the_whole_bytes_give)
{
	uint64_t off;
	size_t n;
	unsigned char *p;

	for (int proto = 0; proto <= 5; proto++) {
		p = read_values(proto, &n);
		/* a one-byte window is read again about every other byte */
		cr_assert_gt(window_same(p, n, 0), n / 4, "protocol %d", proto);
		for (size_t cut = 0; cut < n; cut += 1 + cut / 8)
			window_same(p, cut, 0);
		free(p);
	}
	p = torch_data_pkl(&n, &off);
	window_same(p, n, 0);
	window_same(p, n, PKL_FOLD);
	window_same(p, n, PKL_FOLD | PKL_FOLD_SLOW);
	for (size_t i = 0; i < n; i += 3) {
		p[i] ^= 0x5a;
		window_same(p, n, PKL_FOLD);
		p[i] ^= 0x5a;
	}
	free(p);
	assert_no_leaks();
}

/*
 * A value longer than the window is held whole while it is read, and a
 * length past the pickle's end is refused before anything is read for
 * it: BINBYTES8 of 2^62 bytes must not become a 2^62-byte window.
 */
Test(pkl_window, holds_a_long_value_and_refuses_a_huge_one)
{
	static const unsigned char huge[] = "\x80\x04\x8e\0\0\0\0\0\0\0\x40.";
	unsigned char *b = malloc(100000 + 16);
	struct mem_src m = { b, 0, 0, 0 };
	struct pkl_src src = { mem_read, &m, 16 };
	struct pkl_doc *doc = NULL;
	struct diag d;
	char line[320];

	cr_assert_not_null(b);
	memcpy(b, "\x80\x04\x8e", 3);
	for (int i = 0; i < 8; i++)		/* BINBYTES8's length */
		b[3 + i] = (unsigned char)(UINT64_C(100000) >> (8 * i));
	memset(b + 11, 'x', 100000);
	b[11 + 100000] = '.';
	m.n = 11 + 100000 + 1;
	diag_init(&d, "test.pkl");
	cr_assert_eq(pkl_parse_src(&src, 0, m.n, 0, &doc, &d), 0,
		     "%s", diag_line(&d, line, sizeof(line)));
	cr_assert_eq(doc->root->kind, PKL_BYTES);
	cr_assert_eq(doc->root->u.s.n, 100000);
	cr_assert_eq(doc->root->u.s.p[99999], 'x');
	pkl_doc_free(doc);
	window_same(b, m.n, 0);
	free(b);
	m = (struct mem_src){ huge, sizeof(huge) - 1, 0, 0 };
	diag_init(&d, "test.pkl");
	cr_assert_eq(pkl_parse_src(&src, 0, m.n, 0, &doc, &d), -EILSEQ);
	cr_assert(strstr(diag_line(&d, line, sizeof(line)),
			 "past end of pickle"), "%s", line);
	cr_assert_eq(m.reads, 1);
	assert_no_leaks();
}

static unsigned char *replaced_all(unsigned char *b, size_t *n,
				   const char *old, size_t nold,
				   const char *new, size_t nnew)
{
	while (memmem(b, *n, old, nold))
		b = replaced(b, n, old, nold, new, nnew);
	return b;
}

#define S(s)	s, sizeof(s) - 1

/*
 * The lane's forms (1- and 4-byte memo keys past 255, two to eight
 * dimensions in TUPLE2 and MARK ... TUPLE, 0-d tensors, BININT2 and
 * BININT values, requires_grad) and one it leaves to the loop (each
 * tensor's own location str): the same document either way.  The lane
 * folds every call but the first, which finds the globals and makes the
 * shared values the others use.
 */
Test(pkl_fold, the_lane_makes_what_the_loop_makes)
{
	static const char size8[] = "(K\x03KdK\x02K\x05K\x06K\x07K\x08"
				    "M\x00\x01t";
	static const char stride8[] = "(KdK\x01K\x02K\x05K\x06K\x07K\x08"
				      "J\x00\x00\x01\x00t";
	static const char size_int[] = "J\xff\xff\xff\xffKd\x86";
	static const char stride_int[] = "KdJ\x01\x00\x00\x00\x86";
	struct {
		int locs, grad, zero;
		const char *size;
		size_t nsize;
		const char *stride;
		size_t nstride;
		long lane;	/* calls the lane folds, of 400 */
	} v[] = {
		{ 0, 0, 0, NULL, 0, NULL, 0, 399 },
		{ 0, 3, 0, NULL, 0, NULL, 0, 398 },	/* 1st False: 2nd */
		{ 0, 0, 1, NULL, 0, NULL, 0, 399 },
		{ 2, 0, 0, NULL, 0, NULL, 0, 0 },
		{ 0, 0, 0, S(size8), S(stride8), 399 },
		{ 0, 0, 0, S(size_int), S(stride_int), 399 },
	};

	for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
		size_t n;
		unsigned char *b;
		long nlane;

		fresh_locs = v[k].locs;
		grad_every = v[k].grad;
		zero_dim = v[k].zero;
		b = state_dict(400, "", 0, &n);
		fresh_locs = grad_every = zero_dim = 0;
		if (v[k].size) {
			b = replaced_all(b, &n, "K\x03Kd\x86", 5, v[k].size,
					 v[k].nsize);
			b = replaced_all(b, &n, "KdK\x01\x86", 5,
					 v[k].stride, v[k].nstride);
		}
		nlane = lane_same(b, n);
		cr_assert_eq(nlane, v[k].lane, "form %zu: %ld folded by the "
			     "lane", k, nlane);
		free(b);
	}
	assert_no_leaks();
}
#undef S

/*
 * The data.pkl of every zip checkpoint in fixtures/@sub of the test
 * environment: the same document with the lane as without.  Adds the
 * calls the lane folded to *@lane; returns the pickles compared, or -1
 * if there is no such folder.
 */
static int lane_dir(const char *sub, long *lane)
{
	char dir[512];
	DIR *dp;
	struct dirent *de;
	int files = 0;

	snprintf(dir, sizeof(dir), "%s/fixtures/%s", PT_TESTENV_DIR, sub);
	if (!(dp = opendir(dir)))
		return -1;
	while ((de = readdir(dp))) {
		char path[1024];
		struct ptz_reader z = { 0 };
		struct ptz_entry *e;
		unsigned char *b = NULL;
		size_t n = 0;
		struct diag d;
		int fd;

		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (de->d_name[0] == '.' || (fd = open(path, O_RDONLY)) < 0)
			continue;
		diag_init(&d, path);
		if (!ptz_reader_open(&z, fd, path, &d) &&
		    (e = ptz_find_rel(&z, "data.pkl")) &&
		    !ptz_entry_read(&z, e, 1u << 30, &b, &n, &d)) {
			long k = lane_same(b, n);

			cr_log_info("%s: %ld by the lane", path, k);
			*lane += k > 0 ? k : 0;
			files++;
		}
		free(b);
		ptz_reader_release(&z);
		close(fd);
	}
	closedir(dp);
	return files;
}

/*
 * What torch wrote: the fixtures each torch version generated (made by
 * the "fixtures" test, which every ctest run has), and the real-world
 * corpus when ../shared has one.  The lane folds the plain calls of both
 * versions: many.pt 11, state_dict.pt 5 and misc.pt 4 each.
 */
Test(pkl_fold, the_lane_agrees_on_what_torch_wrote)
{
	long lane = 0, real = 0;
	int n13 = lane_dir("torch-1.13", &lane);
	int n2 = lane_dir("torch-2", &lane);
	int nreal = lane_dir("real", &real);

	cr_assert_geq(n13, 8, "%d pickles of torch 1.13", n13);
	cr_assert_geq(n2, 8, "%d pickles of torch 2", n2);
	cr_assert_geq(lane, 40, "%ld calls folded by the lane", lane);
	if (nreal < 0)
		/* (info, as fixtures.c says it: a warning makes Criterion
		   exit 1, failing a clone that has no ../shared) */
		cr_log_info("no real-world corpus (../shared): not compared");
	else
		cr_log_info("real-world corpus: %d pickles, %ld calls by the "
			    "lane", nreal, real);
	assert_no_leaks();
}

/*
 * Hostile bytes anywhere in calls the lane reads (each byte of a pickle of
 * three tensors cut off there, or set to 0, 0xff or its neighbour): the
 * lane and the loop make the same document or fail with the same error.
 */
Test(pkl_fold, the_lane_and_the_loop_agree_on_every_damaged_byte)
{
	size_t n;
	unsigned char *b = state_dict(3, "", 0, &n);
	unsigned char *c = malloc(n);
	unsigned folded = 0;

	cr_assert_not_null(c);
	for (size_t i = 0; i < n; i++) {
		const unsigned char vals[] = {
			0, 0xff, (unsigned char)(b[i] ^ 1)
		};

		lane_same(b, i);
		for (size_t k = 0; k < sizeof(vals); k++) {
			long r;

			memcpy(c, b, n);
			c[i] = vals[k];
			r = lane_same(c, n);
			folded += r > 0;
		}
	}
	/* damage elsewhere leaves the lane to fold the calls after it */
	cr_assert_gt(folded, n / 2, "%u of %zu", folded, 3 * n);
	free(c);
	free(b);
	assert_no_leaks();
}
