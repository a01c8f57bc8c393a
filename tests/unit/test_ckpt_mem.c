/*
 * test_ckpt_mem.c - what a tensor costs in memory: the builder's memo (a
 * hash table of what the build made, where it was an array over every
 * pickle node) keeps identity, and the structs that exist once per tensor
 * stay the size docs/design.md ("Memory per tensor") counts on; the arena
 * makes resident only what it is about to hand out.
 */
#define _DEFAULT_SOURCE		/* mincore() */
#include "test_util.h"

#include "ckpt/ckpt.h"
#include "ckpt/ckpt_int.h"
#include "zip/ptz.h"
#include "util/arena.h"

#include <sys/mman.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Test(ckpt_memo, zeroed_is_empty_and_stays_usable_after_release)
{
	struct ckpt_memo m = { 0 };
	int x;

	cr_assert_null(ckpt_memo_get(&m, 0));
	cr_assert_null(ckpt_memo_get(&m, 12345));
	cr_assert_eq(ckpt_memo_put(&m, 0, &x), 0);
	cr_assert_eq(ckpt_memo_get(&m, 0), &x);
	ckpt_memo_release(&m);
	cr_assert_null(ckpt_memo_get(&m, 0));
	cr_assert_eq(ckpt_memo_put(&m, 7, &x), 0);
	cr_assert_eq(ckpt_memo_get(&m, 7), &x);
	ckpt_memo_release(&m);
	assert_no_leaks();
}

/* Pages of [@p, @p + @len) that are resident (mincore()), and in all. */
static size_t resident(const char *p, size_t len, size_t *all)
{
	long ps = sysconf(_SC_PAGESIZE);
	uintptr_t from = (uintptr_t)p & ~(uintptr_t)(ps - 1);
	size_t n = ((uintptr_t)p + len - from + ps - 1) / ps, k = 0;
	unsigned char *v = malloc(n);

	cr_assert_not_null(v);
	cr_assert_eq(mincore((void *)from, n * ps, v), 0);
	for (size_t i = 0; i < n; i++)
		k += v[i] & 1;
	free(v);
	*all = n;
	return k;
}

/*
 * A 1 MiB block is populated 256 KiB at a time ahead of the allocations,
 * not whole: the unused end of the newest block costs no memory.  After a
 * trim, allocations still come zeroed and populated.
 */
Test(arena, populates_a_step_ahead_not_the_whole_block)
{
	struct arena a = { 0 };
	size_t all;
	char *p, *q;

	/* blocks of 64, 128, 256 and 512 KiB, then one of 1 MiB */
	for (size_t n = 0; n < (64 + 128 + 256 + 512) << 10; n += 4096)
		cr_assert_not_null(arena_alloc(&a, 4096));
	p = arena_alloc(&a, 4096);
	cr_assert_eq(a.end - p, 1 << 20);
	cr_assert_eq(resident(p, 4096, &all), all);
	/* the rest of the first step may be resident, the block past it not */
	cr_assert_eq(resident(p + (256 << 10), (512 << 10) + (64 << 10), &all),
		     0);
	arena_trim(&a);
	cr_assert_eq(resident(p + 8192, 64 << 10, &all), 0);
	q = arena_alloc(&a, 300 << 10);
	cr_assert_eq(q, p + 4096);
	for (size_t i = 0; i < (300u << 10); i++)
		cr_assert_eq(q[i], 0);
	cr_assert_eq(resident(q, 300 << 10, &all), all);
	arena_release(&a);
	assert_no_leaks();
}

/*
 * Ids the way a torch.save dict numbers its containers and tensors (runs
 * with gaps of 9), plus the extremes, through many regrowths: every one
 * found, overwrites replace, ids never put are absent.
 */
Test(ckpt_memo, keeps_every_id_through_growth)
{
	enum { N = 200000 };
	static char obj[N];
	struct ckpt_memo m = { 0 };
	const uint32_t big = (1u << 26) - 1;	/* PKL_MAX_NODES - 1 */

	for (uint32_t i = 0; i < N; i++)
		cr_assert_eq(ckpt_memo_put(&m, 9 * i + 3, &obj[i]), 0);
	cr_assert_eq(ckpt_memo_put(&m, 0, &obj[0]), 0);
	cr_assert_eq(ckpt_memo_put(&m, big, &obj[1]), 0);
	cr_assert_eq(m.n, N + 2);
	cr_assert_leq(m.n * 2, m.cap);
	for (uint32_t i = 0; i < N; i++) {
		cr_assert_eq(ckpt_memo_get(&m, 9 * i + 3), &obj[i]);
		cr_assert_null(ckpt_memo_get(&m, 9 * i + 4));
	}
	cr_assert_eq(ckpt_memo_get(&m, 0), &obj[0]);
	cr_assert_eq(ckpt_memo_get(&m, big), &obj[1]);
	cr_assert_eq(ckpt_memo_put(&m, 3, &obj[5]), 0);
	cr_assert_eq(ckpt_memo_get(&m, 3), &obj[5]);
	cr_assert_eq(m.n, N + 2);
	ckpt_memo_release(&m);
	assert_no_leaks();
}

/*
 * A ckpt_node, a ckpt_tensor (plus its shape and stride), a ckpt_storage
 * and a ptz_entry exist once per tensor of a state_dict, for the life of
 * a mount.  These were 184, 176, 120 and 72 bytes with padding and the
 * quantizer's fields in every tensor, and the node carried a directory's
 * fields too (the tensor's ndim was an int until 2026-11-29: 8 bytes
 * of padding; its strides, which follow its sizes, had a pointer of
 * their own, and its byte count is numel x the dtype's size); a field
 * added here costs a 1,000,000-tensor mount that many times over.
 */
Test(ckpt_model, per_tensor_structs_stay_packed)
{
	cr_assert_leq(sizeof(struct ckpt_node), 104);
	cr_assert_leq(sizeof(struct ckpt_tensor), 72);
	cr_assert_leq(sizeof(struct ckpt_storage), 104);
	cr_assert_leq(sizeof(struct ptz_entry), 56);
	/* what a plain tensor opened with CKPT_OPEN_ROWS costs instead of
	   a node, a tensor and a storage (ckpt_row.c) */
	cr_assert_leq(sizeof(struct ckpt_row), 32);
	/* and in the pickle graph, a node (three a tensor of a state dict)
	   and a folded call's record (pkl_fold.c) */
	cr_assert_leq(sizeof(struct pkl_value), 32);
	cr_assert_leq(sizeof(struct pkl_fold), 40);
	cr_assert_null(ckpt_no_ext.qscheme);
	cr_assert_null(ckpt_no_ext.cls);
	cr_assert_null(ckpt_no_ext.inline_data);
	cr_assert_null(ckpt_no_ext.qscales);
}

/*
 * Arena blocks are mmap'd, where LeakSanitizer does not look for pointers
 * unless told to: the value texts only the model's nodes point to read as
 * leaked whenever a leak check ran while a checkpoint was open (libFuzzer
 * runs one after any input that allocated more than it freed, and
 * fuzz_ovl keeps its model open across inputs).
 */
Test(ckpt_model, an_open_checkpoint_is_no_leak)
{
	struct ckpt *c;
	struct diag d;
	uint32_t values = 0;

	diag_init(&d, PT_TEST_DATA "/sample.pt");
	cr_assert_eq(ckpt_open(PT_TEST_DATA "/sample.pt", &c, &d), 0, "%s",
		     d.msg);
	for (uint32_t i = 0; i < c->nnodes; i++)
		values += c->nodes[i]->text != NULL;
	cr_assert_gt(values, 0, "the sample has python values");
	assert_no_leaks();
	ckpt_close(c);
}

/*
 * Only directories own a struct ckpt_dir; every leaf shares the empty,
 * read-only ckpt_no_dir, and an edit that makes a directory gives it its
 * own (a write through a leaf's would reach every leaf, or fault).
 */
Test(ckpt_model, only_directories_own_a_children_table)
{
	struct ckpt *c;
	struct diag d;
	struct ckpt_node *n;
	char x[] = "x";
	uint32_t dirs = 0, leaves = 0, shared = 0;

	diag_init(&d, PT_TEST_DATA "/sample.pt");
	cr_assert_eq(ckpt_open(PT_TEST_DATA "/sample.pt", &c, &d), 0, "%s",
		     d.msg);
	for (uint32_t i = 0; i < c->nnodes; i++) {
		n = c->nodes[i];
		if (ckpt_node_is_dir(n)) {
			cr_assert_neq(n->dir, &ckpt_no_dir, "%s", n->name);
			dirs++;
		} else {
			cr_assert_eq(n->dir, &ckpt_no_dir, "%s", n->name);
			leaves++;
		}
	}
	cr_assert_gt(dirs, 1);
	cr_assert_gt(leaves, 1);
	/* a folded call's tensor keeps its shape in the call's record */
	for (uint32_t i = 0; i < c->ntensors; i++)
		shared += c->tensors[i]->shape !=
			  (int64_t *)(c->tensors[i] + 1);
	cr_assert_gt(shared, c->ntensors / 2, "most of the sample's tensors "
		     "share their shape with the pickle document");
	cr_assert_eq(ckpt_no_dir.nkids, 0);
	n = ckpt_node_fresh(c, CKPT_N_DIR, "dict");
	cr_assert_not_null(n);
	cr_assert_neq(n->dir, &ckpt_no_dir);
	cr_assert_eq(ckpt_dir_insert(c, n, ckpt_node_fresh(c, CKPT_N_VALUE,
				     "int"), x), 0);
	cr_assert_eq(n->dir->nkids, 1);
	cr_assert_eq(ckpt_no_dir.nkids, 0);
	ckpt_close(c);
}

/*
 * A node gets edit state (struct ckpt_nedit) only when an edit writes or
 * moves it; until then where it was at open is where it is.  The first
 * rename or move keeps its home and home name, later ones leave them, and
 * a fresh node has none.
 */
Test(ckpt_model, a_node_keeps_its_home_from_its_first_move)
{
	struct ckpt *c;
	struct diag d;
	struct ckpt_node *n = NULL, *home, *dir;
	char *name, a[] = "renamed", b[] = "moved", x[] = "x";

	diag_init(&d, PT_TEST_DATA "/sample.pt");
	cr_assert_eq(ckpt_open(PT_TEST_DATA "/sample.pt", &c, &d), 0, "%s",
		     d.msg);
	for (uint32_t i = 0; i < c->nnodes; i++) {
		cr_assert_eq(c->nodes[i]->ed, &ckpt_no_edit, "%s",
			     c->nodes[i]->name);
		if (!n && c->nodes[i]->kind == CKPT_N_TENSOR)
			n = c->nodes[i];
	}
	cr_assert_not_null(n);
	home = n->parent;
	name = n->name;
	cr_assert_eq(ckpt_node_home(n), home);
	cr_assert_eq(ckpt_node_home_name(n), name);
	cr_assert_null(ckpt_node_home(c->root));
	cr_assert_null(ckpt_node_home_name(c->root));

	cr_assert_eq(ckpt_dir_rename(c, home, n, a), 0);
	cr_assert_neq(n->ed, &ckpt_no_edit);
	cr_assert_str_eq(n->name, "renamed");
	cr_assert_eq(ckpt_node_home(n), home);
	cr_assert_eq(ckpt_node_home_name(n), name);

	dir = ckpt_node_fresh(c, CKPT_N_DIR, "dict");
	cr_assert_not_null(dir);
	cr_assert_null(ckpt_node_home(dir));
	cr_assert_null(ckpt_node_home_name(dir));
	cr_assert_eq(ckpt_dir_insert(c, c->root, dir, x), 0);
	cr_assert_null(ckpt_node_home(dir), "a fresh node has no home");
	ckpt_dir_remove(home, n);
	cr_assert_eq(ckpt_dir_insert(c, dir, n, b), 0);
	cr_assert_eq(n->parent, dir);
	cr_assert_eq(ckpt_node_home(n), home);
	cr_assert_eq(ckpt_node_home_name(n), name);
	ckpt_close(c);
}

/* The bytes ckpt_write() makes of @path opened with @flags, data.pkl
 * emitted anew (repickle) so that the whole graph is walked. */
static unsigned char *repickled(const char *path, unsigned flags,
				uint32_t *nfolded, size_t *len)
{
	struct ckpt_write_opts o = { .repickle = true };
	struct ckpt *c;
	struct diag d;
	unsigned char *buf;
	FILE *f = tmpfile();
	long n;

	cr_assert_not_null(f);
	diag_init(&d, path);
	cr_assert_eq(ckpt_open_with(path, flags, &c, &d), 0, "%s", d.msg);
	*nfolded = c->doc->nfolded;
	cr_assert_eq(ckpt_write(c, fileno(f), &o, &d), 0, "%s", d.msg);
	ckpt_close(c);
	n = lseek(fileno(f), 0, SEEK_END);
	cr_assert_gt(n, 0);
	buf = malloc((size_t)n);
	cr_assert_eq(pread(fileno(f), buf, (size_t)n, 0), n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/*
 * The open folds the sample's plain tensor rebuild calls (pkl_fold.c) and
 * write-back makes the graph whole again first (ckpt_whole()): the new
 * archive is the one an unfolded open writes, byte for byte.
 */
Test(ckpt_model, a_folded_open_writes_back_what_a_whole_one_does)
{
	const char *path = PT_TEST_DATA "/sample.pt";
	uint32_t nf, nw;
	size_t lf, lw;
	unsigned char *f = repickled(path, 0, &nf, &lf);
	unsigned char *w = repickled(path, CKPT_OPEN_WHOLE, &nw, &lw);

	cr_assert_gt(nf, 0, "the sample's tensors are folded");
	cr_assert_eq(nw, 0);
	cr_assert_eq(lf, lw);
	cr_assert_eq(memcmp(f, w, lf), 0);
	free(f);
	free(w);
	assert_no_leaks();
}
