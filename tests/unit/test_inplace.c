/*
 * test_inplace.c - in-place write-back (-o inplace, ovl_inplace.c and
 * ckpt_inplace.c) without FUSE: the patched file is byte for byte the
 * normal write-back's and keeps its inode; what is refused and that it
 * writes nothing; the JR_INPLACE record read back, and a malformed one
 * refused; and the recovery decision at open after a write-back stopped
 * at every stage (plan journaled, any part of the patch on disk, patched
 * but not committed): finished, even under -o discard, refused read-only,
 * refused for a file whose size changed; and a patch that failed without
 * a crash, which takes no edits and is retried by the next commit.  The
 * checkpoint is the bundled sample, copied into a scratch directory per
 * test.
 */
#define _GNU_SOURCE 1
#include "test_util.h"
#include "ovl_fixture.h"

static void load(struct fx *f, bool inplace, bool ro, bool discard, int want)
{
	struct ovl_opts o = { .inplace = inplace, .readonly = ro,
			      .discard = discard };
	int rc = fx_load(f, &o);

	cr_assert_eq(rc, want, "ovl_open: %d (%s), wanted %d", rc, f->d.msg,
		     want);
}

/* The edit: 4 bytes into storages 0 and 6, 2 bytes of 9 written the same. */
static void edit(struct fx *f)
{
	const unsigned char b[4] = { 1, 2, 3, 4 }, c[4] = { 9, 8, 7, 6 };
	struct ptz_entry *e = f->c->storages[9]->rec;
	unsigned char same[2];

	cr_assert_eq(ovl_write_storage(f->v, f->c->storages[0], b, 4, 8,
				       &f->d), 4, "%s", f->d.msg);
	cr_assert_eq(ovl_write_storage(f->v, f->c->storages[6], c, 4, 100,
				       &f->d), 4, "%s", f->d.msg);
	cr_assert_eq(ckpt_record_locate(f->c, e, &f->d), 0, "%s", f->d.msg);
	cr_assert_eq(pread(f->c->fd, same, 2, (off_t)e->data_off), 2);
	cr_assert_eq(ovl_write_storage(f->v, f->c->storages[9], same, 2, 0,
				       &f->d), 2, "%s", f->d.msg);
}

/* The normal write-back's file for edit(): *@ref, *@n (free it). */
static void reference(unsigned char **ref, size_t *n)
{
	struct fx f;

	fx_make(&f, "test_inplace_ref");
	load(&f, false, false, false, 0);
	edit(&f);
	cr_assert_eq(ovl_commit(f.v, NULL, &f.d), 0, "%s", f.d.msg);
	fx_close(&f);
	read_all(f.ck, ref, n);
	fx_fini(&f);
}

static ino_t ino_of(const char *p)
{
	struct stat st;

	cr_assert_eq(stat(p, &st), 0);
	return st.st_ino;
}

static void assert_file(const char *p, const unsigned char *b, size_t n)
{
	unsigned char *now;
	size_t m;

	read_all(p, &now, &m);
	cr_assert_eq(m, n, "%s: %zu bytes, wanted %zu", p, m, n);
	cr_assert(!memcmp(now, b, n), "%s: not the expected bytes", p);
	free(now);
}

/* One byte more at the end of @p (so it is another file); its fd. */
static int grow(const char *p)
{
	int fd = open(p, O_WRONLY | O_APPEND);

	cr_assert(fd >= 0, "%s: %s", p, strerror(errno));
	cr_assert_eq(write(fd, "x", 1), 1);
	return fd;
}

Test(ovl_inplace, patches_the_file_itself)
{
	unsigned char *ref, *orig;
	size_t n, m, differ = 0;
	struct fx f;
	ino_t ino;

	reference(&ref, &n);
	fx_make(&f, "test_inplace");
	read_all(f.ck, &orig, &m);
	ino = ino_of(f.ck);
	load(&f, true, false, false, 0);
	edit(&f);
	cr_assert_eq(ovl_commit(f.v, NULL, &f.d), 0, "%s", f.d.msg);
	cr_assert(f.v->wstats.in_place);
	fx_close(&f);
	assert_file(f.ck, ref, n);
	cr_assert_eq(ino_of(f.ck), ino, "not the same inode");
	cr_assert_eq(access(f.ovl, F_OK), -1, "the overlay stayed");
	/* 8 data bytes and two CRC fields for each of two records */
	for (size_t i = 0; i < n; i++)
		differ += orig[i] != ref[i];
	cr_assert(differ > 8 && differ <= 8 + 16, "%zu bytes differ", differ);
	free(ref);
	free(orig);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_inplace, a_structure_change_is_refused_and_nothing_written)
{
	unsigned char *orig;
	struct fx f;
	size_t m;

	fx_make(&f, "test_inplace");
	read_all(f.ck, &orig, &m);
	load(&f, true, false, false, 0);
	edit(&f);
	cr_assert_eq(ovl_rename(f.v, fx_node(&f, "model"), "embed.weight",
				fx_node(&f, "model"), "embed.w2", false, &f.d),
		     0, "%s", f.d.msg);
	cr_assert_eq(ovl_commit(f.v, NULL, &f.d), -ENOTSUP);
	cr_assert(strstr(f.d.msg, "-o inplace refused (the structure changed"),
		  "%s", f.d.msg);
	cr_assert(!f.v->committed && !f.v->inplace_pending);
	fx_close(&f);
	assert_file(f.ck, orig, m);
	cr_assert_eq(access(f.jr, F_OK), 0, "the edits were not kept");
	free(orig);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_inplace, record_reads_back_and_a_bad_one_is_refused)
{
	const char *bad[] = {
		"1 - 0000000g\n", "1 2 00000000", "2 - 0\n1 - 0\n",
		"1 x 00000000\n", "99999999999 - 0\n", "1 - 100000000\n",
	};
	struct ckpt_plan p;
	struct jrec r = { .op = JR_INPLACE, .nf = 4 };
	uint64_t id[3];
	struct fx f;

	fx_make(&f, "test_inplace");
	load(&f, true, false, false, 0);
	r.f[0] = "1";
	r.f[1] = "22";
	r.f[2] = "333";
	r.f[3] = "3 - 0000abcd\n7 5 ffffffff\n";
	for (int i = 0; i < 4; i++)
		r.len[i] = strlen(r.f[i]);
	cr_assert_eq(ovl_inplace_parse(f.v, &r, &p, id, &f.d), 0, "%s",
		     f.d.msg);
	cr_assert(id[0] == 1 && id[1] == 22 && id[2] == 333 && p.size == 333);
	cr_assert_eq(p.n, 2);
	cr_assert(p.rec[0].entry == 3 && p.rec[0].storage == CKPT_NO_STORAGE &&
		  p.rec[0].crc32 == 0xabcd);
	cr_assert(p.rec[1].entry == 7 && p.rec[1].storage == 5 &&
		  p.rec[1].crc32 == 0xffffffff);
	ckpt_plan_release(&p);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r.f[3] = bad[i];
		r.len[3] = strlen(bad[i]);
		diag_init(&f.d, f.ck);
		cr_assert_eq(ovl_inplace_parse(f.v, &r, &p, id, &f.d), -EILSEQ,
			     "accepted %s", bad[i]);
		cr_assert_null(p.rec);
	}
	fx_fini(&f);
	assert_no_leaks();
}

/*
 * Stop after the plan, put @k of the patch's differing bytes (from the
 * first or, @tail, the last) of @ref into the file, as a crash would
 * leave it, and close.
 */
static void stop_after_plan(struct fx *f, const unsigned char *ref, size_t n,
			    size_t k, bool tail)
{
	unsigned char *now;
	size_t m, seen = 0, total = 0;
	int fd;

	load(f, true, false, false, 0);
	edit(f);
	cr_assert_eq(ovl_inplace_begin(f->v, &f->d), 0, "%s", f->d.msg);
	cr_assert(f->v->inplace_pending);
	/* no more edits now */
	cr_assert_eq(ovl_write_storage(f->v, f->c->storages[1],
				       (const unsigned char *)"x", 1, 0, &f->d),
		     -EROFS);
	fx_close(f);
	read_all(f->ck, &now, &m);
	cr_assert_eq(m, n);
	for (size_t i = 0; i < n; i++)
		total += now[i] != ref[i];
	fd = open(f->ck, O_WRONLY);
	cr_assert(fd >= 0);
	for (size_t i = 0; i < n; i++) {
		if (now[i] == ref[i])
			continue;
		seen++;
		if (tail ? seen > total - k : seen <= k)
			cr_assert_eq(pwrite(fd, ref + i, 1, (off_t)i), 1);
	}
	close(fd);
	free(now);
}

Test(ovl_inplace, an_interrupted_one_is_finished_at_open)
{
	unsigned char *ref;
	size_t n;

	reference(&ref, &n);
	/* none of the patch, a part from either end, all of it */
	for (size_t k = 0; k <= 20; k += 4)
		for (int tail = 0; tail < 2; tail++) {
			struct fx f;
			ino_t ino;

			fx_make(&f, "test_inplace");
			ino = ino_of(f.ck);
			stop_after_plan(&f, ref, n, k, tail);
			/* -o discard cannot drop a half-written file */
			load(&f, false, false, k == 8, 0);
			cr_assert(f.v->inplace_finished, "k %zu", k);
			cr_assert(f.v->note && strstr(f.v->note, "finished an "
				  "in-place write-back"), "%s", f.v->note);
			fx_close(&f);
			assert_file(f.ck, ref, n);
			cr_assert_eq(ino_of(f.ck), ino);
			cr_assert_eq(access(f.ovl, F_OK), -1,
				     "the overlay stayed");
			fx_fini(&f);
		}
	free(ref);
	assert_no_leaks();
}

/* A scratch checkpoint whose write-back stopped with part of the patch
 * on disk, and the file it should have become (*@ref, *@n: free it). */
static void half_patched(struct fx *f, unsigned char **ref, size_t *n)
{
	reference(ref, n);
	fx_make(f, "test_inplace");
	stop_after_plan(f, *ref, *n, 6, false);
}

Test(ovl_inplace, a_read_only_mount_refuses_an_unfinished_one)
{
	unsigned char *ref;
	struct fx f;
	size_t n;

	half_patched(&f, &ref, &n);
	load(&f, false, true, false, -EROFS);
	cr_assert(strstr(f.d.msg, "mount it writable once"), "%s", f.d.msg);
	fx_close(&f);
	load(&f, false, false, false, 0);	/* then a writable one does */
	fx_close(&f);
	assert_file(f.ck, ref, n);
	free(ref);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_inplace, a_file_whose_size_changed_is_refused)
{
	unsigned char *ref;
	struct fx f;
	size_t n;

	half_patched(&f, &ref, &n);
	close(grow(f.ck));
	load(&f, false, false, false, -ESTALE);
	cr_assert(strstr(f.d.msg, "did not finish, and it is another file"),
		  "%s", f.d.msg);
	fx_close(&f);
	cr_assert_eq(access(f.jr, F_OK), 0, "the overlay went");
	free(ref);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_inplace, a_patch_that_failed_is_retried_by_the_next_commit)
{
	unsigned char *ref;
	struct fx f;
	size_t n;
	int fd;

	reference(&ref, &n);
	fx_make(&f, "test_inplace");
	load(&f, true, false, false, 0);
	edit(&f);
	cr_assert_eq(ovl_inplace_begin(f.v, &f.d), 0, "%s", f.d.msg);
	/* the patch fails: the file is not the size it was planned for */
	fd = grow(f.ck);
	cr_assert_eq(ovl_commit(f.v, NULL, &f.d), -ESTALE);
	cr_assert(strstr(f.d.msg, "in-place write-back stopped"), "%s",
		  f.d.msg);
	cr_assert(f.v->inplace_pending && !f.v->committed);
	cr_assert_eq(ovl_write_storage(f.v, f.c->storages[1],
				       (const unsigned char *)"x", 1, 0, &f.d),
		     -EROFS);
	/* fixed: the next commit finishes it */
	cr_assert_eq(ftruncate(fd, (off_t)n), 0);
	close(fd);
	diag_init(&f.d, f.ck);
	cr_assert_eq(ovl_commit(f.v, NULL, &f.d), 0, "%s", f.d.msg);
	cr_assert(f.v->committed && !f.v->inplace_pending);
	fx_close(&f);
	assert_file(f.ck, ref, n);
	cr_assert_eq(access(f.ovl, F_OK), -1, "the overlay stayed");
	free(ref);
	fx_fini(&f);
	assert_no_leaks();
}
