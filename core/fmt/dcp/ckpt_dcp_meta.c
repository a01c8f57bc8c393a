/*
 * ckpt_dcp_meta.c - the .metadata of a DCP directory ckpt_dcp_save.c
 * writes: a pickle of torch's dataclasses (metadata.py, filesystem.py's
 * _StorageInfo; multi-file-formats.md 2.2), in protocol 2 with the
 * emitter's primitives (torch reads it with pickle.load, which takes any
 * protocol):
 *
 *   Metadata.__new__() BUILD {
 *     'state_dict_metadata': { FQN: TensorStorageMetadata.__new__() BUILD {
 *         'properties': TensorProperties.__new__() BUILD (torch.DTYPE,
 *             torch.serialization._get_layout('torch.strided'),
 *             requires_grad, _MEM_FORMAT_ENCODING(0), False),
 *         'size': torch.Size((D0, ...)),
 *         'chunks': [ChunkStorageMetadata.__new__() BUILD {
 *             'offsets': torch.Size((ROW, 0, ...)),
 *             'sizes': torch.Size((ROWS, D1, ...)) }, ...] }
 *       or, for a value: BytesStorageMetadata.__new__() },
 *     'planner_data': { FQN: (the path: str keys, int list indices) },
 *     'storage_data': { MetadataIndex.__new__() BUILD { 'fqn': FQN,
 *             'offset': the chunk's offsets (tensors only),
 *             'index': None, or M ranks: the chunk's place in 'chunks' }:
 *         _StorageInfo.__new__() BUILD { 'relative_path': '__R_0.distcp',
 *             'offset': ITEM'S OFFSET, 'length': ITEM'S LENGTH }, ... },
 *     'storage_meta': None, 'version': '1.0.0' }
 *
 * One rank: every tensor is one chunk of its whole shape, in
 * __0_0.distcp, and the dicts go in key order.  M ranks: the chunks,
 * their files and the dicts' orders are ckpt_dcp_split.c's.  storage_meta
 * is None (the reader puts an empty StorageMeta there; a real save's
 * names its path and a random save_id).
 */
#include "ckpt_dcp_save.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle/pkl_emit.h"

#define MOD		"torch.distributed.checkpoint.metadata"

static int op(struct pkl_emit *e, unsigned char o)
{
	return pkl_emit_op(e, o);
}

/* cls.__new__(cls): what pickle writes for a dataclass instance */
static int new_obj(struct pkl_emit *e, const char *mod, const char *cls)
{
	int rc = pkl_emit_global(e, mod, cls);

	if (!rc)
		rc = op(e, PKL_OP_EMPTY_TUPLE);
	return rc ? rc : op(e, PKL_OP_NEWOBJ);
}

/* cls.__new__(cls), then MARK in its state dict: close_obj() ends it */
static int open_obj(struct pkl_emit *e, const char *mod, const char *cls)
{
	int rc = new_obj(e, mod, cls);

	if (!rc)
		rc = op(e, PKL_OP_EMPTY_DICT);
	return rc ? rc : pkl_emit_mark(e);
}

/* the state dict's items set, and BUILD */
static int close_obj(struct pkl_emit *e)
{
	int rc = op(e, PKL_OP_SETITEMS);

	return rc ? rc : op(e, PKL_OP_BUILD);
}

static int str(struct pkl_emit *e, const char *p)
{
	return pkl_emit_str(e, p, strlen(p));
}

/* torch.Size((@v...)), or of zeros */
static int size(struct pkl_emit *e, const int64_t *v, int n, bool zeros)
{
	int rc = pkl_emit_global(e, "torch", "Size");

	if (!rc)
		rc = pkl_emit_mark(e);
	for (int i = 0; i < n && !rc; i++)
		rc = pkl_emit_int(e, zeros ? 0 : v[i]);
	if (!rc)
		rc = op(e, PKL_OP_TUPLE);
	if (!rc)
		rc = op(e, PKL_OP_TUPLE1);
	return rc ? rc : op(e, PKL_OP_REDUCE);
}

static int properties(struct pkl_emit *e, const struct ckpt_tensor *t)
{
	int rc = new_obj(e, MOD, "TensorProperties");

	if (!rc)
		rc = pkl_emit_mark(e);
	if (!rc)
		rc = pkl_emit_global(e, "torch", t->dtype->name);
	if (!rc)
		rc = pkl_emit_global(e, "torch.serialization", "_get_layout");
	if (!rc)
		rc = str(e, "torch.strided");
	if (!rc)
		rc = op(e, PKL_OP_TUPLE1);
	if (!rc)
		rc = op(e, PKL_OP_REDUCE);
	if (!rc)
		rc = op(e, t->requires_grad ? PKL_OP_NEWTRUE : PKL_OP_NEWFALSE);
	if (!rc)
		rc = pkl_emit_global(e, MOD, "_MEM_FORMAT_ENCODING");
	if (!rc)
		rc = pkl_emit_int(e, 0);	/* TORCH_CONTIGUOUS_FORMAT */
	if (!rc)
		rc = op(e, PKL_OP_TUPLE1);
	if (!rc)
		rc = op(e, PKL_OP_REDUCE);
	if (!rc)
		rc = op(e, PKL_OP_NEWFALSE);	/* pin_memory */
	if (!rc)
		rc = op(e, PKL_OP_TUPLE);
	return rc ? rc : op(e, PKL_OP_BUILD);
}

/* a chunk's offsets, or its sizes (@sizes): Shard(0)'s rows of @x */
static int box(struct pkl_emit *e, const struct ckpt_tensor *t,
	       const struct dcp_item *x, bool sizes)
{
	int64_t v[CKPT_MAX_DIMS];

	for (int i = 0; i < t->ndim; i++)
		v[i] = sizes ? t->shape[i] : 0;
	if (t->ndim)
		v[0] = sizes ? x->rows : x->row;
	return size(e, v, t->ndim, false);
}

static int tensor_meta(struct pkl_emit *e, const struct dcp_leaf *l,
		       const struct dcp_plan *p)
{
	const struct ckpt_tensor *t = l->x->tensor;
	int rc = open_obj(e, MOD, "TensorStorageMetadata");

	if (!rc)
		rc = str(e, "properties");
	if (!rc)
		rc = properties(e, t);
	if (!rc)
		rc = str(e, "size");
	if (!rc)
		rc = size(e, t->shape, t->ndim, false);
	if (!rc)
		rc = str(e, "chunks");
	if (!rc)
		rc = op(e, PKL_OP_EMPTY_LIST);
	if (!rc && l->nitem > 1)
		rc = pkl_emit_mark(e);
	for (uint32_t i = l->item; i < l->item + l->nitem && !rc; i++) {
		rc = open_obj(e, MOD, "ChunkStorageMetadata");
		if (!rc)
			rc = str(e, "offsets");
		if (!rc)
			rc = box(e, t, &p->it[i], false);
		if (!rc)
			rc = str(e, "sizes");
		if (!rc)
			rc = box(e, t, &p->it[i], true);
		if (!rc)
			rc = close_obj(e);
	}
	if (!rc)
		rc = op(e, l->nitem > 1 ? PKL_OP_APPENDS : PKL_OP_APPEND);
	return rc ? rc : close_obj(e);
}

static int path(struct pkl_emit *e, const struct dcp_elem *el,
		const struct dcp_leaf *l)
{
	int rc = pkl_emit_mark(e);

	for (uint32_t i = 0; i < l->npath && !rc; i++) {
		const struct dcp_elem *x = &el[l->path + i];

		rc = x->index ? pkl_emit_int(e, strtoll(l->fqn + x->off, NULL,
							10)) :
		     pkl_emit_str(e, l->fqn + x->off, x->len);
	}
	return rc ? rc : op(e, PKL_OP_TUPLE);
}

static int storage(struct pkl_emit *e, const struct dcp_leaf *v,
		   const struct dcp_plan *p, uint32_t i)
{
	const struct dcp_item *x = &p->it[i];
	const struct dcp_leaf *l = &v[x->leaf];
	const struct ckpt_tensor *t = l->tensor ? l->x->tensor : NULL;
	char file[DCP_FILE_MAX];
	int rc = open_obj(e, MOD, "MetadataIndex");

	snprintf(file, sizeof(file), DCP_FILE_FMT, x->rank);
	if (!rc)
		rc = str(e, "fqn");
	if (!rc)
		rc = pkl_emit_str(e, l->fqn, l->len);
	if (!rc && t)
		rc = str(e, "offset");
	if (!rc && t)
		rc = box(e, t, x, false);
	if (!rc)
		rc = str(e, "index");
	/* the index hint create_default_global_save_plan() rewrites: the
	   chunk's place in its list (one rank: None, as written before) */
	if (!rc)
		rc = t && p->ranks > 1 ? pkl_emit_int(e, dcp_chunk(v, p, i)) :
		     op(e, PKL_OP_NONE);
	if (!rc)
		rc = close_obj(e);
	if (!rc)
		rc = open_obj(e, "torch.distributed.checkpoint.filesystem",
			     "_StorageInfo");
	if (!rc)
		rc = str(e, "relative_path");
	if (!rc)
		rc = str(e, file);
	if (!rc)
		rc = str(e, "offset");
	if (!rc)
		rc = pkl_emit_int(e, (int64_t)x->off);
	if (!rc)
		rc = str(e, "length");
	if (!rc)
		rc = pkl_emit_int(e, (int64_t)x->size);
	return rc ? rc : close_obj(e);
}

/*
 * A dict of one entry per key (@what 0 metadata, 1 path) or per item (2
 * storage), in the order torch writes them: one rank, the keys' own; M
 * ranks, the state_dict_metadata keys and the items as the ranks write
 * them (ckpt_dcp_split.c).
 */
static int leaf_dict(struct pkl_emit *e, const struct dcp_leaf *v,
		     uint32_t n, const struct dcp_elem *el,
		     const struct dcp_plan *p, int what)
{
	bool multi = p->ranks > 1;
	uint32_t cnt = what == 2 ? p->nit : n;
	int rc = op(e, PKL_OP_EMPTY_DICT);

	for (uint32_t i = 0; i < cnt && !rc; i++) {
		uint32_t j = !multi || what == 1 ? i :
			     what == 2 ? p->wr[i] : p->keys[i];
		const struct dcp_leaf *l = &v[what == 2 ? p->it[j].leaf : j];

		if (i % 1000 == 0)	/* pickle's batches */
			rc = pkl_emit_mark(e);
		if (!rc && what != 2)
			rc = pkl_emit_str(e, l->fqn, l->len);
		if (!rc)
			rc = what == 2 ? storage(e, v, p, j) :
			     what == 1 ? path(e, el, l) :
			     l->tensor ? tensor_meta(e, l, p) :
			     new_obj(e, MOD, "BytesStorageMetadata");
		if (!rc && (i % 1000 == 999 || i + 1 == cnt))
			rc = op(e, PKL_OP_SETITEMS);
	}
	return rc;
}

int ckpt_dcp_metadata(const struct dcp_leaf *v, uint32_t n,
		      const struct dcp_elem *el, const struct dcp_plan *p,
		      unsigned char **pkl, size_t *len, struct diag *d)
{
	static const char *const field[] = {
		"state_dict_metadata", "planner_data", "storage_data",
	};
	struct pkl_emit *e;
	int rc = pkl_emit_init(&e, 0, NULL, d);

	if (!rc)
		rc = open_obj(e, MOD, "Metadata");
	for (int i = 0; i < 3 && !rc; i++) {
		rc = str(e, field[i]);
		if (!rc)
			rc = leaf_dict(e, v, n, el, p, i);
	}
	if (!rc)
		rc = str(e, "storage_meta");
	if (!rc)
		rc = op(e, PKL_OP_NONE);
	if (!rc)
		rc = str(e, "version");
	if (!rc)
		rc = str(e, "1.0.0");
	if (!rc)
		rc = close_obj(e);
	if (!rc)
		rc = pkl_emit_finish(e, pkl, len);
	pkl_emit_free(e);
	return rc;
}

