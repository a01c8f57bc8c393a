/*
 * ovl_store.c - the overlay's low-level services: its directory, the data
 * files that hold staged storages, copy-up, the journal wrapper, paths and
 * names.  Everything else in core/ovl/ builds on these; nothing here calls
 * upward (the operations are ovl.c, the data path ovl_data.c, opening,
 * replay and write-back ovl_open.c).
 *
 * Order of work, so that a crash at any point loses nothing that was
 * reported done and never shows half an edit:
 *   - a storage's first write copies it to a temporary data file, fsyncs,
 *     renames it into place and fsyncs the directory: a data file is
 *     always a whole copy;
 *   - replacing a tensor's contents (cp, rename of a temporary file over
 *     it) builds the new storage the same way, then renames it over the
 *     old data file: the old bytes or the new ones, never a mix;
 *   - a structural edit is checked, then journaled (fdatasync), then made
 *     in memory; data it depends on is on disk before the record.
 */
#define _GNU_SOURCE 1	/* copy_file_range, fdatasync, O_TMPFILE */
#include "ovl_int.h"
#include "util/io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define CHUNK	(1u << 20)

/* Copy @len bytes at @in_off of @in to @out at 0 (reflinks where the file
 * system can); pread/pwrite where copy_file_range is refused. */
int ovl_copy_range(int in, uint64_t in_off, int out, uint64_t len)
{
	int rc = io_copy_range(in, in_off, out, 0, len);

	return rc == -ENODATA ? -EIO : rc;
}

int ovl_sys_err(struct ovl *v, struct diag *d, int err, const char *what)
{
	return diag_errno(d, err, "%s: %s: %s", v->dir, what, strerror(-err));
}

int ovl_check_writable(const struct ovl *v, struct diag *d)
{
	if (v->replaying)
		return 0;
	if (v->inplace_pending)
		return diag_errno(d, -EROFS, "an in-place write-back began and "
				  "did not finish: the mount takes no more "
				  "edits (ptfs umount tries it again)");
	if (v->readonly || v->committed)
		return diag_errno(d, -EROFS, "%s", v->discarded ?
				  "the staged edits were dropped (discard): "
				  "the mount takes no more edits" :
				  v->committed ?
				  "written back already: the mount is "
				  "read-only until it is unmounted" :
				  "mounted read-only");
	/* removed under the mount (a tmp cleaner, git clean): an edit now
	   would live in a deleted file and die with the daemon */
	if (!ovl_dir_alive(v))
		return diag_errno(d, -EIO, "%s: the overlay was removed while "
				  "mounted: edits staged in it are lost and "
				  "no more are taken; unmount (ptfs umount "
				  "writes back what is still open) and mount "
				  "again", v->dir);
	return 0;
}

void ovl_tell(struct ovl *v, const char *fmt, ...)
{
	va_list ap;
	char *line;
	int n;

	if (!v->notice || v->replaying)
		return;
	va_start(ap, fmt);
	n = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;		/* out of memory: the edit stands, untold */
	v->notice(v->arg, line);
	free(line);
}

char *ovl_names_over(const struct ovl *v, const struct ckpt_storage *s,
		     const struct ckpt_node *except, unsigned max)
{
	const struct ckpt *c = v->c;
	char *list = NULL;
	size_t size = 0;
	unsigned k = 0, more = 0;
	FILE *f = open_memstream(&list, &size);

	for (uint32_t i = 0; f && i < c->nnodes; i++) {
		const struct ckpt_node *x = c->nodes[i];
		char *p;

		if (x == except || x->dead || x->kind != CKPT_N_TENSOR ||
		    !x->tensor || x->tensor->storage != s)
			continue;
		if (k == max) {
			more++;
			continue;
		}
		p = ckpt_node_path(x);
		fprintf(f, "%s%s", k++ ? ", " : "", p ? p : "?");
		free(p);
	}
	if (f && more)
		fprintf(f, " and %u more", more);
	if (!f || fclose(f) || !k) {
		free(list);
		return NULL;
	}
	return list;
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
	bool made;
	int rc;

	if (v->jfd >= 0)
		return 0;
	if (v->dfd < 0) {
		rc = ovl_dir_open(v->dir, true, &made, &v->dfd, d);
		if (rc)
			return rc;
		if ((rc = ovl_dir_lock(v, d))) {
			close(v->dfd);
			v->dfd = -1;
			return rc;
		}
		v->dir_ours = made || v->default_dir;
		if (made && (rc = io_fsync_dir_of(v->dir)))
			return ovl_sys_err(v, d, rc, "fsync");
	}
	return jr_create(v, d);
}

int ovl_data_open(struct ovl *v, uint32_t i, const char *sfx, int flags,
		  struct diag *d)
{
	char name[64], idx[16];
	struct rlimit lim;
	int fd, rc;

	/* a read-only mount opens what is there and never makes a file */
	if (v->readonly)
		flags = O_RDONLY | (flags & ~(O_ACCMODE | O_CREAT | O_TRUNC));
	if ((flags & O_CREAT) && !ovl_named(v, i)) {
		/* named in the journal before it exists: the manifest */
		struct jrec r = { .op = JR_DATA };

		rc = ovl_ensure_dir(v, d);
		snprintf(idx, sizeof(idx), "%u", i);
		jr_field(&r, idx);
		if (!rc && !v->replaying)
			rc = jr_append(v, &r, d);
		if (!rc && ovl_name_mark(v, i))
			rc = diag_nomem(d);
		if (rc)
			return rc;
	}
	ovl_data_name(v, i, sfx, name, sizeof(name));
	fd = openat(v->dfd, name, flags | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return ovl_sys_err(v, d, -errno, name);
	/*
	 * Each staged storage keeps its data file open for the rest of the
	 * mount (readers use it with pread under the read lock, so it cannot
	 * be closed and reopened beside them: docs/design.md, "One open
	 * file per staged storage").  The daemon raises its soft limit to
	 * the hard one; here it refuses the storage that would leave fewer
	 * than OVL_FD_RESERVE descriptors, so that write-back (the new
	 * archive, its directory, FUSE's threads) always has what it needs.
	 * The kernel gives the lowest free number: below @fd all are taken.
	 */
	if (getrlimit(RLIMIT_NOFILE, &lim) == 0 &&
	    lim.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)fd + OVL_FD_RESERVE >= lim.rlim_cur) {
		close(fd);
		if (flags & O_TRUNC)	/* made empty just now: nothing kept */
			unlinkat(v->dfd, name, 0);
		return diag_errno(d, -EMFILE, "%s: cannot stage storage %u: "
				  "each staged storage holds an open file "
				  "and the open-file limit (%llu) is nearly "
				  "used up; write back (ptfs umount) or raise "
				  "the hard limit (ulimit -Hn)", v->dir, i,
				  (unsigned long long)lim.rlim_cur);
	}
	return fd;
}

int ovl_data_finish(struct ovl *v, uint32_t i, int fd, struct diag *d)
{
	char tmp[64], name[64];

	ovl_data_name(v, i, ".tmp", tmp, sizeof(tmp));
	ovl_data_name(v, i, "", name, sizeof(name));
	if (fsync(fd) || renameat(v->dfd, tmp, v->dfd, name) ||
	    fsync(v->dfd)) {
		int err = -errno;

		unlinkat(v->dfd, tmp, 0);
		return ovl_sys_err(v, d, err, "cannot stage storage");
	}
	return 0;
}

/* Move the temporary (fd @fd, complete) over storage @s's data file and
 * make it @s's. */
static int ovl_data_install(struct ovl *v, struct ckpt_storage *s, int fd,
			    struct diag *d)
{
	int rc = ovl_data_finish(v, s->index, fd, d);

	if (rc) {
		close(fd);
		return rc;
	}
	if (ovl_copied(v, s))
		close(s->fd);
	s->fd = fd;
	s->data_off = 0;
	s->modified = true;
	ckpt_dirty_drop(s);		/* a new file: compared in full */
	ckpt_storage_uninflate(s);	/* the overlay has the bytes now */
	return 0;
}

/* A DCP tensor's storage gathered from its chunks into @fd. */
static int gather_copy(struct ovl *v, const struct ckpt_storage *s, int fd,
		       struct diag *d)
{
	const struct ckpt_tensor *t = ckpt_pieced_tensor(v->c, s);
	char *buf = malloc(CHUNK);
	int rc = buf ? 0 : diag_nomem(d);

	for (uint64_t pos = 0; pos < s->nbytes && !rc; pos += CHUNK) {
		size_t k = s->nbytes - pos < CHUNK ? s->nbytes - pos : CHUNK;
		long long n = ckpt_tensor_read(v->c, t, buf, k, pos, d);

		rc = n < 0 ? (int)n : (uint64_t)n != k ? diag_errno(d, -EIO,
			"%s: short read", s->key) : 0;
		if (!rc && (rc = io_pwrite_full(fd, buf, k, pos)))
			rc = ovl_sys_err(v, d, rc, "cannot stage storage");
	}
	free(buf);
	return rc;
}

/* Start "<jid>.<i>.tmp" as a copy of storage @s as it is now. */
static int data_copy(struct ovl *v, struct ckpt_storage *s, int *out,
		     struct diag *d)
{
	bool pieced = ckpt_storage_pieced(v->c, s);
	uint64_t off = 0;
	int src = -1, fd, rc;

	/* a deflated storage is copied from its inflated copy */
	rc = pieced ? 0 : ckpt_storage_data(v->c, s, &src, &off, d);
	if (rc)
		return rc;
	fd = ovl_data_open(v, s->index, ".tmp", O_RDWR | O_CREAT | O_TRUNC,
			   d);
	if (fd < 0)
		return fd;
	if (pieced)
		rc = gather_copy(v, s, fd, d);
	else if ((rc = ovl_copy_range(src, off, fd, s->nbytes)))
		rc = ovl_sys_err(v, d, rc, "cannot stage storage");
	if (rc) {
		char tmp[64];

		close(fd);
		/* no half copy left in the overlay (an EIO did) */
		ovl_data_name(v, s->index, ".tmp", tmp, sizeof(tmp));
		unlinkat(v->dfd, tmp, 0);
		return rc;
	}
	*out = fd;
	return 0;
}

/* A storage's first write: copy it into the overlay. */
int ovl_copy_up(struct ovl *v, struct ckpt_storage *s, struct diag *d)
{
	int fd, rc;

	if (s->fd != ckpt_storage_home(v->c, s))
		return 0;	/* copied already, or a new tensor's */
	if ((rc = ckpt_rule_data(v->c, s, d)))
		return rc;
	rc = data_copy(v, s, &fd, d);
	if (!rc)
		rc = ovl_data_install(v, s, fd, d);
	if (!rc)
		(void)ckpt_dirty_track(s);	/* none: compared in full */
	return rc;
}

/*
 * Replace all of tensor @t's contents by its size in bytes of @src, from
 * @src_off on:
 * build the new storage in "<jid>.<i>.tmp" and rename it over "<jid>.<i>",
 * so that a
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
	int fd = -1, rc = ckpt_rule_data(v->c, s, d);

	if (rc)
		return rc;
	if (whole) {
		fd = ovl_data_open(v, s->index, ".tmp", O_RDWR | O_CREAT |
				   O_TRUNC, d);
		rc = fd < 0 ? fd : 0;
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
	return ovl_resolve_in(v->c, p, len);
}

struct ckpt_node *ovl_resolve_in(const struct ckpt *c, const char *p,
				 size_t len)
{
	struct ckpt_node *n = c->root;
	char *copy = strndup(p, len), *save = NULL;

	if (!copy)
		return NULL;
	for (char *tok = strtok_r(copy, "/", &save); tok && n;
	     tok = strtok_r(NULL, "/", &save))
		n = ckpt_node_is_dir(n) ? ckpt_node_child(n, tok) : NULL;
	free(copy);
	return n;
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
	jr_field(&r, p1);
	if (name)
		jr_field(&r, name);
	if (ndir) {
		jr_field(&r, p2);
		jr_field(&r, nname);
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

/*
 * The tuple a __getstate__ gave is read back by its __setstate__, by
 * position: no name can be added to it (docs/editing.md).  Its
 * attributes, if it keeps them, are in a dict among its parts (torch's
 * own tests keep self.__dict__ there): name the first one, where a new
 * attribute can go.
 */
static int parts_fixed(const struct ckpt_node *dir, struct diag *d)
{
	const struct ckpt_node *in = NULL;

	for (uint32_t i = 0; i < dir->dir->nkids && !in; i++) {
		const struct ckpt_node *k = dir->dir->kids[i];

		if (k && k->kind == CKPT_N_DIR && ckpt_dict_type(k->type))
			in = k;
	}
	return diag_errno(d, -EPERM, "%s: the state of a %s is what its "
			  "__getstate__ gave, by position: its parts can be "
			  "changed, not renamed, removed or added%s%s%s%s%s",
			  dir->name, dir->type, in ? "; to add an attribute, "
			  "make it inside " : "", in ? dir->name : "",
			  in ? "/" : "", in ? in->name : "",
			  in ? ", the dict among them" : "");
}

int ovl_dir_editable(struct ovl *v, const struct ckpt_node *dir,
			struct diag *d)
{
	int rc = ovl_check_writable(v, d);

	if (rc)
		return rc;
	if (!ckpt_node_is_dir(dir))
		return diag_errno(d, -ENOTDIR, "%s: not a directory",
				  dir->name);
	if ((rc = ckpt_rule_dir(v->c, dir, d)))
		return rc;
	if (!strncmp(dir->type, "sparse", 6))
		return diag_errno(d, -EPERM, "%s: the parts of a sparse "
				  "tensor cannot be renamed, removed or "
				  "added", dir->name);
	if (ckpt_dir_parts_fixed(dir))
		return parts_fixed(dir, d);
	return 0;
}

/*
 * A name a key can have (names.md), arena-copied into *@out.  It may be
 * longer than a file name (NAME_MAX): the whole name of a key shown cut,
 * which a rename onto that cut name replaces, or one given as user.key
 * (at most an attribute value's 64 KiB).
 */
int ovl_key_name(struct ovl *v, const struct ckpt_node *dir,
		    const char *name, char **out, struct diag *d)
{
	size_t n = strlen(name);
	char *buf;

	if (!n || n > OVL_MAX_KEY || strchr(name, '/'))
		return diag_errno(d, -EINVAL, "invalid name '%s'", name);
	if (dir->kind == CKPT_N_DIR) {
		buf = malloc(n + 1);
		if (!buf)
			return diag_nomem(d);
		long k = ckpt_name_unescape(name, buf);
		int rc = k < 0 ? diag_errno(d, -EINVAL, "'%s' is not a key "
					    "name: '%%' must start %%XX "
					    "(docs/names.md)", name) :
			 ckpt_rule_key(v->c, buf, (size_t)k, d);

		free(buf);
		if (rc)
			return rc;
	}
	*out = arena_strndup(&v->c->arena, name, n);
	return *out ? 0 : diag_nomem(d);
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
	/* replaying, the file may be gone: a rename over a tensor later in
	   the journal dropped it (ovl.c); a read-only mount does not make it
	   again, and the rename needs nothing of it */
	if (!create && v->readonly) {
		char name[64];

		ovl_data_name(v, index, "", name, sizeof(name));
		if (faccessat(v->dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) &&
		    errno == ENOENT) {
			s->fd = -1;
			*out = ckpt_tensor_fresh(v->c, s);
			return *out ? 0 : diag_nomem(d);
		}
	}
	s->fd = ovl_data_open(v, index, "", O_RDWR | O_CREAT |
			      (create ? O_TRUNC : 0), d);
	if (s->fd < 0)
		return s->fd;
	if (fstat(s->fd, &st))
		return ovl_sys_err(v, d, -errno, "cannot open a new file's data");
	s->nbytes = s->numel = st.st_size;
	*out = ckpt_tensor_fresh(v->c, s);
	return *out ? 0 : diag_nomem(d);
}


/* How much of @s a one-line message shows: its first line, <= 40. */
int ovl_line_len(const char *s, size_t n)
{
	size_t k = 0;

	while (k < n && k < 40 && s[k] != '\n' && s[k])
		k++;
	return (int)k;
}

/*
 * A name longer than LABEL_MAX would fill a message's 256 bytes before
 * its reason: shown cut the way names.md cuts a long key, "eee...%~2",
 * in one of a few per-thread buffers (a message may name two entries).
 */
#define LABEL_MAX	64

const char *ovl_label(const struct ckpt_node *n)
{
	static _Thread_local char ring[4][LABEL_MAX + 1];
	static _Thread_local unsigned next;

	if (!n->name || !n->name[0])
		return "the root";
	return ckpt_name_short(n->name, n->index, LABEL_MAX,
			       ring[next++ % 4]);
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
