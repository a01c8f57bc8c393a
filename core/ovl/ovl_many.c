/*
 * ovl_many.c - the files the write-back of a checkpoint of many files
 * (a Hugging Face sharded folder, a DCP directory) makes and retires.
 * What that write-back cannot write is refused when the edit is made, by
 * the format's rules (ckpt_rule_*(), core/ckpt/ckpt_format.h).
 *
 * The write-back (core/ckpt/ckpt_fsave.c) journals each new data file
 * just after making it (JR_NEWFILE) and each it replaces just before its
 * commit (JR_RETIRE).  A mount after a killed write-back removes the new
 * files the commit file does not name (the commit did not happen) and,
 * once the commit happened, the old files: each only if the name still
 * leads to the file journaled (dev, ino), never a file found by pattern.
 */
#include "ovl_int.h"

#include <errno.h>
#include <fcntl.h>
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
	for (uint32_t i = 0; i < v->nmfiles; i++)
		free(v->mfiles[i].name);
	free(v->mfiles);
	v->mfiles = NULL;
	v->nmfiles = 0;
}
