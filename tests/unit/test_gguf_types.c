/*
 * test_gguf_types.c - the ggml tensor types of core/fmt/gguf without
 * gguf-py: the table against constants.py's GGML_QUANT_SIZES, lookups,
 * byte swapping, and every codec bit for bit against the vectors
 * tests/data/gguf_vectors.bin holds from gguf-py's quantize / dequantize
 * (made by tests/unit/gguf_vectors.py, whose header gives the layout).
 */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt/gguf/gguf_types.h"
#include "test_util.h"
#include "util/le.h"

#define VECTORS PT_TEST_DATA "/gguf_vectors.bin"

/* The types ptfs decodes and encodes: what the vectors must cover. */
static const uint32_t dequant_ids[] = {
	0, 1, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 30,
};
static const uint32_t quant_ids[] = { 0, 1, 8, 30 };

struct vectors {
	unsigned char *buf;
	size_t len;
	uint32_t ntable, nrec;
};

static void load(struct vectors *v)
{
	FILE *f = fopen(VECTORS, "rb");
	long n;

	cr_assert(f, "%s: cannot open", VECTORS);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	cr_assert_gt(n, 16);
	rewind(f);
	v->len = (size_t)n;
	v->buf = malloc(v->len);
	cr_assert(v->buf);
	cr_assert_eq(fread(v->buf, 1, v->len, f), v->len);
	fclose(f);
	cr_assert(!memcmp(v->buf, "PTGGUFV1", 8), "bad magic");
	v->ntable = le32(v->buf + 8);
	v->nrec = le32(v->buf + 12);
}

/* The first element where @got's bits differ from the f32s at @want, or
 * -1 when all @n agree. */
static long first_diff(const float *got, const unsigned char *want,
		       uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (f32_bits(got[i]) != le32(want + 4 * i))
			return (long)i;
	return -1;
}

static bool in(const uint32_t *ids, size_t n, uint32_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

#define IN(list, id) in(list, sizeof(list) / sizeof(list[0]), id)

Test(gguf_types, table_matches_gguf_py)
{
	struct vectors v;
	unsigned known = 0;

	load(&v);
	cr_assert_leq(16 + (uint64_t)v.ntable * 20, v.len);
	for (uint32_t k = 0; k < v.ntable; k++) {
		const unsigned char *e = v.buf + 16 + 20 * k;
		const struct gguf_type *t = gguf_type_by_id(le32(e));
		char name[9] = { 0 };

		memcpy(name, e + 12, 8);
		cr_assert(t, "%s (%u) missing", name, le32(e));
		cr_expect_str_eq(t->name, name);
		cr_expect_eq(t->block, le32(e + 4), "%s block", name);
		cr_expect_eq(t->bytes, le32(e + 8), "%s bytes", name);
	}
	while (gguf_type_at(known))
		known++;
	cr_expect_eq(known, v.ntable, "%u types, gguf-py has %u", known,
		     v.ntable);
	free(v.buf);
	assert_no_leaks();
}

Test(gguf_types, lookups)
{
	const struct gguf_type *t;
	const uint32_t unknown[] = { 4, 5, 31, 32, 33, 36, 37, 38, 43, 1000,
				     UINT32_MAX };

	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
		cr_expect_null(gguf_type_by_id(unknown[i]), "id %u",
			       unknown[i]);
	t = gguf_type_by_name("q8_0");
	cr_assert(t);
	cr_expect_eq(t->id, 8);
	cr_expect_eq(t, gguf_type_by_name("Q8_0"));
	cr_expect_eq(gguf_type_by_name("bf16"), gguf_type_by_id(30));
	cr_expect_eq(gguf_type_by_name("IQ2_xxs"), gguf_type_by_id(16));
	cr_expect_null(gguf_type_by_name("Q4_2"));
	cr_expect_null(gguf_type_by_name(""));
	cr_expect_null(gguf_type_at(1000));
	cr_expect_str_eq(gguf_type_by_id(0)->torch, "float32");
	cr_expect_str_eq(gguf_type_by_id(1)->torch, "float16");
	cr_expect_str_eq(gguf_type_by_id(30)->torch, "bfloat16");
	cr_expect_str_eq(gguf_type_by_id(28)->torch, "float64");
	cr_expect_str_eq(gguf_type_by_id(27)->torch, "int64");
	for (unsigned k = 0; (t = gguf_type_at(k)); k++) {
		cr_expect_eq(gguf_type_by_id(t->id), t, "%s", t->name);
		cr_expect_eq(gguf_type_by_name(t->name), t, "%s", t->name);
		cr_expect_eq(t->block == 1, t->torch != NULL, "%s", t->name);
		cr_expect_eq(t->dequant != NULL, IN(dequant_ids, t->id), "%s",
			     t->name);
		cr_expect_eq(t->quant != NULL, IN(quant_ids, t->id), "%s",
			     t->name);
	}
}

Test(gguf_types, swap_plain_elements_only)
{
	unsigned char f32[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	unsigned char bf16[4] = { 1, 2, 3, 4 };
	unsigned char q8[34], i8[2] = { 1, 2 };
	const unsigned char f32w[8] = { 4, 3, 2, 1, 8, 7, 6, 5 };
	const unsigned char bf16w[4] = { 2, 1, 4, 3 };

	for (int i = 0; i < 34; i++)
		q8[i] = (unsigned char)i;
	gguf_swap(gguf_type_by_id(0), f32, 2);
	gguf_swap(gguf_type_by_id(30), bf16, 2);
	gguf_swap(gguf_type_by_id(24), i8, 2);
	gguf_swap(gguf_type_by_id(8), q8, 1);
	cr_expect(!memcmp(f32, f32w, 8));
	cr_expect(!memcmp(bf16, bf16w, 4));
	cr_expect(i8[0] == 1 && i8[1] == 2);
	for (int i = 0; i < 34; i++)
		cr_expect_eq(q8[i], i, "Q8_0 byte %d", i);
}

/* One record of the vectors: its dequantization, and its quantization
 * when it carries the input.  Marks what it checked in @seen_*. */
static size_t check_record(const unsigned char *r, size_t left,
			   bool *seen_dq, bool *seen_q)
{
	const struct gguf_type *t = gguf_type_by_id(le32(r));
	uint64_t n = le32(r + 4), nel, nraw;
	bool has_in = le32(r + 8) & 1;
	const unsigned char *raw = r + 12, *deq, *inp;
	size_t len;

	cr_assert(t, "record of unknown type %u", le32(r));
	nel = n * t->block;
	nraw = n * t->bytes;
	len = 12 + nraw + 4 * nel * (has_in ? 2 : 1);
	cr_assert_leq(len, left, "%s record past the end", t->name);
	deq = raw + nraw;
	inp = deq + 4 * nel;
	if (t->dequant) {
		float *out = malloc(4 * nel);
		long i;

		cr_assert(out);
		t->dequant(raw, out, n);
		i = first_diff(out, deq, nel);
		cr_expect_eq(i, -1,
			     "%s dequant: element %ld (block %lu) is 0x%08x, "
			     "gguf-py 0x%08x", t->name, i,
			     i < 0 ? 0 : (unsigned long)i / t->block,
			     i < 0 ? 0 : f32_bits(out[i]),
			     i < 0 ? 0 : le32(deq + 4 * i));
		free(out);
		seen_dq[t->id] = true;
	}
	if (has_in && t->quant) {
		float *x = malloc(4 * nel);
		unsigned char *q = malloc(nraw);

		cr_assert(x && q);
		for (uint64_t k = 0; k < nel; k++)
			x[k] = f32_of(le32(inp + 4 * k));
		t->quant(x, q, n);
		for (uint64_t k = 0; k < nraw; k++)
			if (q[k] != raw[k]) {
				cr_expect_eq(q[k], raw[k],
					     "%s quant: byte %lu (block %lu)"
					     " is 0x%02x, gguf-py 0x%02x",
					     t->name, (unsigned long)k,
					     (unsigned long)(k / t->bytes),
					     q[k], raw[k]);
				break;
			}
		free(x);
		free(q);
		seen_q[t->id] = true;
	}
	return len;
}

Test(gguf_types, codecs_match_gguf_py)
{
	struct vectors v;
	bool seen_dq[64] = { 0 }, seen_q[64] = { 0 };
	size_t off;

	load(&v);
	off = 16 + (size_t)v.ntable * 20;
	for (uint32_t k = 0; k < v.nrec; k++) {
		cr_assert_leq(off + 12, v.len, "record %u past the end", k);
		off += check_record(v.buf + off, v.len - off, seen_dq, seen_q);
	}
	cr_expect_eq(off, v.len, "bytes after the last record");
	for (size_t i = 0; i < sizeof(dequant_ids) / 4; i++)
		cr_expect(seen_dq[dequant_ids[i]], "no vectors for %s",
			  gguf_type_by_id(dequant_ids[i])->name);
	for (size_t i = 0; i < sizeof(quant_ids) / 4; i++)
		cr_expect(seen_q[quant_ids[i]], "no quant vectors for %s",
			  gguf_type_by_id(quant_ids[i])->name);
	free(v.buf);
	assert_no_leaks();
}
