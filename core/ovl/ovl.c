/*
 * ovl.c - edits to a checkpoint, staged on disk (see ovl.h for the layout
 * and docs/design.md for the reasoning).
 *
 * Order of work, so that a crash at any point loses nothing that was
 * reported done and never shows half an edit:
 *   - a storage's first write copies it to "<i>.tmp", fsyncs, renames it
 *     to "<i>" and fsyncs the directory: "<i>" is always a whole copy;
 *   - replacing a tensor's contents (cp, rename of a temporary file over
 *     it) builds the new storage the same way, then renames it over "<i>":
 *     the old bytes or the new ones, never a mix;
 *   - a structural edit is checked, then journaled (fdatasync), then made
 *     in memory; data it depends on is on disk before the record;
 *   - in-place writes go to "<i>" directly and are fsync'd at close().
 * Replaying the journal repeats the structural edits; their data is
 * already in place, so it is not copied again.
 */
#define _GNU_SOURCE 1	/* copy_file_range, fdatasync, O_TMPFILE */
#include "ovl_int.h"
#include "util/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define CHUNK	(1u << 20)

/* ---- small helpers ---- */

static bool is_dir(const struct ckpt_node *n)
{
	return n->kind == CKPT_N_DIR || n->kind == CKPT_N_SEQ;
}

/* Copy @len bytes at @in_off of @in to @out at 0 (reflinks where the file
 * system can); pread/pwrite where copy_file_range is refused. */
int ovl_copy_range(int in, uint64_t in_off, int out, uint64_t len)
{
	loff_t io = in_off, oo = 0;
	char *buf;
	int rc = 0;

	while (len) {
		ssize_t n = copy_file_range(in, &io, out, &oo,
					    len < (1u << 30) ? len : (1u << 30),
					    0);

		if (n > 0) {
			len -= n;
			continue;
		}
		if (n == 0)
			return -EIO;
		if (errno == EINTR)
			continue;
		if (errno != EXDEV && errno != EINVAL && errno != ENOSYS &&
		    errno != EOPNOTSUPP && errno != EBADF)
			return -errno;
		break;
	}
	if (!len)
		return 0;
	buf = malloc(CHUNK);
	if (!buf)
		return -ENOMEM;
	while (len && !rc) {
		size_t k = len < CHUNK ? len : CHUNK;

		rc = io_pread_full(in, buf, k, io);
		if (!rc)
			rc = io_pwrite_full(out, buf, k, oo);
		io += k;
		oo += k;
		len -= k;
	}
	free(buf);
	return rc;
}

int ovl_sys_err(struct ovl *v, struct diag *d, int err, const char *what)
{
	return diag_errno(d, err, "%s: %s: %s", v->dir, what, strerror(-err));
}

int ovl_check_writable(const struct ovl *v, struct diag *d)
{
	if (v->replaying)
		return 0;
	if (v->readonly || v->committed)
		return diag_errno(d, -EROFS, "%s", v->committed ?
				  "written back already: the mount is "
				  "read-only until it is unmounted" :
				  "mounted read-only");
	return 0;
}

void ovl_notify(struct ovl *v, struct ckpt_storage *s,
		    const struct ckpt_node *except)
{
	if (v->changed && !v->replaying)
		v->changed(v->arg, s, except);
}

/* ---- the overlay directory and its data files ---- */

int ovl_ensure_dir(struct ovl *v, struct diag *d)
{
	int rc;

	if (v->jfd >= 0)
		return 0;
	if (v->dfd >= 0)
		return jr_create(v, d);
	if (mkdir(v->dir, 0700) && errno != EEXIST)
		return ovl_sys_err(v, d, -errno, "cannot create the overlay");
	v->dfd = open(v->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (v->dfd < 0)
		return ovl_sys_err(v, d, -errno, "cannot open the overlay");
	rc = jr_create(v, d);
	if (!rc && (fsync(v->dfd) || (rc = io_fsync_dir_of(v->dir))))
		rc = ovl_sys_err(v, d, rc ? rc : -errno, "fsync");
	return rc;
}

int ovl_data_open(struct ovl *v, uint32_t i, const char *sfx, int flags)
{
	char name[32];

	snprintf(name, sizeof(name), "%u%s", i, sfx);
	return openat(v->dfd, name, flags | O_CLOEXEC, 0600);
}

/* Move "<i>.tmp" (fd @fd, complete) over "<i>" and make it storage i's. */
static int ovl_data_install(struct ovl *v, struct ckpt_storage *s, int fd,
			struct diag *d)
{
	char tmp[32], name[32];

	snprintf(tmp, sizeof(tmp), "%u.tmp", s->index);
	snprintf(name, sizeof(name), "%u", s->index);
	if (fsync(fd) || renameat(v->dfd, tmp, v->dfd, name) ||
	    fsync(v->dfd)) {
		int err = -errno;

		close(fd);
		unlinkat(v->dfd, tmp, 0);
		return ovl_sys_err(v, d, err, "cannot stage storage");
	}
	if (s->fd != v->c->fd && s->fd >= 0)
		close(s->fd);
	s->fd = fd;
	s->data_off = 0;
	s->modified = true;
	ckpt_storage_uninflate(s);	/* the overlay has the bytes now */
	return 0;
}

/* Start "<i>.tmp" as a copy of storage @s as it is now. */
static int data_copy(struct ovl *v, struct ckpt_storage *s, int *out,
		     struct diag *d)
{
	uint64_t off;
	int src, fd, rc;

	rc = ovl_ensure_dir(v, d);
	if (rc)
		return rc;
	/* a deflated storage is copied from its inflated copy */
	rc = ckpt_storage_data(v->c, s, &src, &off, d);
	if (rc)
		return rc;
	fd = ovl_data_open(v, s->index, ".tmp", O_RDWR | O_CREAT | O_TRUNC);
	if (fd < 0)
		return ovl_sys_err(v, d, -errno, "cannot stage storage");
	if ((rc = ovl_copy_range(src, off, fd, s->nbytes)))
		rc = ovl_sys_err(v, d, rc, "cannot stage storage");
	if (rc) {
		char tmp[32];

		close(fd);
		/* no half copy left in the overlay (an EIO did) */
		snprintf(tmp, sizeof(tmp), "%u.tmp", s->index);
		unlinkat(v->dfd, tmp, 0);
		return rc;
	}
	*out = fd;
	return 0;
}

/* A storage's first write: copy it into the overlay. */
static int copy_up(struct ovl *v, struct ckpt_storage *s, struct diag *d)
{
	int fd, rc;

	if (s->fd != v->c->fd)
		return 0;
	rc = data_copy(v, s, &fd, d);
	return rc ? rc : ovl_data_install(v, s, fd, d);
}

/*
 * Replace all of tensor @t's contents by its size in bytes of @src, from
 * @src_off on:
 * build the new storage in "<i>.tmp" and rename it over "<i>", so that a
 * crash leaves the old bytes or the new ones.
 */
int ovl_replace_contents(struct ovl *v, const struct ckpt_tensor *t,
			 int src, uint64_t src_off, struct diag *d)
{
	struct ckpt_storage *s = t->storage, tmp_s;
	struct ckpt_tensor tmp_t = *t;
	uint64_t len = ckpt_tensor_size(t);
	bool whole = t->contiguous && t->offset == 0 && len == s->nbytes;
	char *buf = NULL;
	int fd = -1, rc;

	if (whole) {
		rc = ovl_ensure_dir(v, d);
		if (!rc && (fd = ovl_data_open(v, s->index, ".tmp", O_RDWR |
					   O_CREAT | O_TRUNC)) < 0)
			rc = ovl_sys_err(v, d, -errno, "cannot stage storage");
		if (!rc && (rc = ovl_copy_range(src, src_off, fd, len)))
			rc = ovl_sys_err(v, d, rc, "cannot stage storage");
	} else {
		rc = data_copy(v, s, &fd, d);
		buf = rc ? NULL : malloc(CHUNK);
		if (!rc && !buf)
			rc = diag_nomem(d);
		tmp_s = *s;
		tmp_s.fd = fd;
		tmp_s.data_off = 0;
		tmp_t.storage = &tmp_s;
		for (uint64_t pos = 0; pos < len && !rc; pos += CHUNK) {
			size_t k = len - pos < CHUNK ? len - pos : CHUNK;
			long long n;

			rc = io_pread_full(src, buf, k, src_off + pos);
			if (rc) {
				rc = ovl_sys_err(v, d, rc, "cannot read new data");
				break;
			}
			n = ckpt_tensor_write(v->c, &tmp_t, buf, k, pos, d);
			rc = n < 0 ? (int)n : 0;
		}
		free(buf);
	}
	if (rc) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	return ovl_data_install(v, s, fd, d);
}

/* ---- paths and the journal ---- */

struct ckpt_node *ovl_resolve(struct ovl *v, const char *p, size_t len)
{
	struct ckpt_node *n = v->c->root;
	char *copy = strndup(p, len), *save = NULL;

	if (!copy)
		return NULL;
	for (char *tok = strtok_r(copy, "/", &save); tok && n;
	     tok = strtok_r(NULL, "/", &save))
		n = is_dir(n) ? ckpt_node_child(n, tok) : NULL;
	free(copy);
	return n;
}

static void field(struct jrec *r, const char *s)
{
	r->f[r->nf] = s;
	r->len[r->nf++] = strlen(s);
}

/* Journal op @op on (@dir, @name)[, (@ndir, @nname)][, @extra]. */
int ovl_journal(struct ovl *v, char op, const struct ckpt_node *dir,
		   const char *name, const struct ckpt_node *ndir,
		   const char *nname, const char *extra, size_t extra_len,
		   struct diag *d)
{
	struct jrec r = { .op = op };
	char *p1 = NULL, *p2 = NULL;
	int rc;

	if (v->replaying)
		return 0;
	rc = ovl_ensure_dir(v, d);
	if (rc)
		return rc;
	p1 = ckpt_node_path(dir);
	p2 = ndir ? ckpt_node_path(ndir) : NULL;
	if (!p1 || (ndir && !p2)) {
		rc = diag_nomem(d);
		goto out;
	}
	field(&r, p1);
	if (name)
		field(&r, name);
	if (ndir) {
		field(&r, p2);
		field(&r, nname);
	}
	if (extra) {
		r.f[r.nf] = extra;
		r.len[r.nf++] = extra_len;
	}
	rc = jr_append(v, &r, d);
out:
	free(p1);
	free(p2);
	return rc;
}

/* ---- structure ---- */

int ovl_dir_editable(struct ovl *v, const struct ckpt_node *dir,
			struct diag *d)
{
	int rc = ovl_check_writable(v, d);

	if (rc)
		return rc;
	if (!is_dir(dir))
		return diag_errno(d, -ENOTDIR, "%s: not a directory",
				  dir->name);
	if (!strncmp(dir->type, "sparse", 6))
		return diag_errno(d, -EPERM, "%s: the parts of a sparse "
				  "tensor cannot be renamed, removed or "
				  "added", dir->name);
	return 0;
}

/* A name a key can have (names.md), arena-copied into *@out. */
int ovl_key_name(struct ovl *v, const struct ckpt_node *dir,
		    const char *name, char **out, struct diag *d)
{
	size_t n = strlen(name);
	char *buf;

	if (!n || n > 255 || strchr(name, '/'))
		return diag_errno(d, -EINVAL, "invalid name '%s'", name);
	if (dir->kind == CKPT_N_DIR) {
		buf = malloc(n + 1);
		if (!buf)
			return diag_nomem(d);
		if (ckpt_name_unescape(name, buf) < 0) {
			free(buf);
			return diag_errno(d, -EINVAL, "'%s' is not a key name: "
					  "'%%' must start %%XX (docs/names.md)",
					  name);
		}
		free(buf);
	}
	*out = arena_strndup(&v->c->arena, name, n);
	return *out ? 0 : diag_nomem(d);
}

int ovl_mkdir(struct ovl *v, struct ckpt_node *dir, const char *name,
	      struct ckpt_node **out, struct diag *d)
{
	struct ckpt_node *n;
	char *nm;
	int rc = ovl_dir_editable(v, dir, d);

	if (!rc && ckpt_node_child(dir, name))
		rc = diag_errno(d, -EEXIST, "%s exists", name);
	if (!rc)
		rc = ovl_key_name(v, dir, name, &nm, d);
	if (!rc)
		rc = ovl_journal(v, JR_MKDIR, dir, name, NULL, NULL, NULL, 0, d);
	if (rc)
		return rc;
	n = ckpt_node_fresh(v->c, CKPT_N_DIR, "dict");
	if (!n || ckpt_dir_insert(v->c, dir, n, nm))
		return diag_nomem(d);
	n->step = ckpt_dir_step(dir);
	*out = n;
	return 0;
}

/*
 * A new storage @index over its data file "<index>" (@create: made empty
 * now; else it is there already), and a 1-d uint8 tensor viewing it.
 */
int ovl_fresh_tensor(struct ovl *v, uint32_t index, bool create,
		     struct ckpt_tensor **out, struct diag *d)
{
	struct ckpt_storage *s = ckpt_storage_fresh(v->c);
	struct stat st;

	if (!s)
		return diag_nomem(d);
	if (s->index != index)
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s/%s: a new tensor "
				    "should be storage %u, is %u", v->dir,
				    OVL_JOURNAL, index, s->index);
	s->fd = ovl_data_open(v, index, "", O_RDWR | (create ? O_CREAT |
						      O_TRUNC : 0));
	if (s->fd < 0 || fstat(s->fd, &st))
		return ovl_sys_err(v, d, -errno, "cannot open a new file's data");
	s->nbytes = s->numel = st.st_size;
	*out = ckpt_tensor_fresh(v->c, s);
	return *out ? 0 : diag_nomem(d);
}

/* A new file: a 1-d uint8 tensor over new storage @index's data file. */
static int create_at(struct ovl *v, struct ckpt_node *dir, char *nm,
		     uint32_t index, struct ckpt_node **out, struct diag *d)
{
	struct ckpt_tensor *t;
	struct ckpt_node *n;
	int rc = ovl_fresh_tensor(v, index, !v->replaying, &t, d);

	if (rc)
		return rc;
	n = ckpt_node_fresh(v->c, CKPT_N_TENSOR, "Tensor");
	if (!n || ckpt_dir_insert(v->c, dir, n, nm))
		return diag_nomem(d);
	n->tensor = t;
	n->step = ckpt_dir_step(dir);
	*out = n;
	return 0;
}

int ovl_create(struct ovl *v, struct ckpt_node *dir, const char *name,
	       struct ckpt_node **out, struct diag *d)
{
	char *nm;
	char idx[16];
	uint32_t index = v->c->nstorages;
	int fd, rc = ovl_dir_editable(v, dir, d);

	if (!rc && ckpt_node_child(dir, name))
		rc = diag_errno(d, -EEXIST, "%s exists", name);
	if (!rc)
		rc = ovl_key_name(v, dir, name, &nm, d);
	if (!rc)
		rc = ovl_ensure_dir(v, d);
	if (rc)
		return rc;
	/* the data file exists before the record that names it */
	fd = ovl_data_open(v, index, "", O_RDWR | O_CREAT | O_TRUNC);
	if (fd < 0 || fsync(v->dfd)) {
		rc = ovl_sys_err(v, d, -errno, "cannot create a new file");
		if (fd >= 0)
			close(fd);
		return rc;
	}
	close(fd);
	snprintf(idx, sizeof(idx), "%u", index);
	rc = ovl_journal(v, JR_CREATE, dir, name, NULL, NULL, idx, strlen(idx), d);
	return rc ? rc : create_at(v, dir, nm, index, out, d);
}

/* Could new file @s stand for @x, keeping @x's identity (cp, rsync)? */
static bool is_content(const struct ckpt_node *s, const struct ckpt_node *x)
{
	const struct ckpt_tensor *t = s->tensor, *xt = x->tensor;
	bool raw = t && t->dtype->size == 1 && !t->shape_set &&
		   !strcmp(t->dtype->name, "uint8");

	if (s->kind != CKPT_N_TENSOR || !t->fresh || s->stage || x->dead)
		return false;
	if (x->kind == CKPT_N_VALUE)
		return raw && ckpt_value_editable(x);
	if (x->kind != CKPT_N_TENSOR || (xt->fresh && !xt->fixed) ||
	    !xt->storage ||
	    (xt->kind != CKPT_T_STRIDED && xt->kind != CKPT_T_STORAGE &&
	     xt->kind != CKPT_T_QUANTIZED))
		return false;
	if (raw)
		return true;
	if (t->dtype != xt->dtype)
		return false;
	return !t->shape_set || (t->ndim == xt->ndim &&
				 !memcmp(t->shape, xt->shape,
					 t->ndim * sizeof(*t->shape)));
}

/* How much of @s a one-line message shows: its first line, <= 40. */
static int line_len(const char *s, size_t n)
{
	size_t k = 0;

	while (k < n && k < 40 && s[k] != '\n' && s[k])
		k++;
	return (int)k;
}

const char *ovl_label(const struct ckpt_node *n)
{
	return n->name && n->name[0] ? n->name : "the root";
}

/*
 * New file @s replaces the contents of @x and then takes its place, name
 * and identity (dtype, views, tied names, key): the rename of a temporary
 * file over a tensor or value.  First the data half: the new bytes must
 * fit @x (a tensor's size; a value's literal, parsed into @lit from
 * *@text, which the caller frees); a tensor's storage gets them (not
 * when replaying: they are there).
 */
static int transfer_data(struct ovl *v, struct ckpt_node *s,
			 struct ckpt_node *x, struct ckpt_literal *lit,
			 char **text, struct diag *d)
{
	struct ckpt_storage *src = s->tensor->storage;
	int rc;

	*text = NULL;
	if (x->kind == CKPT_N_VALUE) {
		if (src->nbytes > OVL_MAX_VALUE)
			return diag_errno(d, -EFBIG, "%s: a value's text is "
					  "at most %u bytes", ovl_label(x),
					  OVL_MAX_VALUE);
		*text = malloc(src->nbytes + 1);
		if (!*text)
			return diag_nomem(d);
		(*text)[src->nbytes] = 0;
		rc = io_pread_full(src->fd, *text, src->nbytes, 0);
		if (rc)
			return ovl_sys_err(v, d, rc, "cannot read new value");
		if (ckpt_value_parse(x, *text, src->nbytes, lit))
			return diag_errno(d, -EINVAL, "%s: '%.*s' is not a "
					  "python literal", ovl_label(x),
					  line_len(*text, src->nbytes), *text);
		return 0;
	}
	if (src->nbytes != ckpt_tensor_size(x->tensor))
		return diag_errno(d, -EINVAL, "%s: new contents are %llu bytes, "
				  "the tensor is %llu; it keeps its old values",
				  ovl_label(x),
				  (unsigned long long)src->nbytes,
				  (unsigned long long)ckpt_tensor_size(x->tensor));
	if (v->replaying)
		return 0;
	rc = ovl_replace_contents(v, x->tensor, src->fd, 0, d);
	if (!rc)
		ovl_notify(v, x->tensor->storage, NULL);
	return rc;
}

/* The identity half: @s takes @x's slot (named @name) and what it is. */
static int transfer_identity(struct ovl *v, struct ckpt_node *s,
			     struct ckpt_node *x, char *name,
			     const struct ckpt_literal *lit, struct diag *d)
{
	if (x->kind == CKPT_N_VALUE && ckpt_value_set(v->c, x, lit))
		return diag_nomem(d);
	ckpt_dir_remove(s->parent, s);
	ckpt_dir_swap(x->parent, x, s);
	if (strcmp(name, s->name))
		ckpt_dir_rename(s->parent, s, name);
	s->kind = x->kind;
	s->type = x->type;
	s->val = x->val;
	s->key = x->key;
	s->step = x->step;
	s->tensor = x->tensor;
	s->text = x->text;
	s->textlen = x->textlen;
	s->edited = x->edited;
	s->home = x->home;
	s->home_name = x->home_name;
	s->fresh = false;
	x->text = NULL;
	x->textlen = 0;
	x->dead = true;
	return 0;
}

/* Both halves, with journal record @op on (@dir, @name)[, @ndir, @nname]
 * in between: data, record, memory. */
static int transfer(struct ovl *v, struct ckpt_node *s, struct ckpt_node *x,
		    char *to, char op, struct ckpt_node *dir,
		    const char *name, struct ckpt_node *ndir,
		    const char *nname, struct diag *d)
{
	struct ckpt_literal lit;
	char *text;
	int rc = transfer_data(v, s, x, &lit, &text, d);

	if (!rc)
		rc = ovl_journal(v, op, dir, name, ndir, nname, NULL, 0, d);
	if (!rc)
		rc = transfer_identity(v, s, x, to, &lit, d);
	free(text);
	return rc;
}

int ovl_rename(struct ovl *v, struct ckpt_node *dir, const char *name,
	       struct ckpt_node *ndir, const char *nname, bool noreplace,
	       struct diag *d)
{
	struct ckpt_node *s, *x;
	char *nm;
	int rc = ovl_dir_editable(v, dir, d);

	if (!rc)
		rc = ovl_dir_editable(v, ndir, d);
	if (rc)
		return rc;
	s = ckpt_node_child(dir, name);
	x = ckpt_node_child(ndir, nname);
	if (!s)
		return diag_errno(d, -ENOENT, "%s: no such entry", name);
	if (s == x)
		return 0;
	if (x && noreplace)
		return diag_errno(d, -EEXIST, "%s exists", nname);
	if (!x && ovl_view_target(s, ndir, nname))
		return ovl_view_rename(v, s, ndir, nname, d);
	for (const struct ckpt_node *p = ndir; p && is_dir(s); p = p->parent)
		if (p == s)
			return diag_errno(d, -EINVAL, "cannot move %s into "
					  "itself", name);
	if (x && is_dir(x) && !is_dir(s))
		return diag_errno(d, -EISDIR, "%s is a directory", nname);
	if (x && !is_dir(x) && is_dir(s))
		return diag_errno(d, -ENOTDIR, "%s is not a directory", nname);
	if (x && is_dir(x) && x->nlive)
		return diag_errno(d, -ENOTEMPTY, "%s is not empty", nname);
	rc = ovl_key_name(v, ndir, nname, &nm, d);
	if (rc)
		return rc;
	if (x && is_content(s, x))
		return transfer(v, s, x, nm, JR_RENAME, dir, name, ndir, nname,
				d);
	rc = ovl_journal(v, JR_RENAME, dir, name, ndir, nname, NULL, 0, d);
	if (rc)
		return rc;
	if (x) {
		ckpt_dir_remove(dir, s);
		ckpt_dir_swap(ndir, x, s);
		s->step = x->step;
		x->dead = true;
	} else if (dir == ndir) {
		ckpt_dir_rename(dir, s, nm);
	} else {
		ckpt_dir_remove(dir, s);
		if (ckpt_dir_insert(v->c, ndir, s, nm))
			return diag_nomem(d);
		s->step = ckpt_dir_step(ndir);
	}
	return 0;
}

/*
 * vim's way of saving (rename the file to a backup, write a new file
 * under the old name, delete the backup): when @x, renamed in its own
 * directory, is deleted while a new file sits under its original name,
 * the new file takes @x's place as if it had been renamed over it.
 */
static struct ckpt_node *saved_over(const struct ckpt_node *x)
{
	struct ckpt_node *s;

	if (x->fresh || !x->home || x->parent != x->home ||
	    !strcmp(x->name, x->home_name))
		return NULL;
	s = ckpt_node_child(x->home, x->home_name);
	return s && is_content(s, x) ? s : NULL;
}

static int remove_node(struct ovl *v, struct ckpt_node *dir,
		       const char *name, bool want_dir, struct diag *d)
{
	struct ckpt_node *n, *s;
	int rc = ovl_dir_editable(v, dir, d);

	if (rc)
		return rc;
	n = ckpt_node_child(dir, name);
	if (!n)
		return diag_errno(d, -ENOENT, "%s: no such entry", name);
	if (want_dir && !is_dir(n))
		return diag_errno(d, -ENOTDIR, "%s is not a directory", name);
	if (!want_dir && is_dir(n))
		return diag_errno(d, -EISDIR, "%s is a directory", name);
	if (want_dir && n->nlive)
		return diag_errno(d, -ENOTEMPTY, "%s is not empty", name);
	s = want_dir ? NULL : saved_over(n);
	if (s)
		return transfer(v, s, n, n->home_name, JR_UNLINK, dir, name,
				NULL, NULL, d);
	rc = ovl_journal(v, JR_UNLINK, dir, name, NULL, NULL, NULL, 0, d);
	if (rc)
		return rc;
	/* a shared container lives on under a name that links to it */
	ckpt_node_drop(v->c, dir, n);
	return 0;
}

int ovl_unlink(struct ovl *v, struct ckpt_node *dir, const char *name,
	       struct diag *d)
{
	return remove_node(v, dir, name, false, d);
}

int ovl_rmdir(struct ovl *v, struct ckpt_node *dir, const char *name,
	      struct diag *d)
{
	return remove_node(v, dir, name, true, d);
}

static bool parse_bool(const char *s, size_t n, bool *out)
{
	if ((n == 4 && !strncasecmp(s, "true", 4)) || (n == 1 && *s == '1'))
		return *out = true;
	if ((n == 5 && !strncasecmp(s, "false", 5)) || (n == 1 && *s == '0'))
		return !(*out = false);
	return false;
}

/* "2,3" (or "" for 0-d) into @shape; the number of dims or -1. */
int ovl_parse_shape(const char *s, size_t n, int64_t *shape)
{
	int nd = 0;
	size_t i = 0;

	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		n--;
	if (n >= 2 && s[0] == '(' && s[n - 1] == ')')
		s++, n -= 2;
	while (i < n) {
		int64_t x = 0;
		size_t k = i;

		while (i < n && s[i] == ' ')
			i++;
		for (k = i; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			if (__builtin_mul_overflow(x, 10, &x) ||
			    __builtin_add_overflow(x, s[i] - '0', &x))
				return -1;
		if (i == k || nd == CKPT_MAX_DIMS)
			return -1;
		shape[nd++] = x;
		while (i < n && s[i] == ' ')
			i++;
		if (i < n && s[i++] != ',')
			return -1;
	}
	return nd;
}

int ovl_setxattr(struct ovl *v, struct ckpt_node *n, const char *name,
		 const char *value, size_t len, struct diag *d)
{
	struct ckpt_tensor *t = n->tensor, save;
	int64_t shape[CKPT_MAX_DIMS], saved_shape[CKPT_MAX_DIMS];
	char *path;
	bool b;
	int rc = ovl_check_writable(v, d);

	if (rc)
		return rc;
	if (n->kind != CKPT_N_TENSOR || !t->fresh)
		return diag_errno(d, -EPERM, "%s: only new tensors take "
				  "user.* attributes (existing ones share "
				  "storages)", ovl_label(n));
	save = *t;
	memcpy(saved_shape, t->shape, sizeof(saved_shape));
	if (!strcmp(name, "user.dtype")) {
		char buf[32];
		const struct ckpt_dtype *dt;

		snprintf(buf, sizeof(buf), "%.*s", (int)(len < 31 ? len : 31),
			 value);
		buf[strcspn(buf, "\n ")] = 0;
		dt = ckpt_dtype_by_name(buf);
		if (!dt || dt->cls == CKPT_DT_QUANT || dt->cls == CKPT_DT_BITS)
			return diag_errno(d, -EINVAL, "%s: '%s' is not a dtype "
					  "a new tensor can have", n->name, buf);
		t->dtype = dt;
	} else if (!strcmp(name, "user.shape")) {
		int nd = ovl_parse_shape(value, len, shape);
		uint64_t numel = 1;

		for (int i = 0; i < nd; i++)
			if (__builtin_mul_overflow(numel, (uint64_t)shape[i],
						   &numel))
				nd = -1;
		if (nd < 0 || numel > (UINT64_C(1) << 62))
			return diag_errno(d, -EINVAL, "%s: '%.*s' is not a "
					  "shape like 2,3", n->name,
					  (int)(len < 40 ? len : 40), value);
		t->ndim = nd;
		memcpy(t->shape, shape, nd * sizeof(*shape));
		t->shape_set = true;
	} else if (!strcmp(name, "user.requires_grad") ||
		   !strcmp(name, "user.parameter")) {
		if (!parse_bool(value, len, &b))
			return diag_errno(d, -EINVAL, "%s: %s is true or false",
					  n->name, name);
		if (name[5] == 'r')
			t->requires_grad = b;
		else
			t->parameter = b;
		n->type = t->parameter ? "Parameter" : "Tensor";
	} else {
		return diag_errno(d, -ENOTSUP, "%s: %s cannot be set",
				  n->name, name);
	}
	ckpt_tensor_fresh_sync(t);
	if (t->storage->nbytes && ckpt_tensor_fresh_fits(t)) {
		*t = save;
		memcpy(t->shape, saved_shape, sizeof(saved_shape));
		ckpt_tensor_fresh_sync(t);
		return diag_errno(d, -EINVAL, "%s: %llu bytes do not make a "
				  "%s tensor of that shape", n->name,
				  (unsigned long long)t->storage->nbytes,
				  t->dtype->name);
	}
	if (v->replaying)
		return 0;
	path = ckpt_node_path(n);
	if (!path)
		return diag_nomem(d);
	{
		struct jrec r = { .op = JR_XATTR };

		rc = ovl_ensure_dir(v, d);
		field(&r, path);
		field(&r, name);
		r.f[r.nf] = value;
		r.len[r.nf++] = len;
		if (!rc)
			rc = jr_append(v, &r, d);
	}
	free(path);
	if (rc) {
		*t = save;
		memcpy(t->shape, saved_shape, sizeof(saved_shape));
		ckpt_tensor_fresh_sync(t);
	}
	return rc;
}

/* ---- data ---- */

uint64_t ovl_size(const struct ovl *v, const struct ckpt_node *n)
{
	(void)v;
	if (n->stage)
		return n->stage->len;
	if (n->kind == CKPT_N_TENSOR && n->tensor->fresh)
		return n->tensor->storage->nbytes;
	if (n->kind == CKPT_N_TENSOR)
		return ckpt_tensor_size(n->tensor);
	if (n->kind == CKPT_N_VALUE && !strcmp(n->type, "bytes"))
		return n->textlen;
	return n->text ? n->textlen + 1 : 0;
}

long long ovl_read(struct ovl *v, struct ckpt_node *n, void *buf,
		   uint64_t len, uint64_t off, struct diag *d)
{
	uint64_t size = ovl_size(v, n);
	int rc;

	if (off >= size)
		return 0;
	if (len > size - off)
		len = size - off;
	if (n->stage && n->stage->scratch) {
		rc = io_pread_full(n->stage->scratch->fd, buf, len, off);
		return rc ? ovl_sys_err(v, d, rc, "read") : (long long)len;
	}
	if (n->stage) {
		memcpy(buf, n->stage->text + off, len);
		return len;
	}
	if (n->kind == CKPT_N_TENSOR && n->tensor->fresh) {
		rc = io_pread_full(n->tensor->storage->fd, buf, len, off);
		return rc ? ovl_sys_err(v, d, rc, "read") : (long long)len;
	}
	if (n->kind == CKPT_N_TENSOR)
		return ckpt_tensor_read(v->c, n->tensor, buf, len, off, d);
	/* a value: its text and a newline (bytes: none) */
	if (off + len <= n->textlen) {
		memcpy(buf, n->text + off, len);
	} else {
		memcpy(buf, n->text + off, n->textlen - off);
		((char *)buf)[n->textlen - off] = '\n';
	}
	return len;
}

void ovl_stage_free(struct ckpt_stage **pst)
{
	struct ckpt_stage *st = *pst;

	if (!st)
		return;
	if (st->scratch) {
		close(st->scratch->fd);
		free(st->scratch);
	}
	free(st->text);
	free(st);
	*pst = NULL;
}

/* Start rewriting @n: a scratch file (tensor) or a text buffer (value),
 * holding the first @keep bytes of what @n holds now. */
static int stage_start(struct ovl *v, struct ckpt_node *n, uint64_t keep,
		       struct diag *d)
{
	struct ckpt_stage *st = calloc(1, sizeof(*st));
	uint64_t size = ovl_size(v, n);
	int rc = 0;

	if (!st)
		return diag_nomem(d);
	keep = keep < size ? keep : size;
	n->stage = st;
	if (n->kind == CKPT_N_VALUE) {
		st->cap = OVL_MAX_VALUE;
		st->text = malloc(st->cap);
		if (!st->text)
			rc = diag_nomem(d);
		else if (keep)
			rc = ovl_read(v, n, st->text, keep, 0, d) < 0 ? d->err
								      : 0;
		st->len = keep;
		n->stage = rc ? NULL : st;
		if (rc) {
			free(st->text);
			free(st);
		}
		return rc;
	}
	rc = ovl_ensure_dir(v, d);
	st->scratch = calloc(1, sizeof(*st->scratch));
	if (!rc && !st->scratch)
		rc = diag_nomem(d);
	if (!rc) {
		st->scratch->fd = openat(v->dfd, ".", O_TMPFILE | O_RDWR |
					 O_CLOEXEC, 0600);
		if (st->scratch->fd < 0)
			rc = ovl_sys_err(v, d, -errno, "cannot make a scratch file");
	}
	n->stage = NULL;	/* read the current contents, not the stage */
	for (uint64_t pos = 0; pos < keep && !rc; pos += CHUNK) {
		char *buf = malloc(CHUNK);
		uint64_t k = keep - pos < CHUNK ? keep - pos : CHUNK;
		long long got = buf ? ovl_read(v, n, buf, k, pos, d) : -ENOMEM;

		rc = got < 0 ? (int)got : io_pwrite_full(st->scratch->fd, buf, k,
						      pos);
		free(buf);
	}
	n->stage = st;
	st->len = keep;
	if (rc)
		ovl_stage_free(&n->stage);
	return rc;
}

static long long write_stage(struct ovl *v, struct ckpt_node *n,
			     const void *buf, uint64_t len, uint64_t off,
			     struct diag *d)
{
	struct ckpt_stage *st = n->stage;
	uint64_t limit = n->kind == CKPT_N_VALUE ? OVL_MAX_VALUE :
			 ckpt_tensor_size(n->tensor);
	int rc;

	if (off > limit || len > limit - off)
		return diag_errno(d, -EFBIG, "%s: %s is %llu bytes; this write "
				  "goes past that", ovl_label(n),
				  n->kind == CKPT_N_VALUE ? "a value's text" :
				  "the tensor", (unsigned long long)limit);
	if (st->scratch) {
		rc = io_pwrite_full(st->scratch->fd, buf, len, off);
		if (rc)
			return ovl_sys_err(v, d, rc, "write");
	} else {
		if (off > st->len)
			memset(st->text + st->len, 0, off - st->len);
		memcpy(st->text + off, buf, len);
	}
	if (off + len > st->len)
		st->len = off + len;
	st->written = true;
	return len;
}

long long ovl_write(struct ovl *v, struct ckpt_node *n, const void *buf,
		    uint64_t len, uint64_t off, struct diag *d)
{
	struct ckpt_tensor *t = n->tensor;
	long long w;
	int rc = ovl_check_writable(v, d);

	if (rc)
		return rc;
	if (n->kind == CKPT_N_VALUE) {
		if (!ckpt_value_editable(n))
			return diag_errno(d, -EPERM, "%s: a %s cannot be "
					  "edited as text", ovl_label(n),
					  n->type);
		if (!n->stage && (rc = stage_start(v, n, UINT64_MAX, d)))
			return rc;
		return write_stage(v, n, buf, len, off, d);
	}
	if (n->kind != CKPT_N_TENSOR)
		return diag_errno(d, -EPERM, "%s cannot be written",
				  ovl_label(n));
	if (n->stage)
		return write_stage(v, n, buf, len, off, d);
	if (t->fresh && !t->fixed) {
		struct ckpt_storage *s = t->storage;

		rc = io_pwrite_full(s->fd, buf, len, off);
		if (rc)
			return ovl_sys_err(v, d, rc, "write");
		if (off + len > s->nbytes) {
			s->nbytes = off + len;
			ckpt_tensor_fresh_sync(t);
		}
		ovl_notify(v, s, n);	/* its views changed */
		return len;
	}
	if (!t->storage || t->kind == CKPT_T_META || t->kind == CKPT_T_INLINE)
		return diag_errno(d, -EPERM, "%s has no storage to write",
				  ovl_label(n));
	if (off >= ckpt_tensor_size(t) || len > ckpt_tensor_size(t) - off)
		return diag_errno(d, -EFBIG, "%s: the tensor is %llu bytes; "
				  "this write goes past that", ovl_label(n),
				  (unsigned long long)ckpt_tensor_size(t));
	rc = copy_up(v, t->storage, d);
	if (rc)
		return rc;
	w = ckpt_tensor_write(v->c, t, buf, len, off, d);
	if (w > 0)
		ovl_notify(v, t->storage, n);
	return w;
}

int ovl_truncate(struct ovl *v, struct ckpt_node *n, uint64_t size,
		 struct diag *d)
{
	struct ckpt_tensor *t = n->tensor;
	int rc = ovl_check_writable(v, d);

	if (rc)
		return rc;
	if (n->kind == CKPT_N_TENSOR && t->fresh && !t->fixed && !n->stage) {
		struct ckpt_storage *s = t->storage;

		if (ftruncate(s->fd, size))
			return ovl_sys_err(v, d, -errno, "truncate");
		s->nbytes = size;
		ckpt_tensor_fresh_sync(t);
		return 0;
	}
	if (n->kind == CKPT_N_VALUE && !ckpt_value_editable(n))
		return diag_errno(d, -EPERM, "%s: a %s cannot be edited as "
				  "text", ovl_label(n), n->type);
	if (n->kind != CKPT_N_VALUE && n->kind != CKPT_N_TENSOR)
		return diag_errno(d, -EPERM, "%s cannot be written",
				  ovl_label(n));
	if (!n->stage && size == ovl_size(v, n))
		return 0;
	if (n->kind == CKPT_N_TENSOR && (!t->storage ||
					 t->kind == CKPT_T_META ||
					 t->kind == CKPT_T_INLINE))
		return diag_errno(d, -EPERM, "%s has no storage to write",
				  ovl_label(n));
	if (size > (n->kind == CKPT_N_VALUE ? OVL_MAX_VALUE :
		    ckpt_tensor_size(t)))
		return diag_errno(d, -EFBIG, "%s: cannot grow past its size",
				  ovl_label(n));
	if (!n->stage && (rc = stage_start(v, n, size, d)))
		return rc;
	if (n->stage->scratch && ftruncate(n->stage->scratch->fd, size))
		return ovl_sys_err(v, d, -errno, "truncate");
	if (!n->stage->scratch && size > n->stage->len)
		memset(n->stage->text + n->stage->len, 0,
		       size - n->stage->len);
	n->stage->len = size;
	return 0;
}

/* close(): check and apply a replacement being written. */
static int stage_apply(struct ovl *v, struct ckpt_node *n, struct diag *d)
{
	struct ckpt_stage *st = n->stage;
	struct ckpt_literal lit;
	char *path;
	int rc;

	if (n->kind == CKPT_N_VALUE) {
		if (ckpt_value_parse(n, st->text, st->len, &lit)) {
			rc = diag_errno(d, -EINVAL, "%s: '%.*s' is not a python "
					"literal; the value stays %s",
					ovl_label(n), line_len(st->text, st->len),
					st->text, n->text);
			ovl_stage_free(&n->stage);
			return rc;
		}
		path = ckpt_node_path(n);
		if (!path)
			return diag_nomem(d);
		{
			struct jrec r = { .op = JR_VALUE };

			rc = ovl_ensure_dir(v, d);
			field(&r, path);
			r.f[r.nf] = st->text;
			r.len[r.nf++] = st->len;
			if (!rc)
				rc = jr_append(v, &r, d);
		}
		free(path);
		if (!rc)
			rc = ckpt_value_set(v->c, n, &lit) ? diag_nomem(d) : 0;
		ovl_stage_free(&n->stage);
		return rc;
	}
	if (st->len != ckpt_tensor_size(n->tensor)) {
		rc = diag_errno(d, -EINVAL, "%s: new contents are %llu bytes, "
				"the tensor is %llu; it keeps its old values",
				ovl_label(n), (unsigned long long)st->len,
				(unsigned long long)ckpt_tensor_size(n->tensor));
		ovl_stage_free(&n->stage);
		return rc;
	}
	rc = ovl_replace_contents(v, n->tensor, st->scratch->fd, 0, d);
	ovl_stage_free(&n->stage);
	if (!rc)
		ovl_notify(v, n->tensor->storage, NULL);
	return rc;
}

static int sync_storage(struct ovl *v, struct ckpt_storage *s,
			struct diag *d)
{
	if (s && s->fd != v->c->fd && s->fd >= 0 && fdatasync(s->fd))
		return ovl_sys_err(v, d, -errno, "fsync");
	return 0;
}

/*
 * A replacement is applied at the first close() after a write: not at a
 * close() before any (a shell's `> file` closes a dup of the new fd
 * first), and at the latest when the last fd goes (ovl_release()).
 */
int ovl_flush(struct ovl *v, struct ckpt_node *n, struct diag *d)
{
	if (n->stage)
		return n->stage->written ? stage_apply(v, n, d) : 0;
	return ovl_fsync(v, n, d);
}

int ovl_release(struct ovl *v, struct ckpt_node *n, struct diag *d)
{
	return n->stage ? stage_apply(v, n, d) : 0;
}

int ovl_fsync(struct ovl *v, struct ckpt_node *n, struct diag *d)
{
	if (n->kind != CKPT_N_TENSOR || !n->tensor->storage)
		return 0;
	return sync_storage(v, n->tensor->storage, d);
}

long long ovl_write_storage(struct ovl *v, struct ckpt_storage *s,
			    const void *buf, uint64_t len, uint64_t off,
			    struct diag *d)
{
	int rc = ovl_check_writable(v, d);

	if (rc)
		return rc;
	if (off >= s->nbytes || len > s->nbytes - off)
		return diag_errno(d, -EFBIG, "storage %s is %llu bytes; this "
				  "write goes past that", s->key,
				  (unsigned long long)s->nbytes);
	rc = copy_up(v, s, d);
	if (!rc && (rc = io_pwrite_full(s->fd, buf, len, off)))
		rc = ovl_sys_err(v, d, rc, "write");
	if (rc)
		return rc;
	ovl_notify(v, s, NULL);
	return len;
}

int ovl_fsync_storage(struct ovl *v, struct ckpt_storage *s, struct diag *d)
{
	return sync_storage(v, s, d);
}

/* ---- open, replay, commit ---- */

bool ovl_changed(const struct ovl *v)
{
	const struct ckpt *c = v->c;

	for (uint32_t i = 0; i < v->nstorages0; i++)
		if (c->storages[i]->modified)
			return true;
	return ckpt_changed(c);
}

static char *field_str(const struct jrec *r, int i)
{
	return i < r->nf ? strndup(r->f[i], r->len[i]) : NULL;
}

/* Apply journal record @r again (data is already in place). */
static int replay_one(struct ovl *v, const struct jrec *r, struct diag *d)
{
	struct ckpt_node *dir = r->nf ? ovl_resolve(v, r->f[0], r->len[0]) : NULL;
	struct ckpt_node *out, *ndir;
	char *name = field_str(r, 1), *nname = NULL;
	uint64_t idx;
	int rc;

	if (!dir || (!name && r->op != JR_VALUE && r->op != JR_XATTR &&
		     r->op != JR_TENSOR)) {
		free(name);
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s/%s: a record names "
				    "'%.*s', which is not there", v->dir,
				    OVL_JOURNAL, r->nf ? (int)r->len[0] : 0,
				    r->nf ? r->f[0] : "");
	}
	switch (r->op) {
	case JR_MKDIR:
		rc = ovl_mkdir(v, dir, name, &out, d);
		break;
	case JR_CREATE:
		rc = !jr_num(r, 2, &idx) ? diag_corrupt(d, DIAG_NO_OFFSET,
							"bad create record") :
		     create_at(v, dir, arena_strndup(&v->c->arena, name,
						     strlen(name)),
			       (uint32_t)idx, &out, d);
		break;
	case JR_UNLINK:
		out = ckpt_node_child(dir, name);
		rc = out && is_dir(out) ? ovl_rmdir(v, dir, name, d) :
		     ovl_unlink(v, dir, name, d);
		break;
	case JR_RENAME:
		ndir = r->nf == 4 ? ovl_resolve(v, r->f[2], r->len[2]) : NULL;
		nname = field_str(r, 3);
		rc = ndir && nname ? ovl_rename(v, dir, name, ndir, nname,
						false, d) :
		     diag_corrupt(d, DIAG_NO_OFFSET, "bad rename record");
		break;
	case JR_VALUE: {
		struct ckpt_literal lit;

		rc = r->nf != 2 || dir->kind != CKPT_N_VALUE ||
		     ckpt_value_parse(dir, r->f[1], r->len[1], &lit) ?
		     diag_corrupt(d, DIAG_NO_OFFSET, "bad value record") :
		     ckpt_value_set(v->c, dir, &lit);
		break;
	}
	case JR_TENSOR:
		rc = ovl_replay_tensor(v, r, d);
		break;
	case JR_XATTR:
		nname = field_str(r, 1);
		rc = r->nf != 3 || !nname ? diag_corrupt(d, DIAG_NO_OFFSET,
							 "bad xattr record") :
		     ovl_setxattr(v, dir, nname, r->f[2], r->len[2], d);
		break;
	default:
		rc = diag_corrupt(d, DIAG_NO_OFFSET, "%s/%s: unknown record "
				  "'%c'", v->dir, OVL_JOURNAL, r->op);
	}
	free(name);
	free(nname);
	return rc;
}

/* Remove the overlay directory and everything in it. */
static bool ours(const char *name)
{
	size_t k = strspn(name, "0123456789");

	return !strcmp(name, OVL_JOURNAL) ||
	       (k && (!name[k] || !strcmp(name + k, ".tmp")));
}

/* Remove the overlay directory and the files we keep in it. */
static int remove_overlay(struct ovl *v)
{
	int dfd = open(v->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dp = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *e;

	if (!dp) {
		if (dfd >= 0)
			close(dfd);
		return errno == ENOENT ? 0 : -errno;
	}
	while ((e = readdir(dp)))
		if (ours(e->d_name))
			unlinkat(dfd, e->d_name, 0);
	closedir(dp);
	if (rmdir(v->dir) && errno != ENOENT)
		return -errno;
	return io_fsync_dir_of(v->dir);
}

static bool same_file(const struct stat *st, uint64_t size, uint64_t sec,
		      uint64_t nsec)
{
	return (uint64_t)st->st_size == size &&
	       (uint64_t)st->st_mtim.tv_sec == sec &&
	       (uint64_t)st->st_mtim.tv_nsec == nsec;
}

static int replay(struct ovl *v, struct diag *d)
{
	struct jrec *recs;
	unsigned char *buf;
	size_t n;
	uint64_t size, sec, nsec;
	struct stat now;
	int rc;

	v->jfd = openat(v->dfd, OVL_JOURNAL, O_RDWR | O_CLOEXEC);
	if (v->jfd < 0 && errno == ENOENT)
		return 0;	/* an empty directory: nothing staged yet */
	if (v->jfd < 0)
		return ovl_sys_err(v, d, -errno, "cannot open the journal");
	rc = jr_load(v, &recs, &n, &buf, d);
	if (rc)
		return rc;
	if (!n) {
		/* a crash between creating it and its header reaching the
		   disk: nothing was staged after it (ovl_ensure_dir) */
		close(v->jfd);
		v->jfd = -1;
		goto out;
	}
	if (recs[0].op != JR_HEAD || recs[0].nf != 4 ||
	    recs[0].len[0] != strlen(OVL_MAGIC) ||
	    memcmp(recs[0].f[0], OVL_MAGIC, recs[0].len[0]) ||
	    !jr_num(&recs[0], 1, &size) || !jr_num(&recs[0], 2, &sec) ||
	    !jr_num(&recs[0], 3, &nsec)) {
		rc = diag_corrupt(d, 0, "%s/%s: not a ptfs journal", v->dir,
				  OVL_JOURNAL);
		goto out;
	}
	now = v->base;
	if (!same_file(&now, size, sec, nsec)) {
		/* written back, then the crash came before the overlay went */
		const struct jrec *k = recs[n - 1].op == JR_COMMIT ?
				       &recs[n - 1] : NULL;

		if (k && jr_num(k, 0, &size) && jr_num(k, 1, &sec) &&
		    jr_num(k, 2, &nsec) && same_file(&now, size, sec, nsec)) {
			close(v->jfd);
			v->jfd = -1;
			rc = remove_overlay(v);
			close(v->dfd);
			v->dfd = -1;
			if (rc)
				rc = ovl_sys_err(v, d, rc, "cannot remove");
			goto out;
		}
		rc = diag_errno(d, -ESTALE, "%s holds edits for another version "
				"of %s (it changed since); restore the file, "
				"or mount with -o discard to drop them",
				v->dir, v->path);
		goto out;
	}
	v->replaying = true;
	for (size_t i = 1; i < n && !rc; i++)
		if (recs[i].op != JR_COMMIT)
			rc = replay_one(v, &recs[i], d);
	v->replaying = false;
out:
	free(recs);
	free(buf);
	return rc;
}

/* Storages copied up earlier: "<i>" for i below nstorages0. */
static int attach_copies(struct ovl *v, struct diag *d)
{
	struct ckpt *c = v->c;

	for (uint32_t i = 0; i < v->nstorages0; i++) {
		struct ckpt_storage *s = c->storages[i];
		struct stat st;
		int fd = ovl_data_open(v, i, "", O_RDWR);

		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd < 0 || fstat(fd, &st))
			return ovl_sys_err(v, d, -errno, "cannot open staged data");
		if ((uint64_t)st.st_size != s->nbytes) {
			close(fd);
			return diag_corrupt(d, DIAG_NO_OFFSET, "%s/%u has %llu "
					    "bytes, storage %s needs %llu",
					    v->dir, i,
					    (unsigned long long)st.st_size,
					    s->key,
					    (unsigned long long)s->nbytes);
		}
		s->fd = fd;
		s->data_off = 0;
		s->modified = true;
	}
	return 0;
}

/*
 * A write-back that was killed leaves its temporary file beside the
 * checkpoint (".NAME.ptfs-new.XXXXXX", see ckpt_save()); nobody else
 * makes such names, and the lock says no other ptfs is writing.
 */
static void remove_stale_temps(const struct ovl *v)
{
	const char *slash = strrchr(v->path, '/');
	char *dir = strndup(v->path, slash - v->path + 1), pre[300];
	struct dirent *e;
	DIR *dp = dir ? opendir(dir) : NULL;

	snprintf(pre, sizeof(pre), ".%s" CKPT_TMP_SUFFIX, slash + 1);
	while (dp && (e = readdir(dp)))
		if (!strncmp(e->d_name, pre, strlen(pre)) &&
		    strlen(e->d_name) == strlen(pre) + 6)
			unlinkat(dirfd(dp), e->d_name, 0);
	if (dp)
		closedir(dp);
	free(dir);
}


int ovl_open(struct ckpt *c, const char *path, const struct ovl_opts *o,
	     struct ovl **out, struct diag *d)
{
	struct ovl *v = calloc(1, sizeof(*v));
	int rc = 0;

	*out = NULL;
	if (!v)
		return diag_nomem(d);
	v->c = c;
	v->dfd = v->jfd = -1;
	v->readonly = o->readonly;
	v->nstorages0 = c->nstorages;
	v->path = realpath(path, NULL);
	if (!v->path || fstat(c->fd, &v->base)) {
		rc = diag_errno(d, -errno, "%s: %s", path, strerror(errno));
		goto fail;
	}
	v->dir = o->dir ? strdup(o->dir) : io_beside(v->path, ".ptfs");
	if (!v->dir) {
		rc = diag_nomem(d);
		goto fail;
	}
	if (!v->readonly && flock(c->fd, LOCK_EX | LOCK_NB)) {
		rc = diag_errno(d, errno == EWOULDBLOCK ? -EBUSY : -errno,
				"%s is mounted writable by another ptfs",
				v->path);
		goto fail;
	}
	v->dfd = open(v->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (v->dfd < 0 && errno != ENOENT) {
		rc = ovl_sys_err(v, d, -errno, "cannot open the overlay");
		goto fail;
	}
	if (v->dfd >= 0 && o->discard) {
		rc = remove_overlay(v);
		close(v->dfd);
		v->dfd = -1;
		if (rc) {
			rc = ovl_sys_err(v, d, rc, "cannot discard");
			goto fail;
		}
	}
	/* the journal first: it says whether the overlay is this file's */
	if (v->dfd >= 0)
		rc = replay(v, d);
	if (!rc && v->dfd >= 0)
		rc = attach_copies(v, d);
	if (!rc && !v->readonly)
		remove_stale_temps(v);
	if (rc)
		goto fail;
	*out = v;
	return 0;
fail:
	ovl_close(v);
	return rc;
}

void ovl_close(struct ovl *v)
{
	if (!v)
		return;
	for (uint32_t i = 0; i < v->c->nstorages; i++) {
		struct ckpt_storage *s = v->c->storages[i];

		if (s->fd != v->c->fd && s->fd >= 0)
			close(s->fd);
		s->fd = v->c->fd;
	}
	for (uint32_t i = 0; i < v->c->nnodes; i++) {
		ovl_stage_free(&v->c->nodes[i]->stage);
		ovl_stage_free(&v->c->nodes[i]->vstage);
	}
	if (v->jfd >= 0)
		close(v->jfd);
	if (v->dfd >= 0)
		close(v->dfd);
	free(v->path);
	free(v->dir);
	free(v);
}

/* Every new tensor must fit its dtype and shape before anything is written. */
static int check_fresh(const struct ovl *v, struct diag *d)
{
	const struct ckpt *c = v->c;

	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct ckpt_node *n = c->nodes[i];
		char *path;

		if (n->dead || n->kind != CKPT_N_TENSOR || !n->tensor->fresh ||
		    !ckpt_tensor_fresh_fits(n->tensor))
			continue;
		path = ckpt_node_path(n);
		diag_errno(d, -EINVAL, "new tensor %s: its %llu bytes do not "
			   "make a %s tensor of shape user.shape; fix them, or "
			   "remove the file", path ? path : n->name,
			   (unsigned long long)n->tensor->storage->nbytes,
			   n->tensor->dtype->name);
		free(path);
		return d->err;
	}
	return 0;
}

/* Just before the rename: journal where the new file is going. */
static int note_commit(void *arg, const struct stat *st, struct diag *d)
{
	struct ovl *v = arg;
	char size[24], sec[24], nsec[24];
	struct jrec k = { .op = JR_COMMIT, .nf = 3, .f = { size, sec, nsec } };
	int rc = ovl_ensure_dir(v, d);

	snprintf(size, sizeof(size), "%llu", (unsigned long long)st->st_size);
	snprintf(sec, sizeof(sec), "%lld", (long long)st->st_mtim.tv_sec);
	snprintf(nsec, sizeof(nsec), "%ld", (long)st->st_mtim.tv_nsec);
	for (int i = 0; i < 3; i++)
		k.len[i] = strlen(k.f[i]);
	return rc ? rc : jr_append(v, &k, d);
}

int ovl_commit(struct ovl *v, const char *output, struct diag *d)
{
	int rc = v->committed ? 0 : ovl_check_writable(v, d);

	if (rc)
		return rc;
	if (v->committed)
		return 1;
	if (!ovl_changed(v)) {
		/* temporary files came and went: nothing to keep either */
		if (v->dfd >= 0 && !remove_overlay(v)) {
			if (v->jfd >= 0)
				close(v->jfd);
			close(v->dfd);
			v->jfd = v->dfd = -1;
		}
		return 1;
	}
	rc = check_fresh(v, d);
	if (!rc) {
		struct ckpt_write_opts o = {
			.progress = v->progress, .progress_arg = v->arg,
		};

		rc = ckpt_save(v->c, output ? output : v->path, &o, &v->base,
			       output ? NULL : note_commit, v, d);
	}
	if (rc)
		return rc;
	v->committed = true;
	if (v->jfd >= 0)
		close(v->jfd);
	v->jfd = -1;
	remove_overlay(v);	/* best effort: the edits are written */
	return 0;
}
