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
#define VALUE_PKL_MAX	(UINT64_C(1) << 26)	/* a value item's data.pkl */

static const char M_META[] = "torch.distributed.checkpoint.metadata";
static const char M_OLD[] = "torch.distributed._shard.sharded_tensor.metadata";
static const char M_FS[] = "torch.distributed.checkpoint.filesystem";

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

	if (!strcmp(m, M_META)) {
		for (int i = 0; meta[i]; i++)
			if (!strcmp(n, meta[i]))
				return true;
		return false;
	}
	if (!strcmp(m, M_OLD))
		return !strcmp(n, "TensorProperties") ||
		       !strcmp(n, "MEM_FORMAT_ENCODING");
	if (!strcmp(m, M_FS))
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

/* ---- small readers over the pickle's objects ---- */

/* A NEWOBJ/REDUCE of class @module.@name (either module when @alt). */
static bool is_obj(const struct pkl_value *v, const char *module,
		   const char *alt, const char *name)
{
	const struct pkl_value *f;

	if (!v || v->kind != PKL_CALL)
		return false;
	f = v->u.call.func;
	return f && f->kind == PKL_GLOBAL && !strcmp(f->u.global.name, name) &&
	       (!strcmp(f->u.global.module, module) ||
		(alt && !strcmp(f->u.global.module, alt)));
}

/* Entry @key of dict @v (a dataclass's state), or NULL. */
static const struct pkl_value *field(const struct pkl_value *v,
				     const char *key)
{
	if (!v || v->kind != PKL_DICT)
		return NULL;
	for (size_t i = 0; i < pkl_len(v); i++) {
		const char *k = as_str(v->u.items.v[2 * i]);

		if (k && !strcmp(k, key))
			return v->u.items.v[2 * i + 1];
	}
	return NULL;
}

static const struct pkl_value *state(const struct pkl_value *v)
{
	return v && v->kind == PKL_CALL ? v->u.call.x->state : NULL;
}

/* torch.Size((a, b)) or a plain tuple/list of ints >= 0 into @out. */
static bool dims(const struct pkl_value *v, int64_t *out, int *n)
{
	if (v && v->kind == PKL_CALL && pkl_is_global(v->u.call.func, "torch",
						      "Size"))
		v = arg(v->u.call.args, 0);
	if (!v || (v->kind != PKL_TUPLE && v->kind != PKL_LIST) ||
	    pkl_len(v) > CKPT_MAX_DIMS)
		return false;
	*n = (int)pkl_len(v);
	for (int i = 0; i < *n; i++)
		if (!as_int(v->u.items.v[i], &out[i]) || out[i] < 0)
			return false;
	return true;
}

/* ---- lookups: items by (fqn, offsets), planner paths by fqn ---- */

struct ent {
	uint32_t h;
	uint32_t val;		/* + 1; 0: empty slot */
	const char *s;
	size_t n;
	const int64_t *dims;	/* NULL: no offsets (a value) */
	int nd;
};

struct tab {
	struct ent *v;
	uint32_t cap, n;
};

static uint32_t hash_of(const char *s, size_t n, const int64_t *dv, int nd)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	for (int i = 0; dv && i < nd; i++)
		h = (h ^ (uint32_t)(dv[i] * 2654435761u)) * 16777619u;
	h ^= h >> 15;
	return h * 0x2c1b3c6du;
}

static struct ent *tab_slot(const struct tab *t, const char *s, size_t n,
			    const int64_t *dv, int nd, uint32_t h)
{
	for (uint32_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		struct ent *e = &t->v[i];

		if (!e->val || (e->h == h && e->n == n && !memcmp(e->s, s, n) &&
				!e->dims == !dv && (!dv || (e->nd == nd &&
				!memcmp(e->dims, dv, nd * sizeof(*dv))))))
			return e;
	}
}

/* Add (@s, @dv) -> @val; 1 if the key was there already, 0, -ENOMEM. */
static int tab_put(struct tab *t, const char *s, size_t n, const int64_t *dv,
		   int nd, uint32_t val)
{
	uint32_t h = hash_of(s, n, dv, nd);
	struct ent *e;

	if (2 * (t->n + 1) > t->cap) {
		struct tab bigger = { .cap = t->cap ? 2 * t->cap : 256 };

		bigger.v = calloc(bigger.cap, sizeof(*bigger.v));
		if (!bigger.v)
			return -ENOMEM;
		for (uint32_t i = 0; i < t->cap; i++)
			if (t->v[i].val)
				*tab_slot(&bigger, t->v[i].s, t->v[i].n,
					  t->v[i].dims, t->v[i].nd,
					  t->v[i].h) = t->v[i];
		free(t->v);
		bigger.n = t->n;
		*t = bigger;
	}
	e = tab_slot(t, s, n, dv, nd, h);
	if (e->val)
		return 1;
	*e = (struct ent){ h, val + 1, s, n, dv, nd };
	t->n++;
	return 0;
}

/* The value of (@s, @dv), or UINT32_MAX. */
static uint32_t tab_get(const struct tab *t, const char *s, size_t n,
			const int64_t *dv, int nd)
{
	struct ent *e;

	if (!t->cap)
		return UINT32_MAX;
	e = tab_slot(t, s, n, dv, nd, hash_of(s, n, dv, nd));
	return e->val ? e->val - 1 : UINT32_MAX;
}

/* ---- the open ---- */

struct dcp_open {
	struct ckpt *c;
	struct ckpt_dcp *p;
	struct diag *d;
	struct tab items;	/* (fqn, offsets) -> item */
	struct tab paths;	/* fqn -> planner_data entry */
	const struct pkl_value *planner;
};

static uint32_t file_of(struct dcp_open *o, const char *name, uint64_t at)
{
	struct ckpt_dcp *p = o->p;
	struct dcp_file *f;
	struct stat st;
	size_t len = strlen(name);
	char *path;
	int fd;

	for (uint32_t i = p->nfiles; i-- > 0;)	/* the last one, mostly */
		if (!strcmp(p->files[i].name, name))
			return i;
	/* a name, nothing else: no way out of the directory */
	if (!len || strchr(name, '/') || !strcmp(name, ".") ||
	    !strcmp(name, "..")) {
		diag_corrupt(o->d, at, ".metadata: relative_path '%.64s' is not "
			     "a file name in the directory", name);
		return UINT32_MAX;
	}
	if (p->nfiles == p->files_cap) {
		uint32_t cap = p->files_cap ? 2 * p->files_cap : 8;

		f = realloc(p->files, cap * sizeof(*f));
		if (!f)
			goto nomem;
		p->files = f;
		p->files_cap = cap;
	}
	f = &p->files[p->nfiles];
	memset(f, 0, sizeof(*f));
	f->name = name;
	path = arena_alloc(&o->c->arena, strlen(p->dir) + len + 2);
	if (!path)
		goto nomem;
	sprintf(path, "%s/%s", p->dir, name);
	f->path = path;
	fd = openat(p->dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	f->fd = -1;
	if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
		errno = EINVAL;
	}
	if (fd < 0) {
		f->err = -errno;
		p->nfiles++;
		if (ckpt_dcp_problem(o->c, o->d, "file", name, DIAG_NO_OFFSET,
				     f->err, "%s: %s (named by .metadata)",
				     name, f->err == -EINVAL ? "not a regular "
				     "file" : strerror(-f->err)))
			return UINT32_MAX;
		return p->nfiles - 1;
	}
	f->fd = fd;
	f->size = st.st_size;
	return p->nfiles++;
nomem:
	diag_nomem(o->d);
	return UINT32_MAX;
}

/* One storage_data entry: MetadataIndex -> _StorageInfo. */
static int item(struct dcp_open *o, const struct pkl_value *k,
		const struct pkl_value *v)
{
	struct ckpt_dcp *p = o->p;
	const struct pkl_value *ks = state(k), *vs = state(v), *off, *td;
	const char *fqn = as_str(field(ks, "fqn")), *rel;
	int64_t io, il, dv[CKPT_MAX_DIMS];
	struct dcp_item *it;
	int64_t *keep = NULL;
	int nd = 0, rc;
	uint32_t fi;

	if (!is_obj(k, M_META, NULL, "MetadataIndex") || !fqn ||
	    !is_obj(v, M_FS, NULL, "_StorageInfo"))
		return diag_corrupt(o->d, k->off, ".metadata: storage_data "
				    "entry is not MetadataIndex -> "
				    "_StorageInfo");
	off = field(ks, "offset");
	if (off && off->kind != PKL_NONE && !dims(off, dv, &nd))
		return diag_corrupt(o->d, off->off, ".metadata: item of '%s' "
				    "has a bad offset", fqn);
	rel = as_str(field(vs, "relative_path"));
	if (!rel || !as_int(field(vs, "offset"), &io) || io < 0 ||
	    !as_int(field(vs, "length"), &il) || il < 0)
		return diag_corrupt(o->d, v->off, ".metadata: item of '%s' "
				    "lacks relative_path, offset or length",
				    fqn);
	td = field(vs, "transform_descriptors");
	if (td && td->kind != PKL_NONE && pkl_len(td)) {
		const char *t0 = as_str(pkl_item(td, 0));

		return diag_unsupported(o->d, td->off, ".metadata: item of "
					"'%s' is stored through transform "
					"'%.32s' (zstd and other DCP "
					"extensions are not supported)", fqn,
					t0 ? t0 : "?");
	}
	fi = file_of(o, rel, v->off);
	if (fi == UINT32_MAX)
		return o->d->err;
	if (off && off->kind != PKL_NONE) {
		keep = arena_alloc(&o->c->arena, (nd + 1) * sizeof(*keep));
		if (!keep)
			return diag_nomem(o->d);
		memcpy(keep, dv, nd * sizeof(*dv));
	}
	if (p->nitems == p->items_cap) {
		uint32_t cap = p->items_cap ? 2 * p->items_cap : 64;

		it = realloc(p->items, cap * sizeof(*it));
		if (!it)
			return diag_nomem(o->d);
		p->items = it;
		p->items_cap = cap;
	}
	it = &p->items[p->nitems];
	*it = (struct dcp_item){ .file = fi, .off = io, .len = il,
				 .meta_off = v->off };
	rc = tab_put(&o->items, fqn, strlen(fqn), keep, nd, p->nitems);
	if (rc < 0)
		return diag_nomem(o->d);
	if (rc)
		return diag_corrupt(o->d, k->off, ".metadata: two items for "
				    "'%s' at the same offset", fqn);
	p->nitems++;
	if (p->files[fi].fd >= 0 && (it->off > p->files[fi].size ||
				     it->len > p->files[fi].size - it->off))
		return ckpt_dcp_problem(o->c, o->d, "item", rel,
					it->off, -EILSEQ, "%s: item of '%s' "
					"(%llu bytes at %llu) runs past the "
					"end of the file (%llu bytes)", rel,
					fqn, (unsigned long long)it->len,
					(unsigned long long)it->off,
					(unsigned long long)
					p->files[fi].size);
	return 0;
}

static int items(struct dcp_open *o, const struct pkl_value *sd)
{
	int rc = 0;

	if (!sd || sd->kind != PKL_DICT)
		return diag_corrupt(o->d, sd ? sd->off : 0, ".metadata: "
				    "storage_data is not a dict (a storage "
				    "writer other than FileSystemWriter?)");
	for (size_t i = 0; i < pkl_len(sd) && !rc; i++)
		rc = item(o, sd->u.items.v[2 * i], sd->u.items.v[2 * i + 1]);
	return rc;
}

/* A value's item: its torch.save archive's pickle, built as a tree. */
static int value(struct dcp_open *o, const char *fqn, uint64_t at,
		 struct ckpt_node **out)
{
	struct ckpt *c = o->c;
	struct ckpt_dcp *p = o->p;
	uint32_t k = tab_get(&o->items, fqn, strlen(fqn), NULL, 0);
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
	const struct pkl_value *st = state(v), *pr, *pst, *dt, *ch;
	const struct ckpt_dtype *dtype;
	struct ckpt_storage *s;
	struct ckpt_tensor *t;
	int64_t shape[CKPT_MAX_DIMS];
	char key[16];
	int nd, rc;

	pr = field(st, "properties");
	pst = state(pr);
	if (!is_obj(pr, M_META, M_OLD, "TensorProperties") || !pst)
		return diag_corrupt(o->d, v->off, ".metadata: tensor '%s' has "
				    "no TensorProperties", fqn);
	dt = pst->kind == PKL_TUPLE ? pkl_item(pst, 0) : field(pst, "dtype");
	if (!dt || dt->kind != PKL_GLOBAL ||
	    strcmp(dt->u.global.module, "torch") ||
	    !(dtype = ckpt_dtype_by_name(dt->u.global.name)))
		return diag_unsupported(o->d, pst->off, ".metadata: tensor '%s' "
					"has an unknown dtype", fqn);
	if (!dims(field(st, "size"), shape, &nd))
		return diag_corrupt(o->d, v->off, ".metadata: tensor '%s' has "
				    "no valid size", fqn);
	ch = field(st, "chunks");
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
		const struct pkl_value *cs = state(pkl_item(ch, i));
		int64_t off[CKPT_MAX_DIMS], sz[CKPT_MAX_DIMS];
		int n1, n2;
		uint32_t k;

		if (!is_obj(pkl_item(ch, i), M_META, NULL,
			    "ChunkStorageMetadata") ||
		    !dims(field(cs, "offsets"), off, &n1) ||
		    !dims(field(cs, "sizes"), sz, &n2) || n1 != nd || n2 != nd)
			return diag_corrupt(o->d, pkl_item(ch, i)->off,
					    ".metadata: tensor '%s': chunk %zu "
					    "is not a ChunkStorageMetadata of "
					    "%d dimensions", fqn, i, nd);
		k = tab_get(&o->items, fqn, strlen(fqn), off, nd);
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

		if (as_str(k) && tab_put(&o->paths, k->u.s.p, k->u.s.n, NULL,
					 0, (uint32_t)i) < 0)
			return diag_nomem(o->d);
	}
	return 0;
}

/* The path of @fqn: planner_data's tuple, else (fqn,). */
static const struct pkl_value *path_of(struct dcp_open *o,
				       const struct pkl_value *key)
{
	uint32_t i = tab_get(&o->paths, key->u.s.p, key->u.s.n, NULL, 0);
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
		if (is_obj(v, M_META, NULL, "TensorStorageMetadata")) {
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
		} else if (is_obj(v, M_META, NULL, "BytesStorageMetadata")) {
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
	rs = state(root);
	if (!is_obj(root, M_META, NULL, "Metadata") || !rs)
		return diag_corrupt(d, root->off, "%s: not a DCP Metadata "
				    "object", meta);
	sdm = field(rs, "state_dict_metadata");
	if (!sdm || sdm->kind != PKL_DICT)
		return diag_corrupt(d, root->off, "%s: no state_dict_metadata "
				    "dict", meta);
	rc = items(&o, field(rs, "storage_data"));
	o.planner = field(rs, "planner_data");
	if (!rc)
		rc = leaves(&o, sdm);
	free(o.items.v);
	free(o.paths.v);
	if (!rc)
		rc = ckpt_dcp_check_chunks(c, d);
	return rc;
}
