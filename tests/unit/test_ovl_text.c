/*
 * test_ovl_text.c - core/ovl/ovl_text.c, the text views read by offset:
 * for a new tensor of every dtype (rows that straddle the formatting
 * chunks), reads at random offsets and of random lengths, before and
 * after the view was measured, give the bytes of the whole text as it
 * was rendered before (text_ref.h: snprintf); and the size and a small
 * read of a big view format only what the read covers (counted by
 * ovl_text_formatted(): no clock in a test), the size of a big one being
 * measured by several threads.
 */
#include "test_util.h"

#include "ovl_fixture.h"
#include "text_ref.h"
#include "view/view.h"

#include <inttypes.h>

/* every dtype but the quantized and bits ones, which no new tensor can
 * have (test_view_dec.c prints those) */
static const char *const dtypes[] = {
	"float64", "float32", "float16", "bfloat16", "int64", "int32",
	"int16", "int8", "uint8", "bool", "complex128", "complex64",
	"complex32", "uint16", "uint32", "uint64", "float8_e5m2",
	"float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz",
	"float8_e8m0fnu", "float4_e2m1fn_x2", "uint1", "uint2", "uint3",
	"uint4", "uint5", "uint6", "uint7", "int1", "int2", "int3", "int4",
	"int5", "int6", "int7",
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * UINT64_C(0x2545F4914F6CDD1D);
}

/*
 * A new tensor model/@key of @dt, @rows x @cols, of the bytes @data: the
 * way `cp raw m/new; setfattr -n user.dtype ...; setfattr -n user.shape`
 * makes one.
 */
static struct ckpt_node *new_tensor(struct fx *f, const char *key,
				    const char *dt, uint64_t rows,
				    uint64_t cols, const unsigned char *data)
{
	uint64_t len = rows * cols * ckpt_dtype_by_name(dt)->size;
	struct ckpt_node *n;
	char shape[48];

	cr_assert_eq(ovl_create(f->v, fx_node(f, "model"), key, &n, &f->d), 0,
		     "%s", f->d.msg);
	cr_assert_eq(ovl_write(f->v, n, data, len, 0, &f->d), (long long)len,
		     "%s", f->d.msg);
	cr_assert_eq(ovl_setxattr(f->v, n, "user.dtype", dt, strlen(dt),
				  &f->d), 0, "%s: %s", dt, f->d.msg);
	snprintf(shape, sizeof(shape), "%" PRIu64 ",%" PRIu64, rows, cols);
	cr_assert_eq(ovl_setxattr(f->v, n, "user.shape", shape, strlen(shape),
				  &f->d), 0, "%s: %s", dt, f->d.msg);
	cr_assert_eq(ovl_release(f->v, n, &f->d), 0, "%s", f->d.msg);
	return n;
}

/* The whole text of @n as it was rendered before; caller frees. */
static char *whole_text(struct ckpt_node *n, const unsigned char *data,
			size_t *len)
{
	const struct ckpt_tensor *t = n->tensor;
	uint64_t numel = 1;
	size_t h;
	char *buf;

	for (int i = 0; i < t->ndim; i++)
		numel *= (uint64_t)t->shape[i];
	h = view_text_header(t->dtype, t->ndim, t->shape, NULL, 0);
	buf = malloc(h + 1 + numel * VIEW_TEXT_ELEM_MAX);
	cr_assert_not_null(buf);
	view_text_header(t->dtype, t->ndim, t->shape, buf, h + 1);
	*len = h + ref_text(t->dtype, false, t->ndim, t->shape, 0, data, numel,
			    buf + h);
	return buf;
}

/* @k reads of @n at random offsets and lengths, each against @want. */
static void random_reads(struct fx *f, struct ckpt_node *n, const char *want,
			 size_t len, uint64_t *s, int k)
{
	char *buf = malloc(len + 1);

	cr_assert_not_null(buf);
	for (int i = 0; i < k; i++) {
		uint64_t off = rnd(s) % (len + 2), size = rnd(s) % 3 == 0 ?
			       rnd(s) % (len + 1) : rnd(s) % 300;
		uint64_t exp = off >= len ? 0 : len - off < size ? len - off
				  : size;
		long long got = ovl_text_read(f->v, n, buf, size, off, &f->d);

		cr_assert_eq(got, (long long)exp, "%s: %" PRIu64 " bytes at %"
			     PRIu64 ": %lld, want %" PRIu64 " (%s)",
			     n->name, size, off, got, exp, f->d.msg);
		cr_assert_eq(memcmp(buf, want + off, exp), 0, "%s: %" PRIu64
			     " bytes at %" PRIu64 " differ", n->name, size,
			     off);
	}
	free(buf);
}

Test(ovl_text, reads_anywhere_give_the_whole_rendering)
{
	enum { ROWS = 3, COLS = 4099 };	/* chunks of 4096 cut the rows */
	unsigned char *data = malloc(ROWS * COLS * 16);
	uint64_t s = 5, size;
	struct fx f;

	cr_assert_not_null(data);
	fx_make(&f, "test_ovl_text");
	fx_load_ok(&f, false);
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
		struct ckpt_node *n;
		size_t len;
		char *want;

		for (size_t b = 0; b < ROWS * COLS * 16; b++)
			data[b] = (unsigned char)rnd(&s);
		n = new_tensor(&f, dtypes[i], dtypes[i], ROWS, COLS, data);
		want = whole_text(n, data, &len);
		/* nothing learnt yet: each read finds its own way */
		for (int k = 0; k < 4; k++) {
			ovl_texts_drop(f.v);
			random_reads(&f, n, want, len, &s, 1);
		}
		random_reads(&f, n, want, len, &s, 20);
		ovl_texts_drop(f.v);
		cr_assert_eq(ovl_text_measure(f.v, n, &size, &f.d), 0, "%s",
			     f.d.msg);
		cr_assert_eq(size, len, "%s: measured %" PRIu64 ", the text "
			     "has %zu bytes", dtypes[i], size, len);
		random_reads(&f, n, want, len, &s, 30);
		free(want);
	}
	free(data);
	fx_fini(&f);
	assert_no_leaks();
}

/*
 * The first open of a big view measures it (stat: its size), then head
 * reads 300 bytes and something reads in the middle: only the chunks
 * those reads cover may be formatted, not the whole tensor (it was: 37 s
 * before the first byte of a 412 MB tensor's view).
 */
Test(ovl_text, a_small_read_of_a_big_view_formats_what_it_covers)
{
	enum { ROWS = 1024, COLS = 1024 };
	uint64_t numel = ROWS * COLS, s = 9, size, before;
	float *w = malloc(numel * sizeof(*w));
	struct ckpt_node *n;
	char buf[300], *want;
	size_t len;
	struct fx f;

	cr_assert_not_null(w);
	for (uint64_t i = 0; i < numel; i++)
		w[i] = (float)((double)(int64_t)rnd(&s) * 0x1p-68);
	fx_make(&f, "test_ovl_text");
	fx_load_ok(&f, false);
	n = new_tensor(&f, "w", "float32", ROWS, COLS, (unsigned char *)w);
	want = whole_text(n, (unsigned char *)w, &len);
	before = ovl_text_formatted(f.v);
	cr_assert_eq(ovl_text_measure(f.v, n, &size, &f.d), 0, "%s", f.d.msg);
	cr_assert_eq(size, len);
	cr_assert_eq(ovl_text_read(f.v, n, buf, 300, 0, &f.d), 300);
	cr_assert_eq(memcmp(buf, want, 300), 0);
	cr_assert_eq(ovl_text_read(f.v, n, buf, 300, len / 2, &f.d), 300);
	cr_assert_eq(memcmp(buf, want + len / 2, 300), 0);
	/* two reads of 300 bytes: each within at most two chunks of 4096
	   elements (this one straddles two: the middle of the text is
	   near the middle chunk boundary) */
	cr_assert_leq(ovl_text_formatted(f.v) - before, 4 * 4096,
		      "measuring and two reads of 300 bytes formatted %" PRIu64
		      " of %" PRIu64 " elements",
		      ovl_text_formatted(f.v) - before, numel);
	/* the marks the measuring threads learnt lead reads anywhere */
	random_reads(&f, n, want, len, &s, 40);
	free(want);
	free(w);
	fx_fini(&f);
	assert_no_leaks();
}
