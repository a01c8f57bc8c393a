/*
 * ovl_many.c - the files the write-back of a checkpoint of many files
 * (a Hugging Face sharded folder, a DCP directory, a rank set) makes,
 * retires and renames.  What that write-back cannot write is refused
 * when the edit is made, by the format's rules (ckpt_rule_*(),
 * core/ckpt/ckpt_format.h).
 *
 * The write-back (core/ckpt/ckpt_fsave.c) journals each new data file
 * just after making it (JR_NEWFILE) and each it replaces just before its
 * commit (JR_RETIRE).  A mount after a killed write-back removes the new
 * files the commit file does not name (the commit did not happen) and,
 * once the commit happened, the old files: each only if the name still
 * leads to the file journaled (dev, ino), never a file found by pattern.
 *
 * A set whose files keep their names (a rank set) commits with JR_SWAP,
 * the plan of renames, before its first rename.  A mount that finds one
 * finishes it: each temporary still there under its journaled (dev, ino)
 * is renamed over its file, which must be the old one (odev, oino) or
 * already the new one; anything else is another program's doing, and
 * nothing is renamed.  So once ptfs has seen the set, it is all new.
 */
#define _GNU_SOURCE 1	/* asprintf */
#include "ovl_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ovl_many_record(struct ovl *v, int stage, const char *name,
		  const struct stat *st, struct diag *d)
{
	struct jrec r = { .op = stage == CKPT_SAVE_NEW ? JR_NEWFILE :
			  JR_RETIRE };
	char num[2][24];

	if (stage == CKPT_SAVE_SWAP) {
		r.op = JR_SWAP;
		jr_field(&r, name);
		return jr_append(v, &r, d);
	}
	snprintf(num[0], 24, "%llu", (unsigned long long)st->st_dev);
	snprintf(num[1], 24, "%llu", (unsigned long long)st->st_ino);
	jr_field(&r, name);
	jr_field(&r, num[0]);
	jr_field(&r, num[1]);
	return jr_append(v, &r, d);
}

/* Has the name a ".." part?  (A folder's names stay in it.) */
static bool dotdot(const char *s, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
		if (s[i] == '.' && s[i + 1] == '.' && (!i || s[i - 1] == '/') &&
		    (i + 2 == n || s[i + 2] == '/'))
			return true;
	return false;
}

int ovl_many_note(struct ovl *v, const struct jrec *r, struct diag *d)
{
	struct ovl_mfile *f;
	uint64_t dev, ino;

	if (r->nf != 3 || !r->len[0] || r->len[0] >= 4096 ||
	    memchr(r->f[0], 0, r->len[0]) || r->f[0][0] == '/' ||
	    dotdot(r->f[0], r->len[0]) || !jr_num(r, 1, &dev) || !jr_num(r, 2, &ino))
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s: offset 0x%llx: bad "
				    "data file record", v->jpath,
				    (unsigned long long)r->off);
	f = realloc(v->mfiles, (v->nmfiles + 1) * sizeof(*f));
	if (!f)
		return diag_nomem(d);
	v->mfiles = f;
	f += v->nmfiles;
	f->name = strndup(r->f[0], r->len[0]);
	if (!f->name)
		return diag_nomem(d);
	f->dev = dev;
	f->ino = ino;
	f->retire = r->op == JR_RETIRE;
	v->nmfiles++;
	return 0;
}

/* One "TDEV TINO ODEV OINO TLEN FLEN TEMPFINAL\n" of a JR_SWAP from *@p
 * (before @end) into @e (names malloc'd: NULL, no memory); false when it
 * is not one: a name holds a NUL or a ".." part, or starts with '/'. */
static bool swap_line(const char **p, const char *end, struct ovl_swap *e)
{
	uint64_t x[6];
	const char *q = *p;
	char *next;

	for (int i = 0; i < 6; i++) {
		if (q >= end || *q < '0' || *q > '9')
			return false;
		errno = 0;
		x[i] = strtoull(q, &next, 10);
		if (errno || next >= end || *next != ' ')
			return false;
		q = next + 1;
	}
	if (!x[4] || !x[5] || x[4] >= 4096 || x[5] >= 4096 ||
	    (uint64_t)(end - q) < x[4] + x[5] + 1 || q[x[4] + x[5]] != '\n' ||
	    memchr(q, 0, x[4] + x[5]) || *q == '/' || q[x[4]] == '/' ||
	    dotdot(q, x[4]) || dotdot(q + x[4], x[5]))
		return false;
	*e = (struct ovl_swap){ .tdev = x[0], .tino = x[1], .odev = x[2],
				.oino = x[3] };
	e->temp = strndup(q, x[4]);
	e->final = strndup(q + x[4], x[5]);
	*p = q + x[4] + x[5] + 1;
	return true;
}

static void swaps_free(struct ovl *v)
{
	for (uint32_t i = 0; i < v->nswaps; i++) {
		free(v->swaps[i].temp);
		free(v->swaps[i].final);
	}
	free(v->swaps);
	v->swaps = NULL;
	v->nswaps = 0;
}

int ovl_swap_note(struct ovl *v, const struct jrec *r, struct diag *d)
{
	const char *p = r->nf == 1 ? r->f[0] : NULL;
	const char *end = p ? p + r->len[0] : NULL, *q;
	uint32_t n = 0;

	swaps_free(v);	/* the last one counts */
	for (q = p; q && (q = memchr(q, '\n', end - q)); q++)
		n++;	/* at most one entry a line */
	v->swaps = calloc(n + 1u, sizeof(*v->swaps));
	if (!v->swaps)
		return diag_nomem(d);
	while (p && p < end && v->nswaps < n &&
	       swap_line(&p, end, &v->swaps[v->nswaps])) {
		v->nswaps++;
		if (!v->swaps[v->nswaps - 1].temp ||
		    !v->swaps[v->nswaps - 1].final)
			return diag_nomem(d);
	}
	if (!p || p != end || !v->nswaps)
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s: offset 0x%llx: bad "
				    "rename plan record", v->jpath,
				    (unsigned long long)r->off);
	return 0;
}

/* Is @name a file of @c (ckpt_many_file())? */
static bool a_file_of(const struct ckpt *c, const char *name)
{
	const char *n;
	int fd;

	for (uint32_t i = 0; ckpt_many_file(c, i, &n, &fd); i++)
		if (!strcmp(n, name))
			return true;
	return false;
}

static bool is(const struct stat *st, uint64_t dev, uint64_t ino)
{
	return st->st_dev == dev && st->st_ino == ino;
}

/* Where a JR_SWAP's file stands now. */
enum { SW_DONE, SW_TODO, SW_GONE, SW_OTHER };

/* Entry @e's state; *@dfd its folder, *@tl and *@fl the leaves. */
static int swap_state(const struct ovl *v, const struct ovl_swap *e,
		      int *dfd, const char **tl, const char **fl)
{
	struct stat sf, st;
	bool old;

	*dfd = a_file_of(v->c, e->final) ?
	       ckpt_member_dir(v->c, e->final, fl) : -1;
	if (*dfd < 0 || ckpt_member_dir(v->c, e->temp, tl) != *dfd)
		return -1;
	if (fstatat(*dfd, *fl, &sf, 0))
		return SW_OTHER;
	if (is(&sf, e->tdev, e->tino))
		return SW_DONE;	/* renamed before the crash */
	old = is(&sf, e->odev, e->oino);
	if (old && !fstatat(*dfd, *tl, &st, AT_SYMLINK_NOFOLLOW) &&
	    S_ISREG(st.st_mode) && is(&st, e->tdev, e->tino))
		return SW_TODO;
	return old ? SW_GONE : SW_OTHER;
}

int ovl_swap_finish(struct ovl *v, struct diag *d)
{
	uint32_t n[4] = { 0 }, all = v->nswaps;
	int *dfd = calloc(all + 1u, sizeof(*dfd));
	int *state = calloc(all + 1u, sizeof(*state));
	const char **tl = calloc(all + 1u, sizeof(*tl));
	const char **fl = calloc(all + 1u, sizeof(*fl));
	int rc = dfd && state && tl && fl ? 0 : diag_nomem(d);

	/* every file as the plan says, or nothing renamed */
	for (uint32_t i = 0; !rc && i < all; i++) {
		state[i] = swap_state(v, &v->swaps[i], &dfd[i], &tl[i], &fl[i]);
		if (state[i] < 0)
			rc = diag_corrupt(d, DIAG_NO_OFFSET, "%s: its rename "
					  "plan names %s, no file of %s",
					  v->jpath, v->swaps[i].final, v->path);
		else
			n[state[i]]++;
	}
	for (uint32_t i = 0; !rc && i < all; i++)
		if (state[i] == SW_OTHER || (state[i] == SW_GONE &&
					     n[SW_GONE] < all))
			rc = diag_errno(d, -ESTALE, "a write-back into it "
					"committed, but %s is neither the file "
					"it replaced nor its new version %s "
					"(another program changed them since): "
					"nothing renamed; the journal %s stays",
					v->swaps[i].final, v->swaps[i].temp,
					v->jpath);
	/*
	 * All old, no temporary left: the record outlived a write-back that
	 * failed at its sync and undid itself; all new: nothing to do but
	 * forget, which a read-only mount may not.  Either way the set is
	 * whole: on as without the record.
	 */
	if (!rc && (n[SW_GONE] == all || (v->readonly && n[SW_DONE] == all)))
		rc = 1;
	if (!rc && v->readonly)
		rc = diag_errno(d, -EROFS, "a write-back into it committed and "
				"did not finish its renames, so some of its "
				"files may be new and others old: mount it "
				"writable once to finish them (from %s)",
				v->jpath);
	for (uint32_t i = 0; !rc && i < all; i++)
		if (state[i] == SW_TODO &&
		    renameat(dfd[i], tl[i], dfd[i], fl[i]))
			rc = diag_errno(d, -errno, "%s: cannot rename %s over "
					"it: %s", v->swaps[i].final,
					v->swaps[i].temp, strerror(errno));
	for (uint32_t i = 0; !rc && i < all; i++)
		if ((!i || dfd[i] != dfd[i - 1]) && fsync(dfd[i]))
			rc = diag_errno(d, -errno, "%s: fsync of its folder: "
					"%s", v->swaps[i].final,
					strerror(errno));
	free(dfd);
	free(state);
	free(tl);
	free(fl);
	if (rc == 1)
		swaps_free(v);
	if (rc)
		return rc;
	/* the edits are in the files: what the journal names goes */
	ovl_many_tidy(v, false);
	v->committed = true;
	rc = ovl_forget(v, d);
	if (!v->note && asprintf(&v->note, "%s: finished a write-back into "
				 "it that had been interrupted (%u of its %u "
				 "new file%s renamed into place now); the "
				 "edits are in it", v->path, n[SW_TODO], all,
				 all == 1 ? "" : "s") < 0)
		v->note = NULL;
	v->swap_finished = !rc;
	return rc;
}

/* Is (@dev, @ino) the commit file or a data file of @c as opened? */
static bool in_use(const struct ckpt *c, uint64_t dev, uint64_t ino)
{
	struct stat st;
	const char *name;
	int fd;

	if (!fstat(c->fd, &st) && st.st_dev == dev && st.st_ino == ino)
		return true;
	for (uint32_t i = 0; ckpt_many_file(c, i, &name, &fd); i++)
		if (fd >= 0 && !fstat(fd, &st) && st.st_dev == dev &&
		    st.st_ino == ino)
			return true;
	return false;
}

void ovl_many_tidy(struct ovl *v, bool committed)
{
	for (uint32_t i = 0; i < v->nmfiles; i++) {
		struct ovl_mfile *f = &v->mfiles[i];
		const char *leaf;
		struct stat st;
		/* in the folder the source opened beneath the root: never
		   through a symlinked directory */
		int dfd = v->readonly ? -1 : ckpt_member_dir(v->c, f->name,
							     &leaf);

		/* the checkpoint mounted is the one the records are about: a
		   journal of another one names nothing here (dev, ino) */
		if (dfd >= 0 && (!f->retire || committed) &&
		    !fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) &&
		    (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) &&
		    !fstatat(dfd, leaf, &st, 0) &&
		    st.st_dev == f->dev && st.st_ino == f->ino &&
		    !in_use(v->c, f->dev, f->ino))
			(void)unlinkat(dfd, leaf, 0);
	}
	ovl_many_forget(v);
}

void ovl_many_forget(struct ovl *v)
{
	swaps_free(v);
	for (uint32_t i = 0; i < v->nmfiles; i++)
		free(v->mfiles[i].name);
	free(v->mfiles);
	v->mfiles = NULL;
	v->nmfiles = 0;
}
