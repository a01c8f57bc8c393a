/*
 * test_pkl_malformed.c - the pickle parser on hostile input, in the style
 * of libarchive's *_malformed.c tests: every truncation, byte flips, huge
 * length fields, hostile memo keys, stack underflow for every opcode that
 * pops, nesting past the limits, and bad text arguments.  Each must fail
 * cleanly: -EILSEQ, the opcode's offset, nothing leaked, *out left NULL.
 */
#include "test_pkl.h"

Test(pkl_malformed, refuses_unknown_opcodes)
{
	static const unsigned char bad[] = "ADEHOWYZfkmnvwxyz{|~\x99\xff";

	expect_corrupt(LIT("K\x01\xff"), 2, "unknown pickle opcode 0xff");
	for (size_t i = 0; i + 1 < sizeof(bad); i++) {
		unsigned char p[2] = { 'N', bad[i] };
		char msg[40];

		snprintf(msg, sizeof(msg), "unknown pickle opcode 0x%02x",
			 bad[i]);
		expect_corrupt(p, 2, 1, msg);
	}
	assert_no_leaks();
}

Test(pkl_malformed, refuses_pickle_without_stop)
{
	expect_corrupt(LIT(""), 0, "pickle ends without STOP");
	expect_corrupt(LIT("\x80\x02K\x01"), 4, "pickle ends without STOP");
	expect_corrupt(LIT("."), 0, "stack underflow in STOP");
	expect_corrupt(LIT("K\x01(."), 3, "stack underflow in STOP");
	assert_no_leaks();
}

Test(pkl_malformed, fails_cleanly_at_every_truncation)
{
	uint64_t off;
	unsigned char *p;
	size_t n;

	for (int proto = 0; proto <= 5; proto++) {
		p = read_values(proto, &n);
		for (size_t k = 0; k < n; k++)
			expect_rejects(p, k);
		free(p);
	}
	p = p4_framed(&n);
	for (size_t k = 0; k < n; k++)
		expect_rejects(p, k);
	free(p);
	p = torch_data_pkl(&n, &off);
	for (size_t k = 0; p && k < n; k++)
		expect_rejects(p, k);
	free(p);
	assert_no_leaks();
}

/* Every byte replaced by each of a few values: fail or succeed, cleanly. */
static void flip_every_byte(const unsigned char *p, size_t n)
{
	static const unsigned char vals[] = {
		0x00, 0xff, 0x80, 0x7f, '(', '.', 'a', 'h', 't', 'b', 0x94,
	};
	unsigned char *c = dup_exact(p, n);

	for (size_t i = 0; i < n; i++) {
		unsigned char orig = c[i];

		for (size_t v = 0; v <= sizeof(vals); v++) {
			c[i] = v < sizeof(vals) ? vals[v] : orig ^ 0x01;
			parse_any(c, n);
		}
		c[i] = orig;
	}
	free(c);
}

Test(pkl_malformed, survives_byte_flips)
{
	uint64_t off;
	unsigned char *p;
	size_t n;

	p = read_values(0, &n);
	flip_every_byte(p, n);
	free(p);
	p = read_values(4, &n);
	flip_every_byte(p, n);
	free(p);
	p = p4_framed(&n);
	flip_every_byte(p, n);
	free(p);
	p = torch_data_pkl(&n, &off);
	if (p)
		flip_every_byte(p, n);
	free(p);
	assert_no_leaks();
}

Test(pkl_malformed, refuses_huge_lengths)
{
	expect_corrupt(LIT("X\xff\xff\xff\xff"), 0,
		       "BINUNICODE length 4294967295 past end of pickle");
	expect_corrupt(LIT("B\xff\xff\xff\xff"), 0,
		       "BINBYTES length 4294967295 past end of pickle");
	expect_corrupt(LIT("\x8e\xff\xff\xff\xff\xff\xff\xff\xff"), 0,
		       "BINBYTES8 length 18446744073709551615 past end");
	expect_corrupt(LIT("\x8d\xff\xff\xff\xff\xff\xff\xff\xff"), 0,
		       "BINUNICODE8 length 18446744073709551615 past end");
	expect_corrupt(LIT("\x96\xff\xff\xff\xff\xff\xff\xff\xff"), 0,
		       "BYTEARRAY8 length 18446744073709551615 past end");
	expect_corrupt(LIT("\x8b\xff\xff\xff\x7f"), 0,
		       "LONG4 length 2147483647 past end of pickle");
	expect_corrupt(LIT("\x95\xff\xff\xff\xff\xff\xff\xff\xff"), 0,
		       "FRAME length 18446744073709551615 past end");
	expect_corrupt(LIT("\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00N."),
		       2, "FRAME length 16 past end of pickle");
	expect_corrupt(LIT("T\xff\xff\xff\x7f"), 0,
		       "BINSTRING length 2147483647 past end of pickle");
	expect_corrupt(LIT("N\x8c\xff" "ab"), 1,
		       "SHORT_BINUNICODE length 255 past end of pickle");
	expect_corrupt(LIT("\x8a\xff"), 0, "LONG1 length 255 past end");
	expect_corrupt(LIT("U\x05" "ab"), 0, "SHORT_BINSTRING length 5 past");
	expect_corrupt(LIT("C\x05"), 0, "SHORT_BINBYTES length 5 past end");
	expect_corrupt(LIT("T\xff\xff\xff\xff"), 0,
		       "BINSTRING length -1 is negative");
	expect_corrupt(LIT("\x8b\xfe\xff\xff\xff"), 0,
		       "LONG4 length -2 is negative");
	assert_no_leaks();
}

Test(pkl_malformed, refuses_long_past_limits)
{
	struct bytes b = { 0 };
	unsigned char hdr[5] = { 0x8b };
	struct pkl_doc *doc;

	put_le32(hdr + 1, PKL_MAX_LONG + 1);
	add(&b, hdr, 5);
	add_rep(&b, "\x01", PKL_MAX_LONG + 1);
	add(&b, ".", 1);
	expect_corrupt(b.p, b.n, 0, "over PKL_MAX_LONG");
	b.n = 0;
	add(&b, "L", 1);
	add_rep(&b, "7", 4301);
	add(&b, "\n.", 2);
	expect_corrupt(b.p, b.n, 0, "LONG: more than 4300 digits");
	b.n = 0;
	add(&b, "L-", 2);
	add_rep(&b, "9", 4300);
	add(&b, "L\n.", 3);
	doc = parse_ok(b.p, b.n);
	cr_assert_eq(doc->root->kind, PKL_BIGINT);
	cr_assert_eq(doc->root->u.s.n, 1786);
	cr_assert_eq((unsigned char)doc->root->u.s.p[0], 1);
	pkl_doc_free(doc);
	free(b.p);
	assert_no_leaks();
}

Test(pkl_malformed, stores_memo_key_0xffffffff_in_little_memory)
{
	struct pkl_doc *doc = parse_ok(LIT(
		"Nr\xff\xff\xff\xffj\xff\xff\xff\xff\x86."));

	cr_assert_eq(item(doc->root, 0), item(doc->root, 1));
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_malformed, refuses_get_of_unset_memo)
{
	expect_corrupt(LIT("Nh\x05."), 1, "BINGET of unset memo key 5");
	expect_corrupt(LIT("j\x00\x00\x00\x80."), 0,
		       "LONG_BINGET of unset memo key 2147483648");
	expect_corrupt(LIT("g7\n."), 0, "GET of unset memo key 7");
	expect_corrupt(LIT("Nq\x01h\x02."), 3, "BINGET of unset memo key 2");
	expect_corrupt(LIT("Nr\xff\xff\xff\xffj\xfe\xff\xff\xff."), 6,
		       "unset memo key 4294967294");
	expect_corrupt(LIT("g-1\n."), 0, "GET of a negative memo key");
	expect_corrupt(LIT("Np4294967296\n."), 1, "PUT memo key out of range");
	expect_corrupt(LIT("gx\n."), 0, "GET: not an integer");
	assert_no_leaks();
}

Test(pkl_malformed, refuses_marks_nested_past_limit)
{
	struct bytes b = { 0 };

	add_rep(&b, "(", 1000000);
	add(&b, ".", 1);
	expect_corrupt(b.p, b.n, PKL_MAX_MARKS, "PKL_MAX_MARKS (4096)");
	free(b.p);
	assert_no_leaks();
}

Test(pkl_malformed, refuses_stack_past_limit)
{
	struct bytes b = { 0 };

	add(&b, "N", 1);
	add_rep(&b, "2", PKL_MAX_STACK);
	add(&b, ".", 1);
	expect_corrupt(b.p, b.n, PKL_MAX_STACK, "PKL_MAX_STACK");
	free(b.p);
	assert_no_leaks();
}

/* one value memoized over and over: PKL_MAX_MEMO plus its one node */
Test(pkl_malformed, refuses_memo_past_limit)
{
	struct bytes b = { 0 };

	add(&b, "N", 1);
	add_rep(&b, "\x94", PKL_MAX_MEMO + 2);
	add(&b, ".", 1);
	expect_corrupt(b.p, b.n, 2 + PKL_MAX_MEMO, "PKL_MAX_MEMO");
	free(b.p);
	assert_no_leaks();
}

/*
 * torch memoizes about 8 entries per tensor: 530,000 tensors need more
 * than PKL_MAX_MEMO, and each entry comes with a value of its own.
 */
Test(pkl_malformed, memo_grows_with_the_values)
{
	struct bytes b = { 0 };
	struct pkl_doc *doc = NULL;
	struct diag d;

	diag_init(&d, "test");
	add_rep(&b, "]\x94" "0", PKL_MAX_MEMO + 1000);
	add(&b, "N.", 2);
	cr_assert_eq(pkl_parse(b.p, b.n, 0, &doc, &d), 0, "%s", d.msg);
	cr_assert_eq(doc->root->kind, PKL_NONE);
	pkl_doc_free(doc);
	free(b.p);
	assert_no_leaks();
}

/* Each opcode that pops, with one value too few (and no reach past MARK) */
Test(pkl_malformed, refuses_stack_underflow_for_every_popping_opcode)
{
	static const struct {
		const char *op;
		size_t need;
		const char *name;
	} ops[] = {
		{ ".", 1, "STOP" },		{ "0", 1, "POP" },
		{ "2", 1, "DUP" },		{ "R", 2, "REDUCE" },
		{ "\x81", 2, "NEWOBJ" },	{ "\x92", 3, "NEWOBJ_EX" },
		{ "b", 2, "BUILD" },		{ "a", 2, "APPEND" },
		{ "s", 3, "SETITEM" },		{ "Q", 1, "BINPERSID" },
		{ "\x93", 2, "STACK_GLOBAL" },	{ "\x85", 1, "TUPLE1" },
		{ "\x86", 2, "TUPLE2" },	{ "\x87", 3, "TUPLE3" },
		{ "q\x01", 1, "BINPUT" },	{ "p1\n", 1, "PUT" },
		{ "r\x01\x01\x01\x01", 1, "LONG_BINPUT" },
		{ "\x94", 1, "MEMOIZE" },
		{ "\x98", 1, "READONLY_BUFFER" },
		{ "(e", 1, "APPENDS" },		{ "(u", 1, "SETITEMS" },
		{ "(\x90", 1, "ADDITEMS" },
	};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct bytes b = { 0 };
		char msg[64];
		size_t at;

		snprintf(msg, sizeof(msg), "stack underflow in %s",
			 ops[i].name);
		/* one value too few */
		add_rep(&b, "N", ops[i].need - 1);
		at = b.n + (ops[i].op[0] == '(' ? 1 : 0);
		add(&b, ops[i].op, strlen(ops[i].op));
		add(&b, ".", 1);
		expect_corrupt(b.p, b.n, at, msg);
		/* enough values, but below a MARK */
		if (ops[i].op[0] != '0') {
			b.n = 0;
			add_rep(&b, "N", ops[i].need);
			add(&b, "(", 1);
			add_rep(&b, "N", ops[i].need - 1);
			at = b.n + (ops[i].op[0] == '(' ? 1 : 0);
			add(&b, ops[i].op, strlen(ops[i].op));
			add(&b, ".", 1);
			expect_corrupt(b.p, b.n, at, msg);
		}
		free(b.p);
	}
	assert_no_leaks();
}

Test(pkl_malformed, refuses_collecting_without_mark)
{
	static const char *const ops[] = {
		"t", "l", "d", "e", "u", "\x90", "\x91", "o", "1",
		"imod\nCls\n",
	};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct bytes b = { 0 };

		add(&b, "N", 1);
		add(&b, ops[i], strlen(ops[i]));
		add(&b, ".", 1);
		expect_corrupt(b.p, b.n, 1, "without a MARK");
		free(b.p);
	}
	assert_no_leaks();
}

Test(pkl_malformed, refuses_mutating_the_wrong_kind)
{
	expect_corrupt(LIT("]Nb."), 2, "BUILD on a list");
	expect_corrupt(LIT("cmod\nCls\nNb."), 10, "BUILD on a global");
	expect_corrupt(LIT(")K\x01" "a."), 3, "APPEND on a tuple");
	expect_corrupt(LIT(")(K\x01" "e."), 4, "APPENDS on a tuple");
	expect_corrupt(LIT("}K\x01" "a."), 3, "APPEND on a dict");
	expect_corrupt(LIT("\x8fK\x01" "a."), 3, "APPEND on a set");
	expect_corrupt(LIT("]K\x01K\x02s."), 5, "SETITEM on a list");
	expect_corrupt(LIT("](K\x01K\x02u."), 6, "SETITEMS on a list");
	expect_corrupt(LIT("](K\x01\x90."), 4, "ADDITEMS on a list");
	expect_corrupt(LIT("(\x91(K\x01\x90."), 5, "ADDITEMS on a frozenset");
	expect_corrupt(LIT("(K\x01" "d."), 3, "DICT with an odd number (1)");
	expect_corrupt(LIT("}(K\x01u."), 4, "SETITEMS with an odd number");
	assert_no_leaks();
}

Test(pkl_malformed, refuses_bad_calls_and_globals)
{
	expect_corrupt(LIT("cmod\nfn\nNR."), 9,
		       "REDUCE arguments are a None, not a tuple");
	expect_corrupt(LIT("cmod\nCls\n]\x81."), 10,
		       "NEWOBJ arguments are a list, not a tuple");
	expect_corrupt(LIT("(o."), 1, "OBJ without a class");
	expect_corrupt(LIT("K\x01K\x02\x93."), 4,
		       "STACK_GLOBAL needs two str, not int and int");
	expect_corrupt(LIT("cmo\x00" "d\nfn\n."), 0,
		       "GLOBAL module or name is not NUL-free UTF-8");
	expect_corrupt(LIT("\x8c\x01" "a\x8c\x02" "b\x00\x93."), 7,
		       "STACK_GLOBAL module or name is not NUL-free UTF-8");
	expect_corrupt(LIT("cmod\nfn"), 0,
		       "GLOBAL argument has no end of line");
	expect_corrupt(LIT("P\xc3\xa9\n."), 0, "PERSID id is not ASCII");
	expect_fail(LIT("\x80\x06N."), -ENOTSUP, 0, "pickle protocol 6");
	expect_corrupt(LIT("\x82\x00."), 0, "EXT1 code 0 is not positive");
	expect_corrupt(LIT("\x84\xff\xff\xff\xff."), 0,
		       "EXT4 code -1 is not positive");
	assert_no_leaks();
}

Test(pkl_malformed, refuses_bad_unicode)
{
	struct pkl_doc *doc;

	expect_corrupt(LIT("X\x01\x00\x00\x00\xff."), 0,
		       "BINUNICODE is not UTF-8");
	expect_corrupt(LIT("\x8c\x02\xc0\x80."), 0,
		       "SHORT_BINUNICODE is not UTF-8");
	expect_corrupt(LIT("\x8c\x04\xf4\x90\x80\x80."), 0, "is not UTF-8");
	expect_corrupt(LIT("\x8c\x02\xe2\x82."), 0, "is not UTF-8");
	expect_corrupt(LIT("\x8c\x03\xe0\x80\x80."), 0, "is not UTF-8");
	expect_corrupt(LIT("\x8c\x05\xf8\x88\x80\x80\x80."), 0,
		       "is not UTF-8");
	/* after a run of ASCII read 8 bytes at a time */
	expect_corrupt(LIT("\x8c\x0bweights.\xe2\x28\xa1."), 0,
		       "is not UTF-8");
	doc = parse_ok(LIT("\x8c\x0cweights.\xf4\x8f\xbf\xbf."));
	assert_str(doc->root, "weights.\xf4\x8f\xbf\xbf");
	pkl_doc_free(doc);
	/* Python pickles lone surrogates with "surrogatepass" */
	doc = parse_ok(LIT("\x8c\x03\xed\xa0\x80."));
	assert_str(doc->root, "\xed\xa0\x80");
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_malformed, refuses_bad_text_arguments)
{
	expect_corrupt(LIT("Iabc\n."), 0, "INT: not an integer");
	expect_corrupt(LIT("I\n."), 0, "INT: empty argument");
	expect_corrupt(LIT("I1L\n."), 0, "INT: not an integer");
	expect_corrupt(LIT("Lx\n."), 0, "LONG: not an integer");
	expect_corrupt(LIT("F\n."), 0, "FLOAT: empty argument");
	expect_corrupt(LIT("F1.5x\n."), 0, "FLOAT: not a float");
	expect_corrupt(LIT("S'abc\n."), 0, "STRING argument is not quoted");
	expect_corrupt(LIT("Sabc\n."), 0, "STRING argument is not quoted");
	expect_corrupt(LIT("S'\n."), 0, "STRING argument is not quoted");
	expect_corrupt(LIT("S'\\x4'\n."), 0, "bad \\x escape");
	expect_corrupt(LIT("S'ab\\'\n."), 0, "trailing backslash");
	expect_corrupt(LIT("V\\u12\n."), 0, "bad \\u escape");
	expect_corrupt(LIT("V\\u12x4\n."), 0, "bad \\u escape");
	expect_corrupt(LIT("V\\U00110000\n."), 0, "past U+10FFFF");
	expect_corrupt(LIT("Vabc"), 0, "UNICODE argument has no end of line");
	expect_corrupt(LIT("N0I5"), 2, "INT argument has no end of line");
	assert_no_leaks();
}

Test(pkl_malformed, refuses_truncated_fixed_arguments)
{
	expect_corrupt(LIT("J\x01\x02"), 0, "BININT argument past end");
	expect_corrupt(LIT("NG\x00"), 1, "BINFLOAT argument past end");
	expect_corrupt(LIT("\x80"), 0, "PROTO argument past end");
	expect_corrupt(LIT("Nh"), 1, "BINGET argument past end");
	expect_corrupt(LIT("Nr\x00"), 1, "LONG_BINPUT argument past end");
	expect_corrupt(LIT("\x95\x00"), 0, "FRAME argument past end");
	expect_corrupt(LIT("X\x00"), 0, "BINUNICODE argument past end");
	expect_corrupt(LIT("\x83\x01"), 0, "EXT2 argument past end");
	assert_no_leaks();
}
