/*
 * ckpt_dcp_save.c - write a checkpoint as a torch.distributed.checkpoint
 * (DCP) directory: what torch_save_to_dcp() (format_utils.py) makes of a
 * torch.save file, the files FileSystemWriter writes from one process
 * (multi-file-formats.md 2.1-2.3), streamed instead of loaded; or, with
 * o->dcp_ranks M > 1, what M ranks write holding each tensor as Shard(0)
 * (ckpt_dcp_split.c: which chunks, in which rank's file):
 *
 *   OUT/__R_0.distcp   rank R's items (one rank: __0_0.distcp, all of
 *                      them), one after another, each a complete
 *                      torch.save archive whose zip offsets count from
 *                      its own first byte (records "archive/..."):
 *                      the python values first (torch.save(value)), then
 *                      the tensors (torch.save of the tensor's chunk made
 *                      contiguous: one storage of exactly its bytes)
 *   OUT/.metadata      a pickle of torch's Metadata dataclass naming
 *                      every key's items (ckpt_dcp_meta.c has its layout)
 *
 * The state dict is flattened as DCP's traverse_state_dict() does (torch
 * >= 2.4, _traverse.py): dicts always, under str(key); a list only when
 * it holds a tensor, a dict or such a list, its items by index; anything
 * else (a tuple, an object, a plain list, a scalar) is one value.  The
 * key (FQN) is the path joined with '.'.  One rank: every tensor is one
 * chunk of its whole shape.  Like torch, an empty dict leaves no key and
 * a dict's attributes are not kept: the caller hears of each (o->note).
 * Refused with one line naming the key: a value that holds a tensor
 * (torch would pickle it whole), tensors DCP cannot hold, a key that is
 * not str or int, two paths with one FQN.
 *
 * Memory: the flattened keys, their items (M ranks: up to M a tensor) and
 * one value's pickle; tensor bytes stream through ckpt_tensor_read() 1 MiB
 * at a time, so a sharded or DCP input is gathered piece by piece.  OUT
 * is built under a temporary name beside it, fsync'd and renamed
 * (ckpt_newdir.h): a failure or crash leaves OUT as it was, and at most
 * that temporary.
 */
#include "ckpt_dcp_save.h"
#include "ckpt/ckpt_newdir.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pickle/pkl_emit.h"
#include "util/arena.h"
#include "util/io.h"
#include "util/sbuf.h"
#include "zip/ptz_write.h"


/* nodes a flattening may visit: shared containers repeat (CKPT_MAX_NODES) */
#define WALK_MAX	CKPT_MAX_NODES
/* bytes a view's contiguous copy may add to its storage's */
#define EXPAND_MAX	(UINT64_C(1) << 30)

struct dsave {
	struct ckpt *c;
	const struct ckpt_write_opts *o;
	struct diag *d;
	struct arena arena;
	struct dcp_leaf *v;
	uint32_t n, cap;
	struct dcp_elem *el;
	uint32_t nel, elcap;
	struct dcp_elem stack[CKPT_MAX_DEPTH + 2];
	int depth;
	struct dcp_plan plan;	/* the items: where each goes */
	int fd;			/* the file being written */
	uint64_t at;		/* its size so far */
	uint64_t done;		/* every file's bytes so far */
	uint64_t total;		/* the tensors' bytes, for progress */
	uint64_t visits;	/* nodes looked at: shared containers are
				   flattened once per path, so a DAG of them
				   (billion laughs) is bounded by WALK_MAX */
};

static void note(struct dsave *s, const char *key, const char *what)
{
	if (s->o->note)
		s->o->note(s->o->note_arg, key, what);
}

/* ---- flattening ---- */

static bool is_tensor(const struct ckpt_node *x)
{
	return x->tensor && x->tensor->kind != CKPT_T_INLINE;
}

static bool is_dict(const struct ckpt_node *x)
{
	return !x->tensor && x->kind == CKPT_N_DIR && ckpt_dict_type(x->type);
}

static bool is_list(const struct ckpt_node *x)
{
	return !x->tensor && x->kind == CKPT_N_SEQ && !strcmp(x->type, "list");
}

static const struct ckpt_node *deref(const struct ckpt_node *k)
{
	return k->kind == CKPT_N_LINK ? k->target : k;
}

static uint32_t live_kids(const struct ckpt_node *x)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < x->dir->nkids; i++)
		n += x->dir->kids[i] && !x->dir->kids[i]->dead;
	return n;
}

/*
 * _is_terminal() of a list: it holds no tensor, dict or unflat list.
 * Past the depth or the walk's budget it says no: walk() then refuses.
 */
static bool terminal(struct dsave *s, const struct ckpt_node *x, int depth)
{
	if (depth > CKPT_MAX_DEPTH)
		return false;
	for (uint32_t i = 0; i < x->dir->nkids; i++) {
		const struct ckpt_node *k = x->dir->kids[i], *y;

		if (!k || k->dead)
			continue;
		if (++s->visits > WALK_MAX)
			return false;
		y = deref(k);
		if (is_tensor(y) || is_dict(y) ||
		    (is_list(y) && !terminal(s, y, depth + 1)))
			return false;
	}
	return true;
}

static int add_leaf(struct dsave *s, const struct ckpt_node *x,
		    const struct sbuf *fqn)
{
	struct dcp_leaf *l;

	if (s->n == s->cap || s->nel + (uint32_t)s->depth > s->elcap) {
		uint32_t cap = s->cap ? 2 * s->cap : 64;
		uint32_t ecap = 2 * (s->nel + (uint32_t)s->depth) + 64;
		struct dcp_leaf *v = s->n == s->cap ?
				 realloc(s->v, cap * sizeof(*v)) : s->v;
		struct dcp_elem *e;

		if (!v)
			return diag_nomem(s->d);
		if (s->n == s->cap) {
			s->v = v;
			s->cap = cap;
		}
		e = realloc(s->el, ecap * sizeof(*e));
		if (!e)
			return diag_nomem(s->d);
		s->el = e;
		s->elcap = ecap;
	}
	l = &s->v[s->n++];
	memset(l, 0, sizeof(*l));
	l->fqn = arena_strndup(&s->arena, fqn->p, fqn->n);
	if (!l->fqn)
		return diag_nomem(s->d);
	l->len = (uint32_t)fqn->n;
	l->path = s->nel;
	l->npath = (uint32_t)s->depth;
	memcpy(&s->el[s->nel], s->stack, (size_t)s->depth * sizeof(s->el[0]));
	s->nel += (uint32_t)s->depth;
	l->x = x;
	l->tensor = is_tensor(x);
	if (l->tensor)
		s->total += ckpt_tensor_nbytes(x->tensor);
	return 0;
}

/* Can an item hold tensor @t (key @fqn)? */
static int holdable(struct dsave *s, const struct ckpt_tensor *t,
		    const char *fqn)
{
	if (t->kind != CKPT_T_STRIDED || !t->storage)
		return diag_unsupported(s->d, t->pkl_off, "%s: a %s tensor has "
					"no data a DCP item can hold", fqn,
					t->kind == CKPT_T_META ? "meta" :
					t->kind == CKPT_T_QUANTIZED ?
					"quantized" : "storage");
	if (t->conj || t->neg)
		return diag_unsupported(s->d, t->pkl_off, "%s: a tensor with "
					"its conjugate or negative bit set "
					"(resolve_conj() first)", fqn);
	/* an item holds the contiguous copy: an expand()ed view (stride 0)
	   of a small storage could ask for terabytes */
	if (ckpt_tensor_nbytes(t) > t->storage->nbytes &&
	    ckpt_tensor_nbytes(t) - t->storage->nbytes > EXPAND_MAX)
		return diag_unsupported(s->d, t->pkl_off, "%s: a view whose "
					"contiguous copy is %" PRIu64 " bytes "
					"over a storage of %" PRIu64 " (stride "
					"0: expand()); clone() it first if "
					"that is meant", fqn,
					ckpt_tensor_nbytes(t),
					t->storage->nbytes);
	return 0;
}

static int walk(struct dsave *s, const struct ckpt_node *dir,
		struct sbuf *fqn)
{
	uint32_t index = 0, attrs = 0;
	int rc = 0;

	if (s->depth > CKPT_MAX_DEPTH)
		return diag_unsupported(s->d, DIAG_NO_OFFSET, "%s: nested "
					"deeper than %d", fqn->p,
					CKPT_MAX_DEPTH);
	for (uint32_t i = 0; i < dir->dir->nkids && !rc; i++) {
		const struct ckpt_node *k = dir->dir->kids[i], *x;
		size_t mark = fqn->n;

		if (!k || k->dead)
			continue;
		if (++s->visits > WALK_MAX)
			return diag_unsupported(s->d, DIAG_NO_OFFSET, "%s: "
						"flattening repeats shared "
						"containers past %u entries",
						fqn->n ? fqn->p : "(the root)",
						(unsigned)WALK_MAX);
		if (k->step != CKPT_S_KEY && k->step != CKPT_S_INDEX) {
			attrs++;	/* an OrderedDict's _metadata, ... */
			continue;
		}
		if (fqn->n)
			sb_add(fqn, ".", 1);
		s->stack[s->depth] = (struct dcp_elem){ .off = (uint32_t)fqn->n,
			.index = k->step == CKPT_S_INDEX };
		rc = ckpt_key_text(k, index, fqn, "DCP", s->d);
		if (k->step == CKPT_S_INDEX)
			index++;
		if (!rc && fqn->oom)
			rc = diag_nomem(s->d);
		if (rc)
			break;
		s->stack[s->depth].len = (uint32_t)fqn->n -
					 s->stack[s->depth].off;
		s->depth++;
		x = deref(k);
		if (is_dict(x) && !live_kids(x))
			note(s, fqn->p, "an empty dict: DCP keeps no key for it "
			     "(torch_save_to_dcp drops it too)");
		else if (is_dict(x) || (is_list(x) && !terminal(s, x, 0)))
			rc = walk(s, x, fqn);
		else
			rc = (is_tensor(x) ? holdable(s, x->tensor, fqn->p) :
			      0) ?: add_leaf(s, x, fqn);
		s->depth--;
		sb_cut(fqn, mark);
	}
	if (!rc && (attrs || ckpt_node_state(dir))) {
		char what[128];

		snprintf(what, sizeof(what), "the %s's own attributes left "
			 "out: DCP keeps a dict's items only", dir->type);
		note(s, fqn->n ? fqn->p : "(the root)", what);
	}
	return rc;
}

static int by_fqn(const void *a, const void *b)
{
	const struct dcp_leaf *x = *(const struct dcp_leaf *const *)a;
	const struct dcp_leaf *y = *(const struct dcp_leaf *const *)b;
	int r = memcmp(x->fqn, y->fqn, x->len < y->len ? x->len : y->len);

	return r ? r : (x->len > y->len) - (x->len < y->len);
}

/* Two paths may join to one key ({'a.b': .., 'a': {'b': ..}}): refused,
   as flatten_state_dict() raises "duplicated flatten key". */
static int unique(struct dsave *s)
{
	const struct dcp_leaf **v;
	int rc = 0;

	if (s->n < 2)
		return 0;
	v = malloc(s->n * sizeof(*v));
	if (!v)
		return diag_nomem(s->d);
	for (uint32_t i = 0; i < s->n; i++)
		v[i] = &s->v[i];
	qsort(v, s->n, sizeof(*v), by_fqn);
	for (uint32_t i = 1; i < s->n && !rc; i++)
		if (!by_fqn(&v[i - 1], &v[i]))
			rc = diag_errno(s->d, -EINVAL, "%s: two keys flatten to "
					"this name", v[i]->fqn);
	free(v);
	return rc;
}

/* ---- the items ---- */

/* Any persistent id in a value is a tensor torch would pickle whole. */
static int no_persid(struct pkl_emit *e, const struct pkl_value *pid,
		     void *arg)
{
	const struct dcp_leaf *l = arg;

	return diag_unsupported(pkl_emit_diag(e), pid->off, "%s: a %s holding "
				"a tensor: DCP would pickle it whole; make "
				"its tensors keys of a dict or list", l->fqn,
				l->x->type ? l->x->type : "value");
}

static int value_pickle(struct dsave *s, struct dcp_leaf *l,
			unsigned char **pkl, size_t *len)
{
	struct pkl_emit_hooks h = { .persid = no_persid, .arg = l };
	struct pkl_emit *e;
	int rc;

	if (!l->x->val || l->x->edited || l->x->fresh)
		return diag_unsupported(s->d, DIAG_NO_OFFSET, "%s: a value "
					"edited or made since the open: write "
					"the checkpoint back first", l->fqn);
	rc = pkl_emit_init(&e, s->c->doc ? s->c->doc->nnodes : 0, &h, s->d);
	if (!rc)
		rc = pkl_emit_value(e, l->x->val);
	if (!rc)
		rc = pkl_emit_finish(e, pkl, len);
	pkl_emit_free(e);
	return rc;
}

/* torch.save() of the contiguous copy of @t's rows of @x (0-dim: all) */
static int tensor_pickle(struct dsave *s, const struct ckpt_tensor *t,
			 const struct dcp_item *x, uint64_t nbytes,
			 unsigned char **pkl, size_t *len)
{
	struct ckpt_storage st = { .nbytes = nbytes };
	struct ckpt_tensor it = *t;
	int64_t dims[2 * CKPT_MAX_DIMS];
	struct pkl_emit *e;
	int rc;

	memcpy(dims, t->shape, t->ndim * sizeof(*dims));
	if (t->ndim) {
		dims[0] = x->rows;
		it.numel = x->rows ? t->numel / (uint64_t)t->shape[0] *
				     (uint64_t)x->rows : 0;
	}
	it.shape = dims;
	it.storage = &st;
	it.offset = 0;
	(void)ckpt_tensor_c_strides(&it);	/* checked at open: no overflow */
	it.parameter = false;
	it.requires_grad = false;
	rc = pkl_emit_init(&e, 0, NULL, s->d);
	if (!rc)
		rc = ckpt_emit_tensor(e, &it, 0, UINT64_C(1) << 32);
	if (!rc)
		rc = pkl_emit_finish(e, pkl, len);
	pkl_emit_free(e);
	return rc;
}

static int put(struct ptz_writer *w, const char *name, const void *p,
	       size_t n, struct diag *d)
{
	struct ptz_source src = { .buf = p, .len = n };

	return ptz_writer_add(w, name, &src, d);
}

/*
 * Item @x at the end of the file being written, as torch.save writes a
 * stream: a value's pickle, or a tensor's rows [row, row + rows) (the
 * whole of a 0-dim one), bytes [row * R, (row + rows) * R) of its
 * row-major copy for R bytes a row.
 */
static int put_item(struct dsave *s, struct dcp_item *x)
{
	struct dcp_leaf *l = &s->v[x->leaf];
	const struct ckpt_tensor *t = l->tensor ? l->x->tensor : NULL;
	uint64_t nb = t ? ckpt_tensor_nbytes(t) : 0, rowb = 0;
	struct ckpt_tread tr = { s->c, t };
	struct ptz_source data = { .read = ckpt_tread, .read_arg = &tr };
	struct ptz_writer w;
	unsigned char *pkl = NULL;
	size_t len = 0;
	int rc;

	if (t && t->ndim) {
		rowb = t->shape[0] ? nb / (uint64_t)t->shape[0] : 0;
		nb = rowb * (uint64_t)x->rows;
		data.off = rowb * (uint64_t)x->row;
	}
	data.len = nb;
	rc = t ? tensor_pickle(s, t, x, nb, &pkl, &len) :
	     value_pickle(s, l, &pkl, &len);
	if (!rc)
		rc = ptz_writer_init(&w, s->fd, 64, s->d);
	else
		memset(&w, 0, sizeof(w));
	w.origin = s->at;
	if (!rc)
		rc = put(&w, "archive/data.pkl", pkl, len, s->d);
	if (!rc)
		rc = put(&w, "archive/.format_version", "1", 1, s->d);
	if (!rc)
		rc = put(&w, "archive/.storage_alignment", "64", 2, s->d);
	if (!rc)
		rc = put(&w, "archive/byteorder", "little", 6, s->d);
	if (!rc && t)
		rc = ptz_writer_add(&w, "archive/data/0", &data, s->d);
	if (!rc)
		rc = put(&w, "archive/version", "3\n", 2, s->d);
	if (!rc)
		rc = ptz_writer_finish(&w, s->d);
	if (!rc) {
		x->off = s->at;
		x->size = w.cursor;
		s->at += w.cursor;
		s->done += w.cursor;
	}
	ptz_writer_release(&w);
	free(pkl);
	return rc;
}

/* ---- the directory ---- */

/* What no DCP directory can be made of, wherever it goes. */
static int input_ok(const struct ckpt *c, struct diag *d)
{
	if (c->byteorder && !strcmp(c->byteorder, "big"))
		return diag_unsupported(d, DIAG_NO_OFFSET, "a big-endian "
					"checkpoint: DCP items are "
					"little-endian");
	if (!is_dict(c->root))
		return diag_unsupported(d, DIAG_NO_OFFSET, "the checkpoint is "
					"a %s, not a dict: DCP saves a state "
					"dict", c->root->type ? c->root->type :
					"value");
	return ckpt_whole_parts(c, d);
}

/* Rank @r's file: its items from wr[*@j] on, values first (an empty
   file when it holds none, as FileSystemWriter leaves it) */
static int write_rank(struct dsave *s, int dfd, uint32_t r, uint32_t *j)
{
	const struct dcp_plan *p = &s->plan;
	char name[DCP_FILE_MAX];
	int rc = 0;

	snprintf(name, sizeof(name), DCP_FILE_FMT, r);
	s->fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
		       O_CLOEXEC, 0644);
	if (s->fd < 0)
		return diag_errno(s->d, -errno, "%s: %s", name,
				  strerror(errno));
	s->at = 0;
	for (; *j < p->nit && p->it[p->wr[*j]].rank == r && !rc; ++*j) {
		rc = put_item(s, &p->it[p->wr[*j]]);
		if (!rc && s->o->progress)
			s->o->progress(s->o->progress_arg, s->done, s->total);
	}
	if (!rc && fsync(s->fd))
		rc = diag_errno(s->d, -errno, "%s: %s", name, strerror(errno));
	close(s->fd);
	s->fd = -1;
	return rc;
}

static int write_all(struct dsave *s, struct newdir *nd, struct diag *d)
{
	unsigned char *pkl = NULL;
	size_t len = 0;
	uint32_t j = 0;
	int rc;

	rc = ckpt_dcp_split(s->v, s->n, s->o->dcp_ranks, &s->plan, d);
	for (uint32_t r = 0; r < s->plan.ranks && !rc; r++)
		rc = write_rank(s, nd->dfd, r, &j);
	if (!rc)
		rc = ckpt_dcp_metadata(s->v, s->n, s->el, &s->plan, &pkl, &len,
				       d);
	if (!rc)
		rc = newdir_put(nd, ".metadata", pkl, len, 0644, d);
	free(pkl);
	return rc;
}

int ckpt_dcp_save(struct ckpt *c, const char *dst,
		  const struct ckpt_write_opts *o, struct ckpt_dcp_stats *st,
		  struct diag *d)
{
	struct dsave s = { .c = c, .o = o, .d = d, .fd = -1 };
	struct sbuf fqn = { 0 };
	struct newdir nd = { .dfd = -1 };
	int rc;

	rc = input_ok(c, d);
	if (!rc)
		rc = ckpt_whole(c, d);	/* values are written as parsed */
	if (!rc)
		rc = newdir_begin(&nd, dst, "a DCP output", d);
	if (!rc)
		rc = walk(&s, c->root, &fqn);
	free(fqn.p);
	if (!rc)
		rc = unique(&s);
	if (!rc)
		rc = write_all(&s, &nd, d);
	if (!rc)
		rc = newdir_commit(&nd, d);
	if (!rc && st) {
		st->keys = s.n;
		for (uint32_t i = 0; i < s.n; i++)
			st->tensors += s.v[i].tensor;
		st->size = s.done;
	}
	newdir_end(&nd);
	ckpt_dcp_plan_release(&s.plan);
	free(s.v);
	free(s.el);
	arena_release(&s.arena);
	return rc;
}
