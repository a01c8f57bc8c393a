/*
 * test_pkl.c - the restricted pickle parser (core/pickle) on valid input:
 * every opcode family of protocols 0 to 5 from hand-written bytes, pickles
 * made by Python (tests/data/make_pickles.py) and by torch 1.13 (a
 * fixture's data.pkl), memo identity, cycles, and nesting a million deep.
 * Hostile input is in test_pkl_malformed.c.
 */
#include "test_pkl.h"

/* ---- pkl_value: accessors ---- */

Test(pkl_value, names_every_kind)
{
	cr_assert_str_eq(pkl_kind_name(PKL_TUPLE), "tuple");
	cr_assert_str_eq(pkl_kind_name(PKL_INT), "int");
	cr_assert_str_eq(pkl_kind_name(PKL_NONE), "None");
	for (int k = PKL_NONE; k <= PKL_FOLDED; k++)
		cr_assert_str_neq(pkl_kind_name(k), "unknown");
	cr_assert_str_eq(pkl_kind_name(-1), "unknown");
	cr_assert_str_eq(pkl_kind_name(PKL_FOLDED + 1), "unknown");
	assert_no_leaks();
}

Test(pkl_value, free_accepts_null)
{
	pkl_doc_free(NULL);
	assert_no_leaks();
}

Test(pkl_value, len_item_and_is_global)
{
	struct pkl_doc *doc = parse_ok(LIT("\x80\x02(cmod\nname\n}K\x01K\x02"
					   "\x86" "K\x03K\x04\x8f(K\x01"
					   "\x90" "}(K\x01K\x02ut."));
	struct pkl_value *t = doc->root;

	cr_assert_eq(t->kind, PKL_TUPLE);
	cr_assert_eq(pkl_len(t), 7);
	cr_assert(pkl_is_global(item(t, 0), "mod", "name"));
	cr_assert_not(pkl_is_global(item(t, 0), "mod", "nam"));
	cr_assert_not(pkl_is_global(item(t, 0), "mo", "name"));
	cr_assert_not(pkl_is_global(item(t, 1), "mod", "name"));
	cr_assert_not(pkl_is_global(NULL, "mod", "name"));
	cr_assert_eq(pkl_len(item(t, 1)), 0);
	cr_assert_eq(pkl_len(item(t, 2)), 2);
	assert_int(pkl_item(item(t, 2), 1), 2);
	cr_assert_null(pkl_item(item(t, 2), 2));
	cr_assert_null(pkl_item(item(t, 3), 0));
	cr_assert_eq(pkl_len(item(t, 3)), 0);
	cr_assert_eq(pkl_len(item(t, 5)), 1);		/* set */
	cr_assert_null(pkl_item(item(t, 5), 0));	/* not a sequence */
	cr_assert_eq(pkl_len(item(t, 6)), 1);		/* dict: pairs */
	cr_assert_eq(pkl_len(NULL), 0);
	cr_assert_null(pkl_item(NULL, 0));
	pkl_doc_free(doc);
	assert_no_leaks();
}

/* ---- pkl_parse: protocol 0 ---- */

Test(pkl_parse, reads_protocol0_numbers)
{
	static const unsigned char two63[] = { 0, 0, 0, 0, 0, 0, 0, 0x80, 0 };
	static const unsigned char m2_64[] = { 0, 0, 0, 0, 0, 0, 0, 0, 0xff };
	struct pkl_doc *doc = parse_ok(LIT(
		"(I00\nI01\nI42\nI-7\n"
		"L123L\nL-9223372036854775808L\nL9223372036854775808L\n"
		"L-18446744073709551616\nI 12\r\nF1.5\nF-2e3\n"
		"I99999999999999999999\nl."));
	struct pkl_value *l = doc->root;

	cr_assert_eq(l->kind, PKL_LIST);
	cr_assert_eq(pkl_len(l), 12);
	cr_assert_eq(item(l, 0)->kind, PKL_BOOL);
	cr_assert_eq(item(l, 0)->u.i, 0);
	cr_assert_eq(item(l, 1)->kind, PKL_BOOL);
	cr_assert_eq(item(l, 1)->u.i, 1);
	assert_int(item(l, 2), 42);
	assert_int(item(l, 3), -7);
	assert_int(item(l, 4), 123);
	assert_int(item(l, 5), INT64_MIN);
	assert_bytes(item(l, 6), PKL_BIGINT, (const char *)two63, 9);
	assert_bytes(item(l, 7), PKL_BIGINT, (const char *)m2_64, 9);
	assert_int(item(l, 8), 12);
	cr_assert_eq(item(l, 9)->kind, PKL_FLOAT);
	cr_assert_float_eq(item(l, 9)->u.f, 1.5, 0);
	cr_assert_float_eq(item(l, 10)->u.f, -2000.0, 0);
	cr_assert_eq(item(l, 11)->kind, PKL_BIGINT);
	cr_assert_eq(doc->proto, 0);
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_parse, decodes_string_escapes)
{
	struct pkl_doc *doc = parse_ok(LIT(
		"(S'a\\x41\\n\\\\\\'\\101\\q\\0z'\n"
		"S\"it's\"\n"
		"S'\\t\\r\\a\\b\\f\\v\\\"\\777x'\n"
		"S''\nt."));
	struct pkl_value *t = doc->root;

	assert_bytes(item(t, 0), PKL_STRING, "aA\n\\'A\\q\0z", 10);
	assert_bytes(item(t, 1), PKL_STRING, "it's", 4);
	assert_bytes(item(t, 2), PKL_STRING, "\t\r\a\b\f\v\"\xffx", 9);
	assert_bytes(item(t, 3), PKL_STRING, "", 0);
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_parse, decodes_unicode_escapes_to_utf8)
{
	struct pkl_doc *doc = parse_ok(LIT(
		"(V\\u20ac\\U0001F600 \xe9\n"
		"V\\\\u0041 \\q \\u005c\\u000a\n"
		"Vend\\\nt."));
	struct pkl_value *t = doc->root;

	assert_str(item(t, 0), "\xe2\x82\xac\xf0\x9f\x98\x80 \xc3\xa9");
	assert_str(item(t, 1), "\\\\u0041 \\q \\\n");
	assert_str(item(t, 2), "end\\");
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_parse, builds_protocol0_containers)
{
	struct pkl_doc *doc = parse_ok(LIT(
		"((I1\nI2\n0I3\n2(I4\nI5\n1t"
		"(I1\nl(Va\nI1\nd(dp0\nVk\np1\nI1\nsg1\nI2\ns"
		"I7\n(0t."));
	struct pkl_value *t = doc->root, *d;

	/* POP, DUP and POP_MARK */
	cr_assert_eq(pkl_len(item(t, 0)), 3);
	assert_int(item(item(t, 0), 0), 1);
	assert_int(item(item(t, 0), 1), 3);
	cr_assert_eq(item(item(t, 0), 1), item(item(t, 0), 2));
	cr_assert_eq(item(t, 1)->kind, PKL_LIST);
	assert_int(item(item(t, 1), 0), 1);
	d = item(t, 2);
	cr_assert_eq(d->kind, PKL_DICT);
	cr_assert_eq(pkl_len(d), 1);
	/* A repeated key keeps both pairs, in order; GET gives the key. */
	d = item(t, 3);
	cr_assert_eq(pkl_len(d), 2);
	cr_assert_eq(d->u.items.v[0], d->u.items.v[2]);
	assert_int(d->u.items.v[3], 2);
	/* POP on an empty frame drops its MARK */
	assert_int(item(t, 4), 7);
	cr_assert_eq(pkl_len(t), 5);
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_parse, keeps_protocol0_calls_symbolic)
{
	struct pkl_doc *doc = parse_ok(LIT(
		"(cmod\nfn\n(I1\ntR(dVx\nI2\nsb"
		"(I1\nimod\nCls\n"
		"Pkey7\n"
		"(cmod\nCls\nI3\nI4\not."));
	struct pkl_value *t = doc->root, *c;

	c = item(t, 0);
	cr_assert_eq(c->kind, PKL_CALL);
	cr_assert_eq(c->how, PKL_REDUCE);
	cr_assert(pkl_is_global(c->u.call.func, "mod", "fn"));
	assert_int(item(pkl_call_args(c), 0), 1);
	assert_int(dict_get(pkl_call_x(c)->state, "x"), 2);
	cr_assert_null(pkl_call_x(c)->kwargs);
	c = item(t, 1);
	cr_assert_eq(c->kind, PKL_CALL);
	cr_assert_eq(c->how, PKL_OBJ);
	cr_assert(pkl_is_global(c->u.call.func, "mod", "Cls"));
	assert_int(item(pkl_call_args(c), 0), 1);
	c = item(t, 2);
	cr_assert_eq(c->kind, PKL_PERSID);
	assert_str(pkl_call_args(c), "key7");
	c = item(t, 3);
	cr_assert_eq(c->how, PKL_OBJ);
	cr_assert(pkl_is_global(c->u.call.func, "mod", "Cls"));
	cr_assert_eq(pkl_len(pkl_call_args(c)), 2);
	assert_int(item(pkl_call_args(c), 1), 4);
	pkl_doc_free(doc);
	assert_no_leaks();
}

/* ---- pkl_parse: protocols 1 to 5 ---- */

Test(pkl_parse, reads_protocol1_scalars)
{
	struct pkl_doc *doc = parse_ok(LIT(
		"]q\x00(J\xff\xff\xff\xffK\xffM\xff\xffJ\x00\x00\x00\x80"
		"G\x3f\xf8\x00\x00\x00\x00\x00\x00"
		"T\x03\x00\x00\x00" "abcU\x02hiX\x02\x00\x00\x00\xc3\xa9"
		"N)e."));
	struct pkl_value *l = doc->root;

	cr_assert_eq(pkl_len(l), 10);
	assert_int(item(l, 0), -1);
	assert_int(item(l, 1), 255);
	assert_int(item(l, 2), 65535);
	assert_int(item(l, 3), INT32_MIN);
	cr_assert_float_eq(item(l, 4)->u.f, 1.5, 0);
	assert_bytes(item(l, 5), PKL_STRING, "abc", 3);
	assert_bytes(item(l, 6), PKL_STRING, "hi", 2);
	assert_str(item(l, 7), "\xc3\xa9");
	cr_assert_eq(item(l, 8)->kind, PKL_NONE);
	cr_assert_eq(item(l, 9)->kind, PKL_TUPLE);
	cr_assert_eq(pkl_len(item(l, 9)), 0);
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_parse, builds_protocol1_containers)
{
	struct pkl_doc *doc = parse_ok(LIT(
		"(}(K\x01K\x02K\x03K\x04u"
		"(cmod\nCls\nK\x01K\x02o"
		"(X\x07\x00\x00\x00storageK\x00tQ"
		"](K\x01K\x02" "e"
		"]r\x05\x00\x00\x01j\x05\x00\x00\x01" "at."));
	struct pkl_value *t = doc->root, *v;

	v = item(t, 0);
	cr_assert_eq(pkl_len(v), 2);
	assert_int(v->u.items.v[3], 4);
	v = item(t, 1);
	cr_assert_eq(v->kind, PKL_CALL);
	cr_assert_eq(v->how, PKL_OBJ);
	cr_assert(pkl_is_global(v->u.call.func, "mod", "Cls"));
	cr_assert_eq(pkl_len(pkl_call_args(v)), 2);
	v = item(t, 2);
	cr_assert_eq(v->kind, PKL_PERSID);
	assert_str(item(pkl_call_args(v), 0), "storage");
	v = item(t, 3);
	cr_assert_eq(pkl_len(v), 2);
	v = item(t, 4);
	cr_assert_eq(item(v, 0), v, "LONG_BINGET must give the same list");
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_parse, reads_protocol2_opcodes)
{
	struct pkl_doc *doc = parse_ok(LIT(
		"\x80\x02(cmod\nCls\n)\x81}(K\x01K\x02ub"
		"\x82\x01\x83\x01\x02\x84\x01\x02\x03\x04\x88\x89"
		"\x8a\x00\x8b\x02\x00\x00\x00\xff\x7f"
		"K\x01\x85K\x01K\x02\x86K\x01K\x02K\x03\x87t."));
	struct pkl_value *t = doc->root, *c = item(t, 0);

	cr_assert_eq(doc->proto, 2);
	cr_assert_eq(c->kind, PKL_CALL);
	cr_assert_eq(c->how, PKL_NEWOBJ);
	cr_assert(pkl_is_global(c->u.call.func, "mod", "Cls"));
	cr_assert_eq(pkl_call_args(c)->kind, PKL_TUPLE);
	cr_assert_eq(pkl_len(pkl_call_x(c)->state), 1);
	cr_assert_eq(item(t, 1)->kind, PKL_EXT);
	cr_assert_eq(item(t, 1)->u.i, 1);
	cr_assert_eq(item(t, 2)->u.i, 0x201);
	cr_assert_eq(item(t, 3)->u.i, 0x04030201);
	cr_assert_eq(item(t, 4)->kind, PKL_BOOL);
	cr_assert_eq(item(t, 4)->u.i, 1);
	cr_assert_eq(item(t, 5)->u.i, 0);
	assert_int(item(t, 6), 0);
	assert_int(item(t, 7), 0x7fff);
	cr_assert_eq(pkl_len(item(t, 8)), 1);
	cr_assert_eq(pkl_len(item(t, 9)), 2);
	cr_assert_eq(pkl_len(item(t, 10)), 3);
	assert_int(item(item(t, 10), 2), 3);
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_parse, decodes_long1_beyond_int64)
{
	static const unsigned char big[] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
	};
	struct pkl_doc *doc = parse_ok(LIT(
		"\x80\x02]("
		"\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00"
		"\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80"
		"\x8a\x01\xff"
		"\x8a\x03\xff\xff\xff"
		"\x8a\x0a\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00"
		"\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x7f"
		"\x8a\x02\x00\x80"
		"e."));
	struct pkl_value *l = doc->root;

	assert_bytes(item(l, 0), PKL_BIGINT,
		     "\x00\x00\x00\x00\x00\x00\x00\x80\x00", 9);
	assert_int(item(l, 1), INT64_MIN);
	assert_int(item(l, 2), -1);
	assert_int(item(l, 3), -1);
	assert_int(item(l, 4), 1);
	assert_bytes(item(l, 5), PKL_BIGINT, (const char *)big, 9);
	assert_int(item(l, 6), -32768);
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_parse, reads_protocol3_bytes)
{
	struct pkl_doc *doc = parse_ok(LIT(
		"\x80\x03](C\x03" "a\x00" "bB\x02\x00\x00\x00xyC\x00" "e."));

	assert_bytes(item(doc->root, 0), PKL_BYTES, "a\0b", 3);
	assert_bytes(item(doc->root, 1), PKL_BYTES, "xy", 2);
	assert_bytes(item(doc->root, 2), PKL_BYTES, "", 0);
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_parse, reads_protocol4_opcodes)
{
	size_t n;
	unsigned char *c = p4_framed(&n);
	struct pkl_doc *doc = parse_ok(c, n);
	struct pkl_value *t = doc->root, *call;

	cr_assert_eq(doc->proto, 4);
	cr_assert_eq(doc->end, n);
	cr_assert(pkl_is_global(item(t, 0), "mod", "Cls"));
	call = item(t, 1);
	cr_assert_eq(call->kind, PKL_CALL);
	cr_assert_eq(call->how, PKL_NEWOBJ_EX);
	cr_assert_eq(call->u.call.func, item(t, 0), "MEMOIZE identity");
	cr_assert_eq(pkl_len(pkl_call_args(call)), 0);
	assert_int(dict_get(pkl_call_x(call)->kwargs, "k"), 7);
	assert_str(item(t, 2), "hi");
	assert_bytes(item(t, 3), PKL_BYTES, "z", 1);
	cr_assert_eq(item(t, 4)->kind, PKL_SET);
	cr_assert_eq(pkl_len(item(t, 4)), 2);
	cr_assert_eq(item(t, 5)->kind, PKL_FROZENSET);
	cr_assert_eq(pkl_len(item(t, 5)), 1);
	assert_str(item(t, 6), "mod");
	pkl_doc_free(doc);
	free(c);
	assert_no_leaks();
}

Test(pkl_parse, reads_protocol5_buffers)
{
	struct pkl_doc *doc = parse_ok(LIT(
		"\x80\x05](\x96\x02\x00\x00\x00\x00\x00\x00\x00" "ab"
		"\x97\x97\x98" "e."));

	cr_assert_eq(doc->proto, 5);
	assert_bytes(item(doc->root, 0), PKL_BYTES, "ab", 2);
	cr_assert_eq(item(doc->root, 1)->kind, PKL_BUFFER);
	cr_assert_eq(item(doc->root, 2)->kind, PKL_BUFFER);
	cr_assert_eq(pkl_len(doc->root), 3);
	pkl_doc_free(doc);
	assert_no_leaks();
}

/* ---- pkl_parse: identity, calls, offsets ---- */

Test(pkl_parse, binget_keeps_identity)
{
	struct pkl_doc *doc = parse_ok(LIT(
		"\x80\x02}(X\x01\x00\x00\x00" "a]q\x00"
		"X\x01\x00\x00\x00" "bh\x00u."));

	cr_assert_eq(dict_get(doc->root, "a"), dict_get(doc->root, "b"));
	cr_assert_eq(dict_get(doc->root, "a")->kind, PKL_LIST);
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_parse, list_contains_itself)
{
	struct pkl_doc *doc = parse_ok(LIT("]q\x00h\x00" "a."));

	cr_assert_eq(item(doc->root, 0), doc->root);
	pkl_doc_free(doc);
	doc = parse_ok(LIT("]2a."));
	cr_assert_eq(item(doc->root, 0), doc->root);
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_parse, call_collects_items_and_state)
{
	struct pkl_doc *doc = parse_ok(LIT(
		"cmod\nfn\n)R(K\x01K\x02" "eK\x03" "aK\x04K\x05s"
		"(K\x06K\x07u}b."));
	struct pkl_value *c = doc->root;

	cr_assert_eq(c->kind, PKL_CALL);
	cr_assert_eq(pkl_call_x(c)->nlist, 3);
	assert_int(pkl_call_x(c)->list[2], 3);
	cr_assert_eq(pkl_call_x(c)->ndict, 4);
	assert_int(pkl_call_x(c)->dict[0], 4);
	assert_int(pkl_call_x(c)->dict[3], 7);
	cr_assert_eq(pkl_call_x(c)->state->kind, PKL_DICT);
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_parse, reads_pickles_in_a_row)
{
	static const unsigned char two[] = "K\x01.\x80\x02K\x02.";
	struct pkl_doc *doc;
	struct diag d;

	diag_init(&d, NULL);
	cr_assert_eq(pkl_parse(two, sizeof(two) - 1, 100, &doc, &d), 0);
	assert_int(doc->root, 1);
	cr_assert_eq(doc->end, 103);
	pkl_doc_free(doc);
	cr_assert_eq(pkl_parse(two + 3, sizeof(two) - 4, 103, &doc, &d), 0);
	assert_int(doc->root, 2);
	cr_assert_eq(doc->end, 108);
	cr_assert_eq(doc->root->off, 105, "node offsets are file offsets");
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_parse, accepts_stop_with_values_left)
{
	struct pkl_doc *doc = parse_ok(LIT("K\x01(K\x02."));

	assert_int(doc->root, 2);
	pkl_doc_free(doc);
	assert_no_leaks();
}

/* A large key is stored first; later dense keys grow over it. */
Test(pkl_parse, keeps_memo_entry_when_dense_keys_grow_over_it)
{
	struct bytes b = { 0 };
	unsigned char op[5] = { 'r' };
	struct pkl_doc *doc;

	add(&b, "(K\x07", 3);
	put_le32(op + 1, 3000);
	add(&b, op, 5);
	for (uint32_t i = 0; i < 3000; i++) {
		add(&b, "K\x01", 2);
		put_le32(op + 1, i);
		add(&b, op, 5);
		add(&b, "0", 1);
	}
	op[0] = 'j';
	put_le32(op + 1, 3000);
	add(&b, op, 5);
	put_le32(op + 1, 2999);
	add(&b, op, 5);
	add(&b, "t.", 2);
	doc = parse_ok(b.p, b.n);
	cr_assert_eq(pkl_len(doc->root), 3);
	cr_assert_eq(item(doc->root, 1), item(doc->root, 0));
	assert_int(item(doc->root, 2), 1);
	cr_assert_neq(item(doc->root, 2), item(doc->root, 0));
	pkl_doc_free(doc);
	free(b.p);
	assert_no_leaks();
}

/* ---- pkl_parse: pickles made by Python and torch ---- */

static void check_values(const struct pkl_value *r, int proto)
{
	static const char big[] = "\x01\0\0\0\0\0\0\0\x01";
	static const char negbig[] = "\0\0\0\0\0\0\0\0\xc0";
	const char *bi = proto < 3 ? "__builtin__" : "builtins";
	struct pkl_value *v;

	cr_assert_eq(r->kind, PKL_DICT);
	cr_assert_eq(pkl_len(r), 19);
	assert_int(dict_get(r, "int"), 7);
	assert_int(dict_get(r, "neg"), -300);
	assert_int(dict_get(r, "i32"), INT32_MIN);
	assert_int(dict_get(r, "i64"), INT64_MAX);
	assert_bytes(dict_get(r, "big"), PKL_BIGINT, big, 9);
	assert_bytes(dict_get(r, "negbig"), PKL_BIGINT, negbig, 9);
	cr_assert_float_eq(dict_get(r, "float")->u.f, -1.25, 0);
	assert_str(dict_get(r, "str"),
		   "h\xc3\xa9llo \xe2\x82\xac\xf0\x9f\x98\x80 \\ \n end");
	v = dict_get(r, "bytes");
	if (proto < 3) {
		cr_assert(pkl_is_global(v->u.call.func, "_codecs", "encode"));
		assert_str(item(pkl_call_args(v), 0), "\0\xc3\xbf'\"\\");
		assert_str(item(pkl_call_args(v), 1), "latin1");
	} else {
		assert_bytes(v, PKL_BYTES, "\0\xff'\"\\", 5);
	}
	cr_assert_eq(dict_get(r, "none")->kind, PKL_NONE);
	cr_assert_eq(dict_get(r, "yes")->kind, PKL_BOOL);
	cr_assert_eq(dict_get(r, "yes")->u.i, 1);
	cr_assert_eq(dict_get(r, "no")->u.i, 0);
	v = dict_get(r, "tuple");
	assert_int(item(v, 0), 1);
	assert_str(item(v, 1), "a");
	cr_assert_eq(item(v, 2)->kind, PKL_NONE);
	v = dict_get(r, "list");
	cr_assert_eq(v->kind, PKL_LIST);
	assert_int(item(v, 2), 3);
	v = dict_get(r, "set");
	if (proto < 4) {
		cr_assert(pkl_is_global(v->u.call.func, bi, "set"));
		assert_int(item(item(pkl_call_args(v), 0), 0), 5);
	} else {
		cr_assert_eq(v->kind, PKL_SET);
		assert_int(v->u.items.v[0], 5);
	}
	v = dict_get(r, "frozen");
	if (proto < 4) {
		cr_assert(pkl_is_global(v->u.call.func, bi, "frozenset"));
	} else {
		cr_assert_eq(v->kind, PKL_FROZENSET);
		assert_int(v->u.items.v[0], 6);
	}
	cr_assert_eq(dict_get(r, "a"), dict_get(r, "b"));
	assert_str(item(dict_get(r, "a"), 0), "shared");
	v = dict_get(r, "point");
	cr_assert_eq(v->kind, PKL_CALL);
	assert_int(dict_get(pkl_call_x(v)->state, "x"), 1);
	if (proto >= 2) {
		cr_assert_eq(v->how, PKL_NEWOBJ);
		cr_assert(pkl_is_global(v->u.call.func, "__main__", "Point"));
	} else {
		cr_assert(pkl_is_global(v->u.call.func, "copy_reg",
					"_reconstructor"));
		cr_assert(pkl_is_global(item(pkl_call_args(v), 0), "__main__",
					"Point"));
	}
}

Test(pkl_parse, reads_python_pickles_of_every_protocol)
{
	for (int proto = 0; proto <= 5; proto++) {
		size_t n;
		unsigned char *p = read_values(proto, &n);
		struct pkl_doc *doc = parse_ok(p, n);

		cr_assert_eq(doc->proto, proto >= 2 ? proto : 0);
		cr_assert_eq(doc->end, n);
		check_values(doc->root, proto);
		pkl_doc_free(doc);
		free(p);
	}
	assert_no_leaks();
}

Test(pkl_parse, reads_torch_state_dict)
{
	static const char *const keys[] = {
		"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
		"1.running_var", "1.num_batches_tracked",
	};
	uint64_t off;
	size_t n;
	unsigned char *p = torch_data_pkl(&n, &off);
	struct pkl_value *r, *rebuild = NULL, *meta;
	struct pkl_doc *doc;
	struct diag d;

	cr_assert(p, "no torch fixtures in %s (the \"fixtures\" test makes them)",
		  PT_TESTENV_DIR);
	diag_init(&d, NULL);
	cr_assert_eq(pkl_parse(p, n, off, &doc, &d), 0, "%s", d.msg);
	cr_assert_eq(n, 680);
	cr_assert_eq(doc->end, off + n);
	cr_assert_eq(doc->proto, 2);
	r = doc->root;
	cr_assert_eq(r->kind, PKL_CALL);
	cr_assert_eq(r->off, off + 30);
	cr_assert(pkl_is_global(r->u.call.func, "collections", "OrderedDict"));
	cr_assert_eq(pkl_call_x(r)->ndict, 14);
	for (size_t i = 0; i < 7; i++) {
		struct pkl_value *k = pkl_call_x(r)->dict[2 * i];
		struct pkl_value *t = pkl_call_x(r)->dict[2 * i + 1];
		struct pkl_value *args = pkl_call_args(t), *pid;
		char key[4];

		cr_assert_str_eq(k->u.s.p, keys[i]);
		cr_assert_eq(t->kind, PKL_CALL);
		if (!rebuild)
			rebuild = t->u.call.func;
		cr_assert_eq(t->u.call.func, rebuild, "BINGET 3 identity");
		cr_assert(pkl_is_global(rebuild, "torch._utils",
					"_rebuild_tensor_v2"));
		cr_assert_eq(pkl_len(args), 6);
		pid = item(args, 0);
		cr_assert_eq(pid->kind, PKL_PERSID);
		assert_str(item(pkl_call_args(pid), 0), "storage");
		cr_assert(pkl_is_global(item(pkl_call_args(pid), 1), "torch",
					i == 6 ? "LongStorage" :
						 "FloatStorage"));
		snprintf(key, sizeof(key), "%zu", i);
		cr_assert_str_eq(item(pkl_call_args(pid), 2)->u.s.p, key);
		assert_str(item(pkl_call_args(pid), 3), "cpu");
		cr_assert_eq(item(args, 4)->kind, PKL_BOOL);
		/* backward hooks: OrderedDict() via BINGET 0 */
		cr_assert_eq(item(args, 5)->u.call.func, r->u.call.func);
	}
	meta = dict_get(pkl_call_x(r)->state, "_metadata");
	cr_assert_not_null(meta);
	cr_assert_eq(pkl_call_x(meta)->ndict, 6);
	assert_int(dict_get(pkl_call_x(meta)->dict[5], "version"), 2);
	pkl_doc_free(doc);
	free(p);
	assert_no_leaks();
}

Test(pkl_parse, nests_a_million_lists_without_recursion)
{
	const size_t depth = 1000000;
	struct bytes b = { 0 };
	struct pkl_doc *doc;
	struct pkl_value *v;
	size_t k = 1;

	add_rep(&b, "]", depth);
	add_rep(&b, "a", depth - 1);
	add(&b, ".", 1);
	doc = parse_ok(b.p, b.n);
	for (v = doc->root; pkl_len(v); v = pkl_item(v, 0))
		k++;
	cr_assert_eq(k, depth);
	pkl_doc_free(doc);
	free(b.p);
	assert_no_leaks();
}

Test(pkl_parse, frees_deep_self_reference)
{
	const size_t depth = 200000;
	struct bytes b = { 0 };
	struct pkl_doc *doc;
	struct pkl_value *v;
	size_t k = 0, bad = 0;

	add_rep(&b, "]q\x01", 1);
	add_rep(&b, "]h\x01" "a", depth);
	add_rep(&b, "a", depth);
	add(&b, ".", 1);
	doc = parse_ok(b.p, b.n);
	for (v = item(doc->root, 0); pkl_len(v) == 2; v = pkl_item(v, 1)) {
		bad += pkl_item(v, 0) != doc->root;
		k++;
	}
	cr_assert_eq(k, depth - 1);
	cr_assert_eq(bad, 0);
	cr_assert_eq(pkl_item(v, 0), doc->root);
	pkl_doc_free(doc);
	free(b.p);
	assert_no_leaks();
}

Test(pkl_parse, sparse_memo_keys_keep_identity)
{
	const uint32_t count = 50000;
	struct bytes b = { 0 };
	unsigned char op[5];
	struct pkl_doc *doc;
	size_t bad = 0;

	add(&b, "(", 1);
	for (uint32_t i = 0; i < count; i++) {
		op[0] = 'K';
		op[1] = (unsigned char)i;
		add(&b, op, 2);
		op[0] = 'r';
		put_le32(op + 1, 0xfffffff0u - i * 65536u);
		add(&b, op, 5);
	}
	for (uint32_t i = 0; i < count; i++) {
		op[0] = 'j';
		put_le32(op + 1, 0xfffffff0u - i * 65536u);
		add(&b, op, 5);
	}
	add(&b, "t.", 2);
	doc = parse_ok(b.p, b.n);
	cr_assert_eq(pkl_len(doc->root), 2 * count);
	for (uint32_t i = 0; i < count; i++)
		bad += pkl_item(doc->root, i) != pkl_item(doc->root, count + i);
	cr_assert_eq(bad, 0);
	pkl_doc_free(doc);
	free(b.p);
	assert_no_leaks();
}
