/*
 * ckpt_write.c - write a checkpoint back as a torch zip archive, with its
 * edits (torch-format.md section 9).
 *
 * Two paths.  When the object structure is unchanged (only storage bytes
 * were edited), every record is written in its original order under its
 * original name, data.pkl byte for byte: a repack of an untouched torch
 * file is then byte-identical to it.  When the structure changed, a new
 * data.pkl is emitted from the tree (pkl_emit.c does the pickling, we
 * substitute what the edits changed) and the records are laid out as
 * torch.save lays them out:
 *
 *   data.pkl                      the new pickle
 *   .format_version               kept if present: our layout is torch's
 *   .storage_alignment            kept if present (its value is our align)
 *   byteorder                     kept if present
 *   data/0 .. data/N-1            storages in first-use order, renumbered;
 *                                 storages nothing uses are dropped
 *   version                       kept
 *   .data/serialization_id        kept (torch only logs it)
 *   anything else                 kept, in its original order
 *
 * Unchanged storages are copied from the checkpoint (copy_file_range) with
 * the CRC of its central directory; edited ones from their overlay file
 * with a CRC computed while copying.
 */
#include "ckpt_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pickle/pkl_emit.h"
#include "util/io.h"
#include "zip/ptz_write.h"

#define BATCH		1000		/* items per SETITEMS/APPENDS */
#define SYNTH_KEY	(UINT64_C(1) << 32)	/* memo keys for new objects */
#define SMALL_MAX	(UINT64_C(1) << 30)	/* deflated records we inflate */

struct wb {
	struct ckpt *c;
	struct diag *d;
	struct pkl_emit *e;
	struct ckpt_node **dirty;	/* pickle value id -> edited dir */
	uint32_t *out;		/* storage index -> new key + 1, 0 unused */
	struct ckpt_storage **order;	/* storages in first-use order */
	uint32_t nout;
};

static int emit_node(struct wb *w, struct ckpt_node *n);

/* The new key of @s, numbered on first use. */
static uint32_t out_key(struct wb *w, struct ckpt_storage *s)
{
	if (!w->out[s->index]) {
		w->order[w->nout] = s;
		w->out[s->index] = ++w->nout;
	}
	return w->out[s->index] - 1;
}

static int emit_key_str(struct wb *w, uint32_t key)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%u", key);
	return pkl_emit_str(w->e, buf, strlen(buf));
}

/* ('storage', <class>, key, location, numel) for an existing storage */
static int hook_persid(struct pkl_emit *e, const struct pkl_value *pid,
		       void *wbp)
{
	struct wb *w = wbp;
	const struct pkl_value *t = pid->u.call.args;
	const char *key = as_str(arg(t, 2));
	struct ckpt_storage *s = key ? ckpt_storage_find(w->c->b, key) : NULL;
	int rc;

	if (!s || pkl_len(t) != 5)
		return diag_unsupported(w->d, pid->off, "cannot rewrite this "
					"persistent id");
	rc = pkl_emit_mark(e);
	for (size_t i = 0; i < 5 && !rc; i++)
		rc = i == 2 ? emit_key_str(w, out_key(w, s)) :
		     pkl_emit_value(e, pkl_item(t, i));
	return rc ? rc : pkl_emit_op(e, PKL_OP_TUPLE);
}

/* Edited containers are written from the tree, the rest as they were. */
static int hook_value(struct pkl_emit *e, const struct pkl_value *v,
		      void *wbp)
{
	struct wb *w = wbp;
	struct ckpt_node *n = v->id < w->c->doc->nnodes ? w->dirty[v->id] :
			      NULL;
	int rc;

	if (!n)
		return 0;
	if (pkl_emit_memo_get(e, v->id))
		return 1;
	rc = emit_node(w, n);
	return rc ? rc : 1;
}

static int emit_int_tuple(struct wb *w, const int64_t *v, int n)
{
	int rc = pkl_emit_mark(w->e);

	for (int i = 0; i < n && !rc; i++)
		rc = pkl_emit_int(w->e, v[i]);
	return rc ? rc : pkl_emit_op(w->e, PKL_OP_TUPLE);
}

static int emit_bool(struct wb *w, bool b)
{
	return pkl_emit_op(w->e, b ? PKL_OP_NEWTRUE : PKL_OP_NEWFALSE);
}

/* collections.OrderedDict(): the backward hooks argument */
static int emit_hooks(struct wb *w)
{
	int rc = pkl_emit_global(w->e, "collections", "OrderedDict");

	if (!rc)
		rc = pkl_emit_op(w->e, PKL_OP_EMPTY_TUPLE);
	return rc ? rc : pkl_emit_op(w->e, PKL_OP_REDUCE);
}

/*
 * A tensor made from a new file, as torch.save writes one:
 * _rebuild_tensor_v2((pid), 0, size, stride, requires_grad, OrderedDict())
 * (v3 with the dtype for dtypes without a storage class), wrapped in
 * _rebuild_parameter(tensor, requires_grad, OrderedDict()) for Parameters.
 */
static int emit_fresh_tensor(struct wb *w, const struct ckpt_tensor *t)
{
	struct pkl_emit *e = w->e;
	const struct ckpt_dtype *dt = t->dtype;
	bool v3 = !dt->storage;
	int rc = 0;

	if (t->parameter)
		rc = pkl_emit_global(e, "torch._utils", "_rebuild_parameter");
	if (!rc && t->parameter)
		rc = pkl_emit_mark(e);
	if (!rc)
		rc = pkl_emit_global(e, "torch._utils", v3 ?
				     "_rebuild_tensor_v3" : "_rebuild_tensor_v2");
	if (!rc)
		rc = pkl_emit_mark(e);
	/* the persistent id */
	if (!rc)
		rc = pkl_emit_mark(e);
	if (!rc)
		rc = pkl_emit_str(e, "storage", 7);
	if (!rc)
		rc = v3 ? pkl_emit_global(e, "torch.storage", "UntypedStorage")
			: pkl_emit_global(e, "torch", dt->storage);
	if (!rc)
		rc = emit_key_str(w, out_key(w, t->storage));
	if (!rc)
		rc = pkl_emit_str(e, "cpu", 3);
	if (!rc)
		rc = pkl_emit_int(e, v3 ? t->storage->nbytes :
				  t->storage->nbytes / dt->size);
	if (!rc)
		rc = pkl_emit_op(e, PKL_OP_TUPLE);
	if (!rc)
		rc = pkl_emit_op(e, PKL_OP_BINPERSID);
	/* offset, size, stride, requires_grad, hooks[, dtype] */
	if (!rc)
		rc = pkl_emit_int(e, 0);
	if (!rc)
		rc = emit_int_tuple(w, t->shape, t->ndim);
	if (!rc)
		rc = emit_int_tuple(w, t->stride, t->ndim);
	if (!rc)
		rc = emit_bool(w, t->requires_grad && !t->parameter);
	if (!rc)
		rc = emit_hooks(w);
	if (!rc && v3)
		rc = pkl_emit_global(e, "torch", dt->name);
	if (!rc)
		rc = pkl_emit_op(e, PKL_OP_TUPLE);
	if (!rc)
		rc = pkl_emit_op(e, PKL_OP_REDUCE);
	if (!rc && t->parameter) {
		rc = emit_bool(w, t->requires_grad);
		if (!rc)
			rc = emit_hooks(w);
		if (!rc)
			rc = pkl_emit_op(e, PKL_OP_TUPLE);
		if (!rc)
			rc = pkl_emit_op(e, PKL_OP_REDUCE);
	}
	return rc;
}

/* bytes as protocol 2 pickles them: _codecs.encode(latin-1 str, 'latin1') */
static int emit_bytes(struct wb *w, const char *p, size_t n)
{
	char *u = malloc(2 * n + 1);
	size_t k = 0;
	int rc;

	if (!u)
		return diag_nomem(w->d);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = p[i];

		if (ch < 0x80) {
			u[k++] = ch;
		} else {
			u[k++] = (char)(0xc0 | ch >> 6);
			u[k++] = (char)(0x80 | (ch & 0x3f));
		}
	}
	rc = pkl_emit_global(w->e, "_codecs", "encode");
	if (!rc)
		rc = pkl_emit_str(w->e, u, k);
	if (!rc)
		rc = pkl_emit_str(w->e, "latin1", 6);
	if (!rc)
		rc = pkl_emit_op(w->e, PKL_OP_TUPLE2);
	if (!rc)
		rc = pkl_emit_op(w->e, PKL_OP_REDUCE);
	free(u);
	return rc;
}

static int emit_edited_value(struct wb *w, const struct ckpt_node *n)
{
	struct ckpt_literal lit;

	if (ckpt_value_parse(n, n->text, n->textlen, &lit))
		return diag_corrupt(w->d, DIAG_NO_OFFSET, "value %s no longer "
				    "parses", n->name);
	if (!strcmp(lit.type, "str"))
		return pkl_emit_str(w->e, lit.text, lit.len);
	if (!strcmp(lit.type, "bytes"))
		return emit_bytes(w, lit.text, lit.len);
	if (!strcmp(lit.type, "bool"))
		return emit_bool(w, lit.i);
	if (!strcmp(lit.type, "NoneType"))
		return pkl_emit_op(w->e, PKL_OP_NONE);
	if (!strcmp(lit.type, "int"))
		return pkl_emit_int(w->e, lit.i);
	return pkl_emit_float(w->e, lit.f);
}

/* The key a child is written under: its own, or its (new) name. */
static int emit_key(struct wb *w, const struct ckpt_node *k)
{
	char *buf;
	long n;
	int rc;

	if (k->key && !ckpt_node_rekeyed(k))
		return pkl_emit_value(w->e, k->key);
	buf = malloc(strlen(k->name) + 1);
	if (!buf)
		return diag_nomem(w->d);
	n = ckpt_name_unescape(k->name, buf);
	rc = n < 0 ? diag_set(w->d, -EINVAL, DIAG_NO_OFFSET, "name '%s' is "
			      "not a valid key", k->name) :
	     pkl_emit_str(w->e, buf, n);
	free(buf);
	return rc;
}

/* MARK k v k v ... SETITEMS for the children reached by @step. */
static int emit_items(struct wb *w, const struct ckpt_node *dir, int step,
		      bool pairs)
{
	uint32_t in_batch = 0;
	int rc = 0;

	for (uint32_t i = 0; i <= dir->nkids && !rc; i++) {
		struct ckpt_node *k = i < dir->nkids ? dir->kids[i] : NULL;

		if (i < dir->nkids && (!k || k->step != step))
			continue;
		if (in_batch && (!k || in_batch == BATCH)) {
			rc = pkl_emit_op(w->e, pairs ? PKL_OP_SETITEMS : PKL_OP_APPENDS);
			in_batch = 0;
		}
		if (!k || rc)
			continue;
		if (!in_batch++)
			rc = pkl_emit_mark(w->e);
		if (!rc && pairs)
			rc = emit_key(w, k);
		if (!rc)
			rc = emit_node(w, k);
	}
	return rc;
}

/* A tuple or list of the children in slot order. */
static int emit_seq_items(struct wb *w, const struct ckpt_node *dir)
{
	int rc = pkl_emit_mark(w->e);

	for (uint32_t i = 0; i < dir->nkids && !rc; i++)
		if (dir->kids[i])
			rc = emit_node(w, dir->kids[i]);
	return rc ? rc : pkl_emit_op(w->e, PKL_OP_TUPLE);
}

/* BUILD's state of an object, from its attribute children. */
static int emit_state(struct wb *w, const struct ckpt_node *dir,
		      const struct pkl_value *st)
{
	int rc;

	if (st && st->kind != PKL_DICT)
		return diag_unsupported(w->d, st->off, "cannot rewrite the "
					"state of %s", dir->name);
	rc = pkl_emit_op(w->e, PKL_OP_EMPTY_DICT);
	if (!rc && st)
		rc = pkl_emit_memo_put(w->e, st->id);
	if (!rc)
		rc = emit_items(w, dir, CKPT_S_ATTR, true);
	return rc ? rc : pkl_emit_op(w->e, PKL_OP_BUILD);
}

/* An edited directory whose pickle value is a call (object, dict type). */
static int emit_call_dir(struct wb *w, const struct ckpt_node *dir)
{
	const struct pkl_value *v = dir->val, *st = v->u.call.x->state;
	const struct pkl_value *f = v->u.call.func;
	bool keep_args = true, has_attr = false;
	int rc;

	if (!strncmp(dir->type, "sparse", 6) || !strcmp(dir->type, "set") ||
	    !strcmp(dir->type, "frozenset") || !strcmp(dir->type, "torch.Size"))
		keep_args = false;
	for (uint32_t i = 0; i < dir->nkids; i++)
		has_attr |= dir->kids[i] && dir->kids[i]->step == CKPT_S_ATTR;
	rc = pkl_emit_value(w->e, f);
	if (rc)
		return rc;
	if (!keep_args) {
		/* set([...]) / torch.Size((...)): the items are the argument */
		if (!strcmp(dir->type, "torch.Size"))
			rc = emit_seq_items(w, dir);
		else if (!(rc = pkl_emit_op(w->e, PKL_OP_EMPTY_LIST)) &&
			 !(rc = pkl_emit_memo_put(w->e, SYNTH_KEY + dir->id)))
			rc = emit_items(w, dir, CKPT_S_INDEX, false);
		if (!rc)
			rc = pkl_emit_op(w->e, PKL_OP_TUPLE1);
		if (!rc)
			rc = pkl_emit_op(w->e, PKL_OP_REDUCE);
		return rc ? rc : pkl_emit_memo_put(w->e, v->id);
	}
	/* dict types hold their items through SETITEMS, not their args */
	if (ckpt_dict_type(dir->type) && strcmp(dir->type, "defaultdict"))
		rc = pkl_emit_op(w->e, PKL_OP_EMPTY_TUPLE);
	else
		rc = pkl_emit_value(w->e, v->u.call.args);
	if (!rc)
		rc = pkl_emit_op(w->e, v->how == PKL_NEWOBJ ? PKL_OP_NEWOBJ :
				 PKL_OP_REDUCE);
	if (!rc)
		rc = pkl_emit_memo_put(w->e, v->id);
	if (!rc)
		rc = emit_items(w, dir, CKPT_S_INDEX, false);
	if (!rc)
		rc = emit_items(w, dir, CKPT_S_KEY, true);
	/* an object's state is its attribute children; a dict's (the
	   _metadata of a state_dict) is not shown and stays as it was */
	if (rc || (!st && !has_attr))
		return rc;
	if (!ckpt_dict_type(dir->type))
		return emit_state(w, dir, st);
	rc = pkl_emit_value(w->e, st);
	return rc ? rc : pkl_emit_op(w->e, PKL_OP_BUILD);
}

/* An edited or new directory, from its children. */
static int emit_dir(struct wb *w, const struct ckpt_node *dir)
{
	const struct pkl_value *v = dir->val;
	int rc;

	if (!v || v->kind == PKL_DICT) {
		rc = pkl_emit_op(w->e, PKL_OP_EMPTY_DICT);
		if (!rc)
			rc = pkl_emit_memo_put(w->e, v ? v->id :
					       SYNTH_KEY + dir->id);
		return rc ? rc : emit_items(w, dir, CKPT_S_KEY, true);
	}
	switch (v->kind) {
	case PKL_LIST:
		rc = pkl_emit_op(w->e, PKL_OP_EMPTY_LIST);
		if (!rc)
			rc = pkl_emit_memo_put(w->e, v->id);
		return rc ? rc : emit_items(w, dir, CKPT_S_INDEX, false);
	case PKL_TUPLE:
		rc = emit_seq_items(w, dir);
		return rc ? rc : pkl_emit_memo_put(w->e, v->id);
	case PKL_SET:
	case PKL_FROZENSET:
		rc = pkl_emit_global(w->e, "__builtin__", v->kind == PKL_SET ?
				     "set" : "frozenset");
		if (!rc)
			rc = pkl_emit_op(w->e, PKL_OP_EMPTY_LIST);
		if (!rc)
			rc = emit_items(w, dir, CKPT_S_INDEX, false);
		if (!rc)
			rc = pkl_emit_op(w->e, PKL_OP_TUPLE1);
		if (!rc)
			rc = pkl_emit_op(w->e, PKL_OP_REDUCE);
		return rc ? rc : pkl_emit_memo_put(w->e, v->id);
	case PKL_CALL:
		return emit_call_dir(w, dir);
	default:
		return diag_unsupported(w->d, v->off, "cannot rewrite %s",
					dir->name);
	}
}

static int emit_node(struct wb *w, struct ckpt_node *n)
{
	switch (n->kind) {
	case CKPT_N_DIR:
	case CKPT_N_SEQ:
		if (!n->val)
			return emit_dir(w, n);
		if (w->dirty[n->val->id] == n) {
			if (pkl_emit_memo_get(w->e, n->val->id))
				return 0;
			return emit_dir(w, n);
		}
		return pkl_emit_value(w->e, n->val);
	case CKPT_N_TENSOR:
		if (n->tensor->fresh) {
			if (pkl_emit_memo_get(w->e, SYNTH_KEY + n->id))
				return 0;
			return emit_fresh_tensor(w, n->tensor);
		}
		return pkl_emit_value(w->e, n->val);
	case CKPT_N_VALUE:
		if (n->edited)
			return emit_edited_value(w, n);
		return pkl_emit_value(w->e, n->val);
	case CKPT_N_LINK:
		return emit_node(w, n->target);
	default:
		return pkl_emit_value(w->e, n->val);
	}
}

/* Emit the new data.pkl into *@out. */
static int repickle(struct wb *w, unsigned char **out, size_t *len)
{
	struct ckpt *c = w->c;
	struct pkl_emit_hooks h = {
		.value = hook_value, .persid = hook_persid, .arg = w,
	};
	int rc;

	for (uint32_t i = 0; i < c->nnodes; i++) {
		struct ckpt_node *n = c->nodes[i];

		if ((n->kind == CKPT_N_DIR || n->kind == CKPT_N_SEQ) &&
		    n->val && !ckpt_dir_clean(n) && !w->dirty[n->val->id])
			w->dirty[n->val->id] = n;
	}
	rc = pkl_emit_init(&w->e, c->doc->nnodes, &h, w->d);
	if (!rc)
		rc = emit_node(w, c->root);
	if (!rc)
		rc = pkl_emit_finish(w->e, out, len);
	return rc;
}

/* What a storage record copies: its overlay file or its original bytes. */
static int storage_source(struct ckpt *c, struct ckpt_storage *s,
			  struct ptz_source *src, unsigned char **tmp,
			  struct diag *d)
{
	size_t len;
	int rc;

	memset(src, 0, sizeof(*src));
	src->len = s->nbytes;
	if (s->fd != c->fd) {
		src->fd = s->fd;
		return 0;
	}
	if (s->rec && s->rec->method != PTZ_STORED) {
		rc = ptz_entry_read(&c->zip, s->rec, SMALL_MAX, tmp, &len, d);
		src->buf = *tmp;
		return rc;
	}
	rc = ckpt_storage_locate(c, s, d);
	src->fd = c->fd;
	src->off = s->data_off;
	src->has_crc = s->rec != NULL;
	src->crc32 = s->rec ? s->rec->crc32 : 0;
	return rc;
}

static int record_source(struct ckpt *c, struct ptz_entry *e,
			 struct ptz_source *src, unsigned char **tmp,
			 struct diag *d)
{
	size_t len;
	int rc;

	memset(src, 0, sizeof(*src));
	if (e->method != PTZ_STORED) {
		rc = ptz_entry_read(&c->zip, e, SMALL_MAX, tmp, &len, d);
		src->buf = *tmp;
		src->len = len;
		return rc;
	}
	rc = ckpt_record_locate(c, e, d);
	src->fd = c->fd;
	src->off = e->data_off;
	src->len = e->usize;
	src->has_crc = true;
	src->crc32 = e->crc32;
	return rc;
}

/* Add record @e (or storage @s) of the original under @name. */
static int add(struct ptz_writer *zw, struct ckpt *c, const char *name,
	       struct ptz_entry *e, struct ckpt_storage *s, struct diag *d)
{
	struct ptz_source src;
	unsigned char *tmp = NULL;
	int rc = s ? storage_source(c, s, &src, &tmp, d) :
		 record_source(c, e, &src, &tmp, d);

	if (!rc)
		rc = ptz_writer_add(zw, name, &src, d);
	free(tmp);
	return rc;
}

static const char *rel_name(const struct ckpt *c, const struct ptz_entry *e)
{
	return e->name + c->zip.prefix_len + 1;
}

static bool is_data_rec(const struct ckpt *c, const struct ptz_entry *e)
{
	return !strncasecmp(rel_name(c, e), "data/", 5);
}

/* Write all records as they were, storages from wherever they are now. */
static int write_same(struct ptz_writer *zw, struct ckpt *c,
		      struct diag *d)
{
	struct ckpt_storage **by_rec = calloc(c->zip.nentries + 1,
					      sizeof(*by_rec));
	int rc = 0;

	if (!by_rec)
		return diag_nomem(d);
	for (uint32_t i = 0; i < c->nstorages; i++)
		if (c->storages[i]->rec)
			by_rec[c->storages[i]->rec - c->zip.entries] =
				c->storages[i];
	for (uint32_t i = 0; i < c->zip.nentries && !rc; i++)
		rc = add(zw, c, c->zip.entries[i].name, &c->zip.entries[i],
			 by_rec[i], d);
	free(by_rec);
	return rc;
}

/* Write the new pickle and the storages it uses, in torch's order. */
static int write_new(struct ptz_writer *zw, struct wb *w,
		     const unsigned char *pkl, size_t pkl_len)
{
	static const char *const before[] = {
		".format_version", ".storage_alignment", "byteorder",
	};
	static const char *const after[] = {
		"version", ".data/version", ".data/serialization_id",
	};
	struct ckpt *c = w->c;
	struct ptz_source src = { .buf = pkl, .len = pkl_len };
	const char *pre = c->zip.prefix;
	size_t size = strlen(pre) + 32;	/* "/data/<u32>" fits */
	char *name = malloc(size);
	struct ptz_entry *e;
	int rc;

	if (!name)
		return diag_nomem(w->d);
	snprintf(name, size, "%s/data.pkl", pre);
	rc = ptz_writer_add(zw, name, &src, w->d);
	for (size_t i = 0; i < 3 && !rc; i++)
		if ((e = ptz_find_rel(&c->zip, before[i])))
			rc = add(zw, c, e->name, e, NULL, w->d);
	for (uint32_t k = 0; k < w->nout && !rc; k++) {
		snprintf(name, size, "%s/data/%u", pre, k);
		rc = add(zw, c, name, NULL, w->order[k], w->d);
	}
	for (size_t i = 0; i < 3 && !rc; i++)
		if ((e = ptz_find_rel(&c->zip, after[i])))
			rc = add(zw, c, e->name, e, NULL, w->d);
	/* records torch does not know: kept, in their order */
	for (uint32_t i = 0; i < c->zip.nentries && !rc; i++) {
		const char *r = rel_name(c, &c->zip.entries[i]);
		bool known = is_data_rec(c, &c->zip.entries[i]) ||
			     !strcasecmp(r, "data.pkl");

		for (size_t j = 0; j < 3; j++)
			known |= !strcasecmp(r, before[j]) ||
				 !strcasecmp(r, after[j]);
		if (!known)
			rc = add(zw, c, c->zip.entries[i].name,
				 &c->zip.entries[i], NULL, w->d);
	}
	free(name);
	return rc;
}

/* The alignment: .storage_alignment if it is a sane power of two. */
static uint32_t alignment(struct ckpt *c)
{
	struct ptz_entry *e = ptz_find_rel(&c->zip, ".storage_alignment");
	unsigned char *txt = NULL;
	unsigned long a = PTZ_ALIGN_DEFAULT;
	size_t len;
	struct diag quiet;

	diag_init(&quiet, c->path);
	if (e && !ptz_entry_read(&c->zip, e, 64, &txt, &len, &quiet)) {
		unsigned long v = strtoul((char *)txt, NULL, 10);

		if (v && !(v & (v - 1)) && v <= PTZ_ALIGN_MAX)
			a = v;
	}
	free(txt);
	return a;
}

int ckpt_write(struct ckpt *c, int fd, const struct ckpt_write_opts *o,
	       struct diag *d)
{
	struct ckpt_write_opts none = { 0 };
	struct ptz_writer zw = { 0 };
	struct wb w = { .c = c, .d = d };
	unsigned char *pkl = NULL;
	size_t pkl_len = 0;
	bool same;
	int rc;

	if (!o)
		o = &none;
	if (c->format != CKPT_ZIP)
		return diag_unsupported(d, 0, "writing back a legacy "
					"checkpoint: not supported yet");
	same = !o->repickle && !ckpt_changed(c);
	if (!same) {
		w.dirty = calloc(c->doc->nnodes + 1, sizeof(*w.dirty));
		w.out = calloc(c->nstorages + 1, sizeof(*w.out));
		w.order = calloc(c->nstorages + 1, sizeof(*w.order));
		if (!w.dirty || !w.out || !w.order) {
			rc = diag_nomem(d);
			goto out;
		}
		rc = repickle(&w, &pkl, &pkl_len);
		if (rc)
			goto out;
	}
	rc = ptz_writer_init(&zw, fd, o->align ? o->align : alignment(c),
			     d);
	if (!rc)
		rc = same ? write_same(&zw, c, d) :
		     write_new(&zw, &w, pkl, pkl_len);
	if (!rc)
		rc = ptz_writer_finish(&zw, d);
out:
	ptz_writer_release(&zw);
	pkl_emit_free(w.e);
	free(pkl);
	free(w.dirty);
	free(w.out);
	free(w.order);
	return rc;
}

int ckpt_save(struct ckpt *c, const char *target,
	      const struct ckpt_write_opts *o, const struct stat *like,
	      int (*before)(void *arg, const struct stat *st, struct diag *d),
	      void *arg, struct diag *d)
{
	/* ".NAME.ptfs-new.XXXXXX" beside the target: same file system, so
	   rename works; the overlay removes what a killed write-back left */
	char *tmp = io_beside(target, CKPT_TMP_SUFFIX "XXXXXX");
	struct stat st;
	int fd, rc;

	if (!tmp)
		return diag_nomem(d);
	fd = mkstemp(tmp);
	if (fd < 0) {
		rc = diag_errno(d, -errno, "cannot create a temporary file "
				"beside %s: %s", strcmp(target, c->path) ?
				target : "it", strerror(errno));
		free(tmp);
		return rc;
	}
	rc = ckpt_write(c, fd, o, d);
	if (!rc && ((like && !geteuid() &&
		     fchown(fd, like->st_uid, like->st_gid)) ||
		    fchmod(fd, like ? like->st_mode & 07777 : 0644)))
		rc = diag_errno(d, -errno, "%s: %s", tmp, strerror(errno));
	if (!rc && (fsync(fd) || fstat(fd, &st)))
		rc = diag_errno(d, -errno, "%s: %s", tmp, strerror(errno));
	if (!rc && before)
		rc = before(arg, &st, d);
	if (!rc && rename(tmp, target))
		rc = diag_errno(d, -errno, "%s: cannot replace it: %s", target,
				strerror(errno));
	if (!rc && (rc = io_fsync_dir_of(target)))
		rc = diag_errno(d, rc, "%s: fsync of its directory: %s",
				target, strerror(-rc));
	close(fd);
	if (rc)
		unlink(tmp);
	free(tmp);
	return rc;
}
