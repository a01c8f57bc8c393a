/*
 * test_ovl_retype.c - user.dtype through the overlay (core/ovl/ovl_retype.c)
 * without FUSE or torch: a cast converts the whole storage (the sample's
 * tied embed.weight/head.weight stay one storage), comes back after a
 * reopen (replay), is not there when the crash came before its record
 * (and the unused copy goes with the overlay), keeps in-place writes made
 * before and after it, and is refused for dtypes it does not cast,
 * journaling nothing.  Values are checked against cvt_elems(), which
 * tests/tools/ptrepack_dtype.sh checks against torch; the mount tests
 * (tests/fs/dtype.sh) check the written-back file with torch itself.
 */
#define _GNU_SOURCE 1
#include "test_util.h"
#include "ovl_fixture.h"

#include "cvt/cvt.h"

#include <dirent.h>

#define EMB "model/embed.weight"	/* tied with model/head.weight */
#define NEMB 128			/* its elements */

static void fx_open(struct fx *f, bool discard)
{
	fx_load_ok(f, discard);
}

static void fx_init(struct fx *f)
{
	fx_make(f, "test_ovl_retype");
	fx_open(f, false);
}

/* All of @path's bytes as its file shows them: their count. */
static size_t bytes(struct fx *f, const char *path, unsigned char *buf,
		    size_t max)
{
	struct ckpt_node *n = fx_node(f, path);
	long long got = ovl_read(f->v, n, buf, max, 0, &f->d);

	cr_assert(got >= 0, "%s", f->d.msg);
	return (size_t)got;
}

static int set_dtype(struct fx *f, const char *path, const char *dt)
{
	diag_init(&f->d, f->ck);
	return ovl_setxattr(f->v, fx_node(f, path), "user.dtype", dt, strlen(dt),
			    &f->d);
}

static const char *dtype(struct fx *f, const char *path)
{
	return fx_node(f, path)->tensor->dtype->name;
}

/* @src (float32) converted to @to as cvt_elems() does it. */
static size_t expect(const unsigned char *src, const char *to,
		     unsigned char *out)
{
	const struct ckpt_dtype *a = ckpt_dtype_by_name("float32");
	const struct ckpt_dtype *b = ckpt_dtype_by_name(to);

	cvt_elems(a, b, false, CVT_TORCH2, src, out, NEMB);
	return (size_t)NEMB * b->size;
}

/* Files in the overlay directory (-1: it is gone). */
static int files_in(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

Test(ovl_retype, casts_the_storage_with_its_ties_and_replays)
{
	unsigned char f32[NEMB * 4], want[NEMB * 4], got[NEMB * 8];
	struct fx f;
	size_t n;

	fx_init(&f);
	cr_assert_eq(bytes(&f, EMB, f32, sizeof(f32)), sizeof(f32));
	cr_assert_eq(set_dtype(&f, EMB, "bfloat16\n"), 0, "%s", f.d.msg);
	cr_assert_str_eq(dtype(&f, EMB), "bfloat16");
	cr_assert_str_eq(dtype(&f, "model/head.weight"), "bfloat16");
	cr_assert_eq(fx_node(&f, EMB)->tensor->storage,
		     fx_node(&f, "model/head.weight")->tensor->storage);
	n = expect(f32, "bfloat16", want);
	cr_assert_eq(bytes(&f, EMB, got, sizeof(got)), n);
	cr_assert_eq(memcmp(got, want, n), 0);
	cr_assert(ovl_changed(f.v));
	/* the same dtype again: nothing to do, nothing journaled */
	off_t j = size_of(f.jr);
	cr_assert_eq(set_dtype(&f, "model/head.weight", "bfloat16"), 0);
	cr_assert_eq(size_of(f.jr), j);
	fx_close(&f);
	fx_open(&f, false);
	cr_assert_eq(f.v->resumed, 1);
	cr_assert_str_eq(dtype(&f, "model/head.weight"), "bfloat16");
	cr_assert_eq(bytes(&f, "model/head.weight", got, sizeof(got)), n);
	cr_assert_eq(memcmp(got, want, n), 0);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_retype, a_crash_before_the_record_leaves_the_storage_as_it_was)
{
	unsigned char f32[NEMB * 4], got[NEMB * 4];
	struct fx f;
	off_t before;

	fx_init(&f);
	cr_assert_eq(bytes(&f, EMB, f32, sizeof(f32)), sizeof(f32));
	cr_assert_eq(set_dtype(&f, EMB, "float16"), 0, "%s", f.d.msg);
	before = size_of(f.jr);
	cr_assert_eq(set_dtype(&f, EMB, "float64"), 0, "%s", f.d.msg);
	fx_close(&f);
	/* the kill came after the float64 copy, before its record */
	cr_assert_eq(truncate(f.jr, before), 0);
	fx_open(&f, false);
	cr_assert_str_eq(dtype(&f, EMB), "float16");
	cr_assert_eq(bytes(&f, EMB, got, sizeof(got)), NEMB * 2);
	/* the unused copy goes with the rest: -o discard forgets all */
	cr_assert_eq(files_in(f.ovl), 3, "journal, two copies");
	fx_close(&f);
	fx_open(&f, true);
	cr_assert_str_eq(dtype(&f, EMB), "float32");
	cr_assert_eq(bytes(&f, EMB, got, sizeof(got)), sizeof(f32));
	cr_assert_eq(memcmp(got, f32, sizeof(f32)), 0);
	cr_assert_eq(files_in(f.ovl), -1, "the overlay stayed");
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_retype, in_place_writes_before_and_after_stay)
{
	unsigned char f32[NEMB * 4], want[NEMB * 4], got[NEMB * 4];
	const unsigned char one[4] = { 0, 0, 0x80, 0x3f };	/* 1.0f */
	const unsigned char two[2] = { 0, 0x40 };		/* 2.0 f16 */
	struct ckpt_storage *s;
	struct fx f;
	size_t n;

	fx_init(&f);
	s = fx_node(&f, EMB)->tensor->storage;
	cr_assert_eq(ovl_write_storage(f.v, s, one, 4, 8, &f.d), 4, "%s",
		     f.d.msg);
	cr_assert_eq(bytes(&f, EMB, f32, sizeof(f32)), sizeof(f32));
	cr_assert_eq(set_dtype(&f, "model/head.weight", "float16"), 0, "%s",
		     f.d.msg);
	cr_assert_eq(ovl_write_storage(f.v, s, two, 2, 0, &f.d), 2, "%s",
		     f.d.msg);
	cr_assert_eq(set_dtype(&f, EMB, "float32"), 0, "%s", f.d.msg);
	/* float32 -> float16 -> float32 rounds; element 0 is 2.0 now */
	expect(f32, "float16", want);
	memcpy(want, two, 2);
	cvt_elems(ckpt_dtype_by_name("float16"), ckpt_dtype_by_name("float32"),
		  false, CVT_TORCH2, want, f32, NEMB);
	n = NEMB * 4;
	cr_assert_eq(bytes(&f, EMB, got, sizeof(got)), n);
	cr_assert_eq(memcmp(got, f32, n), 0);
	cr_assert_eq(memcmp(got + 8, one, 4), 0);
	fx_close(&f);
	fx_open(&f, false);
	cr_assert_str_eq(dtype(&f, EMB), "float32");
	cr_assert_eq(bytes(&f, EMB, got, sizeof(got)), n);
	cr_assert_eq(memcmp(got, f32, n), 0);
	/* written back: a checkpoint of float32 again, the overlay gone */
	cr_assert_eq(ovl_commit(f.v, NULL, &f.d), 0, "%s", f.d.msg);
	cr_assert_eq(files_in(f.ovl), -1, "the overlay stayed");
	fx_close(&f);
	fx_open(&f, false);
	cr_assert_eq(bytes(&f, "model/head.weight", got, sizeof(got)), n);
	cr_assert_eq(memcmp(got, f32, n), 0);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_retype, what_it_does_not_cast_is_refused_unjournaled)
{
	struct fx f;
	off_t j;

	fx_init(&f);
	cr_assert_eq(set_dtype(&f, EMB, "float16"), 0, "%s", f.d.msg);
	j = size_of(f.jr);
	cr_assert_eq(set_dtype(&f, EMB, "int32"), -ENOTSUP);
	cr_assert(strstr(f.d.msg, "not a cast"), "%s", f.d.msg);
	cr_assert_eq(set_dtype(&f, EMB, "complex64"), -ENOTSUP);
	cr_assert_eq(set_dtype(&f, EMB, "floaty"), -EINVAL);
	cr_assert_eq(ovl_setxattr(f.v, fx_node(&f, EMB), "user.shape", "128", 3,
				  &f.d), -EPERM);
	cr_assert_eq(size_of(f.jr), j);
	cr_assert_str_eq(dtype(&f, EMB), "float16");
	fx_fini(&f);
	assert_no_leaks();
}
