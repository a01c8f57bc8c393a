/*
 * ovl_inplace.c - write-back into the checkpoint itself (-o inplace, issue
 * 18), with the overlay as its redo log.
 *
 * Order: the checks (the file is the one mounted and unchanged, nobody
 * else has it open for writing, the edits fit in place: ckpt_inplace.c),
 * the plan journaled as JR_INPLACE (fdatasync'd), then the patch, the
 * checkpoint's fdatasync, JR_COMMIT and the overlay's clean-up.  The plan
 * holds everything the patch needs but the staged bytes, which stay in
 * the overlay until JR_COMMIT: a crash anywhere after JR_INPLACE leaves a
 * journal that the next mount replays and then finishes by patching again
 * (idempotent), provided the file is still the same file (device, inode,
 * size; its times and CRC fields may have moved with the patch).
 *
 * Between the checks and JR_COMMIT another program may rename a file over
 * the path (a training job's `cp job.pt tmp && mv tmp model.pt`): the
 * patch then went into an inode that nobody will read again.  So after
 * the patch's fdatasync, the name is looked up once more in its directory
 * (no link followed) and must be the patched inode, with a link left.  If
 * it is not, the plan is given up: a JR_COMMIT of no file (every field 0,
 * which no checkpoint matches) closes the JR_INPLACE, and the overlay is
 * what it is when the file changed before the plan: the edits stay staged
 * for the file that was mounted, ptfs umount says it changed since it was
 * mounted, and a mount of the new file refuses them (-o discard drops
 * them).  When the name cannot be looked up (EIO, EACCES), the plan stays
 * pending and ptfs umount tries it again.
 *
 * JR_INPLACE's fields (decimal text):
 *
 * FIELD | CONTENTS
 * ------+-----------------------------------------------------------
 *  0..2 | dev, ino, size of the checkpoint
 *     3 | one line per changed record, by entry ascending:
 *       | "<entry> <storage index, or -> <crc-32, 8 hex digits>\n"
 */
#define _GNU_SOURCE 1	/* F_SETLEASE */
#include "ovl_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/sbuf.h"

/* ---- the record ---- */

static int plan_append(struct ovl *v, const uint64_t id[3], struct diag *d)
{
	struct jrec r = { .op = JR_INPLACE };
	struct sbuf b = { 0 };
	char num[3][24];
	size_t len;
	char *text;
	int rc;

	for (int i = 0; i < 3; i++) {
		snprintf(num[i], sizeof(num[i]), "%" PRIu64, id[i]);
		jr_field(&r, num[i]);
	}
	for (uint32_t k = 0; k < v->plan.n; k++) {
		const struct ckpt_patch_rec *p = &v->plan.rec[k];

		if (p->storage == CKPT_NO_STORAGE)
			sb_printf(&b, "%" PRIu32 " - %08" PRIx32 "\n", p->entry,
				  p->crc32);
		else
			sb_printf(&b, "%" PRIu32 " %" PRIu32 " %08" PRIx32 "\n",
				  p->entry, p->storage, p->crc32);
	}
	text = sb_detach(&b, &len);
	if (!text)
		return diag_nomem(d);
	r.f[3] = text;
	r.len[3] = (uint32_t)len;
	r.nf = 4;
	rc = len >= JR_MAX ? diag_errno(d, -E2BIG, "%u changed records are "
					"too many for one journal record",
					v->plan.n) : jr_append(v, &r, d);
	free(text);
	return rc;
}

/* The unsigned number at *@s (base @base, at most @max) and a space or
 * newline after it. */
static bool num_at(const char **s, const char *end, int base, uint64_t max,
		   char sep, uint64_t *out)
{
	uint64_t x = 0;
	const char *p = *s;

	for (; p < end && *p != sep; p++) {
		int dgt = *p >= '0' && *p <= '9' ? *p - '0' :
			  base == 16 && *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 :
			  -1;

		if (dgt < 0 || x > (max - (uint64_t)dgt) / (uint64_t)base)
			return false;
		x = x * (uint64_t)base + (uint64_t)dgt;
	}
	if (p == *s || p == end)
		return false;
	*s = p + 1;
	*out = x;
	return true;
}

int ovl_inplace_parse(const struct ovl *v, const struct jrec *r,
		      struct ckpt_plan *p, uint64_t id[3], struct diag *d)
{
	const char *s = r->nf == 4 ? r->f[3] : NULL;
	const char *end = s ? s + r->len[3] : NULL;
	uint32_t cap = 0;
	uint64_t e, st, crc;

	memset(p, 0, sizeof(*p));
	for (int i = 0; i < 3; i++)
		if (r->nf != 4 || !jr_num(r, i, &id[i]))
			goto bad;
	p->size = id[2];
	while (s < end) {
		if (!num_at(&s, end, 10, UINT32_MAX - 1, ' ', &e))
			goto bad;
		if (s + 1 < end && s[0] == '-' && s[1] == ' ') {
			st = CKPT_NO_STORAGE;
			s += 2;
		} else if (!num_at(&s, end, 10, UINT32_MAX - 1, ' ', &st)) {
			goto bad;
		}
		if (!num_at(&s, end, 16, UINT32_MAX, '\n', &crc) ||
		    (p->n && e <= p->rec[p->n - 1].entry))
			goto bad;
		if (p->n == cap) {
			struct ckpt_patch_rec *nr;

			cap = cap ? 2 * cap : 64;
			nr = realloc(p->rec, cap * sizeof(*nr));
			if (!nr) {
				ckpt_plan_release(p);
				return diag_nomem(d);
			}
			p->rec = nr;
		}
		p->rec[p->n].entry = (uint32_t)e;
		p->rec[p->n].storage = (uint32_t)st;
		p->rec[p->n].crc32 = (uint32_t)crc;
		p->n++;
	}
	return 0;
bad:
	ckpt_plan_release(p);
	return diag_corrupt(d, DIAG_NO_OFFSET, "%s: offset 0x%llx: bad "
			    "in-place record", v->jpath,
			    (unsigned long long)r->off);
}

int ovl_inplace_scan(struct ovl *v, struct diag *d)
{
	struct jr_reader rd;
	struct jrec r;
	struct stat st;
	int rc, pending = 0;

	if (fstat(v->jfd, &st))
		return diag_errno(d, -errno, "%s: %s", v->jpath,
				  strerror(errno));
	jr_reader_init(&rd, v->jfd, (uint64_t)st.st_size);
	while ((rc = jr_next(&rd, &r, v->jpath, d)) > 0)
		if (r.op == JR_INPLACE || r.op == JR_COMMIT)
			pending = r.op == JR_INPLACE;
	jr_reader_release(&rd);
	return rc < 0 ? rc : pending;
}

/* ---- the patch ---- */

/*
 * Has another program the checkpoint open for writing?  A read lease is
 * granted only when no descriptor of the file is open for writing (nor
 * mapped shared and writable); when the kernel cannot say (another
 * owner without CAP_LEASE, NFS, leases off), we cannot tell: go on.
 */
static int other_writer(struct ovl *v, struct diag *d)
{
	int fd = v->c->fd;

	if (!fcntl(fd, F_SETLEASE, F_RDLCK))
		(void)fcntl(fd, F_SETLEASE, F_UNLCK);
	else if (errno == EAGAIN)
		return diag_errno(d, -EBUSY, "%s is open for writing by "
				  "another program: not patched in place; "
				  "nothing written, edits kept in %s (close "
				  "it and try again)", v->path, v->dir);
	return 0;
}

/*
 * The checkpoint opened for writing: the inode the mount reads (through
 * /proc, whatever is at the path now), once nobody else writes it.
 */
static int open_for_patch(struct ovl *v, int *out, struct diag *d)
{
	int fd = v->c->fd, wfd, rc = other_writer(v, d);
	struct stat a, b;
	char proc[64];

	*out = -1;
	if (rc)
		return rc;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	wfd = open(proc, O_RDWR | O_CLOEXEC);
	if (wfd < 0)
		return diag_errno(d, -errno, "%s: cannot open it for writing: "
				  "%s; nothing written, edits kept in %s",
				  v->path, strerror(errno), v->dir);
	if (fstat(fd, &a) || fstat(wfd, &b) || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino || !S_ISREG(b.st_mode)) {
		close(wfd);
		return diag_errno(d, -ESTALE, "%s: reopened for writing, it is "
				  "another file; nothing written", v->path);
	}
	*out = wfd;
	return 0;
}

/* Is the checkpoint, at the path and as mounted, the file @id names? */
static int same_file(struct ovl *v, const uint64_t id[3], struct diag *d)
{
	struct stat a, b;

	if (fstat(v->c->fd, &a) || stat(v->path, &b))
		return diag_errno(d, -errno, "%s: %s", v->path,
				  strerror(errno));
	if ((uint64_t)a.st_dev == id[0] && (uint64_t)a.st_ino == id[1] &&
	    (uint64_t)a.st_size == id[2] && a.st_dev == b.st_dev &&
	    a.st_ino == b.st_ino)
		return 0;
	return diag_errno(d, -ESTALE, "an in-place write-back into it did not "
			  "finish, and it is another file now (its inode or "
			  "size changed): nothing written; the edits are kept "
			  "in %s", v->dir);
}

/*
 * After the patch: does the path still lead to @wfd, the file patched?
 * 0 yes, 1 no (renamed over, removed), or -errno with @d set when it
 * cannot tell.  The directory is opened without following a link, and
 * the name looked up in it without following one.
 */
static int still_at_path(const struct ovl *v, int wfd, struct diag *d)
{
	const char *slash = strrchr(v->path, '/');
	char *dir = slash ? strndup(v->path, slash == v->path ? 1 :
				    (size_t)(slash - v->path)) : NULL;
	struct stat a, b;
	int dfd = -1, rc = 0;

	if (!dir)
		rc = diag_nomem(d);
	else if (fstat(wfd, &a))
		rc = diag_errno(d, -errno, "%s: %s", v->path, strerror(errno));
	else if (!a.st_nlink)
		rc = 1;
	else if ((dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW |
			     O_CLOEXEC)) < 0 ||
		 fstatat(dfd, slash + 1, &b, AT_SYMLINK_NOFOLLOW))
		/* gone, or a component is no directory (a link put there) */
		rc = errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? 1 :
		     diag_errno(d, -errno, "%s: cannot check it is still the "
				"file patched in place: %s", v->path,
				strerror(errno));
	else if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		rc = 1;
	if (dfd >= 0)
		close(dfd);
	free(dir);
	return rc;
}

/*
 * The path leads to another file than the one patched: close the plan
 * with a JR_COMMIT of no file (nothing of it is in the checkpoint at the
 * path, and no checkpoint matches it), and refuse as for a file changed
 * before the plan: the edits stay staged.
 */
static int give_up(struct ovl *v, struct diag *d)
{
	struct stat none;
	int rc;

	memset(&none, 0, sizeof(none));
	rc = ovl_commit_append(v, &none, d);
	if (rc)
		return rc;	/* still pending: the next try checks again */
	v->inplace_pending = false;
	ckpt_plan_release(&v->plan);
	return ovl_changed_err(v, d);
}

int ovl_inplace_begin(struct ovl *v, struct diag *d)
{
	struct stat st;
	int rc = ovl_still_same(v, true, d);

	if (rc)
		return rc;
	ckpt_plan_release(&v->plan);
	rc = ckpt_plan_inplace(v->c, &v->plan, d);
	if (rc == -ENOTSUP) {
		char why[sizeof(d->msg)];

		snprintf(why, sizeof(why), "%s", d->msg);
		diag_init(d, d->path);
		return diag_unsupported(d, DIAG_NO_OFFSET, "-o inplace "
					"refused (%s); nothing written, edits "
					"kept in %s", why, v->dir);
	}
	if (rc || !v->plan.bytes)
		return rc;
	if (fstat(v->c->fd, &st))
		return diag_errno(d, -errno, "%s: %s", v->path,
				  strerror(errno));
	v->plan_id[0] = (uint64_t)st.st_dev;
	v->plan_id[1] = (uint64_t)st.st_ino;
	v->plan_id[2] = (uint64_t)st.st_size;
	/* nobody else writing: checked now, and again just before */
	rc = other_writer(v, d);
	if (!rc)
		rc = ovl_ensure_dir(v, d);
	if (!rc)
		rc = plan_append(v, v->plan_id, d);
	if (!rc)
		v->inplace_pending = true;
	return rc;
}

int ovl_inplace_finish(struct ovl *v, struct diag *d)
{
	struct stat st;
	int wfd = -1, rc = same_file(v, v->plan_id, d);

	if (!rc)
		rc = open_for_patch(v, &wfd, d);
	if (!rc)
		rc = ckpt_apply_inplace(v->c, wfd, &v->plan, d);
	if (!rc && (rc = still_at_path(v, wfd, d)) > 0)
		rc = give_up(v, d);
	if (!rc && fstat(wfd, &st))
		rc = diag_errno(d, -errno, "%s: %s", v->path, strerror(errno));
	if (!rc)
		rc = ovl_commit_append(v, &st, d);
	if (wfd >= 0)
		close(wfd);
	if (rc)
		return rc;
	v->inplace_pending = false;
	memset(&v->wstats, 0, sizeof(v->wstats));
	v->wstats.in_place = true;
	v->wstats.size = v->plan.size;
	v->wstats.written = v->plan.bytes;
	v->wstats.records = v->plan.n;
	return 0;
}

int ovl_inplace_commit(struct ovl *v, struct diag *d)
{
	int rc = v->inplace_pending ? 0 : ovl_inplace_begin(v, d);

	if (!rc && !v->inplace_pending) {
		/* nothing differs from the checkpoint */
		memset(&v->wstats, 0, sizeof(v->wstats));
		v->wstats.in_place = true;
		v->wstats.size = v->plan.size;
		return 0;
	}
	if (!rc)
		rc = ovl_inplace_finish(v, d);
	if (rc && v->inplace_pending) {
		char why[sizeof(d->msg)];

		snprintf(why, sizeof(why), "%s", d->msg);
		diag_init(d, d->path);
		rc = diag_errno(d, rc, "in-place write-back stopped (%s): the "
				"file may hold old and new bytes until ptfs "
				"umount or a writable mount finishes it", why);
	}
	return rc;
}

int ovl_inplace_recover(struct ovl *v, struct diag *d)
{
	int rc;

	if (v->readonly)
		return diag_errno(d, -EROFS, "an in-place write-back into it "
				  "did not finish, so it may hold old and new "
				  "bytes: mount it writable once to finish it "
				  "(from %s)", v->dir);
	rc = same_file(v, v->plan_id, d);
	if (!rc)
		rc = ovl_inplace_finish(v, d);
	if (rc)
		return rc;
	v->committed = true;
	(void)ovl_forget(v, d);
	diag_init(d, d->path);
	v->inplace_finished = true;
	return 0;
}
