/*
 * ckpt_dcp.c - torch.distributed.checkpoint (DCP) directories as one
 * model, read-only for now.  torch 2.x's FileSystemWriter writes:
 *
 *   FILE              WHAT
 *   .metadata         pickle.dump(Metadata) (or __R.metadata: one rank's)
 *   __R_N.distcp      items, concatenated; each is a complete torch.save
 *                     archive of one tensor chunk, or of one python value
 *
 *   Metadata          state {state_dict_metadata, planner_data,
 *                            storage_data, storage_meta?, version?}
 *   state_dict_metadata  {fqn: TensorStorageMetadata | BytesStorageMetadata}
 *   TensorStorageMetadata {properties: TensorProperties (state: dtype,
 *                          layout, requires_grad, _MEM_FORMAT_ENCODING(k),
 *                          pin_memory), size: torch.Size,
 *                          chunks: [ChunkStorageMetadata{offsets, sizes}]}
 *   planner_data      {fqn: (key, key, ...)}: the nested path, str keys of
 *                     dicts and int indices of lists
 *   storage_data      {MetadataIndex{fqn, offset?, index}:
 *                      _StorageInfo{relative_path, offset, length,
 *                                   transform_descriptors?}}
 *
 * The pickle is parsed, never run (core/pickle).  Its globals are listed
 * against the few a well-formed file needs; others go to c->globals for
 * ptls and ptverify.  The tree nests the keys as planner_data says; each
 * tensor is one storage of its global shape whose chunks ckpt_dcp_read.c
 * gathers; each value is its item's pickle, built as a single file's.
 */
#include "ckpt_dcp.h"
#include "util/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define META_MAX	(UINT64_C(1) << 31)	/* .metadata bytes */
#define VALUE_PKL_MAX	(UINT64_C(1) << 26)	/* a value's data.pkl */

const char DCP_M_META[] = "torch.distributed.checkpoint.metadata";
const char DCP_M_OLD[] = "torch.distributed._shard.sharded_tensor.metadata";
const char DCP_M_FS[] = "torch.distributed.checkpoint.filesystem";

/* The globals a well-formed .metadata of torch 2.x uses. */
static bool meta_global_ok(const char *m, const char *n)
{
	static const char *const meta[] = {
		"Metadata", "TensorStorageMetadata", "BytesStorageMetadata",
		"ChunkStorageMetadata", "TensorProperties",
		"_MEM_FORMAT_ENCODING", "MetadataIndex", "StorageMeta", NULL,
	};
	static const char *const paths[] = {
		"PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath",
		NULL,
	};

	if (!strcmp(m, DCP_M_META)) {
		for (int i = 0; meta[i]; i++)
			if (!strcmp(n, meta[i]))
				return true;
		return false;
	}
	if (!strcmp(m, DCP_M_OLD))
		return !strcmp(n, "TensorProperties") ||
		       !strcmp(n, "MEM_FORMAT_ENCODING");
	if (!strcmp(m, DCP_M_FS))
		return !strcmp(n, "_StorageInfo");
	if (!strcmp(m, "pathlib") || !strcmp(m, "pathlib._local")) {
		for (int i = 0; paths[i]; i++)
			if (!strcmp(n, paths[i]))
				return true;
		return false;
	}
	if (!strcmp(m, "torch"))
		return !strcmp(n, "Size") || !strcmp(n, "strided") ||
		       ckpt_dtype_by_name(n);
	return !strcmp(m, "torch.serialization") && !strcmp(n, "_get_layout");
}

struct meta_walk {
	struct ckpt *c;
	struct diag *d;
};

static void note_meta_global(const struct pkl_value *g, void *arg)
{
	struct meta_walk *w = arg;

	if (!diag_failed(w->d) &&
	    !meta_global_ok(g->u.global.module, g->u.global.name) &&
	    ckpt_global_add(w->c, g))
		diag_nomem(w->d);
}

static void note_value_global(const struct pkl_value *g, void *arg)
{
	struct meta_walk *w = arg;

	if (!diag_failed(w->d) &&
	    !ckpt_global_allowed(g->u.global.module, g->u.global.name) &&
	    ckpt_global_add(w->c, g))
		diag_nomem(w->d);
}

int ckpt_dcp_problem(struct ckpt *c, struct diag *d, const char *check,
		     const char *path, uint64_t off, int err,
		     const char *fmt, ...)
{
	struct ckpt_dcp *p = c->dcp;
	struct dcp_finding *f;
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!p->lenient)
		return diag_set(d, err, off, "%s", msg);
	if (p->nfindings == p->findings_cap) {
		uint32_t cap = p->findings_cap ? 2 * p->findings_cap : 16;

		f = realloc(p->findings, cap * sizeof(*f));
		if (!f)
			return diag_nomem(d);
		p->findings = f;
		p->findings_cap = cap;
	}
	f = &p->findings[p->nfindings];
	f->check = check;
	f->path = path;
	f->off = off;
	f->msg = arena_strndup(&c->arena, msg, strlen(msg));
	if (!f->msg)
		return diag_nomem(d);
	p->nfindings++;
	return 0;
}

/* Put "@name: " before a failure's message (the diag names the directory). */
static int in_file(struct diag *d, const char *name, int rc)
{
	char msg[sizeof(d->msg) + 64];

	if (rc && diag_failed(d) && strncmp(d->msg, name, strlen(name))) {
		snprintf(msg, sizeof(msg), "%.60s: %s", name, d->msg);
		memcpy(d->msg, msg, sizeof(d->msg) - 1);
		d->msg[sizeof(d->msg) - 1] = 0;
	}
	return rc;
}

/* ---- the open ---- */

struct dcp_open {
	struct ckpt *c;
	struct ckpt_dcp *p;
	struct diag *d;
	struct dcp_tab items;	/* (fqn, offsets) -> item */
	struct dcp_tab paths;	/* fqn -> planner_data entry */
	const struct pkl_value *planner;
};

/* A value's item: its torch.save archive's pickle, built as a tree. */
static int value(struct dcp_open *o, const char *fqn, uint64_t at,
		 struct ckpt_node **out)
{
	struct ckpt *c = o->c;
	struct ckpt_dcp *p = o->p;
	uint32_t k = dcp_tab_get(&o->items, fqn, strlen(fqn), NULL, 0);
	struct meta_walk w = { c, o->d };
	struct ptz_reader z = { 0 };
	struct pkl_doc *doc = NULL;
	struct ptz_entry *e;
	struct dcp_item *it;
	struct dcp_file *f;
	unsigned char *buf = NULL;
	uint32_t s0 = c->nstorages;
	size_t len;
	int rc;

	if (k == UINT32_MAX)
		return diag_corrupt(o->d, at, ".metadata: value '%s' has no "
				    "item in storage_data", fqn);
	it = &p->items[k];
	it->used = true;
	f = &p->files[it->file];
	if (f->fd < 0 || it->off + it->len > f->size)
		return diag_corrupt(o->d, at, ".metadata: value '%s' is in an "
				    "item that cannot be read", fqn);
	/* the zip reader's offsets count from the item */
	rc = ptz_reader_open_at(&z, f->fd, f->path, it->off, it->len, o->d);
	e = rc ? NULL : ptz_find_rel(&z, "data.pkl");
	if (!rc && !e)
		rc = diag_corrupt(o->d, 0, "no data.pkl record in the item "
				  "of '%s'", fqn);
	if (!rc)
		rc = ptz_entry_read(&z, e, VALUE_PKL_MAX, &buf, &len, o->d);
	if (rc && o->d->off != DIAG_NO_OFFSET)
		o->d->off += it->off;
	if (!rc)
		rc = pkl_parse(buf, len, it->off + e->data_off, &doc, o->d);
	free(buf);
	if (!rc && ckpt_push((void ***)&p->docs, &p->ndocs, &p->docs_cap,
			     doc)) {
		pkl_doc_free(doc);
		rc = diag_nomem(o->d);
	}
	if (!rc) {
		char prefix[24];

		pkl_doc_each_global(doc, note_value_global, &w);
		snprintf(prefix, sizeof(prefix), "v%u/", k);
		c->b->key_prefix = prefix;
		rc = diag_failed(o->d) ? o->d->err :
		     ckpt_build_doc(c, doc, out, o->d);
		c->b->key_prefix = NULL;
	}
	/* tensors inside a value: their storages are records of the item */
	for (uint32_t i = s0; i < c->nstorages && !rc; i++)
		rc = ckpt_dcp_value_storage(c, &z, k, c->storages[i], o->d);
	ptz_reader_release(&z);
	return in_file(o->d, f->name, rc);
}

/*
 * value(), but a lenient open notes a value it cannot read (a missing
 * file, a broken item) and leaves it out of the tree.
 */
static int leaf_value(struct dcp_open *o, const char *fqn, uint64_t at,
		      struct ckpt_node **out)
{
	struct diag *d = o->d, mine;
	int rc;

	if (!o->p->lenient)
		return value(o, fqn, at, out);
	diag_init(&mine, d->path);
	o->d = &mine;
	rc = value(o, fqn, at, out);
	o->d = d;
	if (rc == -ENOMEM)
		return diag_nomem(d);
	if (rc)
		*out = NULL;
	return rc ? ckpt_dcp_problem(o->c, d, "item", NULL, mine.off, rc,
				     "%s", mine.msg) : 0;
}

/* TensorStorageMetadata @v of @fqn: its storage, tensor and chunks. */
static int tensor(struct dcp_open *o, const char *fqn,
		  const struct pkl_value *v, struct ckpt_tensor **out)
{
	struct ckpt *c = o->c;
	const struct pkl_value *st = dcp_state(v), *pr, *pst, *dt, *ch;
	const struct ckpt_dtype *dtype;
	struct ckpt_storage *s;
	struct ckpt_tensor *t;
	int64_t shape[CKPT_MAX_DIMS];
	char key[16];
	int nd, rc;

	pr = dcp_field(st, "properties");
	pst = dcp_state(pr);
	if (!dcp_is_obj(pr, DCP_M_META, DCP_M_OLD, "TensorProperties") || !pst)
		return diag_corrupt(o->d, v->off, ".metadata: tensor '%s' has "
				    "no TensorProperties", fqn);
	dt = pst->kind == PKL_TUPLE ? pkl_item(pst, 0) :
	     dcp_field(pst, "dtype");
	if (!dt || dt->kind != PKL_GLOBAL ||
	    strcmp(dt->u.global.module, "torch") ||
	    !(dtype = ckpt_dtype_by_name(dt->u.global.name)))
		return diag_unsupported(o->d, pst->off, ".metadata: tensor "
					"'%s' has an unknown dtype", fqn);
	if (!dcp_dims(dcp_field(st, "size"), shape, &nd))
		return diag_corrupt(o->d, v->off, ".metadata: tensor '%s' has "
				    "no valid size", fqn);
	ch = dcp_field(st, "chunks");
	if (!ch || ch->kind != PKL_LIST)
		return diag_corrupt(o->d, v->off, ".metadata: tensor '%s' has "
				    "no list of chunks", fqn);
	snprintf(key, sizeof(key), "%u", c->nstorages);
	t = ckpt_tensor_new(c->b, nd);
	if (!t)
		return diag_nomem(o->d);
	memcpy(t->shape, shape, nd * sizeof(*shape));
	t->kind = CKPT_T_STRIDED;
	t->dtype = dtype;
	t->pkl_off = v->off;
	if (!ckpt_tensor_c_strides(t))
		return diag_corrupt(o->d, v->off, ".metadata: tensor '%s': "
				    "strides overflow", fqn);
	rc = ckpt_tensor_check(c, t, o->d);	/* numel, nbytes */
	if (!rc)
		rc = ckpt_storage_add(c->b, key, dtype, "cpu", t->numel,
				      v->off, &s);
	if (rc)
		return rc;
	t->storage = s;
	t->device = s->location;
	s->ntensors++;
	for (size_t i = 0; i < pkl_len(ch) && !rc; i++) {
		const struct pkl_value *cs = dcp_state(pkl_item(ch, i));
		int64_t off[CKPT_MAX_DIMS], sz[CKPT_MAX_DIMS];
		int n1, n2;
		uint32_t k;

		if (!dcp_is_obj(pkl_item(ch, i), DCP_M_META, NULL,
			    "ChunkStorageMetadata") ||
		    !dcp_dims(dcp_field(cs, "offsets"), off, &n1) ||
		    !dcp_dims(dcp_field(cs, "sizes"), sz, &n2) ||
		    n1 != nd || n2 != nd)
			return diag_corrupt(o->d, pkl_item(ch, i)->off,
					    ".metadata: tensor '%s': chunk %zu "
					    "is not a ChunkStorageMetadata of "
					    "%d dimensions", fqn, i, nd);
		k = dcp_tab_get(&o->items, fqn, strlen(fqn), off, nd);
		rc = ckpt_dcp_chunk_add(c, nd, off, sz, k,
					pkl_item(ch, i)->off, o->d);
		if (!rc && k != UINT32_MAX)
			o->p->items[k].used = true;
	}
	if (!rc)
		rc = ckpt_dcp_storage_done(c, fqn, t, o->d);
	*out = t;
	return rc;
}

/* planner_data: fqn -> the path tuple of the nested state dict. */
static int paths(struct dcp_open *o)
{
	const struct pkl_value *pd = o->planner;

	if (!pd || pd->kind != PKL_DICT)
		return 0;	/* a custom planner: keys stay flat */
	for (size_t i = 0; i < pkl_len(pd); i++) {
		const struct pkl_value *k = pd->u.items.v[2 * i];

		if (as_str(k) && dcp_tab_put(&o->paths, k->u.s.p, k->u.s.n,
					     NULL, 0, (uint32_t)i) < 0)
			return diag_nomem(o->d);
	}
	return 0;
}

/* The path of @fqn: planner_data's tuple, else (fqn,). */
static const struct pkl_value *path_of(struct dcp_open *o,
				       const struct pkl_value *key)
{
	uint32_t i = dcp_tab_get(&o->paths, key->u.s.p, key->u.s.n, NULL, 0);
	const struct pkl_value *v;

	if (i == UINT32_MAX)
		return NULL;
	v = o->planner->u.items.v[2 * i + 1];
	return v && (v->kind == PKL_TUPLE || v->kind == PKL_LIST) &&
	       pkl_len(v) ? v : NULL;
}

/* Every entry of state_dict_metadata: a tensor or a value, then nested. */
static int leaves(struct dcp_open *o, const struct pkl_value *sdm)
{
	struct ckpt *c = o->c;
	size_t n = pkl_len(sdm);
	struct dcp_leaf *lv = calloc(n + 1, sizeof(*lv));
	int rc = lv ? paths(o) : diag_nomem(o->d);

	for (size_t i = 0; i < n && !rc; i++) {
		const struct pkl_value *k = sdm->u.items.v[2 * i];
		const struct pkl_value *v = sdm->u.items.v[2 * i + 1];
		const char *fqn = as_str(k);
		struct ckpt_tensor *t = NULL;

		if (!fqn) {
			rc = diag_corrupt(o->d, k->off, ".metadata: a key of "
					  "state_dict_metadata is not a str");
			break;
		}
		lv[i].key = k;
		lv[i].path = path_of(o, k);
		if (dcp_is_obj(v, DCP_M_META, NULL, "TensorStorageMetadata")) {
			rc = tensor(o, fqn, v, &t);
			if (rc)
				break;
			lv[i].node = ckpt_node_synth(c->b, CKPT_N_TENSOR,
						     "Tensor");
			if (!lv[i].node) {
				rc = diag_nomem(o->d);
				break;
			}
			lv[i].node->tensor = t;
			t->shown = true;
			c->nshown++;
		} else if (dcp_is_obj(v, DCP_M_META, NULL,
				      "BytesStorageMetadata")) {
			rc = leaf_value(o, fqn, v->off, &lv[i].node);
		} else {
			rc = diag_corrupt(o->d, v ? v->off : k->off,
					  ".metadata: '%s' is neither "
					  "TensorStorageMetadata nor "
					  "BytesStorageMetadata", fqn);
		}
	}
	if (!rc)
		rc = ckpt_dcp_nest(c, lv, (uint32_t)n, o->d);
	free(lv);
	return rc;
}

/* The directory's path from the user's: DIR for DIR/.metadata. */
static char *dir_of(struct ckpt *c, const char *path, bool is_dir)
{
	const char *slash = strrchr(path, '/');

	if (is_dir)
		return arena_strndup(&c->arena, path, strlen(path));
	if (!slash)
		return arena_strndup(&c->arena, ".", 1);
	return arena_strndup(&c->arena, path, slash == path ? 1 :
			     (size_t)(slash - path));
}

int ckpt_dcp_open(struct ckpt *c, const char *meta, unsigned flags,
		  struct diag *d)
{
	struct dcp_open o = { .c = c, .d = d };
	struct meta_walk w = { c, d };
	bool is_dir = !meta;
	const struct pkl_value *root, *rs, *sdm;
	struct ckpt_dcp *p;
	struct stat st;
	unsigned char *buf = NULL;
	int fd, rc;

	p = arena_alloc(&c->arena, sizeof(*p));
	if (!p)
		return diag_nomem(d);
	c->dcp = p;
	o.p = p;
	c->format = CKPT_DCP;
	p->dirfd = -1;
	p->lenient = flags & CKPT_OPEN_LENIENT;
	pthread_mutex_init(&p->lock, NULL);
	p->dir = dir_of(c, c->path, is_dir);
	if (!p->dir)
		return diag_nomem(d);
	if (is_dir) {
		char *mp = arena_alloc(&c->arena, strlen(p->dir) + 12);

		if (!mp)
			return diag_nomem(d);
		sprintf(mp, "%s/.metadata", p->dir);
		p->meta_path = mp;
	} else {
		p->meta_path = c->path;
	}
	if (is_dir) {
		p->dirfd = c->fd;
		c->fd = -1;
		meta = ".metadata";
	} else {
		p->dirfd = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (p->dirfd < 0)
			return diag_errno(d, -errno, "%s: %s", p->dir,
					  strerror(errno));
		meta = strrchr(c->path, '/') ? strrchr(c->path, '/') + 1 :
		       c->path;
	}
	if (is_dir) {
		fd = openat(p->dirfd, meta, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			return diag_errno(d, -errno, "%s: %s", meta,
					  strerror(errno));
		c->fd = fd;
	}
	if (fstat(c->fd, &st) || !S_ISREG(st.st_mode))
		return diag_errno(d, -EINVAL, "%s: not a regular file", meta);
	c->file_size = st.st_size;
	if (c->file_size > META_MAX)
		return diag_unsupported(d, 0, "%s of %llu bytes: larger than "
					"ptfs reads", meta,
					(unsigned long long)c->file_size);
	buf = malloc(c->file_size + 1);
	if (!buf)
		return diag_nomem(d);
	rc = io_pread_full(c->fd, buf, c->file_size, 0);
	if (rc)
		rc = diag_errno(d, rc, "%s: cannot read: %s", meta,
				strerror(-rc));
	if (!rc)
		rc = pkl_parse(buf, c->file_size, 0, &c->doc, d);
	free(buf);
	if (!rc)
		rc = ckpt_build_begin(c, d);
	if (rc)
		return in_file(d, meta, rc);
	pkl_doc_each_global(c->doc, note_meta_global, &w);
	if (diag_failed(d))
		return d->err;
	root = c->doc->root;
	rs = dcp_state(root);
	if (!dcp_is_obj(root, DCP_M_META, NULL, "Metadata") || !rs)
		return diag_corrupt(d, root->off, "%s: not a DCP Metadata "
				    "object", meta);
	sdm = dcp_field(rs, "state_dict_metadata");
	if (!sdm || sdm->kind != PKL_DICT)
		return diag_corrupt(d, root->off, "%s: no state_dict_metadata "
				    "dict", meta);
	rc = ckpt_dcp_items(c, dcp_field(rs, "storage_data"), &o.items, d);
	o.planner = dcp_field(rs, "planner_data");
	if (!rc)
		rc = leaves(&o, sdm);
	free(o.items.v);
	free(o.paths.v);
	if (!rc)
		rc = ckpt_dcp_check_chunks(c, d);
	return rc;
}
