/*
 * test_pkl.h - helpers shared by the pickle parser's tests (test_pkl.c for
 * valid input, test_pkl_malformed.c for hostile input): parsing exact-size
 * heap copies (so ASan sees every overread), expecting a failure at an
 * offset, building generated inputs, and reading the Python-made and torch
 * fixture pickles.
 */
#ifndef PT_TESTS_TEST_PKL_H
#define PT_TESTS_TEST_PKL_H

#include "test_util.h"

#include "pickle/pkl.h"
#include "diag/diag.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A string literal as (bytes, length), without its NUL. */
#define LIT(s) (const unsigned char *)(s), sizeof(s) - 1

/* An exact-size heap copy, so ASan sees any read past the end. */
static inline unsigned char *dup_exact(const unsigned char *p, size_t n)
{
	unsigned char *c = malloc(n ? n : 1);

	cr_assert_not_null(c);
	if (n)
		memcpy(c, p, n);
	return c;
}

static inline int parse_at(const unsigned char *p, size_t n, uint64_t base,
			   struct pkl_doc **doc, struct diag *d)
{
	unsigned char *c = dup_exact(p, n);
	int rc;

	diag_init(d, "test.pkl");
	rc = pkl_parse(c, n, base, doc, d);
	free(c);
	return rc;
}

static inline struct pkl_doc *parse_ok(const unsigned char *p, size_t n)
{
	struct pkl_doc *doc = NULL;
	struct diag d;
	char line[320];
	int rc = parse_at(p, n, 0, &doc, &d);

	cr_assert_eq(rc, 0, "parse failed: %s", diag_line(&d, line,
							  sizeof(line)));
	cr_assert_not_null(doc);
	cr_assert_not_null(doc->root);
	return doc;
}

/* Parse must fail with -@err at @off with a message containing @msg. */
static inline void expect_fail(const unsigned char *p, size_t n, int err,
			       uint64_t off, const char *msg)
{
	struct pkl_doc sentinel, *doc = &sentinel;
	struct diag d;
	int rc = parse_at(p, n, 0x1000, &doc, &d);

	cr_assert_eq(rc, err, "rc %d, want %d (%s)", rc, err, d.msg);
	cr_assert_null(doc);
	cr_assert_eq(d.off, 0x1000 + off, "offset 0x%llx, want 0x%llx (%s)",
		     (unsigned long long)d.off,
		     (unsigned long long)(0x1000 + off), d.msg);
	cr_assert_not_null(strstr(d.msg, msg), "message '%s' lacks '%s'",
			    d.msg, msg);
}

static inline void expect_corrupt(const unsigned char *p, size_t n,
				  uint64_t off, const char *msg)
{
	expect_fail(p, n, -EILSEQ, off, msg);
}

/* Parse must fail as corrupt input, whatever the message. */
static inline void expect_rejects(const unsigned char *p, size_t n)
{
	struct pkl_doc sentinel, *doc = &sentinel;
	struct diag d;
	int rc = parse_at(p, n, 0, &doc, &d);

	cr_assert_eq(rc, -EILSEQ, "length %zu: rc %d", n, rc);
	cr_assert_null(doc);
	cr_assert(d.msg[0]);
}

/* Parse must fail or succeed cleanly (no crash, no leak, sane result). */
static inline void parse_any(const unsigned char *p, size_t n)
{
	struct pkl_doc sentinel, *doc = &sentinel;
	struct diag d;
	int rc = parse_at(p, n, 0, &doc, &d);

	if (rc == 0) {
		cr_assert_not_null(doc);
		cr_assert_not_null(doc->root);
		pkl_doc_free(doc);
	} else {
		cr_assert(rc == -EILSEQ || rc == -ENOTSUP, "rc %d", rc);
		cr_assert_null(doc);
		cr_assert(d.msg[0]);
	}
}

static inline unsigned char *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *p;
	long sz;

	if (!f)
		return NULL;
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	sz = ftell(f);
	cr_assert_geq(sz, 0);
	rewind(f);
	p = malloc(sz ? (size_t)sz : 1);
	cr_assert_not_null(p);
	cr_assert_eq(fread(p, 1, (size_t)sz, f), (size_t)sz);
	fclose(f);
	*n = (size_t)sz;
	return p;
}

/* @s (no NUL inside) @times over. */
static inline void add_rep(struct bytes *b, const char *s, size_t times)
{
	size_t k = strlen(s);

	for (size_t i = 0; i < times; i++)
		add(b, s, k);
}

static inline void assert_int(const struct pkl_value *v, int64_t i)
{
	cr_assert_not_null(v);
	cr_assert_eq(v->kind, PKL_INT, "kind %s, want int",
		     pkl_kind_name(v->kind));
	cr_assert_eq(v->u.i, i, "%lld, want %lld", (long long)v->u.i,
		     (long long)i);
}

static inline void assert_bytes(const struct pkl_value *v, int kind,
				const char *s, size_t n)
{
	cr_assert_not_null(v);
	cr_assert_eq(v->kind, kind, "kind %s, want %s",
		     pkl_kind_name(v->kind), pkl_kind_name(kind));
	cr_assert_eq(v->u.s.n, n, "length %zu, want %zu", v->u.s.n, n);
	cr_assert_eq(memcmp(v->u.s.p, s, n), 0);
	cr_assert_eq(v->u.s.p[n], 0, "not NUL-terminated");
}

#define assert_str(v, s) assert_bytes((v), PKL_STR, (s), sizeof(s) - 1)

/* The value of str key @key in dict @d (the last pair wins), or NULL. */
static inline struct pkl_value *dict_get(const struct pkl_value *d,
					 const char *key)
{
	struct pkl_value *found = NULL;

	cr_assert_eq(d->kind, PKL_DICT);
	for (size_t i = 0; i + 1 < d->u.items.n; i += 2) {
		const struct pkl_value *k = d->u.items.v[i];

		if (k->kind == PKL_STR && strcmp(k->u.s.p, key) == 0)
			found = d->u.items.v[i + 1];
	}
	return found;
}

static inline struct pkl_value *item(const struct pkl_value *v, size_t i)
{
	struct pkl_value *it = pkl_item(v, i);

	cr_assert_not_null(it, "no item %zu in a %s", i,
			   v ? pkl_kind_name(v->kind) : "NULL");
	return it;
}

/* A protocol 4 pickle in one FRAME, with STACK_GLOBAL and MEMOIZE. */
static inline unsigned char *p4_framed(size_t *n)
{
	static const unsigned char p4[] =
		"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00"
		"(\x8c\x03mod\x94\x8c\x03" "Cls\x94\x93\x94"
		"h\x02)}\x8c\x01k\x94K\x07s\x92"
		"\x8d\x02\x00\x00\x00\x00\x00\x00\x00hi"
		"\x8e\x01\x00\x00\x00\x00\x00\x00\x00z"
		"\x8f(K\x01K\x02\x90(K\x03\x91"
		"h\x00t.";
	unsigned char *c = dup_exact(p4, sizeof(p4) - 1);

	*n = sizeof(p4) - 1;
	put_le64(c + 3, *n - 11);
	return c;
}

static inline unsigned char *read_values(int proto, size_t *n)
{
	char path[512];
	unsigned char *p;

	snprintf(path, sizeof(path), "%s/values_p%d.pkl", PT_TEST_DATA,
		 proto);
	p = read_file(path, n);
	cr_assert_not_null(p, "cannot read %s", path);
	return p;
}

/*
 * The data.pkl of the torch 1.13 state_dict fixture: a stored zip record
 * whose bytes start after the local header and end where the data
 * descriptor begins.  *@off is its offset in the file.
 */
static inline unsigned char *torch_data_pkl(size_t *n, uint64_t *off)
{
	char path[512];
	unsigned char *f, *p = NULL;
	size_t fn;

	snprintf(path, sizeof(path), "%s/fixtures/torch-1.13/state_dict.pt",
		 PT_TESTENV_DIR);
	f = read_file(path, &fn);
	if (!f)
		return NULL;
	for (size_t i = 0; i + 30 < fn; i++) {
		size_t nl, xl, start;
		unsigned char *end;

		if (memcmp(f + i, "PK\x03\x04", 4))
			continue;
		nl = f[i + 26] | f[i + 27] << 8;
		xl = f[i + 28] | f[i + 29] << 8;
		if (nl < 8 || memcmp(f + i + 30 + nl - 8, "data.pkl", 8))
			continue;
		start = i + 30 + nl + xl;
		for (end = f + start; end + 4 <= f + fn; end++)
			if (!memcmp(end, "PK\x07\x08", 4))
				break;
		cr_assert(end + 4 <= f + fn, "no data descriptor");
		*n = (size_t)(end - (f + start));
		*off = start;
		p = dup_exact(f + start, *n);
		break;
	}
	free(f);
	cr_assert_not_null(p, "no data.pkl in %s", path);
	return p;
}

#endif
