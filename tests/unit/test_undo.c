/*
 * test_undo.c - status and undo in the core, without FUSE or torch: what
 * ovl_summarize() says after each kind of edit (and a file renamed over a
 * key, which is no removal), ovl_discard() removing only what the journal
 * names, and ovl_revert(): a renamed, removed and rewritten key back, a
 * tie refused unless both names go together, and the same state after the
 * journal is replayed, also when the crash left a reverted storage's data
 * file behind.  The checkpoint is the bundled sample (model/embed.weight
 * and model/head.weight share storage 0), copied per test.
 */
#define _GNU_SOURCE 1
#include "test_util.h"
#include "ovl_fixture.h"

static void fx_open(struct fx *f)
{
	fx_load_ok(f, false);
}

static void fx_init(struct fx *f)
{
	fx_make(f, "test_undo");
	fx_open(f);
}

static struct ckpt_node *at(struct fx *f, const char *path)
{
	return ovl_resolve(f->v, path, strlen(path));
}

/* Write @len bytes of @b at 0 into the tensor or value at @path. */
static void put(struct fx *f, const char *path, const void *b, size_t len)
{
	struct ckpt_node *n = at(f, path);

	cr_assert(n, "%s", path);
	if (n->kind == CKPT_N_VALUE)
		cr_assert_eq(ovl_truncate(f->v, n, 0, &f->d), 0, "%s",
			     f->d.msg);
	cr_assert_eq(ovl_write(f->v, n, b, len, 0, &f->d), (long long)len,
		     "%s", f->d.msg);
	cr_assert_eq(ovl_flush(f->v, n, &f->d), 0, "%s", f->d.msg);
}

/* The first 4 bytes of tensor @path. */
static uint32_t head4(struct fx *f, const char *path)
{
	uint32_t x = 0;

	cr_assert_eq(ovl_read(f->v, at(f, path), &x, 4, 0, &f->d), 4);
	return x;
}

static int revert1(struct fx *f, const char *path)
{
	const char *p[1] = { path };

	diag_init(&f->d, f->ck);
	return ovl_revert(f->v, p, 1, &f->d);
}

static const struct ovl_change *find(const struct ovl_summary *s, int kind,
				     const char *path)
{
	for (size_t i = 0; i < s->nitems; i++)
		if (s->items[i].kind == kind && !strcmp(s->items[i].path, path))
			return &s->items[i];
	return NULL;
}

static bool nothing_staged(struct fx *f)
{
	struct ovl_summary s;
	bool none;

	cr_assert_eq(ovl_summarize(f->v, 10, &s, &f->d), 0);
	none = !s.changed && !s.nitems;
	ovl_summary_free(&s);
	return none;
}

Test(ovl_summary, each_kind_of_edit)
{
	struct fx f;
	struct ovl_summary s;
	struct ckpt_node *n;
	const struct ovl_change *c;
	const float one = 1;

	fx_init(&f);
	cr_assert(nothing_staged(&f));
	put(&f, "model/block.0.weight", &one, 4);
	cr_assert_eq(ovl_rename(f.v, at(&f, "model"), "block.0.bias",
				at(&f, "model"), "b0", false, &f.d), 0);
	cr_assert_eq(ovl_unlink(f.v, f.c->root, "loss", &f.d), 0);
	cr_assert_eq(ovl_mkdir(f.v, f.c->root, "extra", &n, &f.d), 0);
	cr_assert_eq(ovl_mkdir(f.v, n, "inner", &n, &f.d), 0);
	put(&f, "epoch", "13\n", 3);
	cr_assert_eq(ovl_summarize(f.v, 10, &s, &f.d), 0, "%s", f.d.msg);
	cr_assert(s.changed);
	cr_assert_eq(s.count[OVL_C_DATA], 1);
	cr_assert_eq(s.count[OVL_C_RENAME], 1);
	cr_assert_eq(s.count[OVL_C_REMOVE], 1);
	cr_assert_eq(s.count[OVL_C_NEW], 1, "a new subtree is one new key");
	cr_assert_eq(s.count[OVL_C_VALUE], 1);
	cr_assert(find(&s, OVL_C_DATA, "model/block.0.weight"));
	c = find(&s, OVL_C_RENAME, "model/b0");
	cr_assert(c && !strcmp(c->from, "model/block.0.bias"));
	cr_assert(find(&s, OVL_C_REMOVE, "loss"));
	c = find(&s, OVL_C_NEW, "extra");
	cr_assert(c && c->dir);
	c = find(&s, OVL_C_VALUE, "epoch");
	cr_assert(c && !strcmp(c->from, "12") && !strcmp(c->to, "13"));
	cr_assert_eq(s.storages, 1);
	cr_assert_eq(s.files, 1);
	ovl_summary_free(&s);
	fx_fini(&f);
	assert_no_leaks();
}

/* A new file renamed over a key (rsync, editors) takes its identity: a
 * data change, no removal and no new key; reverting gives the key back. */
Test(ovl_revert, file_renamed_over_a_key)
{
	struct fx f;
	struct ovl_summary s;
	struct ckpt_node *n, *orig;
	unsigned char b[32];
	uint32_t was;

	fx_init(&f);
	orig = at(&f, "model/block.0.bias");
	was = head4(&f, "model/block.0.bias");
	memset(b, 7, sizeof(b));
	cr_assert_eq(ovl_create(f.v, at(&f, "model"), "tmp", &n, &f.d), 0);
	cr_assert_eq(ovl_write(f.v, n, b, 32, 0, &f.d), 32);
	cr_assert_eq(ovl_rename(f.v, at(&f, "model"), "tmp", at(&f, "model"),
				"block.0.bias", false, &f.d), 0, "%s", f.d.msg);
	cr_assert_neq(at(&f, "model/block.0.bias"), orig);
	cr_assert_eq(head4(&f, "model/block.0.bias"), 0x07070707);
	cr_assert_eq(ovl_summarize(f.v, 10, &s, &f.d), 0);
	cr_assert_eq(s.count[OVL_C_DATA], 1);
	cr_assert_eq(s.count[OVL_C_REMOVE] + s.count[OVL_C_NEW] +
		     s.count[OVL_C_RENAME], 0);
	ovl_summary_free(&s);
	cr_assert_eq(revert1(&f, "model/block.0.bias"), 0, "%s", f.d.msg);
	cr_assert_eq(at(&f, "model/block.0.bias"), orig);
	cr_assert_eq(head4(&f, "model/block.0.bias"), was);
	cr_assert(nothing_staged(&f));
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_revert, tied_weights_go_together)
{
	struct fx f;
	const char *both[2] = { "model/embed.weight", "model/head.weight" };
	const float one = 1;

	fx_init(&f);
	put(&f, "model/embed.weight", &one, 4);
	put(&f, "epoch", "13\n", 3);
	cr_assert_eq(revert1(&f, "model/embed.weight"), -EBUSY);
	cr_assert(strstr(f.d.msg, "model/head.weight views it too"), "%s",
		  f.d.msg);
	cr_assert_eq(head4(&f, "model/head.weight"), 0x3f800000,
		     "refused, yet changed");
	diag_init(&f.d, f.ck);
	cr_assert_eq(ovl_revert(f.v, both, 2, &f.d), 0, "%s", f.d.msg);
	cr_assert_neq(head4(&f, "model/head.weight"), 0x3f800000);
	cr_assert(!f.c->storages[0]->modified);
	cr_assert_eq(revert1(&f, "model"), 1, "nothing left to revert there");
	cr_assert(!nothing_staged(&f), "the value edit stays");
	fx_fini(&f);
	assert_no_leaks();
}

/*
 * Reverts are journaled: reopening gives the same tree.  A copy-up after a
 * revert is kept; a data file the revert should have removed (the crash
 * came first) is not attached.
 */
Test(ovl_revert, replayed_after_a_crash)
{
	struct fx f;
	struct ckpt_node *n;
	const float one = 1, two = 2;
	char name[160];
	int fd;

	fx_init(&f);
	put(&f, "model/block.0.bias", &one, 4);
	put(&f, "model/block.1.bias", &one, 4);
	cr_assert_eq(ovl_unlink(f.v, at(&f, "model"), "block.1.weight", &f.d),
		     0);
	cr_assert_eq(ovl_rename(f.v, f.c->root, "config", f.c->root, "cfg",
				false, &f.d), 0);
	cr_assert_eq(ovl_mkdir(f.v, at(&f, "model"), "new", &n, &f.d), 0);
	cr_assert_eq(revert1(&f, "model"), 0, "%s", f.d.msg);
	cr_assert(!ckpt_node_child(at(&f, "model"), "new"));
	cr_assert(at(&f, "model/block.1.weight"));
	/* storage 2 (block.0.bias) copied up again after the revert */
	put(&f, "model/block.0.bias", &two, 4);
	/* as if the crash came before the revert removed storage 4's file */
	snprintf(name, sizeof(name), "%s/%s.4", f.ovl, f.v->jid);
	fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0600);
	cr_assert(fd >= 0, "%s", name);
	cr_assert_eq(ftruncate(fd, 32), 0);
	close(fd);
	fx_close(&f);
	fx_open(&f);
	cr_assert(at(&f, "cfg") && !at(&f, "config"), "the rename is kept");
	cr_assert(at(&f, "model/block.1.weight"));
	cr_assert(!at(&f, "model/new"));
	cr_assert_eq(head4(&f, "model/block.0.bias"), 0x40000000);
	cr_assert(!f.c->storages[4]->modified, "a reverted file attached");
	cr_assert_neq(access(name, F_OK), 0, "the stale file stayed");
	fx_fini(&f);
	assert_no_leaks();
}

Test(ovl_discard, removes_what_the_journal_names)
{
	struct fx f;
	struct ckpt_node *n;
	const float one = 1;
	char mine[160], data[160], jr[160];
	struct stat a, b;
	FILE *fp;

	fx_init(&f);
	cr_assert_eq(stat(f.ck, &a), 0);
	put(&f, "model/block.0.bias", &one, 4);
	snprintf(mine, sizeof(mine), "%s/notes", f.ovl);
	snprintf(data, sizeof(data), "%s/%s.2", f.ovl, f.v->jid);
	snprintf(jr, sizeof(jr), "%s/" OVL_JOURNAL, f.ovl);
	fp = fopen(mine, "w");
	cr_assert(fp);
	fputs("mine\n", fp);
	fclose(fp);
	cr_assert_eq(access(data, F_OK), 0);
	cr_assert_eq(ovl_discard(f.v, &f.d), 0, "%s", f.d.msg);
	cr_assert_neq(access(data, F_OK), 0, "the data file stayed");
	cr_assert_neq(access(jr, F_OK), 0, "the journal stayed");
	cr_assert_eq(access(mine, F_OK), 0, "a file ptfs did not make went");
	cr_assert_eq(ovl_commit(f.v, NULL, &f.d), 1, "written back after all");
	cr_assert_eq(ovl_mkdir(f.v, f.c->root, "x", &n, &f.d), -EROFS);
	cr_assert(strstr(f.d.msg, "dropped"), "%s", f.d.msg);
	cr_assert_eq(stat(f.ck, &b), 0);
	cr_assert(a.st_ino == b.st_ino && a.st_size == b.st_size &&
		  a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
		  a.st_mtim.tv_nsec == b.st_mtim.tv_nsec);
	fx_fini(&f);
	assert_no_leaks();
}
