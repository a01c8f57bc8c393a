/*
 * test_ckpt_rows.c - rows (core/ckpt/ckpt_row.c): a checkpoint opened
 * with CKPT_OPEN_ROWS shows through ckpt_node_at(), ckpt_kid(),
 * ckpt_tensor_at() and ckpt_storage_at() (and the *_size_at() counts),
 * field by field, what a plain open builds, finds every child by name,
 * and ckpt_materialize() makes that very model; on every fixture,
 * torch's and the real-world ones.
 */
#include "test_util.h"
#include "fixtures.h"
#include "pickle_asm.h"

#include "ckpt/ckpt.h"
#include "diag/diag.h"
#include "pickle/pkl.h"
#include "zip/ptz.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void same_storage(const struct ckpt_storage *a,
			 const struct ckpt_storage *b)
{
	cr_assert_str_eq(a->key, b->key);
	cr_assert_eq(a->dtype, b->dtype, "storage %s", a->key);
	cr_assert_str_eq(a->location, b->location);
	cr_assert_eq(a->numel, b->numel);
	cr_assert_eq(a->nbytes, b->nbytes);
	cr_assert_eq(!a->rec, !b->rec);
	if (a->rec)
		cr_assert_eq(a->rec->header_off, b->rec->header_off);
	cr_assert_eq(a->data_off, b->data_off);
	cr_assert_eq(a->pkl_off, b->pkl_off, "storage %s: %llu, %llu",
		     a->key, (unsigned long long)a->pkl_off,
		     (unsigned long long)b->pkl_off);
	cr_assert_eq(a->index, b->index);
	cr_assert_eq(a->ntensors, b->ntensors, "storage %s", a->key);
	cr_assert_eq(a->untyped, b->untyped);
	cr_assert_eq(a->modified, b->modified);
	cr_assert_eq(a->fresh, b->fresh);
	cr_assert_eq(a->zdone, b->zdone);
	cr_assert_eq(a->retyped, b->retyped);
	cr_assert_eq(!a->dirty, !b->dirty);
}

static void same_tensor(const struct ckpt_tensor *a,
			const struct ckpt_tensor *b)
{
	cr_assert_eq(a->kind, b->kind);
	cr_assert_eq(a->requires_grad, b->requires_grad);
	cr_assert_eq(a->parameter, b->parameter);
	cr_assert_eq(a->conj, b->conj);
	cr_assert_eq(a->neg, b->neg);
	cr_assert_eq(a->contiguous, b->contiguous, "tensor %u", a->index);
	cr_assert_eq(a->shown, b->shown);
	cr_assert_eq(a->fresh, b->fresh);
	cr_assert_eq(a->shape_set, b->shape_set);
	cr_assert_eq(a->fixed, b->fixed);
	cr_assert_eq(a->x_own, b->x_own);
	cr_assert_eq(a->ndim, b->ndim);
	cr_assert_eq(a->index, b->index);
	cr_assert_eq(a->dtype, b->dtype);
	cr_assert_eq(!a->storage, !b->storage);
	if (a->storage)
		same_storage(a->storage, b->storage);
	cr_assert_eq(a->offset, b->offset);
	cr_assert_eq(memcmp(a->shape, b->shape,
			    2 * (size_t)a->ndim * sizeof(a->shape[0])), 0);
	cr_assert_eq(a->numel, b->numel);
	cr_assert_eq(a->x == &ckpt_no_ext, b->x == &ckpt_no_ext);
	cr_assert_eq(a->pkl_off, b->pkl_off);
}

static uint32_t id_of(const struct ckpt_node *n)
{
	return n ? n->id : UINT32_MAX;
}

static void same_node(const struct ckpt_node *a, const struct ckpt_node *b)
{
	cr_assert_eq(a->kind, b->kind, "node %u", a->id);
	cr_assert_eq(a->step, b->step);
	cr_assert_eq(a->dead, b->dead);
	cr_assert_eq(a->fresh, b->fresh);
	cr_assert_eq(a->edited, b->edited);
	cr_assert_eq(a->pending, b->pending);
	cr_assert_eq(a->index, b->index);
	cr_assert_eq(a->id, b->id);
	cr_assert_eq(!a->name, !b->name);
	if (a->name)
		cr_assert_str_eq(a->name, b->name);
	cr_assert_eq(id_of(a->parent), id_of(b->parent));
	cr_assert_eq(a->dir->nkids, b->dir->nkids);
	cr_assert_eq(!a->key, !b->key);
	if (a->key)
		cr_assert_eq(a->key->off, b->key->off);
	cr_assert_eq(!a->val, !b->val);
	if (a->val)
		cr_assert_eq(a->val->off, b->val->off);
	cr_assert_eq(!a->type, !b->type);
	if (a->type)
		cr_assert_str_eq(a->type, b->type);
	cr_assert_eq(!a->tensor, !b->tensor);
	if (a->tensor)
		same_tensor(a->tensor, b->tensor);
	cr_assert_eq(id_of(a->target), id_of(b->target));
	cr_assert_eq(a->textlen, b->textlen);
	if (a->textlen)
		cr_assert_eq(memcmp(a->text, b->text, a->textlen), 0);
	cr_assert_eq(a->ed == &ckpt_no_edit, b->ed == &ckpt_no_edit);
}

/* @r (maybe with rows) and @p (a plain open) are the same model. */
static void same_model(const struct ckpt *r, const struct ckpt *p)
{
	struct ckpt_rowview v;

	cr_assert_eq(r->nnodes, p->nnodes);
	cr_assert_eq(r->ntensors, p->ntensors);
	cr_assert_eq(r->nstorages, p->nstorages);
	cr_assert_eq(r->nshown, p->nshown);
	for (uint32_t i = 0; i < p->nnodes; i++) {
		const struct ckpt_node *a = ckpt_node_at(r, r->nodes[i], &v);
		const struct ckpt_node *b = p->nodes[i];

		same_node(a, b);
		for (uint32_t k = 0; k < b->dir->nkids; k++) {
			struct ckpt_rowview w;
			const struct ckpt_node *x = ckpt_kid(r, a, k, &w);

			cr_assert_eq(x->id, b->dir->kids[k]->id);
			cr_assert_eq(ckpt_node_child(a, x->name),
				     a->dir->kids[k], "%s", x->name);
		}
	}
	for (uint32_t i = 0; i < p->ntensors; i++) {
		uint64_t nbytes = 0;

		same_tensor(ckpt_tensor_at(r, i, &v), p->tensors[i]);
		cr_assert_eq(ckpt_tensor_size_at(r, i, &nbytes),
			     p->tensors[i]->dtype);
		cr_assert_eq(nbytes, ckpt_tensor_nbytes(p->tensors[i]));
	}
	for (uint32_t i = 0; i < p->nstorages; i++) {
		uint64_t nbytes = 0;

		same_storage(ckpt_storage_at(r, i, &v), p->storages[i]);
		cr_assert_eq(ckpt_storage_size_at(r, i, &nbytes),
			     p->storages[i]->dtype);
		cr_assert_eq(nbytes, p->storages[i]->nbytes);
	}
}

struct counts {
	unsigned files, rows;
};

static void compare(const char *path, void *arg)
{
	struct counts *k = arg;
	struct ckpt *r, *p;
	struct diag d;
	int rc;

	diag_init(&d, path);
	rc = ckpt_open(path, &p, &d);
	if (rc) {	/* refused alike with rows (test_ckpt checks why) */
		cr_assert_eq(ckpt_open_with(path, CKPT_OPEN_ROWS, &r, &d), rc);
		return;
	}
	cr_assert_eq(p->nrows, 0, "%s: rows without CKPT_OPEN_ROWS", path);
	cr_assert_eq(ckpt_open_with(path, CKPT_OPEN_ROWS, &r, &d), 0, "%s",
		     path);
	k->files++;
	k->rows += r->nrows;
	same_model(r, p);
	cr_assert_eq(ckpt_materialize(r, &d), 0);
	cr_assert_eq(r->nrows, 0);
	for (uint32_t i = 0; i < r->nnodes; i++)
		cr_assert(!ckpt_is_row(r->nodes[i]));
	for (uint32_t i = 0; i < r->nstorages; i++)
		cr_assert(!ckpt_is_row(r->storages[i]));
	same_model(r, p);
	ckpt_close(r);
	ckpt_close(p);
}

Test(ckpt_rows, show_what_a_plain_open_builds)
{
	struct counts k = { 0, 0 };

	for_each_fixture(compare, &k);
	cr_log_info("%u files, %u rows", k.files, k.rows);
	/* rows must be there, or this passes without them: torch's
	   generated fixtures have 48 (22 files), with the real-world corpus
	   of ../shared 630; a clone without ../shared has only the first */
	cr_assert_geq(k.rows, 40);
	assert_no_leaks();
}

/* ---- what a row cannot stay ---- */

static const int32_t four[] = { 4 }, one[] = { 1 };

/* A float32 tensor of @numel over storage @key, under the key pushed
 * just before. */
static void item(struct buf *b, const char *key, int32_t numel)
{
	pk_tensor(b, "FloatStorage", key, numel, 0, numel == 4 ? four : one,
		  one, 1, false);
}

/*
 * {@k1: tensor over storage "0", @k2: tensor over storage @key2}, with
 * ints for keys given as NULL (1 and 2), and records data/0 and data/1 of
 * 16 bytes; opened with rows and without, which must agree.  Returns the
 * open with rows (caller closes), NULL if both refused it with @err.
 */
static struct ckpt *two(const char *k1, const char *k2, const char *key2,
			int32_t numel2, int err)
{
	static const char zero[16];
	const struct zent recs[] = {
		{ "m/data/0", zero, sizeof(zero), false },
		{ "m/data/1", zero, sizeof(zero), false },
	};
	struct ckpt *r, *p;
	struct diag d1, d2;
	struct buf b = { 0 };
	const char *path;
	char l1[320], l2[320];

	pk_start(&b);
	op(&b, '}');
	op(&b, '(');
	if (k1)
		pk_str(&b, k1);
	else
		pk_int(&b, 1);
	item(&b, "0", 4);
	if (k2)
		pk_str(&b, k2);
	else
		pk_int(&b, 2);
	item(&b, key2, numel2);
	op(&b, 'u');
	op(&b, '.');
	path = write_ckpt(&b, "3\n", recs, 2);
	free(b.p);
	diag_init(&d1, path);
	diag_init(&d2, path);
	cr_assert_eq(ckpt_open(path, &p, &d1), err, "%s",
		     diag_line(&d1, l1, sizeof(l1)));
	cr_assert_eq(ckpt_open_with(path, CKPT_OPEN_ROWS, &r, &d2), err);
	if (err) {
		cr_assert_str_eq(diag_line(&d2, l2, sizeof(l2)),
				 diag_line(&d1, l1, sizeof(l1)));
		return NULL;
	}
	same_model(r, p);
	ckpt_close(p);
	return r;
}

/*
 * A second tensor naming a row's storage by a str of its own (torch
 * would fetch the first one's from the memo, and that tensor would not
 * be a row): the storage is made for good, viewed by both; the first
 * tensor stays a row.
 */
Test(ckpt_rows, a_storage_viewed_again_is_made_for_good)
{
	struct ckpt_rowview v;
	struct ckpt *r = two("a", "b", "0", 4, 0);

	cr_assert_eq(r->nrows, 1);
	cr_assert(ckpt_is_row(r->nodes[1]));
	cr_assert(!ckpt_is_row(r->storages[0]));
	cr_assert_eq(r->storages[0]->ntensors, 2);
	cr_assert_eq(ckpt_kid(r, r->root, 0, &v)->tensor->storage,
		     r->storages[0]);
	ckpt_close(r);
	assert_no_leaks();
}

/* ... and one that disagrees about it is refused as without rows. */
Test(ckpt_rows, a_storage_given_two_sizes_is_refused_alike)
{
	cr_assert_null(two("a", "b", "0", 1, -EILSEQ));
	assert_no_leaks();
}

/*
 * A row's name is its key.  When an earlier key is shown under the same
 * name (int 1 and str "1"), the row is renamed "1%#1" and so is made a
 * node for good, found under its new name.
 */
Test(ckpt_rows, a_row_renamed_by_a_collision_is_made_a_node)
{
	struct ckpt *r = two(NULL, "1", "1", 4, 0);
	const struct ckpt_node *n = ckpt_node_child(r->root, "1%#1");

	cr_assert_not_null(n);
	cr_assert(!ckpt_is_row(n));
	cr_assert_eq(n->kind, CKPT_N_TENSOR);
	cr_assert_eq(r->nrows, 0);	/* an int key makes no row */
	ckpt_close(r);
	r = two("x", "y", "1", 4, 0);
	cr_assert_eq(r->nrows, 2);
	ckpt_close(r);
	assert_no_leaks();
}
