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
 *             'offsets': torch.Size((0, ...)), 'sizes': the size }] }
 *       or, for a value: BytesStorageMetadata.__new__() },
 *     'planner_data': { FQN: (the path: str keys, int list indices) },
 *     'storage_data': { MetadataIndex.__new__() BUILD { 'fqn': FQN,
 *             'offset': torch.Size((0, ...)) (tensors only), 'index': None }:
 *         _StorageInfo.__new__() BUILD { 'relative_path': '__0_0.distcp',
 *             'offset': ITEM'S OFFSET, 'length': ITEM'S LENGTH } },
 *     'storage_meta': None, 'version': '1.0.0' }
 *
 * Every tensor is one chunk of its whole shape; storage_meta is None (the
 * reader puts an empty StorageMeta there).
 */
#include "ckpt_dcp_save.h"

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

static int tensor_meta(struct pkl_emit *e, const struct ckpt_tensor *t)
{
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
	if (!rc)
		rc = open_obj(e, MOD, "ChunkStorageMetadata");
	if (!rc)
		rc = str(e, "offsets");
	if (!rc)
		rc = size(e, t->shape, t->ndim, true);
	if (!rc)
		rc = str(e, "sizes");
	if (!rc)
		rc = size(e, t->shape, t->ndim, false);
	if (!rc)
		rc = close_obj(e);
	if (!rc)
		rc = op(e, PKL_OP_APPEND);
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

static int storage(struct pkl_emit *e, const struct dcp_leaf *l)
{
	const struct ckpt_tensor *t = l->tensor ? l->x->tensor : NULL;
	int rc = open_obj(e, MOD, "MetadataIndex");

	if (!rc)
		rc = str(e, "fqn");
	if (!rc)
		rc = pkl_emit_str(e, l->fqn, l->len);
	if (!rc && t)
		rc = str(e, "offset");
	if (!rc && t)
		rc = size(e, t->shape, t->ndim, true);
	if (!rc)
		rc = str(e, "index");
	if (!rc)
		rc = op(e, PKL_OP_NONE);
	if (!rc)
		rc = close_obj(e);
	if (!rc)
		rc = open_obj(e, "torch.distributed.checkpoint.filesystem",
			     "_StorageInfo");
	if (!rc)
		rc = str(e, "relative_path");
	if (!rc)
		rc = str(e, DCP_DATA_FILE);
	if (!rc)
		rc = str(e, "offset");
	if (!rc)
		rc = pkl_emit_int(e, (int64_t)l->off);
	if (!rc)
		rc = str(e, "length");
	if (!rc)
		rc = pkl_emit_int(e, (int64_t)l->size);
	return rc ? rc : close_obj(e);
}

/* A dict of one entry per leaf: @what 0 metadata, 1 path, 2 storage. */
static int leaf_dict(struct pkl_emit *e, const struct dcp_leaf *v,
		     uint32_t n, const struct dcp_elem *el, int what)
{
	int rc = op(e, PKL_OP_EMPTY_DICT);

	for (uint32_t i = 0; i < n && !rc; i++) {
		const struct dcp_leaf *l = &v[i];

		if (i % 1000 == 0)	/* pickle's batches */
			rc = pkl_emit_mark(e);
		if (!rc && what != 2)
			rc = pkl_emit_str(e, l->fqn, l->len);
		if (!rc)
			rc = what == 2 ? storage(e, l) :
			     what == 1 ? path(e, el, l) :
			     l->tensor ? tensor_meta(e, l->x->tensor) :
			     new_obj(e, MOD, "BytesStorageMetadata");
		if (!rc && (i % 1000 == 999 || i + 1 == n))
			rc = op(e, PKL_OP_SETITEMS);
	}
	return rc;
}

int ckpt_dcp_metadata(const struct dcp_leaf *v, uint32_t n,
		      const struct dcp_elem *el, unsigned char **pkl,
		      size_t *len, struct diag *d)
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
			rc = leaf_dict(e, v, n, el, i);
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

