/*
 * test_pkl_text.c - the protocol 0 text arguments (core/pickle/pkl_text.c)
 * against CPython: every case of the table pkl_text_cases.py wrote at this
 * run from CPython's C unpickler (PKL_TEXT_CASES) is parsed whole and
 * through a 16-byte window, and its value compared (kind, int64 or the
 * big int's bytes, a float's bits, a string's bytes and its UTF-8 mark,
 * which memo entry a GET found), or its refusal.  Then by hand: a GET
 * finds the node the PUT of the same key (as Python reads it) stored,
 * and what the refusals say.
 */
#include "test_pkl.h"

#include <inttypes.h>

#ifndef PKL_TEXT_CASES
#error "PKL_TEXT_CASES: the table pkl_text_cases.py writes"
#endif

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Hex @h to bytes (malloc'd; "-" is empty); NULL if it is not hex. */
static unsigned char *unhex(const char *h, size_t *n)
{
	size_t k = strcmp(h, "-") ? strlen(h) : 0;
	unsigned char *b = malloc(k / 2 + 1);

	cr_assert_not_null(b);
	*n = k / 2;
	for (size_t i = 0; i < *n; i++) {
		int hi = hexval(h[2 * i]), lo = hexval(h[2 * i + 1]);

		if (k % 2 || hi < 0 || lo < 0) {
			free(b);
			return NULL;
		}
		b[i] = (unsigned char)(hi << 4 | lo);
	}
	return b;
}

struct window {
	const unsigned char *p;
	size_t n;
};

static int window_read(void *ctx, unsigned char *buf, size_t n, uint64_t off,
		       struct diag *d)
{
	const struct window *w = ctx;

	(void)d;
	cr_assert_leq(off + n, w->n);
	memcpy(buf, w->p + off, n);
	return 0;
}

static bool same_bytes(const struct pkl_value *v, const unsigned char *b,
		       size_t n)
{
	return v->u.s.n == n && !memcmp(v->u.s.p, b, n) && !v->u.s.p[n];
}

/*
 * Does @doc (rc @rc) hold what CPython gave, @kind (the table's word)
 * with @arg and @flag?  NULL if so, else what differs.
 */
static const char *differs(int rc, const struct pkl_doc *doc,
			   const char *kind, const char *arg, const char *flag)
{
	const struct pkl_value *v;
	unsigned char *b = NULL;
	const char *why = NULL;
	size_t n = 0;

	if (!strcmp(kind, "error"))
		return rc == -EILSEQ ? NULL : "accepted, CPython refuses";
	if (rc)
		return "refused, CPython accepts";
	v = doc->root;
	if (strcmp(kind, "int") && strcmp(kind, "bool") &&
	    strcmp(kind, "memo")) {
		b = unhex(arg, &n);
		cr_assert_not_null(b, "bad hex in the table: %s", arg);
	}
	if (!strcmp(kind, "int")) {
		if (v->kind != PKL_INT)
			why = "not an int";
		else if (v->u.i != strtoll(arg, NULL, 10))
			why = "another int";
	} else if (!strcmp(kind, "bool")) {
		if (v->kind != PKL_BOOL)
			why = "not a bool";
		else if (v->u.i != atoi(arg))
			why = "the other bool";
	} else if (!strcmp(kind, "big")) {
		if (v->kind != PKL_BIGINT)
			why = "not a big int";
		else if (!same_bytes(v, b, n))
			why = "another big int";
	} else if (!strcmp(kind, "float")) {
		uint64_t want = 0, got;

		for (size_t i = 0; i < n; i++)
			want = want << 8 | b[i];
		memcpy(&got, &v->u.f, sizeof(got));
		if (v->kind != PKL_FLOAT)
			why = "not a float";
		else if (n != 8 || got != want)
			why = "another float";
	} else if (!strcmp(kind, "str")) {
		if (v->kind != PKL_STR)
			why = "not a str";
		else if (!same_bytes(v, b, n))
			why = "another str";
	} else if (!strcmp(kind, "string")) {
		if (v->kind != PKL_STRING)
			why = "not a STRING";
		else if (!same_bytes(v, b, n))
			why = "other bytes";
		else if (pkl_loads_as_str(v) != (atoi(flag) == 1))
			why = "another UTF-8 mark";
	} else if (!strcmp(kind, "memo")) {
		size_t k = pkl_len(v), i = (size_t)atoi(arg);

		if (v->kind != PKL_TUPLE || k < 2 || i >= k - 1)
			why = "not the tuple";
		else if (pkl_item(v, k - 1) != pkl_item(v, i))
			why = "GET found another node";
	} else {
		cr_assert_fail("unknown result '%s' in the table", kind);
	}
	free(b);
	return why;
}

/* One case both ways; 1 if ptfs differs from CPython (printed). */
static int check_case(const char *name, const char *hex, const char *kind,
		      const char *arg, const char *flag)
{
	struct pkl_doc *doc = NULL, *wdoc = NULL;
	struct diag d, wd;
	struct window w;
	struct pkl_src src = { window_read, &w, 16 };
	const char *why, *wwhy;
	unsigned char *p;
	size_t n;
	int rc, wrc;

	p = unhex(hex, &n);
	cr_assert_not_null(p, "%s: bad hex in the table", name);
	rc = parse_at(p, n, 0, &doc, &d);
	w = (struct window){ p, n };
	diag_init(&wd, "test.pkl");
	wrc = pkl_parse_src(&src, 0, n, 0, &wdoc, &wd);
	why = differs(rc, doc, kind, arg, flag);
	wwhy = differs(wrc, wdoc, kind, arg, flag);
	if (why || wwhy)
		fprintf(stderr, "%s: %s%s (CPython: %s%s%.40s%s%s; ptfs: %s)\n",
			name, why ? why : wwhy, why ? "" : " (windowed)",
			kind, arg ? " " : "", arg ? arg : "", flag ? " " : "",
			flag ? flag : "", rc ? d.msg : "parsed");
	if (rc != -EILSEQ || wrc != -EILSEQ)
		cr_assert(!!rc == !!wrc, "%s: whole %d, windowed %d", name,
			  rc, wrc);
	if (rc)
		cr_assert(d.msg[0], "%s: refused without a reason", name);
	pkl_doc_free(doc);
	pkl_doc_free(wdoc);
	free(p);
	return why || wwhy;
}

Test(pkl_text, matches_cpython_on_every_case)
{
	FILE *f = fopen(PKL_TEXT_CASES, "r");
	char *line = NULL;
	size_t cap = 0, cases = 0, bad = 0;

	cr_assert_not_null(f, "cannot read %s (the pkl_text_cases test "
			   "writes it)", PKL_TEXT_CASES);
	while (getline(&line, &cap, f) > 0) {
		char *save = NULL, *name, *hex, *kind, *arg, *flag;

		line[strcspn(line, "\n")] = 0;
		name = strtok_r(line, " ", &save);
		hex = strtok_r(NULL, " ", &save);
		kind = strtok_r(NULL, " ", &save);
		arg = strtok_r(NULL, " ", &save);
		flag = strtok_r(NULL, " ", &save);
		cr_assert(name && hex && kind, "bad line %zu", cases + 1);
		bad += check_case(name, hex, kind, arg, flag);
		cases++;
	}
	free(line);
	fclose(f);
	cr_assert_gt(cases, 1000, "only %zu cases", cases);
	cr_assert_eq(bad, 0, "%zu of %zu cases differ from CPython", bad,
		     cases);
	assert_no_leaks();
}

Test(pkl_text, get_finds_the_node_put_stored_under_the_same_key)
{
	struct pkl_doc *doc = parse_ok(LIT(
		"(]p10\n]p1\n"
		"g1_0\ng010\ng+10\ng \t10 \r\ng10\0junk\ng1\n"
		"]p0_0_7\ng7\nt."));
	struct pkl_value *t = doc->root;

	cr_assert_eq(pkl_len(t), 10);
	cr_assert_neq(item(t, 0), item(t, 1));
	for (size_t i = 2; i < 7; i++)
		cr_assert_eq(item(t, i), item(t, 0), "item %zu", i);
	cr_assert_eq(item(t, 7), item(t, 1));
	cr_assert_eq(item(t, 9), item(t, 8));
	pkl_doc_free(doc);
	assert_no_leaks();
}

Test(pkl_text, refusals_say_what_cpython_raises_for)
{
	struct bytes b = { 0 };

	expect_corrupt(LIT("Np-1\n."), 1, "negative PUT argument");
	expect_corrupt(LIT("Np-0x1\n."), 1, "PUT: not an integer");
	expect_corrupt(LIT("g-5\n."), 0, "GET of a negative memo key");
	expect_corrupt(LIT("I1__0\n."), 0, "INT: two underscores");
	expect_corrupt(LIT("I1_\n."), 0, "INT: underscore after the digits");
	expect_corrupt(LIT("L_1\n."), 0, "LONG: underscore before the digits");
	expect_corrupt(LIT("I09\n."), 0, "INT: nonzero decimal integer with");
	expect_corrupt(LIT("L010L\n."), 0, "LONG: nonzero decimal integer");
	expect_corrupt(LIT("F1e999\n."), 0, "FLOAT: float out of range");
	expect_corrupt(LIT("F 1.5\n."), 0, "FLOAT: not a float");
	expect_corrupt(LIT("Finfinit\n."), 0, "FLOAT: not a float");
	add(&b, "L", 1);
	add_rep(&b, "1", 4301);
	add(&b, "\n.", 2);
	expect_corrupt(b.p, b.n, 0, "LONG: more than 4300 digits");
	free(b.p);
	assert_no_leaks();
}

/* ptfs's own limits, where CPython goes on: both refusals */
Test(pkl_text, refuses_what_ptfs_cannot_hold)
{
	struct bytes b = { 0 };
	struct pkl_doc *doc;

	expect_corrupt(LIT("Np4294967296\n."), 1, "PUT memo key out of range");
	/* a hex LONG is not bound by the 4300 digits: PKL_MAX_LONG is */
	add(&b, "L0x", 3);
	add_rep(&b, "f", 2 * PKL_MAX_LONG - 2);
	add(&b, "\n.", 2);
	doc = parse_ok(b.p, b.n);
	cr_assert_eq(doc->root->kind, PKL_BIGINT);
	cr_assert_eq(doc->root->u.s.n, PKL_MAX_LONG);
	pkl_doc_free(doc);
	b.n = 0;
	add(&b, "L0x", 3);
	add_rep(&b, "f", 2 * PKL_MAX_LONG);
	add(&b, "\n.", 2);
	expect_corrupt(b.p, b.n, 0, "LONG: integer of more than PKL_MAX_LONG");
	free(b.p);
	assert_no_leaks();
}

Test(pkl_text, marks_the_strings_torch_load_makes_str)
{
	struct pkl_doc *doc = parse_ok(LIT(
		"(S'abc'\nS'\\xc3\\xa9'\nS'\\xff'\nS'\\xed\\xa0\\x80'\n"
		"U\x02\xc3\xa9U\x03\xed\xa0\x80T\x01\x00\x00\x00\x80"
		"X\x03\x00\x00\x00\xed\xa0\x80t."));
	struct pkl_value *t = doc->root;
	static const bool str[] = { 1, 1, 0, 0, 1, 0, 0, 1 };

	cr_assert_eq(pkl_len(t), 8);
	for (size_t i = 0; i < 8; i++)
		cr_assert_eq(pkl_loads_as_str(item(t, i)), str[i], "item %zu",
			     i);
	/* the bytes stay what the pickle holds */
	assert_bytes(item(t, 3), PKL_STRING, "\xed\xa0\x80", 3);
	pkl_doc_free(doc);
	assert_no_leaks();
}
