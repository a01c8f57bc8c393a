/*
 * ckpt_row.c - a plain tensor kept as a row instead of a node, a tensor
 * and a storage (ckpt.h, "Rows"; docs/design.md, "Memory per tensor").
 *
 * torch.save's usual tensor is a folded rebuild call in the pickle
 * document (pkl_fold.c): its record already holds the dtype's storage
 * class, numel, offset, sizes, strides, requires_grad, location and the
 * storage key, and its dict key str is its file name.  What the node,
 * tensor and storage add to that (333 bytes with their slots and names)
 * is derived, so the build keeps only what is not in the document:
 *
 *   field    bytes  what
 *   item         8  the dict's item in the pickle document: the key (a
 *                   str, the file name) and the PKL_FOLDED rebuild call
 *                   (item arrays never move once the parse is done)
 *   rec          4  the storage's zip record, as its index + 1
 *                   (zip_storages())
 *   id           4  slot in c->nodes[] (inode numbers: fs/ptfs_ino.c)
 *   parent       4  the dict's node id
 *   index        4  position in the dict's kids[]
 *   tindex       4  slot in c->tensors[]
 *   step, dtype  2  enum ckpt_step; ckpt_dtype_index() of the storage's
 *
 * (32 bytes.)  Its storage's slot in c->storages[] is its storage key's
 * number: a row's storage is at its home (ckpt_storage.c).
 *
 * Its four slots hold the row's address with bit 63 set (ckpt_is_row()),
 * which no user-space pointer has: code that missed a row faults at once
 * instead of reading garbage.  The build asks ckpt_row_add() first for
 * each dict item; it takes only the usual form and leaves anything else,
 * and anything that fails a check, to the build, which then makes the
 * node and reports what is wrong as it always did.  A view fills node,
 * tensor and storage from the row, field by field what the build would
 * have made (test_ckpt_rows compares every field on every fixture);
 * ckpt_materialize() makes them for good, in the same slots.  A storage
 * that a second tensor names after all (a pickle that repeats the key as
 * a str of its own) is made for good then (ckpt_row_storage()), and a
 * row whose name collides is made a node (ckpt_dir_adopt()).
 */
#include "ckpt_int.h"

#include <errno.h>
#include <string.h>

#define ROW_TAG	((uintptr_t)1 << 63)

static void *tagged(struct ckpt_row *r)
{
	return (void *)((uintptr_t)r | ROW_TAG);
}

struct ckpt_row *ckpt_row_of(const void *p)
{
	return (struct ckpt_row *)((uintptr_t)p & ~ROW_TAG);
}

static const struct pkl_fold *fold(const struct ckpt_row *r)
{
	return r->item[1]->u.fold.rec;
}

/* The slot of @r's storage in c->storages[]: its home. */
static uint32_t sindex(const struct ckpt_row *r)
{
	return (uint32_t)ckpt_storage_dense(fold(r)->key->u.s.p);
}

const char *ckpt_row_key(const struct ckpt_row *r)
{
	return fold(r)->key->u.s.p;
}

/* Row @r's storage, whose slot is @k (sindex()), into @s. */
static void fill_storage(const struct ckpt *c, const struct ckpt_row *r,
			 uint32_t k, struct ckpt_storage *s)
{
	const struct pkl_fold *f = fold(r);

	memset(s, 0, sizeof(*s));
	s->key = f->key->u.s.p;
	s->dtype = ckpt_dtype_at(r->dtype);
	s->location = f->kind->loc;
	s->numel = (uint64_t)f->numel;
	s->nbytes = s->numel * s->dtype->size;	/* checked by the build */
	s->rec = r->rec ? &c->zip.entries[r->rec - 1] : NULL;
	s->pkl_off = r->item[1]->off - f->pid_back;
	s->index = k;
	s->ntensors = 1;
	s->fd = c->fd;
}

/*
 * The tensor of row @r, viewing storage @s, into @v; numel and contiguous
 * come from ckpt_tensor_check(), whose result this returns (a row's
 * passed at the build).
 */
static int fill_tensor_with(const struct ckpt *c, const struct ckpt_row *r,
			    const struct ckpt_storage *s,
			    struct ckpt_rowview *v)
{
	const struct pkl_fold *f = fold(r);
	struct ckpt_tensor *t = &v->tensor;

	memset(t, 0, sizeof(*t));
	t->kind = CKPT_T_STRIDED;
	t->requires_grad = f->requires_grad;
	t->shown = true;
	t->ndim = f->ndim;
	t->index = r->tindex;
	t->dtype = s->dtype;
	t->storage = (struct ckpt_storage *)(uintptr_t)s;
	t->offset = (uint64_t)f->offset;
	t->shape = (int64_t *)(uintptr_t)f->dims;
	t->x = &ckpt_no_ext;
	t->pkl_off = r->item[1]->off;
	return ckpt_tensor_check((struct ckpt *)(uintptr_t)c, t, NULL);
}

/* The tensor of row @r into @v, its storage the real one if the storage
 * was made for good (ckpt_row_storage()), else @v's. */
static void fill_tensor(const struct ckpt *c, const struct ckpt_row *r,
			struct ckpt_rowview *v)
{
	uint32_t k = sindex(r);
	const struct ckpt_storage *s = c->storages[k];

	if (ckpt_is_row(s)) {
		fill_storage(c, r, k, &v->storage);
		s = &v->storage;
	}
	(void)fill_tensor_with(c, r, s, v);
}

/* Row @r into @v: node, tensor and storage. */
static void fill(const struct ckpt *c, const struct ckpt_row *r,
		 struct ckpt_rowview *v)
{
	struct ckpt_node *n = &v->node;

	fill_tensor(c, r, v);
	memset(n, 0, sizeof(*n));
	n->kind = CKPT_N_TENSOR;
	n->step = r->step;
	n->index = r->index;
	n->id = r->id;
	n->name = r->item[0]->u.s.p;
	n->parent = c->nodes[r->parent];
	n->dir = (struct ckpt_dir *)(uintptr_t)&ckpt_no_dir;
	n->key = r->item[0];
	n->val = r->item[1];
	n->type = "Tensor";
	n->tensor = &v->tensor;
	n->ed = (struct ckpt_nedit *)(uintptr_t)&ckpt_no_edit;
}

const struct ckpt_node *ckpt_node_at(const struct ckpt *c,
				     const struct ckpt_node *p,
				     struct ckpt_rowview *v)
{
	if (!ckpt_is_row(p))
		return p;
	fill(c, ckpt_row_of(p), v);
	return &v->node;
}

const struct ckpt_tensor *ckpt_tensor_at(const struct ckpt *c, uint32_t i,
					 struct ckpt_rowview *v)
{
	const struct ckpt_tensor *t = c->tensors[i];

	if (!ckpt_is_row(t))
		return t;
	fill_tensor(c, ckpt_row_of(t), v);
	return &v->tensor;
}

const struct ckpt_storage *ckpt_storage_at(const struct ckpt *c, uint32_t i,
					   struct ckpt_rowview *v)
{
	const struct ckpt_storage *s = c->storages[i];

	if (!ckpt_is_row(s))
		return s;
	fill_storage(c, ckpt_row_of(s), i, &v->storage);
	return &v->storage;
}

const struct ckpt_dtype *ckpt_tensor_size_at(const struct ckpt *c,
					     uint32_t i, uint64_t *nbytes)
{
	const struct ckpt_tensor *t = c->tensors[i];
	const struct ckpt_dtype *dt;
	const struct pkl_fold *f;
	uint64_t numel = 1;

	if (!ckpt_is_row(t)) {
		*nbytes = ckpt_tensor_nbytes(t);
		return t->dtype;
	}
	/* ckpt_tensor_check()'s numel, which passed at the build */
	f = fold(ckpt_row_of(t));
	for (uint8_t k = 0; k < f->ndim; k++)
		numel *= (uint64_t)f->dims[k];
	dt = ckpt_dtype_at(ckpt_row_of(t)->dtype);
	*nbytes = numel * dt->size;
	return dt;
}

const struct ckpt_dtype *ckpt_storage_size_at(const struct ckpt *c,
					      uint32_t i, uint64_t *nbytes)
{
	const struct ckpt_storage *s = c->storages[i];
	const struct ckpt_dtype *dt;

	if (!ckpt_is_row(s)) {
		*nbytes = s->nbytes;
		return s->dtype;
	}
	dt = ckpt_dtype_at(ckpt_row_of(s)->dtype);
	*nbytes = (uint64_t)fold(ckpt_row_of(s))->numel * dt->size;
	return dt;
}

const char *ckpt_slot_name(const struct ckpt_node *p)
{
	return ckpt_is_row(p) ? ckpt_row_of(p)->item[0]->u.s.p : p->name;
}

uint32_t ckpt_slot_id(const struct ckpt_node *p)
{
	return ckpt_is_row(p) ? ckpt_row_of(p)->id : p->id;
}

/* ---- the build ---- */

int ckpt_row_add(struct ckpt_build *b, const struct ckpt_node *dir,
		 uint32_t index, struct pkl_value *const *item,
		 struct ckpt_node **np)
{
	const struct pkl_value *key = item[0], *v = item[1];
	struct ckpt *c = b->c;
	const struct pkl_fold *f;
	const struct ckpt_dtype *dt;
	struct ckpt_rowview view;
	struct ckpt_row r, *row;
	uint64_t nbytes;

	/* what build() would make a plain tensor node of, with this name */
	if (!c->rows || b->key_prefix || b->persid || !key ||
	    v->kind != PKL_FOLDED || pkl_shared(v) || !ckpt_name_is_key(key) ||
	    c->nnodes >= CKPT_MAX_NODES)
		return 0;
	/* ckpt_storage_ref(): a typed storage, new, at its home */
	f = v->u.fold.rec;
	dt = ckpt_dtype_by_storage(f->kind->cls->u.global.name);
	if (!dt || pkl_shared(f->key) ||
	    ckpt_storage_dense(f->key->u.s.p) != (long)c->nstorages ||
	    __builtin_mul_overflow((uint64_t)f->numel, (uint64_t)dt->size,
				   &nbytes) || nbytes > (UINT64_C(1) << 62))
		return 0;
	r = (struct ckpt_row){
		.item = item, .id = c->nnodes, .parent = dir->id,
		.index = index, .tindex = c->ntensors, .step = CKPT_S_KEY,
		.dtype = (uint8_t)ckpt_dtype_index(dt),
	};
	/* rebuild(): the checks of ckpt_tensor_check(); a tensor that fails
	   them is left to the build, which says why */
	fill_storage(c, &r, c->nstorages, &view.storage);
	if (fill_tensor_with(c, &r, &view.storage, &view))
		return 0;
	row = arena_alloc(&c->arena, sizeof(*row));
	if (!row || ckpt_push((void ***)&c->nodes, &c->nnodes, &b->nodes_cap,
			      tagged(row)) ||
	    ckpt_push((void ***)&c->tensors, &c->ntensors, &b->tensors_cap,
		      tagged(row)) ||
	    ckpt_push((void ***)&c->storages, &c->nstorages,
		      &b->storages_cap, tagged(row)))
		return diag_nomem(b->d);
	*row = r;
	c->nshown++;
	c->nrows++;
	*np = tagged(row);
	return 1;
}

int ckpt_row_storage(struct ckpt *c, struct ckpt_storage **out)
{
	struct ckpt_row *r = ckpt_row_of(*out);
	struct ckpt_storage *s = arena_alloc(&c->arena, sizeof(*s));
	uint32_t k = sindex(r);

	if (!s)
		return -ENOMEM;
	fill_storage(c, r, k, s);
	c->storages[k] = s;
	*out = s;
	return 0;
}

/* ---- for good ---- */

static int materialize(struct ckpt *c, struct ckpt_row *r)
{
	struct ckpt_rowview v;
	struct ckpt_node *n = arena_alloc(&c->arena, sizeof(*n));
	struct ckpt_tensor *t = arena_alloc(&c->arena, sizeof(*t));
	struct ckpt_storage *s = c->storages[sindex(r)];

	if (!n || !t || (ckpt_is_row(s) && ckpt_row_storage(c, &s)))
		return -ENOMEM;
	fill(c, r, &v);
	*t = v.tensor;
	t->storage = s;
	*n = v.node;
	n->tensor = t;
	c->tensors[r->tindex] = t;
	c->nodes[r->parent]->dir->kids[r->index] = n;
	c->nodes[r->id] = n;
	c->nrows--;
	return 0;
}

int ckpt_row_materialize(struct ckpt *c, const void *p, struct diag *d)
{
	if (ckpt_is_row(p) && materialize(c, ckpt_row_of(p)))
		return diag_nomem(d);
	return 0;
}

int ckpt_materialize(struct ckpt *c, struct diag *d)
{
	for (uint32_t i = 0; i < c->nnodes && c->nrows; i++)
		if (ckpt_is_row(c->nodes[i]) &&
		    materialize(c, ckpt_row_of(c->nodes[i])))
			return diag_nomem(d);
	return 0;
}
