/*
 * ovl_ident.c - what binds an overlay to one checkpoint and keeps it the
 * user's own: the checkpoint's identity, the directory opened without
 * following links and checked (a directory of the effective user that
 * nobody else can write), the journal header, data file names that carry
 * the journal id, and the clean-up that removes exactly what the journal
 * names (its manifest), never anything found by pattern.
 *
 * JR_HEAD's fields (decimal text unless said):
 *
 * FIELD | CONTENTS
 * ------+-----------------------------------------------------------
 *     0 | OVL_MAGIC
 *     1 | journal id: 16 hex digits from getrandom()
 *     2 | "1" if ptfs made the directory (it may rmdir it), else "0"
 *  3..10| dev, ino, size, mtime s, mtime ns, ctime s, ctime ns,
 *       | CRC-32 of the central directory (struct ovl_ident)
 */
#define _GNU_SOURCE 1	/* getrandom */
#include "ovl_int.h"

#include <errno.h>
#include <fcntl.h>
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cvt/cvt.h"
#include "util/io.h"

#define CRC_CHUNK	(64u << 10)

int ovl_ident_of(int fd, uint64_t cdir_off, uint64_t cdir_size,
		 struct ovl_ident *id)
{
	unsigned char *buf;
	struct stat st;
	uint32_t crc = 0;
	int rc = 0;

	if (fstat(fd, &st))
		return -errno;
	memset(id, 0, sizeof(*id));
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	id->size = st.st_size;
	id->mtime_s = st.st_mtim.tv_sec;
	id->mtime_ns = st.st_mtim.tv_nsec;
	id->ctime_s = st.st_ctim.tv_sec;
	id->ctime_ns = st.st_ctim.tv_nsec;
	if (!cdir_size)
		return 0;
	if (cdir_off > id->size || cdir_size > id->size - cdir_off)
		return -ESTALE;	/* shorter than it was: another file */
	/* 64 KiB at a time: a bigger buffer is a mapping of its own, and
	   the mount's peak memory is taken right here (design.md) */
	buf = malloc(cdir_size < CRC_CHUNK ? cdir_size : CRC_CHUNK);
	if (!buf)
		return -ENOMEM;
	for (uint64_t k = 0; k < cdir_size && !rc; k += CRC_CHUNK) {
		size_t m = cdir_size - k < CRC_CHUNK ? cdir_size - k :
			   CRC_CHUNK;

		rc = io_pread_full(fd, buf, m, cdir_off + k);
		crc = libdeflate_crc32(crc, buf, m);
	}
	free(buf);
	id->cdir_crc = crc;
	return rc;
}

/*
 * The identity of a checkpoint of many files (a sharded folder, a DCP
 * directory, a rank set): its commit file's (the index, .metadata, rank
 * 0's file), with the CRC-32 of each data file's (dev, ino, size, mtime)
 * and the directory's (dev, ino) in place of a central directory's.
 * Through the descriptors (@path NULL), or what the names are now (the
 * directory @path, its commit file's path or a rank set's pattern).
 */
static int ident_many(const struct ckpt *c, const char *path,
		      struct ovl_ident *id)
{
	const char *dir, *commit, *name;
	int dfd = ckpt_many_dir(c, &dir, &commit), dfile;
	struct stat st;
	uint32_t crc = 0;
	bool named = false;	/* @path names a file in the folder */
	int fd = path ? openat(dfd, commit, O_RDONLY | O_CLOEXEC |
			       O_NONBLOCK) : c->fd;
	int rc = fd < 0 ? -errno : ovl_ident_of(fd, 0, 0, id);

	if (path && fd >= 0)
		close(fd);
	if (!rc && path && stat(path, &st)) {
		/* a rank set's pattern (DIR/PREFIX_world_size_N_rank_*.pt)
		   names no file: its folder is the one */
		if (errno == ENOENT)
			named = true;
		else
			rc = -errno;
	} else if (!rc && path) {
		named = !S_ISDIR(st.st_mode);
	} else if (!rc && fstat(dfd, &st)) {
		rc = -errno;
	}
	if (!rc && named) {
		char *d = strdup(path), *slash = d ? strrchr(d, '/') : NULL;

		if (slash)
			*(slash == d ? slash + 1 : slash) = 0;
		rc = !d ? -ENOMEM : stat(slash ? d : ".", &st) ? -errno : 0;
		free(d);
	}
	for (uint32_t i = 0; !rc; i++) {
		uint64_t x[5] = { st.st_dev, st.st_ino, st.st_size,
				  st.st_mtim.tv_sec, st.st_mtim.tv_nsec };
		bool more;

		if (i == 0)	/* the directory: the one a name leads to */
			x[2] = x[3] = x[4] = 0;
		crc = libdeflate_crc32(crc, x, sizeof(x));
		while ((more = ckpt_many_file(c, i, &name, &dfile)) &&
		       dfile < 0)
			i++;	/* absent (refused at mount) */
		if (!more)
			break;
		if (path ? fstatat(dfd, name, &st, 0) : fstat(dfile, &st))
			rc = -errno;
	}
	id->cdir_crc = crc;
	return rc;
}

int ovl_ident_ckpt(const struct ckpt *c, const char *path,
		   struct ovl_ident *id)
{
	int fd, rc;

	if (ckpt_can(c, CKPT_CAP_MANY))
		return ident_many(c, path, id);
	fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : c->fd;
	if (fd < 0)
		return -errno;
	/* a zip's central directory (none: 0, 0) */
	rc = ovl_ident_of(fd, c->zip.cdir_off, c->zip.cdir_size, id);
	if (path)
		close(fd);
	return rc;
}

bool ovl_ident_same(const struct ovl_ident *a, const struct ovl_ident *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime_s == b->mtime_s && a->mtime_ns == b->mtime_ns &&
	       a->ctime_s == b->ctime_s && a->ctime_ns == b->ctime_ns &&
	       a->cdir_crc == b->cdir_crc;
}

/*
 * Is the checkpoint still what was mounted?  The fd the mount reads must
 * hold the same bytes (its ctime may change: a rename over the path
 * unlinks it, and that is no change of its data); with @target, the file
 * at the path must be that same file, unchanged in every respect.
 */
int ovl_still_same(struct ovl *v, bool target, struct diag *d)
{
	struct ovl_ident now;
	int rc = ovl_ident_ckpt(v->c, NULL, &now);

	if (!rc) {
		now.ctime_s = v->id.ctime_s;
		now.ctime_ns = v->id.ctime_ns;
	}
	if (!rc && ovl_ident_same(&now, &v->id) && target)
		rc = ovl_ident_ckpt(v->c, v->path, &now);
	if (rc == -ENOMEM)
		return diag_nomem(d);
	/* cannot tell (EMFILE, EIO, ENOENT after a rm): say so, not "changed" */
	if (rc)
		return diag_errno(d, rc, "%s: cannot check it is the file that "
				  "was mounted: %s; nothing written, edits "
				  "kept in %s", v->path, strerror(-rc),
				  v->dir);
	return ovl_ident_same(&now, &v->id) ? 0 : ovl_changed_err(v, d);
}

int ovl_changed_err(const struct ovl *v, struct diag *d)
{
	return diag_errno(d, -ESTALE, "changed since it was mounted (another "
			  "program replaced or rewrote it): nothing written, "
			  "edits kept in %s; mount again with -o discard to "
			  "drop them%s", v->dir,
			  /* a folder or DCP directory has no -o output= */
			  ckpt_can(v->c, CKPT_CAP_MANY) ? "" :
			  ", or -o output=FILE to write elsewhere");
}

/* Is the file written back (JR_COMMIT @k) the checkpoint we opened? */
bool ovl_commit_is(const struct jrec *k, const struct ovl_ident *id)
{
	uint64_t x[5];

	for (int i = 0; i < 5; i++)
		if (!jr_num(k, i, &x[i]))
			return false;
	return x[0] == id->dev && x[1] == id->ino && x[2] == id->size &&
	       x[3] == (uint64_t)id->mtime_s && x[4] == (uint64_t)id->mtime_ns;
}

/* JR_COMMIT: the written file @st is where the edits are now. */
int ovl_commit_append(struct ovl *v, const struct stat *st, struct diag *d)
{
	struct jrec k = { .op = JR_COMMIT, .nf = 5 };
	char num[5][24];

	snprintf(num[0], 24, "%llu", (unsigned long long)st->st_dev);
	snprintf(num[1], 24, "%llu", (unsigned long long)st->st_ino);
	snprintf(num[2], 24, "%llu", (unsigned long long)st->st_size);
	snprintf(num[3], 24, "%lld", (long long)st->st_mtim.tv_sec);
	snprintf(num[4], 24, "%ld", (long)st->st_mtim.tv_nsec);
	for (int i = 0; i < 5; i++) {
		k.f[i] = num[i];
		k.len[i] = strlen(num[i]);
	}
	return jr_append(v, &k, d);
}

/* ---- the directory ---- */

int ovl_dir_check(int dfd, const char *dir, struct diag *d)
{
	struct stat st;

	if (fstat(dfd, &st))
		return diag_errno(d, -errno, "%s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022))
		return diag_errno(d, -EPERM, "%s: the overlay must be a "
				  "directory of yours that nobody else can "
				  "write (it is owned by uid %u, mode %04o); "
				  "ptfs will not use it: remove it or choose "
				  "another with -o overlay=DIR",
				  dir, (unsigned)st.st_uid,
				  (unsigned)(st.st_mode & 07777));
	return 0;
}

int ovl_dir_open(const char *dir, bool create, bool *made, int *out,
		 struct diag *d)
{
	int dfd, rc;

	*out = -1;
	if (made)
		*made = false;
	if (create) {
		if (!mkdir(dir, 0700)) {
			if (made)
				*made = true;
		} else if (errno != EEXIST) {
			return diag_errno(d, -errno, "%s: cannot create the "
					  "overlay: %s", dir, strerror(errno));
		}
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 && errno == ENOENT && !create)
		return 0;
	if (dfd < 0 && (errno == ELOOP || errno == ENOTDIR))
		return diag_errno(d, -EPERM, "%s: the overlay is a symbolic "
				  "link or not a directory; ptfs will not use "
				  "it: remove it or choose another with -o "
				  "overlay=DIR", dir);
	if (dfd < 0)
		return diag_errno(d, -errno, "%s: cannot open the overlay: %s",
				  dir, strerror(errno));
	rc = ovl_dir_check(dfd, dir, d);
	if (rc) {
		close(dfd);
		return rc;
	}
	*out = dfd;
	return 0;
}

int ovl_dir_lock(const struct ovl *v, struct diag *d)
{
	if (!flock(v->dfd, LOCK_EX | LOCK_NB))
		return 0;
	return diag_errno(d, errno == EWOULDBLOCK ? -EBUSY : -errno,
			  "%s: the overlay is in use by another ptfs mount "
			  "(of this file, or of an earlier version of it)",
			  v->dir);
}

bool ovl_dir_alive(const struct ovl *v)
{
	struct stat st;

	return v->dfd < 0 || (!fstat(v->dfd, &st) && st.st_nlink > 0);
}

/* ---- the journal's header ---- */

static void put_num(char (*buf)[24], int i, struct jrec *h, long long x)
{
	snprintf(buf[i], sizeof(buf[i]), "%lld", x);
	h->f[h->nf] = buf[i];
	h->len[h->nf++] = strlen(buf[i]);
}

int jr_create(struct ovl *v, struct diag *d)
{
	const struct ovl_ident *id = &v->id;
	struct jrec h = { .op = JR_HEAD };
	char num[9][24];
	uint64_t rnd;
	int rc;

	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		return diag_errno(d, -errno, "getrandom: %s", strerror(errno));
	snprintf(v->jid, sizeof(v->jid), "%016llx", (unsigned long long)rnd);
	v->jfd = openat(v->dfd, OVL_JOURNAL, O_RDWR | O_CREAT | O_EXCL |
			O_NOFOLLOW | O_CLOEXEC, 0600);
	if (v->jfd < 0)
		return diag_errno(d, -errno, "%s: %s", v->jpath,
				  errno == EEXIST ? "another mount made a "
				  "journal here meanwhile" : strerror(errno));
	v->jend = 0;
	v->jseq = 0;
	jr_field(&h, OVL_MAGIC);
	jr_field(&h, v->jid);
	jr_field(&h, v->dir_ours ? "1" : "0");
	put_num(num, 0, &h, (long long)id->dev);
	put_num(num, 1, &h, (long long)id->ino);
	put_num(num, 2, &h, (long long)id->size);
	put_num(num, 3, &h, id->mtime_s);
	put_num(num, 4, &h, id->mtime_ns);
	put_num(num, 5, &h, id->ctime_s);
	put_num(num, 6, &h, id->ctime_ns);
	put_num(num, 7, &h, id->cdir_crc);
	rc = jr_append(v, &h, d);
	/*
	 * Made durable, unless the edits were just written back: then a
	 * crash that brings the journal back is harmless (its JR_COMMIT
	 * names the new file, and the next mount removes it), and the two
	 * flushes were a third of a clone-and-patch write-back's time on
	 * btrfs.  A discard must not come back.
	 */
	if (!rc && !v->committed && fsync(v->dfd))
		rc = diag_errno(d, -errno, "%s: fsync: %s", v->dir,
				strerror(errno));
	if (rc) {
		/*
		 * No journal without its header: the next edit creates it
		 * again, instead of appending records that the next mount
		 * would refuse as "not a ptfs journal".
		 */
		close(v->jfd);
		v->jfd = -1;
		(void)unlinkat(v->dfd, OVL_JOURNAL, 0);
	}
	return rc;
}

static bool num_at(const struct jrec *r, int i, int64_t *out)
{
	uint64_t x;

	if (!jr_num(r, i, &x) || x > INT64_MAX)
		return false;
	*out = (int64_t)x;
	return true;
}

bool jr_head_parse(const struct jrec *r, struct ovl_ident *id, char *jid,
		   bool *ours)
{
	int64_t x[8];

	if (r->op != JR_HEAD || r->nf != 11 ||
	    r->len[0] != strlen(OVL_MAGIC) ||
	    memcmp(r->f[0], OVL_MAGIC, r->len[0]) ||
	    r->len[1] != OVL_JID_LEN ||
	    strspn(r->f[1], "0123456789abcdef") < OVL_JID_LEN ||
	    r->len[2] != 1 || (r->f[2][0] != '0' && r->f[2][0] != '1'))
		return false;
	for (int i = 0; i < 8; i++)
		if (!num_at(r, 3 + i, &x[i]))
			return false;
	if (x[7] > UINT32_MAX)
		return false;
	memcpy(jid, r->f[1], OVL_JID_LEN);
	jid[OVL_JID_LEN] = 0;
	*ours = r->f[2][0] == '1';
	id->dev = x[0];
	id->ino = x[1];
	id->size = x[2];
	id->mtime_s = x[3];
	id->mtime_ns = x[4];
	id->ctime_s = x[5];
	id->ctime_ns = x[6];
	id->cdir_crc = (uint32_t)x[7];
	return true;
}

/* ---- the manifest: data files and temporaries the journal names ---- */

void ovl_data_name_as(const struct ovl *v, uint32_t i,
		      const struct ckpt_dtype *dt, const char *sfx, char *buf,
		      size_t size)
{
	snprintf(buf, size, "%s.%u%s%s%s", v->jid, i, dt ? "." : "",
		 dt ? dt->name : "", sfx);
}

void ovl_data_name(const struct ovl *v, uint32_t i, const char *sfx,
		   char *buf, size_t size)
{
	/* a converted storage's bytes are in the copy of its new dtype
	   (ovl_retype.c); a new storage's index may not be taken yet */
	const struct ckpt_dtype *dt = i < v->c->nstorages ?
				      v->c->storages[i]->retyped : NULL;

	ovl_data_name_as(v, i, dt, sfx, buf, size);
}

/* named[i]: NAMED_PLAIN for "<i>", NAMED_CVT for "<i>.<dtype>" */
enum { NAMED_PLAIN = 1, NAMED_CVT = 2 };

bool ovl_named(const struct ovl *v, uint32_t i)
{
	return i < v->nnamed && (v->named[i] & NAMED_PLAIN);
}

bool ovl_named_cvt(const struct ovl *v, uint32_t i)
{
	return i < v->nnamed && (v->named[i] & NAMED_CVT);
}

static int mark(struct ovl *v, uint32_t i, uint8_t bit)
{
	if (i >= v->nnamed) {
		uint32_t n = i + 64;
		uint8_t *nb = realloc(v->named, n);

		if (!nb)
			return -ENOMEM;
		memset(nb + v->nnamed, 0, n - v->nnamed);
		v->named = nb;
		v->nnamed = n;
	}
	v->named[i] |= bit;
	return 0;
}

int ovl_name_mark(struct ovl *v, uint32_t i)
{
	return mark(v, i, NAMED_PLAIN);
}

int ovl_name_mark_cvt(struct ovl *v, uint32_t i)
{
	return mark(v, i, NAMED_CVT);
}

void ovl_data_unlink(struct ovl *v, uint32_t i, bool tmp_only)
{
	char name[64];

	if (i >= v->nnamed)
		return;
	/* the plain copy, and the converted copy of each dtype a JR_DATA
	   record with a dtype may have named: exact names, no pattern */
	for (int k = -1; k < 0 || (v->named[i] & NAMED_CVT); k++) {
		const struct ckpt_dtype *dt = k < 0 ? NULL : cvt_dtype(k);

		if (k >= 0 && !dt)
			break;
		if (k < 0 && !(v->named[i] & NAMED_PLAIN))
			continue;
		if (!tmp_only) {
			ovl_data_name_as(v, i, dt, "", name, sizeof(name));
			(void)unlinkat(v->dfd, name, 0);
		}
		ovl_data_name_as(v, i, dt, ".tmp", name, sizeof(name));
		(void)unlinkat(v->dfd, name, 0);
	}
}

int ovl_temp_add(struct ovl *v, const char *p, size_t len)
{
	char **nt;

	/* one per target: memory stays bounded however long the journal */
	for (size_t i = 0; i < v->ntemps; i++)
		if (strlen(v->temps[i]) == len && !memcmp(v->temps[i], p, len))
			return 0;
	nt = realloc(v->temps, (v->ntemps + 1) * sizeof(*nt));

	if (!nt)
		return -ENOMEM;
	v->temps = nt;
	nt[v->ntemps] = strndup(p, len);
	if (!nt[v->ntemps])
		return -ENOMEM;
	v->ntemps++;
	return 0;
}

/*
 * Remove a write-back temporary the journal named, if it is still a
 * regular file of ours (a name in a shared directory may be anyone's).
 */
void ovl_temp_remove(const char *path)
{
	struct stat st;

	if (!lstat(path, &st) && S_ISREG(st.st_mode) &&
	    st.st_uid == geteuid())
		(void)unlink(path);
}

int ovl_forget(struct ovl *v, struct diag *d)
{
	int rc = 0;

	if (v->dfd < 0)
		return 0;
	for (uint32_t i = 0; i < v->nnamed; i++)
		ovl_data_unlink(v, i, false);
	for (size_t i = 0; i < v->ntemps; i++)
		ovl_temp_remove(v->temps[i]);
	if (v->jfd >= 0) {
		close(v->jfd);
		v->jfd = -1;
	}
	/* the journal last: until it goes, it names what is left */
	if (unlinkat(v->dfd, OVL_JOURNAL, 0) && errno != ENOENT)
		rc = diag_errno(d, -errno, "%s: %s", v->jpath,
				strerror(errno));
	/*
	 * Made durable, unless the edits were just written back: then a
	 * crash that brings the journal back is harmless (its JR_COMMIT
	 * names the new file, and the next mount removes it), and the two
	 * flushes were a third of a clone-and-patch write-back's time on
	 * btrfs.  A discard must not come back.
	 */
	if (!rc && !v->committed && fsync(v->dfd))
		rc = diag_errno(d, -errno, "%s: fsync: %s", v->dir,
				strerror(errno));
	if (v->named)
		memset(v->named, 0, v->nnamed);
	v->jend = v->jseq = 0;
	close(v->dfd);
	v->dfd = -1;
	/* only a directory ptfs made, and only when empty (rmdir) */
	if (!rc && v->dir_ours && !rmdir(v->dir) && !v->committed)
		(void)io_fsync_dir_of(v->dir);
	return rc;
}
