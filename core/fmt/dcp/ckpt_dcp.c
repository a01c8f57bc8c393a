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
#include "source/source.h"
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

/* Read and parse metadata file @fd (@name, for messages) into *@doc,
 * and check what it holds is a Metadata object; *@rs gets its state. */
static int read_meta(struct ckpt *c, int fd, const char *name,
		     struct pkl_doc **doc, const struct pkl_value **rs,
		     struct diag *d)
{
	struct stat st;
	unsigned char *buf;
	const struct pkl_value *root;
	int rc;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		return diag_errno(d, -EINVAL, "%s: not a regular file", name);
	if ((uint64_t)st.st_size > META_MAX)
		return diag_unsupported(d, 0, "%s of %llu bytes: larger than "
					"ptfs reads", name,
					(unsigned long long)st.st_size);
	buf = malloc(st.st_size + 1);
	if (!buf)
		return diag_nomem(d);
	rc = io_pread_full(fd, buf, st.st_size, 0);
	if (rc) {
		free(buf);
		return diag_errno(d, rc, "%s: cannot read: %s", name,
				  strerror(-rc));
	}
	/* torch reads .metadata with a plain pickle.load: what it would
	   run is reported even when the model cannot use the file */
	rc = pkl_parse(buf, st.st_size, 0, doc, d);
	if (rc)
		ckpt_scan_failed(c, buf, st.st_size, 0, name, meta_global_ok,
				 d);
	else if (ckpt_scan_doc(c, *doc, name, meta_global_ok))
		rc = diag_nomem(d);
	free(buf);
	if (rc)
		return dcp_in_file(d, name, rc);
	root = (*doc)->root;
	*rs = dcp_state(root);
	if (!dcp_is_obj(root, DCP_M_META, NULL, "Metadata") || !*rs)
		return diag_corrupt(d, root->off, "%s: not a DCP Metadata "
				    "object", name);
	return 0;
}

/* The metadata files of directory @p: .metadata, else __0.metadata,
 * __1.metadata ... as long as they follow one another.  0: none. */
static uint32_t count_ranks(const struct ckpt_dcp *p)
{
	struct stat st;
	char name[32];
	uint32_t n = 0;

	if (!fstatat(p->dirfd, ".metadata", &st, AT_SYMLINK_NOFOLLOW))
		return 1;
	for (;; n++) {
		snprintf(name, sizeof(name), "__%u.metadata", n);
		if (fstatat(p->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) ||
		    n == DCP_MAX_RANKS)
			return n;
	}
}

/* Metadata file @r of @o: c->doc and c->fd for the first. */
static int open_meta(struct dcp_open *o, uint32_t r, const char *name)
{
	struct ckpt *c = o->c;
	struct pkl_doc *doc = NULL;
	const struct pkl_value *rs = NULL;
	int fd = r ? -1 : c->fd, rc;

	if (fd < 0) {
		rc = src_add(c->src, name, strlen(name), DIAG_NO_OFFSET, 0,
			     o->d);
		if (rc < 0)
			return rc;
		fd = src_at(c->src, (uint32_t)rc)->fd;	/* the source's */
	}
	rc = read_meta(c, fd, name, &doc, &rs, o->d);
	if (!r) {
		c->doc = doc;
	} else {
		if (doc && ckpt_push((void ***)&o->p->docs, &o->p->ndocs,
				     &o->p->docs_cap, doc)) {
			pkl_doc_free(doc);
			rc = rc ? rc : diag_nomem(o->d);
		}
	}
	if (rc)
		return rc;
	o->sdm[r] = dcp_field(rs, "state_dict_metadata");
	if (!o->sdm[r] || o->sdm[r]->kind != PKL_DICT)
		return diag_corrupt(o->d, doc->root->off, "%s: no "
				    "state_dict_metadata dict", name);
	o->planner[r] = dcp_field(rs, "planner_data");
	return ckpt_dcp_items(c, dcp_field(rs, "storage_data"), &o->items[r],
			      o->d);
}

/* ---- the open ---- */

int ckpt_dcp_open(struct ckpt *c, const char *meta, unsigned flags,
		  struct diag *d)
{
	struct dcp_open o = { .c = c, .d = d, .n = 1 };
	bool is_dir = !meta;
	struct ckpt_dcp *p;
	char name[32], *mp;
	int rc;

	p = arena_alloc(&c->arena, sizeof(*p));
	if (!p)
		return diag_nomem(d);
	c->dcp = p;
	o.p = p;
	c->format = CKPT_DCP;
	c->fmt = &ckpt_fmt_dcp;
	p->dirfd = -1;
	p->lenient = flags & CKPT_OPEN_LENIENT;
	pthread_mutex_init(&p->lock, NULL);
	p->dir = dir_of(c, c->path, is_dir);
	if (!p->dir)
		return diag_nomem(d);
	rc = src_new(p->dir, is_dir ? c->fd : -1, &c->src, d);
	if (is_dir)
		c->fd = -1;	/* the source's now */
	if (rc)
		return rc;
	p->dirfd = src_root_fd(c->src);
	if (is_dir) {
		o.n = count_ranks(p);
		meta = o.n == 1 && !fstatat(p->dirfd, ".metadata", &(struct
		       stat){ 0 }, AT_SYMLINK_NOFOLLOW) ? ".metadata" :
		       "__0.metadata";
		if (!o.n)
			return diag_set(d, -EISDIR, DIAG_NO_OFFSET, "no DCP "
					".metadata");
	}
	/* member 0: a fifo or a link out is the source's to judge */
	rc = src_add(c->src, meta, strlen(meta), DIAG_NO_OFFSET, 0, d);
	if (rc < 0)
		return rc;
	if (is_dir) {
		c->fd = fcntl(src_at(c->src, 0)->fd, F_DUPFD_CLOEXEC, 0);
		if (c->fd < 0)
			return diag_errno(d, -errno, "%s: %s", meta,
					  strerror(errno));
	}
	mp = arena_alloc(&c->arena, strlen(p->dir) + strlen(meta) + 2);
	if (!mp)
		return diag_nomem(d);
	sprintf(mp, "%s/%s", p->dir, meta);
	p->meta_path = mp;
	c->file_size = 0;
	o.sdm = calloc(o.n, sizeof(*o.sdm));
	o.planner = calloc(o.n, sizeof(*o.planner));
	o.items = calloc(o.n, sizeof(*o.items));
	rc = o.sdm && o.planner && o.items ? ckpt_build_begin(c, d) :
	     diag_nomem(d);
	for (uint32_t r = 0; r < o.n && !rc; r++) {
		snprintf(name, sizeof(name), "__%u.metadata", r);
		rc = open_meta(&o, r, r ? name : meta);
	}
	if (!rc) {
		struct stat st;

		c->file_size = fstat(c->fd, &st) ? 0 : (uint64_t)st.st_size;
		rc = ckpt_dcp_leaves(&o);
	}
	for (uint32_t r = 0; o.items && r < o.n; r++)
		free(o.items[r].v);
	free(o.items);
	free(o.sdm);
	free(o.planner);
	free(o.paths.v);
	free(o.pathv);
	if (!rc)
		rc = ckpt_dcp_check_chunks(c, d);
	return rc;
}
