/*
 * test_pkl_fold.c - folding torch.save's tensor rebuild calls while
 * parsing (core/pickle/pkl_fold.c): what is folded and what is not, that
 * released nodes are reused, that pkl_unfolded() shows what an unfolded
 * parse made, that pkl_unfold() restores the very graph, and that a pickle
 * which refers again to a released value is parsed a second time, unfolded.
 */
#define _GNU_SOURCE	/* memmem */
#include "test_pkl.h"
#include "pickle/pkl_int.h"	/* struct pkl_chunk */

#define REBUILD "ctorch._utils\n_rebuild_tensor_v2\n"
#define OD	"ccollections\nOrderedDict\n"

/*
 * 0: every tensor's location is the first one's 'cpu' (BINGET), as torch
 * writes it; K: each writes a str of its own, 'cuda:<i % K>', as torch
 * does for CUDA tensors.
 */
static int fresh_locs;

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
		PUT("QK\x02K\x03Kd\x86");	/* pid, offset 2, size (3, 100) */
		BINPUT();
		PUT("KdK\x01\x86");		/* stride (100, 1) */
		BINPUT();
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
	switch (a->kind) {
	case PKL_INT: case PKL_BOOL:
		cr_assert_eq(a->u.i, b->u.i);
		break;
	case PKL_STR:
		cr_assert_eq(a->u.s.n, b->u.s.n);
		cr_assert_eq(memcmp(a->u.s.p, b->u.s.p, a->u.s.n), 0);
		break;
	case PKL_GLOBAL:
		cr_assert_str_eq(a->u.global.module, b->u.global.module);
		cr_assert_str_eq(a->u.global.name, b->u.global.name);
		break;
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
