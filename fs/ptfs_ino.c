/*
 * ptfs_ino.c - how checkpoint entries map to fuse_ino_t.
 *
 * The table is implicit, computed from positions, so that inode numbers
 * are stable across mounts of the same file and cost no memory:
 *
 *   1                        the mount's root directory
 *   2 + node->id             a node of the object tree (ckpt->nodes[id]);
 *                            when the root object is a dict/list, node 0
 *                            is shown as ino 1 and 2 is never handed out;
 *                            nodes made by edits continue the numbering
 *   P = 2^40                 .ptfs/
 *   P + 1                    .ptfs/storages/
 *   P + 2 + i                .ptfs/storages/<key of storage i>
 *   P + 2 + nstor + j        .ptfs/<record j> (data.pkl, version, ...;
 *                            a safetensors file's header.json)
 *   P + 2 + nstor + nrecs + k  control file k of a writable mount
 *                            (enum ptfs_ctl, ptfs_ctl_files[]: commit,
 *                            progress, status, discard, revert,
 *                            status.json)
 *   F = P + 2 + nstor + nrecs + PTFS_NCTL
 *                            .ptfs/files/ of a sharded folder, and F + 1 + k
 *                            its file k (ptfs_files.c)
 *   M = F + 1 + nfiles       .ptfs/<format>/ of a flat format, and M + 1 + i
 *                            its metadata entry i (ptfs_meta.c)
 *   2^43 ...                 .ptfs/as/ and its files (ptfs_as.c)
 *   2^41 + node->id          KEY.npy of tensor node KEY
 *   2^42 + node->id          KEY.txt of tensor node KEY
 *
 * Views and .ptfs/ are found by name but not listed (unless -o views), so
 * ls, diff -r and rsync see each tensor once and never the plumbing.
 *
 * Nodes live as long as the mount, also when an edit removes them (an
 * open file keeps working), so lookup counts need no bookkeeping: forget
 * has nothing to free.
 */
#include "ptfs.h"

#include "diag/diag.h"
#include "pickle/pkl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLUMB_NAME ".ptfs"
#define VIEW_NPY ((fuse_ino_t)1 << 41)
#define VIEW_TXT ((fuse_ino_t)1 << 42)

static bool root_is_dir(const struct ptfs *fs)
{
	return ckpt_node_is_dir(fs->c->root);
}

bool ptfs_ino_is_dir(const struct ptfs *fs, fuse_ino_t ino)
{
	struct ptfs_ino i;

	if (ptfs_ino_get(fs, ino, &i))
		return false;
	switch (i.kind) {
	case PTFS_ROOT:
	case PTFS_PLUMB:
	case PTFS_STORAGES:
	case PTFS_FILES:
	case PTFS_META:
	case PTFS_AS:
		return true;
	case PTFS_NODE:
		return ckpt_node_is_dir(i.node);
	default:
		return false;
	}
}

fuse_ino_t ptfs_ino_of(const struct ptfs *fs, const struct ckpt_node *n)
{
	if (n == fs->c->root && root_is_dir(fs))
		return FUSE_ROOT_ID;
	return 2 + (fuse_ino_t)n->id;
}

fuse_ino_t ptfs_ino_of_view(const struct ckpt_node *n, int view)
{
	return (view == CKPT_V_NPY ? VIEW_NPY : VIEW_TXT) + n->id;
}

/* One record the format shows raw (ckpt_records()). */
static int add_rec(void *arg, const char *name, uint64_t off, uint64_t size,
		   struct ptz_entry *e)
{
	struct ptfs *fs = arg;
	struct ptfs_rec *r = realloc(fs->recs, (fs->nrecs + 1) * sizeof(*r));

	if (!r)
		return -ENOMEM;
	fs->recs = r;
	r += fs->nrecs;
	r->name = ptfs_escape_record(name);
	if (!r->name)
		return -ENOMEM;
	if (strlen(r->name) > CKPT_NAME_MAX) {
		char buf[CKPT_NAME_MAX + 1];

		strcpy(r->name, ckpt_name_short(r->name, fs->nrecs,
						CKPT_NAME_MAX, buf));
	}
	r->off = off;
	r->size = size;
	r->e = e;
	fs->nrecs++;
	return 0;
}

int ptfs_ino_init(struct ptfs *fs)
{
	struct ckpt *c = fs->c;
	int rc;

	fs->plumb = (fuse_ino_t)1 << 40;
	src_ident_of(&fs->st, &fs->ident);
	fs->nstor = c->nstorages;
	fs->byteorder = c->byteorder ? c->byteorder : "little";
	switch (c->root->kind) {
	case CKPT_N_TENSOR: fs->root_name = "tensor"; break;
	case CKPT_N_VALUE: fs->root_name = "value"; break;
	default: fs->root_name = "object"; break;
	}
	ptfs_meta_init(fs);
	rc = ptfs_files_init(fs);	/* a folder's other files, if any */
	return rc ? rc : ckpt_records(c, add_rec, fs);
}

void ptfs_ino_release(struct ptfs *fs)
{
	ptfs_files_release(fs);
	for (uint32_t i = 0; i < fs->nrecs; i++)
		free(fs->recs[i].name);
	free(fs->recs);
	fs->recs = NULL;
	fs->nrecs = 0;
}

/* Node slot @id into @out: the node, or its row seen through out->rv. */
static void node_at(const struct ckpt *c, uint32_t id, struct ptfs_ino *out)
{
	const struct ckpt_node *p = c->nodes[id];

	out->node = (struct ckpt_node *)(uintptr_t)ckpt_node_at(c, p,
								 &out->rv);
	out->row = ckpt_is_row(p) ? p : NULL;
}

int ptfs_ino_get(const struct ptfs *fs, fuse_ino_t ino, struct ptfs_ino *out)
{
	const struct ckpt *c = fs->c;

	memset(out, 0, sizeof(*out));
	if (ino == FUSE_ROOT_ID) {
		out->kind = PTFS_ROOT;
		out->node = c->root;
		return 0;
	}
	if (ino >= 2 && ino - 2 < c->nnodes) {
		out->kind = PTFS_NODE;
		node_at(c, ino - 2, out);
		return 0;
	}
	if (ptfs_as_ino(ino))
		return ptfs_as_get(fs, ino, out);
	if (ino >= VIEW_NPY) {
		fuse_ino_t id = ino & (VIEW_NPY - 1);

		if (id >= c->nnodes || (ino - id != VIEW_NPY &&
					ino - id != VIEW_TXT))
			return -ENOENT;
		out->kind = PTFS_VIEW;
		node_at(c, (uint32_t)id, out);
		out->view = ino - id == VIEW_NPY ? CKPT_V_NPY : CKPT_V_TXT;
		if (!ovl_view_ok(out->node) ||
		    (out->node->pending && out->view != CKPT_V_NPY))
			return -ENOENT;
		return 0;
	}
	if (ino == fs->plumb || ino == fs->plumb + 1) {
		out->kind = ino == fs->plumb ? PTFS_PLUMB : PTFS_STORAGES;
		return 0;
	}
	if (ino < fs->plumb)
		return -ENOENT;
	ino -= fs->plumb + 2;
	if (ino < fs->nstor) {
		out->kind = PTFS_STORAGE;
		out->storage = (struct ckpt_storage *)(uintptr_t)
			       ckpt_storage_at(c, (uint32_t)ino, &out->rv);
		out->row = ckpt_is_row(c->storages[ino]) ? c->storages[ino] :
			   NULL;
		out->index = ino;
		return 0;
	}
	ino -= fs->nstor;
	if (ino < fs->nrecs) {
		out->kind = PTFS_RECORD;
		out->rec = fs->recs[ino].e;
		out->index = ino;
		return 0;
	}
	ino -= fs->nrecs;
	if (ino < PTFS_NCTL && fs->ovl && !fs->readonly) {
		out->kind = PTFS_CTL;
		out->ctl = (int)ino;
		return 0;
	}
	if (fs->has_files && ino >= PTFS_NCTL && ino - PTFS_NCTL <= fs->nfiles) {
		out->index = (uint32_t)(ino - PTFS_NCTL);
		out->kind = out->index ? PTFS_FILE : PTFS_FILES;
		out->index--;
		return 0;
	}
	if (ino >= PTFS_NCTL + 1 + fs->nfiles)
		return ptfs_meta_get(fs, ino - PTFS_NCTL - 1 - fs->nfiles, out);
	return -ENOENT;
}

int ptfs_ino_real(struct ptfs *fs, fuse_ino_t ino, struct diag *d)
{
	struct ptfs_ino i;
	int rc = 0;

	ptfs_rdlock(fs);
	i.row = NULL;
	(void)ptfs_ino_get(fs, ino, &i);
	ptfs_unlock(fs);
	if (!i.row)
		return 0;
	/* again under the write lock: another request may have done it */
	ptfs_wrlock(fs);
	if (!ptfs_ino_get(fs, ino, &i) && i.row)
		rc = ckpt_row_materialize(fs->c, i.row, d);
	ptfs_unlock(fs);
	return rc;
}

int ptfs_edit_lock(struct ptfs *fs, struct diag *d)
{
	ptfs_wrlock(fs);
	return ckpt_materialize(fs->c, d);
}

fuse_ino_t ptfs_ctl_ino(const struct ptfs *fs, int k)
{
	return fs->plumb + 2 + fs->nstor + fs->nrecs + k;
}

fuse_ino_t ptfs_ino_of_storage(const struct ptfs *fs,
			       const struct ckpt_storage *s)
{
	return s->index < fs->nstor ? fs->plumb + 2 + s->index : 0;
}

static uint32_t subdirs(const struct ckpt_node *n)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n->dir->nkids; i++)
		k += !ckpt_is_row(n->dir->kids[i]) &&	/* a row is a file */
		     ckpt_node_is_dir(n->dir->kids[i]);
	return k;
}

/*
 * Permissions come from the checkpoint file: a file in the mount may be
 * read by whoever may read the checkpoint, and written (on a writable
 * mount) by whoever may write it.  No file has an x bit; a directory has
 * x wherever it has r.  With -o allow_other (and the default_permissions
 * ptfs always adds), the kernel enforces exactly that.  A checkpoint of
 * many files narrows each file to the members it is read from (a 0600
 * shard, a link to /etc/shadow): access_of().
 */
static mode_t perm_r(const struct ptfs *fs)
{
	return fs->st.st_mode & 0444;
}

static mode_t perm_w(const struct ptfs *fs)
{
	return fs->readonly ? 0 : fs->st.st_mode & 0222;
}

static mode_t perm_dir(const struct ptfs *fs, bool writable)
{
	return perm_r(fs) | perm_r(fs) >> 2 | (writable ? perm_w(fs) : 0);
}

/* @st's owner and mode narrowed to what member access @a allows. */
static void access_of(const struct src_access *a, struct stat *st)
{
	mode_t keep = S_IFMT | (a->mode & 0666) | (a->mode & 0444) >> 2;

	/* a directory's x follows its r, as above; a file has no x */
	if (!S_ISDIR(st->st_mode))
		keep &= ~(mode_t)0111;
	st->st_mode &= keep;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
}

static void node_stat(const struct ptfs *fs, const struct ckpt_node *n,
		      struct stat *st)
{
	mode_t w = perm_w(fs), r = perm_r(fs);
	struct src_access a;
	char *to;

	switch (n->kind) {
	case CKPT_N_DIR:
	case CKPT_N_SEQ:
		st->st_mode = S_IFDIR | perm_dir(fs, true);
		st->st_nlink = 2 + subdirs(n);
		break;
	case CKPT_N_TENSOR:
		st->st_mode = S_IFREG | r | w;
		st->st_size = ovl_size(fs->ovl, n);
		break;
	case CKPT_N_LINK:
		st->st_mode = S_IFLNK | 0777;
		to = ptfs_link_target(n);
		st->st_size = to ? strlen(to) : 0;
		free(to);
		break;
	case CKPT_N_VALUE:
		st->st_mode = S_IFREG | r | (ckpt_value_editable(n) ? w : 0);
		st->st_size = ovl_size(fs->ovl, n);
		break;
	default:
		st->st_mode = S_IFREG | r;
		st->st_size = ovl_size(fs->ovl, n);
		break;
	}
	if (!S_ISLNK(st->st_mode) && ckpt_node_access(fs->c, n, &a))
		access_of(&a, st);
}

/*
 * A text view's size: one measuring pass (ovl_text_measure: lengths
 * counted, not printed), which reads the checkpoint,
 * so it fails like a read when the checkpoint changed (ESTALE, logged
 * once) or the view cannot be (EFBIG): a size of 0 would make every
 * read look like an empty file.
 */
static int text_size(struct ptfs *fs, struct ckpt_node *n, off_t *size)
{
	struct diag d;
	uint64_t s = 0;
	int rc;

	diag_init(&d, fs->c->path);
	rc = ptfs_fresh(fs, &d);
	if (rc) {
		ptfs_errno(rc, &d);	/* logs the first time */
		return rc;
	}
	rc = ovl_text_measure(fs->ovl, n, &s, &d);
	*size = (off_t)s;
	return rc;
}

static int stat_ino(struct ptfs *fs, fuse_ino_t ino, struct stat *st,
		    bool measure)
{
	struct src_access a;
	struct ptfs_ino i;
	int rc = ptfs_ino_get(fs, ino, &i);

	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_nlink = 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_atim = fs->st.st_atim;
	st->st_mtim = fs->st.st_mtim;
	st->st_ctim = fs->st.st_ctim;
	st->st_blksize = 1 << 20;
	switch (i.kind) {
	case PTFS_ROOT:
		st->st_mode = S_IFDIR | perm_dir(fs, true);
		/* what readdir lists: .ptfs/ is not (see the top) */
		st->st_nlink = 2 + (root_is_dir(fs) ? subdirs(i.node) :
				    i.node->kind == CKPT_N_DIR);
		break;
	case PTFS_NODE:
		node_stat(fs, i.node, st);
		ptfs_node_mtime(fs, i.node, &st->st_mtim);
		break;
	case PTFS_PLUMB:
		st->st_mode = S_IFDIR | perm_dir(fs, false);
		st->st_nlink = 4 + fs->has_files + fs->has_meta;
		break;
	case PTFS_ASFILE: {
		const struct src_access *acc;

		st->st_mode = S_IFREG | perm_r(fs);
		st->st_size = ptfs_as_size(fs, i.index, &acc);
		if (acc)
			access_of(acc, st);
		break;
	}
	case PTFS_FILES:
	case PTFS_META:
	case PTFS_AS:
		st->st_mode = S_IFDIR | perm_dir(fs, false);
		st->st_nlink = 2;
		break;
	case PTFS_METAV:
		st->st_mode = S_IFREG | perm_r(fs) |
			      (ptfs_meta_writable(fs) ? perm_w(fs) : 0);
		st->st_size = ptfs_meta_size(fs, i.index);
		break;
	case PTFS_FILE:
		st->st_mode = S_IFREG | perm_r(fs);
		st->st_size = fs->files[i.index].m->size;
		access_of(&(struct src_access){ fs->files[i.index].m->uid,
			fs->files[i.index].m->gid, fs->files[i.index].m->mode },
			  st);
		break;
	case PTFS_STORAGES:
		st->st_mode = S_IFDIR | perm_dir(fs, false);
		st->st_nlink = 2;
		break;
	case PTFS_STORAGE:
		st->st_mode = S_IFREG | perm_r(fs) | perm_w(fs);
		st->st_size = i.storage->nbytes;
		ptfs_storage_mtime(fs, i.storage, &st->st_mtim);
		if (ckpt_storage_access(fs->c, i.storage, &a))
			access_of(&a, st);
		break;
	case PTFS_CTL:
		st->st_mode = S_IFREG | perm_r(fs) |
			      (ptfs_ctl_files[i.ctl].writable ? perm_w(fs) : 0);
		/* read with direct_io: the size is not what bounds them */
		if (i.ctl == PTFS_CTL_COMMIT)
			st->st_size = strlen(fs->commit_msg);
		break;
	case PTFS_RECORD:
		st->st_mode = S_IFREG | perm_r(fs);
		st->st_size = fs->recs[i.index].size;
		break;
	case PTFS_VIEW:
		st->st_mode = S_IFREG | perm_r(fs) | perm_w(fs);
		ptfs_node_mtime(fs, i.node, &st->st_mtim);
		if (ckpt_node_access(fs->c, i.node, &a))
			access_of(&a, st);
		if (measure && i.view == CKPT_V_TXT && !ovl_view_staged(i.node, NULL, NULL)) {
			/* measuring reads the tensor: a node's work */
			if (i.row)
				return -EAGAIN;
			rc = text_size(fs, i.node, &st->st_size);
			if (rc)
				return rc;
			break;
		}
		st->st_size = ovl_view_size(fs->ovl, i.node, i.view, false);
		break;
	}
	st->st_blocks = (st->st_size + 511) / 512;
	return 0;
}

int ptfs_stat(struct ptfs *fs, fuse_ino_t ino, struct stat *st)
{
	return stat_ino(fs, ino, st, true);
}

int ptfs_stat_entry(struct ptfs *fs, fuse_ino_t ino, struct stat *st)
{
	return stat_ino(fs, ino, st, false);
}

/* With -o views, entry 3i + j of a directory is child i itself (j = 0)
 * or its .npy (1) and .txt (2) views. */
static int child_entry(const struct ptfs *fs, const struct ckpt_node *k,
		       const char *kname, uint32_t slot, int j,
		       const char **name, fuse_ino_t *ino, char *buf)
{
	char cut[CKPT_NAME_MAX + 1];

	if (!k)
		return -1;
	if (!j) {
		/* a name over NAME_MAX is shown cut (ptfs_names.c) */
		*name = ckpt_name_short(kname, slot, CKPT_NAME_MAX, buf);
		*ino = ptfs_ino_of(fs, k);
		return 1;
	}
	if (k->kind != CKPT_N_TENSOR || !ovl_view_ok(k))
		return -1;
	snprintf(buf, PTFS_NAME_BUF, "%s.%s",
		 ckpt_name_short(kname, slot, PTFS_VIEW_KEY_MAX, cut),
		 j == 1 ? "npy" : "txt");
	/* a real key of that name wins over the view */
	if (k->parent && ptfs_child(k->parent, buf, CKPT_NAME_MAX))
		return -1;
	*name = buf;
	*ino = ptfs_ino_of_view(k, j == 1 ? CKPT_V_NPY : CKPT_V_TXT);
	return 1;
}

int ptfs_dirent(const struct ptfs *fs, fuse_ino_t dir, uint64_t i,
		const char **name, fuse_ino_t *ino, char *buf)
{
	const struct ckpt *c = fs->c;
	uint64_t per = fs->list_views ? 3 : 1;
	struct ptfs_ino d;

	buf[0] = 0;
	if (ptfs_ino_get(fs, dir, &d))
		return 0;
	switch (d.kind) {
	case PTFS_ROOT:
		if (!root_is_dir(fs)) {
			if (i >= per)
				return 0;
			return child_entry(fs, c->root, fs->root_name, 0,
					   i % per, name, ino, buf);
		}
		/* fall through */
	case PTFS_NODE: {
		struct ckpt_rowview v;
		const struct ckpt_node *k;

		if (i / per >= d.node->dir->nkids || !ckpt_node_is_dir(d.node))
			return 0;
		k = ckpt_kid(c, d.node, (uint32_t)(i / per), &v);
		return child_entry(fs, k, k ? k->name : NULL,
				   (uint32_t)(i / per), i % per, name, ino, buf);
	}
	case PTFS_FILES:
		if (i >= fs->nfiles)
			return 0;
		*name = fs->files[i].m->leaf;
		*ino = ptfs_files_ino(fs, (uint32_t)i + 1);
		return 1;
	case PTFS_META:
		return ptfs_meta_dirent(fs, i, name, ino);
	case PTFS_AS:
		return ptfs_as_dirent(fs, i, name, ino);
	case PTFS_PLUMB:
		/* as/ last, after every other entry's place */
		if (i == fs->nrecs + 2 + PTFS_NCTL) {
			*name = "as";
			*ino = ptfs_as_dir_ino();
			return 1;
		}
		if (i > fs->nrecs + 2 + PTFS_NCTL)
			return 0;
		/* a sharded folder: storages/, files/ (it is read-only) */
		if (fs->has_files && i == fs->nrecs + 1) {
			*name = "files";
			*ino = ptfs_files_ino(fs, 0);
			return 1;
		}
		/* a flat format: its metadata folder (and no control files
		   are in between: PTFS_NCTL counts from nrecs + 2) */
		if (fs->has_meta && i == fs->nrecs + 1 + PTFS_NCTL) {
			*name = ptfs_meta_dir(fs);
			*ino = ptfs_meta_ino(fs, 0);
			return 1;
		}
		if (i > fs->nrecs && i - fs->nrecs - 1 < PTFS_NCTL) {
			if (!fs->ovl || fs->readonly)
				return -1;
			*name = ptfs_ctl_files[i - fs->nrecs - 1].name;
			*ino = ptfs_ctl_ino(fs, (int)(i - fs->nrecs - 1));
			return 1;
		}
		if (i > fs->nrecs)
			return -1;
		*name = i ? fs->recs[i - 1].name : "storages";
		*ino = i ? fs->plumb + 2 + fs->nstor + (i - 1) :
		       fs->plumb + 1;
		return 1;
	case PTFS_STORAGES: {
		struct ckpt_rowview v;

		if (i >= fs->nstor)
			return 0;
		*name = ptfs_storage_name(ckpt_storage_at(c, (uint32_t)i,
							  &v)->key, i, buf);
		*ino = fs->plumb + 2 + i;
		return *name ? 1 : -1;
	}
	default:
		return 0;
	}
}

/* View @name of node @n (named @key), or 0. */
static fuse_ino_t view_of(const struct ckpt_node *n, const char *key,
			  const char *name)
{
	size_t kl;
	int view = ovl_view_name(name, &kl);

	if (!view || kl != strlen(key) || strncmp(name, key, kl) ||
	    n->kind != CKPT_N_TENSOR || !ovl_view_ok(n))
		return 0;
	return ptfs_ino_of_view(n, view);
}

fuse_ino_t ptfs_lookup(const struct ptfs *fs, fuse_ino_t parent,
		       const char *name)
{
	const struct ckpt *c = fs->c;
	struct ckpt_rowview v;
	struct ptfs_ino d;
	struct ckpt_node *n;

	if (ptfs_ino_get(fs, parent, &d))
		return 0;
	switch (d.kind) {
	case PTFS_ROOT:
		if (!strcmp(name, PLUMB_NAME))
			return fs->plumb;
		if (!root_is_dir(fs)) {
			if (!strcmp(name, fs->root_name))
				return ptfs_ino_of(fs, c->root);
			return view_of(c->root, fs->root_name, name);
		}
		/* fall through */
	case PTFS_NODE:
		if (!ckpt_node_is_dir(d.node))
			return 0;
		n = ptfs_child(d.node, name, CKPT_NAME_MAX);
		if (n)
			return ptfs_ino_of(fs, ckpt_node_at(c, n, &v));
		{
			/* KEY.npy, KEY.txt: views of tensor KEY */
			size_t kl;
			char key[256];

			if (!ovl_view_name(name, &kl) || kl >= sizeof(key))
				return 0;
			memcpy(key, name, kl);
			key[kl] = 0;
			n = ptfs_child(d.node, key, PTFS_VIEW_KEY_MAX);
			return n ? view_of(ckpt_node_at(c, n, &v), key, name) :
			       0;
		}
	case PTFS_FILES:
		return ptfs_files_lookup(fs, name);
	case PTFS_META:
		return ptfs_meta_lookup(fs, name);
	case PTFS_AS:
		return ptfs_as_lookup(fs, name);
	case PTFS_PLUMB:
		if (!strcmp(name, "storages"))
			return fs->plumb + 1;
		if (!strcmp(name, "as"))
			return ptfs_as_dir_ino();
		if (fs->has_files && !strcmp(name, "files"))
			return ptfs_files_ino(fs, 0);
		if (fs->has_meta && !strcmp(name, ptfs_meta_dir(fs)))
			return ptfs_meta_ino(fs, 0);
		for (uint32_t i = 0; i < fs->nrecs; i++)
			if (!strcmp(name, fs->recs[i].name))
				return fs->plumb + 2 + fs->nstor + i;
		for (int k = 0; k < PTFS_NCTL && fs->ovl && !fs->readonly;
		     k++)
			if (!strcmp(name, ptfs_ctl_files[k].name))
				return ptfs_ctl_ino(fs, k);
		return 0;
	case PTFS_STORAGES: {
		/* torch numbers storages in first-use order: try that first */
		char *end;
		unsigned long k = strtoul(name, &end, 10);

		char buf[PTFS_NAME_BUF];
		const char *sn;

		if (!*end && k < fs->nstor &&
		    !strcmp(name, ckpt_storage_at(c, (uint32_t)k, &v)->key))
			return fs->plumb + 2 + k;
		for (uint32_t i = 0; i < fs->nstor; i++)
			if ((sn = ptfs_storage_name(ckpt_storage_at(c, i,
								    &v)->key,
						    i, buf)) &&
			    !strcmp(name, sn))
				return fs->plumb + 2 + i;
		return 0;
	}
	default:
		return 0;
	}
}
