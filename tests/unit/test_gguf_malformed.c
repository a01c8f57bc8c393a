/*
 * test_gguf_malformed.c - hostile GGUF headers (core/fmt/gguf), built here
 * byte by byte: what gguf_parse.c must refuse with one line, and what the
 * key/value text (gguf_kv.c) must keep bounded and JSON.  The fuzz target
 * tests/fuzz/fuzz_gguf.c has the seeds; the cases it found are here.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "diag/diag.h"
#include "fmt/gguf/gguf.h"
#include "test_util.h"

/* A GGUF file being built: little-endian, version 3. */
struct gb {
	struct bytes b;
	uint64_t nkv, nt;
};

static void u32(struct gb *b, uint32_t v)
{
	unsigned char e[4];

	put_le32(e, v);
	add(&b->b, e, 4);
}

static void u64(struct gb *b, uint64_t v)
{
	unsigned char e[8];

	put_le64(e, v);
	add(&b->b, e, 8);
}

static void str(struct gb *b, const void *s, size_t n)
{
	u64(b, n);
	add(&b->b, s, n);
}

/* A key and its type: the value follows. */
static void key(struct gb *b, const char *k, uint32_t type)
{
	str(b, k, strlen(k));
	u32(b, type);
	b->nkv++;
}

static void begin(struct gb *b)
{
	memset(b, 0, sizeof(*b));
	add(&b->b, "GGUF", 4);
	u32(b, 3);
	u64(b, 0);	/* tensors and key/values: set by finish() */
	u64(b, 0);
}

/* The file, opened: 0 or the refusal (its message in @d). */
static int finish(struct gb *b, struct ckpt **c, struct diag *d)
{
	const char *path;

	put_le64(b->b.p + 8, b->nt);
	put_le64(b->b.p + 16, b->nkv);
	path = write_tmp(b->b.p, b->b.n);
	free(b->b.p);
	diag_init(d, path);
	return ckpt_open(path, c, d);
}

static const struct ckpt_meta *meta(const struct ckpt *c, const char *k)
{
	for (uint32_t i = 0; i < c->nmeta; i++)
		if (!strcmp(c->meta[i].key, k))
			return &c->meta[i];
	cr_assert_fail("no key %s", k);
	return NULL;
}

static bool ends_with(const struct ckpt_meta *m, const char *s)
{
	size_t n = strlen(s);

	return m->vlen >= n && !memcmp(m->val + m->vlen - n, s, n);
}

Test(gguf_malformed, a_string_of_escapes_stays_under_the_value_cap)
{
	size_t n = 4u << 20;	/* 24 MiB as \u0001s: over 16 MiB */
	char *s = malloc(n);
	struct ckpt *c;
	struct diag d;
	struct gb b;

	memset(s, 1, n);
	begin(&b);
	key(&b, "t", 9);
	u32(&b, 8);
	u64(&b, 2);
	str(&b, s, n);
	str(&b, "x", 1);
	free(s);
	cr_assert_eq(finish(&b, &c, &d), 0, "%s", d.msg);
	/* the cap, and the tail that says what was cut */
	cr_assert_leq(meta(c, "t")->vlen, GGUF_TEXT_MAX + 64);
	cr_assert(ends_with(meta(c, "t"), "...\", \"... (1 more)\"]"));
	ckpt_close(c);
	assert_no_leaks();
}

Test(gguf_malformed, all_values_stay_under_the_meta_cap)
{
	size_t n = 3u << 20;	/* "false, " each: 21 MiB of text a key */
	unsigned char *v = calloc(n, 1);
	size_t total = 0;
	struct ckpt *c;
	struct diag d;
	struct gb b;

	begin(&b);
	for (int k = 0; k < 8; k++) {
		char name[8];

		snprintf(name, sizeof(name), "b%d", k);
		key(&b, name, 9);
		u32(&b, 7);
		u64(&b, n);
		add(&b.b, v, n);
	}
	free(v);
	cr_assert_eq(finish(&b, &c, &d), 0, "%s", d.msg);
	for (uint32_t i = 0; i < c->nmeta; i++)
		total += c->meta[i].vlen;
	cr_assert_leq(total, GGUF_META_MAX + 8 * 64, "%zu bytes", total);
	cr_assert_str_eq(meta(c, "b7")->val, "[\"... (3145728 more)\"]");
	ckpt_close(c);
	assert_no_leaks();
}

Test(gguf_malformed, strings_that_are_not_utf8_stay_json)
{
	struct ckpt *c;
	struct diag d;
	struct gb b;

	begin(&b);
	key(&b, "t", 9);
	u32(&b, 8);
	u64(&b, 3);
	str(&b, "\xff", 1);
	str(&b, "\xed\xa0\x80", 3);	/* a surrogate */
	str(&b, "\xc3\xa9\n", 3);
	cr_assert_eq(finish(&b, &c, &d), 0, "%s", d.msg);
	cr_assert_str_eq(meta(c, "t")->val, "[\"\\u00ff\", "
			 "\"\\u00ed\\u00a0\\u0080\", \"\xc3\xa9\\n\"]");
	ckpt_close(c);
	assert_no_leaks();
}
