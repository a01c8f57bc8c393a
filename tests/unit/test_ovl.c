/*
 * test_ovl.c - the overlay on its own (no FUSE, no torch): journal records
 * read back by streaming, a torn tail told apart from damage in the
 * middle, the checkpoint's identity checked at mount and at write-back,
 * clean-up by the journal's manifest (never by pattern), a directory that
 * is not the user's own refused, a deleted overlay noticed, and the
 * targets ckpt_save() refuses or follows.  The checkpoint is the bundled
 * sample, copied into a scratch directory per test.
 */
#define _GNU_SOURCE 1
#include "test_util.h"
#include "ovl_fixture.h"

static void fx_init(struct fx *f)
{
	fx_make(f, "test_ovl");
}

/* Open the checkpoint and its overlay: ovl_open()'s result. */
static int fx_open(struct fx *f, const char *dir, bool ro, bool discard)
{
	struct ovl_opts o = { .dir = dir, .readonly = ro, .discard = discard };

	return fx_load(f, &o);
}

/* Two edits: a new dict and an in-place write to storage 0 (copy-up). */
static void fx_edit(struct fx *f)
{
	struct ckpt_node *n;
	const unsigned char b[4] = { 1, 2, 3, 4 };

	cr_assert_eq(ovl_mkdir(f->v, f->c->root, "staged", &n, &f->d), 0,
		     "%s", f->d.msg);
	cr_assert_eq(ovl_write_storage(f->v, f->c->storages[0], b, 4, 0,
				       &f->d), 4, "%s", f->d.msg);
}

static bool same_bytes(const char *p, const unsigned char *b, size_t n)
{
	unsigned char *now;
	size_t m;
	bool same;

	read_all(p, &now, &m);
	same = m == n && !memcmp(now, b, n);
	free(now);
	return same;
}

/* Offsets of the journal's records (by walking the length fields). */
static int record_offsets(const char *jr, uint64_t *off, int max)
{
	unsigned char *b;
	size_t n, pos = 0;
	int k = 0;

	read_all(jr, &b, &n);
	while (pos + JR_HDR <= n && k < max) {
		uint32_t len = b[pos] | b[pos + 1] << 8 | b[pos + 2] << 16 |
			       (uint32_t)b[pos + 3] << 24;

		off[k++] = pos;
		pos += JR_HDR + len;
	}
	free(b);
	return k;
}

/* ---- the journal's records, read by streaming ---- */

Test(ovl_journal, records_read_back_in_order)
{
	FILE *tf = tmpfile();
	int fd = fileno(tf);
	struct jr_reader rd;
	struct jrec r, w = { .op = 'M' };
	struct diag d;
	uint64_t pos = 0;

	diag_init(&d, "journal");
	jr_field(&w, "a/b");
	jr_field(&w, "");
	for (uint64_t i = 0; i < 5; i++) {
		unsigned char *p;
		size_t n;

		cr_assert_eq(jr_encode(&w, i, &p, &n), 0);
		cr_assert_eq(pwrite(fd, p, n, pos), (ssize_t)n);
		pos += n;
		free(p);
	}
	jr_reader_init(&rd, fd, pos);
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(jr_next(&rd, &r, "journal", &d), 1);
		cr_assert_eq(r.op, 'M');
		cr_assert_eq(r.nf, 2);
		cr_assert_eq(r.len[0], 3);
		cr_assert_eq(memcmp(r.f[0], "a/b", 3), 0);
		cr_assert_eq(r.len[1], 0);
	}
	cr_assert_eq(jr_next(&rd, &r, "journal", &d), 0);
	cr_assert_not(rd.torn);
	jr_reader_release(&rd);
	fclose(tf);
	assert_no_leaks();
}

/* Write @nrec records; damage the file with @hurt; read it back. */
static int read_damaged(int nrec, void (*hurt)(int fd, uint64_t *off,
					       uint64_t *end),
			int *got, bool *torn, struct diag *d)
{
	FILE *tf = tmpfile();
	int fd = fileno(tf), rc;
	uint64_t off[16], end = 0;
	struct jr_reader rd;
	struct jrec r, w = { .op = 'V' };

	jr_field(&w, "epoch");
	jr_field(&w, "12345678901234567890");
	for (int i = 0; i < nrec; i++) {
		unsigned char *p;
		size_t n;

		cr_assert_eq(jr_encode(&w, i, &p, &n), 0);
		cr_assert_eq(pwrite(fd, p, n, end), (ssize_t)n);
		off[i] = end;
		end += n;
		free(p);
	}
	hurt(fd, off, &end);
	jr_reader_init(&rd, fd, end);
	*got = 0;
	while ((rc = jr_next(&rd, &r, "journal", d)) > 0)
		(*got)++;
	*torn = rd.torn;
	jr_reader_release(&rd);
	fclose(tf);
	return rc;
}

static void cut_last(int fd, uint64_t *off, uint64_t *end)
{
	(void)off;
	*end -= 7;
	cr_assert_eq(ftruncate(fd, *end), 0);
}

static void flip_middle(int fd, uint64_t *off, uint64_t *end)
{
	unsigned char c;

	(void)end;
	cr_assert_eq(pread(fd, &c, 1, off[2] + JR_HDR + 3), 1);
	c ^= 0x10;
	cr_assert_eq(pwrite(fd, &c, 1, off[2] + JR_HDR + 3), 1);
}

static void length_middle(int fd, uint64_t *off, uint64_t *end)
{
	unsigned char big[4] = { 0xff, 0xff, 0xff, 0x00 };

	(void)end;
	cr_assert_eq(pwrite(fd, big, 4, off[1]), 4);
}

static void flip_last(int fd, uint64_t *off, uint64_t *end)
{
	unsigned char c = 0x55;

	(void)end;
	cr_assert_eq(pwrite(fd, &c, 1, off[3] + JR_HDR + 1), 1);
}

Test(ovl_journal, torn_tail_ends_the_journal)
{
	struct diag d;
	bool torn;
	int got;

	diag_init(&d, "journal");
	cr_assert_eq(read_damaged(4, cut_last, &got, &torn, &d), 0);
	cr_assert_eq(got, 3);
	cr_assert(torn);
	/* a bad last record with nothing after it is a torn tail too */
	cr_assert_eq(read_damaged(4, flip_last, &got, &torn, &d), 0);
	cr_assert_eq(got, 3);
	cr_assert(torn);
	assert_no_leaks();
}

Test(ovl_journal, damage_in_the_middle_is_refused)
{
	struct diag d;
	bool torn;
	int got;

	diag_init(&d, "journal");
	cr_assert_eq(read_damaged(4, flip_middle, &got, &torn, &d), -EILSEQ);
	cr_assert_eq(got, 2);
	cr_assert(strstr(d.msg, "damaged"), "%s", d.msg);
	diag_init(&d, "journal");
	/* a length that points past the end, intact records after it */
	cr_assert_eq(read_damaged(4, length_middle, &got, &torn, &d), -EILSEQ);
	cr_assert_eq(got, 1);
	assert_no_leaks();
}

Test(ovl_journal, sequence_numbers_are_checked)
{
	FILE *tf = tmpfile();
	int fd = fileno(tf);
	struct jr_reader rd;
	struct jrec r, w = { .op = 'M' };
	struct diag d;
	unsigned char *p;
	size_t n;
	uint64_t pos = 0;

	diag_init(&d, "journal");
	jr_field(&w, "x");
	/* records 0, 1, then 1 again (replayed twice if trusted), then 2 */
	for (uint64_t s = 0; s < 4; s++) {
		cr_assert_eq(jr_encode(&w, s < 2 ? s : s - 1, &p, &n), 0);
		cr_assert_eq(pwrite(fd, p, n, pos), (ssize_t)n);
		pos += n;
		free(p);
	}
	jr_reader_init(&rd, fd, pos);
	cr_assert_eq(jr_next(&rd, &r, "journal", &d), 1);
	cr_assert_eq(jr_next(&rd, &r, "journal", &d), 1);
	cr_assert_eq(jr_next(&rd, &r, "journal", &d), -EILSEQ);
	jr_reader_release(&rd);
	fclose(tf);
	assert_no_leaks();
}

/* ---- the overlay: identity, replay, manifest ---- */

Test(ovl_open, edits_come_back_after_close)
{
	struct fx f;

	fx_init(&f);
	cr_assert_eq(fx_open(&f, NULL, false, false), 0, "%s", f.d.msg);
	fx_edit(&f);
	fx_close(&f);
	cr_assert_eq(fx_open(&f, NULL, false, false), 0, "%s", f.d.msg);
	cr_assert(ckpt_node_child(f.c->root, "staged"));
	cr_assert(f.c->storages[0]->modified);
	cr_assert_eq(f.v->resumed, 1);
	/* ptfs says it, counted as ptfs status counts (fs/ptfs_staged.c) */
	cr_assert_null(f.v->note);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_open, another_version_of_the_file_is_refused)
{
	struct fx f;
	unsigned char *j;
	size_t jn;
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 12345, 0 } };

	fx_init(&f);
	cr_assert_eq(fx_open(&f, NULL, false, false), 0);
	fx_edit(&f);
	fx_close(&f);
	/* same bytes, another mtime: identity differs */
	cr_assert_eq(utimensat(AT_FDCWD, f.ck, ts, 0), 0);
	read_all(f.jr, &j, &jn);
	cr_assert_eq(fx_open(&f, NULL, false, false), -ESTALE);
	cr_assert(strstr(f.d.msg, "another version"), "%s", f.d.msg);
	cr_assert(same_bytes(f.jr, j, jn), "the journal was changed");
	fx_close(&f);
	/* read-only: shown as on disk, with a note */
	cr_assert_eq(fx_open(&f, NULL, true, false), 0, "%s", f.d.msg);
	cr_assert(f.v->note);
	cr_assert_null(ckpt_node_child(f.c->root, "staged"));
	fx_close(&f);
	/* discard: removed by the manifest, directory and all */
	cr_assert_eq(fx_open(&f, NULL, false, true), 0, "%s", f.d.msg);
	cr_assert_eq(access(f.ovl, F_OK), -1);
	free(j);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_open, torn_tail_cut_only_by_a_writable_mount)
{
	struct fx f;
	off_t before;
	int fd;

	fx_init(&f);
	cr_assert_eq(fx_open(&f, NULL, false, false), 0);
	fx_edit(&f);
	fx_close(&f);
	before = size_of(f.jr);
	fd = open(f.jr, O_WRONLY | O_APPEND);
	cr_assert_eq(write(fd, "\x40\0\0\0garbage", 11), 11);
	close(fd);
	cr_assert_eq(fx_open(&f, NULL, true, false), 0, "%s", f.d.msg);
	cr_assert(ckpt_node_child(f.c->root, "staged"));
	fx_close(&f);
	cr_assert_eq(size_of(f.jr), before + 11, "a read-only mount cut it");
	cr_assert_eq(fx_open(&f, NULL, false, false), 0, "%s", f.d.msg);
	cr_assert_eq(size_of(f.jr), before);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_open, damage_refuses_the_mount_and_keeps_the_journal)
{
	struct fx f;
	struct ckpt_node *n;
	uint64_t off[8];
	unsigned char *j, c;
	size_t jn;
	int fd;

	fx_init(&f);
	cr_assert_eq(fx_open(&f, NULL, false, false), 0);
	fx_edit(&f);
	cr_assert_eq(ovl_mkdir(f.v, f.c->root, "later", &n, &f.d), 0);
	fx_close(&f);
	/* header, data, mkdir, mkdir: hurt the first mkdir */
	cr_assert_geq(record_offsets(f.jr, off, 8), 4);
	fd = open(f.jr, O_RDWR);
	cr_assert_eq(pread(fd, &c, 1, off[2] + JR_HDR + 2), 1);
	c ^= 1;
	cr_assert_eq(pwrite(fd, &c, 1, off[2] + JR_HDR + 2), 1);
	close(fd);
	read_all(f.jr, &j, &jn);
	cr_assert_eq(fx_open(&f, NULL, false, false), -EILSEQ);
	cr_assert(strstr(f.d.msg, "damaged"), "%s", f.d.msg);
	cr_assert(strstr(f.d.msg, OVL_JOURNAL), "%s", f.d.msg);
	fx_close(&f);
	cr_assert_eq(fx_open(&f, NULL, true, false), -EILSEQ);
	fx_close(&f);
	cr_assert(same_bytes(f.jr, j, jn), "the journal was changed");
	free(j);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_open, planted_files_are_never_data)
{
	struct fx f;
	char p[256];
	int fd;

	fx_init(&f);
	cr_assert_eq(mkdir(f.ovl, 0700), 0);
	/* storage 0's size in the old name, and a journal-less overlay */
	snprintf(p, sizeof(p), "%s/0", f.ovl);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	cr_assert_eq(ftruncate(fd, 1 << 16), 0);
	close(fd);
	cr_assert_eq(fx_open(&f, NULL, false, false), 0, "%s", f.d.msg);
	for (uint32_t i = 0; i < f.c->nstorages; i++)
		cr_assert_not(f.c->storages[i]->modified);
	cr_assert_not(ovl_changed(f.v));
	fx_close(&f);
	cr_assert_eq(access(p, F_OK), 0, "a file ptfs did not make was removed");
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_open, a_directory_others_can_write_is_refused)
{
	struct fx f;
	char p[256];

	fx_init(&f);
	cr_assert_eq(mkdir(f.ovl, 0700), 0);
	cr_assert_eq(chmod(f.ovl, 0777), 0);
	cr_assert_eq(fx_open(&f, NULL, false, false), -EPERM);
	cr_assert(strstr(f.d.msg, "nobody else can write"), "%s", f.d.msg);
	fx_close(&f);
	/* read-only: the checkpoint as it is, with a note */
	cr_assert_eq(fx_open(&f, NULL, true, false), 0);
	cr_assert(f.v->note);
	fx_close(&f);
	cr_assert_eq(rmdir(f.ovl), 0);
	/* a symbolic link to a directory of the user's */
	snprintf(p, sizeof(p), "%s/victim", f.dir);
	cr_assert_eq(mkdir(p, 0700), 0);
	cr_assert_eq(symlink(p, f.ovl), 0);
	cr_assert_eq(fx_open(&f, NULL, false, false), -EPERM);
	cr_assert(strstr(f.d.msg, "symbolic link"), "%s", f.d.msg);
	fx_close(&f);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_open, user_directory_keeps_its_files)
{
	struct fx f;
	const char *names[] = { "0", "12", "2024", "journal", "1.tmp" };
	char dir[128], p[256];

	fx_init(&f);
	snprintf(dir, sizeof(dir), "%s/runs", f.dir);
	cr_assert_eq(mkdir(dir, 0700), 0);
	for (int i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		close(open(p, O_WRONLY | O_CREAT, 0600));
	}
	cr_assert_eq(fx_open(&f, dir, false, false), 0, "%s", f.d.msg);
	fx_edit(&f);
	cr_assert_eq(ovl_commit(f.v, NULL, &f.d), 0, "%s", f.d.msg);
	fx_close(&f);
	for (int i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		cr_assert_eq(access(p, F_OK), 0, "%s was removed", p);
	}
	snprintf(p, sizeof(p), "%s/" OVL_JOURNAL, dir);
	cr_assert_eq(access(p, F_OK), -1, "the journal stayed");
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_open, a_removed_overlay_takes_no_more_edits)
{
	struct fx f;
	struct ckpt_node *n;
	char cmd[200];

	fx_init(&f);
	cr_assert_eq(fx_open(&f, NULL, false, false), 0);
	fx_edit(&f);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f.ovl);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(ovl_mkdir(f.v, f.c->root, "lost", &n, &f.d), -EIO);
	cr_assert(strstr(f.d.msg, "removed while mounted"), "%s", f.d.msg);
	fx_fini(&f);
	assert_no_leaks();
}

/* ---- write-back ---- */

Test(ovl_commit, writes_and_removes_exactly_its_files)
{
	struct fx f;
	struct ckpt *c;
	struct diag d;

	fx_init(&f);
	cr_assert_eq(fx_open(&f, NULL, false, false), 0);
	fx_edit(&f);
	cr_assert_eq(ovl_commit(f.v, NULL, &f.d), 0, "%s", f.d.msg);
	fx_close(&f);
	cr_assert_eq(access(f.ovl, F_OK), -1, "the overlay stayed");
	diag_init(&d, f.ck);
	cr_assert_eq(ckpt_open(f.ck, &c, &d), 0, "%s", d.msg);
	cr_assert(ckpt_node_child(c->root, "staged"));
	ckpt_close(c);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_commit, a_replaced_checkpoint_is_not_overwritten)
{
	struct fx f;
	char p[256];
	unsigned char *b;
	size_t n;

	fx_init(&f);
	cr_assert_eq(fx_open(&f, NULL, false, false), 0);
	fx_edit(&f);
	/* a job saves to a temporary file and renames it over */
	snprintf(p, sizeof(p), "%s/new.pt", f.dir);
	copy_file(SAMPLE, p);
	cr_assert_eq(rename(p, f.ck), 0);
	read_all(f.ck, &b, &n);
	cr_assert_eq(ovl_commit(f.v, NULL, &f.d), -ESTALE);
	cr_assert(strstr(f.d.msg, "-o discard"), "%s", f.d.msg);
	cr_assert(same_bytes(f.ck, b, n), "the job's file was overwritten");
	cr_assert_eq(access(f.jr, F_OK), 0, "the edits were not kept");
	free(b);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_commit, a_checkpoint_rewritten_in_place_is_not_overwritten)
{
	struct fx f;
	unsigned char *b;
	size_t n;
	int fd;

	fx_init(&f);
	cr_assert_eq(fx_open(&f, NULL, false, false), 0);
	fx_edit(&f);
	/* torch.save to the same path: same inode, truncated, rewritten */
	read_all(SAMPLE, &b, &n);
	b[n / 2] ^= 1;
	fd = open(f.ck, O_WRONLY | O_TRUNC);
	cr_assert_eq(write(fd, b, n), (ssize_t)n);
	close(fd);
	cr_assert_eq(ovl_commit(f.v, NULL, &f.d), -ESTALE);
	cr_assert(same_bytes(f.ck, b, n), "the job's file was overwritten");
	free(b);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_commit, a_killed_write_back_leaves_no_temporary)
{
	struct fx f;
	char tmp[256], out[128];
	struct jrec w = { .op = JR_TEMP };

	fx_init(&f);
	snprintf(out, sizeof(out), "%s/slim.pt", f.dir);
	cr_assert_eq(fx_open(&f, NULL, false, false), 0);
	fx_edit(&f);
	/* what a write-back to -o output= does before it is killed */
	snprintf(tmp, sizeof(tmp), "%s/.slim.pt" CKPT_TMP_SUFFIX "%s", f.dir,
		 f.v->jid);
	jr_field(&w, tmp);
	cr_assert_eq(jr_append(f.v, &w, &f.d), 0);
	close(open(tmp, O_WRONLY | O_CREAT, 0600));
	fx_close(&f);
	cr_assert_eq(fx_open(&f, NULL, false, false), 0, "%s", f.d.msg);
	cr_assert_eq(access(tmp, F_OK), -1, "the temporary stayed");
	cr_assert_eq(ovl_commit(f.v, out, &f.d), 0, "%s", f.d.msg);
	cr_assert_eq(access(out, F_OK), 0);
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_commit, two_mounts_never_share_an_overlay)
{
	struct fx f, g;
	struct ovl_opts o = { 0 };

	fx_init(&f);
	cr_assert_eq(fx_open(&f, NULL, false, false), 0);
	fx_edit(&f);
	/* the file replaced by rename and mounted again: another inode
	   (its own flock), the same overlay directory */
	g = f;
	snprintf(g.ck, sizeof(g.ck), "%s/other.pt", f.dir);
	copy_file(SAMPLE, g.ck);
	diag_init(&g.d, g.ck);
	cr_assert_eq(ckpt_open(g.ck, &g.c, &g.d), 0);
	o.dir = f.ovl;
	cr_assert_neq(ovl_open(g.c, g.ck, &o, &g.v, &g.d), 0);
	cr_assert_eq(g.d.err, -EBUSY, "%s", g.d.msg);
	ckpt_close(g.c);
	fx_fini(&f);
	assert_no_leaks();
}

/* ---- ckpt_save()'s targets ---- */

Test(ckpt_save, follows_a_link_and_refuses_special_files)
{
	struct fx f;
	struct ckpt_write_opts o = { 0 };
	char real[128], link[128], fifo[128];
	struct stat st;

	fx_init(&f);
	cr_assert_eq(fx_open(&f, NULL, true, false), 0);
	snprintf(real, sizeof(real), "%s/real.pt", f.dir);
	snprintf(link, sizeof(link), "%s/link.pt", f.dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", f.dir);
	close(open(real, O_WRONLY | O_CREAT, 0644));
	cr_assert_eq(symlink("real.pt", link), 0);
	cr_assert_eq(ckpt_save(f.c, link, &o, NULL, NULL, NULL, &f.d), 0,
		     "%s", f.d.msg);
	cr_assert_eq(lstat(link, &st), 0);
	cr_assert(S_ISLNK(st.st_mode), "the link was replaced");
	cr_assert_gt(size_of(real), 0);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	diag_init(&f.d, f.ck);
	cr_assert_eq(ckpt_save(f.c, fifo, &o, NULL, NULL, NULL, &f.d),
		     -EINVAL);
	cr_assert(strstr(f.d.msg, "not a regular file"), "%s", f.d.msg);
	cr_assert_eq(lstat(fifo, &st), 0);
	cr_assert(S_ISFIFO(st.st_mode));
	fx_fini(&f);
	assert_no_leaks();
}

/* Whether storage @i's data file is in the overlay. */
static bool data_file(struct fx *f, uint32_t i)
{
	char name[64], p[256];

	ovl_data_name(f->v, i, "", name, sizeof(name));
	snprintf(p, sizeof(p), "%s/%s", f->ovl, name);
	return size_of(p) >= 0;
}

/*
 * A new file renamed over a tensor (rsync's temporary, an editor's save)
 * gives it its bytes; its own data file and descriptor go at once, not at
 * write-back, and the journal still replays, writable or read-only.
 */
Test(ovl_edit, a_file_renamed_over_a_tensor_leaves_no_copy)
{
	struct fx f;
	struct ckpt_node *n, *dir;
	unsigned char b[32];
	uint32_t fresh, head;
	struct ovl_opts ro = { .readonly = true };

	fx_init(&f);
	fx_load_ok(&f, false);
	dir = fx_node(&f, "model");
	memset(b, 7, sizeof(b));
	cr_assert_eq(ovl_create(f.v, dir, ".tmp", &n, &f.d), 0, "%s",
		     f.d.msg);
	cr_assert_eq(ovl_write(f.v, n, b, sizeof(b), 0, &f.d), 32);
	fresh = n->tensor->storage->index;
	cr_assert(data_file(&f, fresh));
	cr_assert_eq(ovl_rename(f.v, dir, ".tmp", dir, "block.0.bias", false,
				&f.d), 0, "%s", f.d.msg);
	cr_assert_not(data_file(&f, fresh), "the temporary's data stayed");
	cr_assert_eq(f.c->storages[fresh]->fd, -1);
	for (int ro_pass = 0; ro_pass < 2; ro_pass++) {
		fx_close(&f);
		if (ro_pass)
			cr_assert_eq(fx_load(&f, &ro), 0, "%s", f.d.msg);
		else
			fx_load_ok(&f, false);
		head = 0;
		cr_assert_eq(ovl_read(f.v, fx_node(&f, "model/block.0.bias"),
				      &head, 4, 0, &f.d), 4, "%s", f.d.msg);
		cr_assert_eq(head, 0x07070707);
		cr_assert_null(ovl_resolve(f.v, "model/.tmp", 10));
		cr_assert_not(data_file(&f, fresh));
	}
	fx_fini(&f);
	assert_no_leaks();
}
