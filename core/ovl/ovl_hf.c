/*
 * ovl_hf.c - a mounted sharded folder's edits and files.  Its write-back
 * (core/ckpt/ckpt_hfsave.c) writes anew the shards whose storages or
 * top-level keys changed, and the index.  What it cannot write is
 * refused when the edit is made, with one line (EPERM), instead of
 * failing the write-back or being lost in it: an edit below the top
 * level (a folder's keys are dotted names, no directories), a directory,
 * an attribute of a tensor read from a shard, a value, a view of a
 * tensor, and any edit of a legacy (torch < 1.6) shard, which the folder
 * write-back does not rewrite.  A folder of safetensors shards takes
 * what a safetensors file takes (ovl_st.c).
 *
 * The write-back journals each new shard file just after making it
 * (JR_NEWFILE) and each shard it replaces just before its commit
 * (JR_RETIRE).  A mount after a killed write-back removes the new files
 * the index does not name (the commit did not happen) and, once the
 * commit happened, the old shards: each only if the name still leads to
 * the file journaled (dev, ino), never a file found by pattern.
 */
#include "ovl_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ovl_hf_shape(struct ovl *v, const char *what, struct diag *d)
{
	if (!v->c->hf)
		return 0;
	return diag_errno(d, -EPERM, "%s: a sharded folder takes tensor "
			  "bytes, and keys of its top level renamed, removed "
			  "or added; attributes of its tensors, values and "
			  "views are written back as they are", what);
}

/* Is shard @sh one the folder write-back rewrites (zip, safetensors)? */
static bool rewritten(const struct ckpt_shard *sh)
{
	return !sh->c || sh->c->format == CKPT_ZIP ||
	       sh->c->format == CKPT_SAFETENSORS;
}

/* A shard not written back in a folder (a legacy one), or NULL. */
static const struct ckpt_shard *legacy_shard(const struct ckpt_hf *hf)
{
	for (uint32_t i = 0; i < hf->nshards; i++)
		if (!rewritten(&hf->shards[i]))
			return &hf->shards[i];
	return NULL;
}

int ovl_hf_dir(struct ovl *v, const struct ckpt_node *dir, struct diag *d)
{
	const struct ckpt_hf *hf = v->c->hf;
	const struct ckpt_shard *sh;

	if (!hf)
		return 0;
	if (dir != v->c->root)
		return ovl_hf_shape(v, dir->name, d);
	sh = legacy_shard(hf);
	if (sh)
		return diag_errno(d, -EPERM, "%s: a %s shard is not written "
				  "back in a folder, so its keys stay as they "
				  "are; convert it with ptrepack first",
				  sh->path, ckpt_format_name(sh->c->format));
	return 0;
}

bool ovl_hf_st(const struct ovl *v)
{
	const struct ckpt_hf *hf = v->c->hf;
	uint32_t n = 0;

	for (uint32_t i = 0; hf && i < hf->nshards; i++)
		n += hf->shards[i].c &&
		     hf->shards[i].c->format == CKPT_SAFETENSORS;
	return hf && n && n == hf->nshards - hf->nabsent;
}

int ovl_hf_data(struct ovl *v, const struct ckpt_storage *s,
		struct diag *d)
{
	const struct ckpt_hf *hf = v->c->hf;

	if (!hf)
		return 0;
	for (uint32_t i = 0; i < hf->nshards; i++) {
		const struct ckpt_shard *sh = &hf->shards[i];

		if (s->index < sh->storage0 ||
		    s->index - sh->storage0 >= sh->nstorages || rewritten(sh))
			continue;
		return diag_errno(d, -EPERM, "%s: a %s shard is not written "
				  "back in a folder; convert it with ptrepack "
				  "first", sh->path,
				  ckpt_format_name(sh->c->format));
	}
	return 0;
}

int ovl_hf_record(struct ovl *v, int stage, const char *name,
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

int ovl_hf_note(struct ovl *v, const struct jrec *r, struct diag *d)
{
	struct ovl_hffile *f;
	uint64_t dev, ino;

	if (r->nf != 3 || !r->len[0] || r->len[0] >= 4096 ||
	    memchr(r->f[0], 0, r->len[0]) || r->f[0][0] == '/' ||
	    dotdot(r->f[0], r->len[0]) || !jr_num(r, 1, &dev) || !jr_num(r, 2, &ino))
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s: offset 0x%llx: bad "
				    "shard file record", v->jpath,
				    (unsigned long long)r->off);
	f = realloc(v->hffiles, (v->nhffiles + 1) * sizeof(*f));
	if (!f)
		return diag_nomem(d);
	v->hffiles = f;
	f += v->nhffiles;
	f->name = strndup(r->f[0], r->len[0]);
	if (!f->name)
		return diag_nomem(d);
	f->dev = dev;
	f->ino = ino;
	f->retire = r->op == JR_RETIRE;
	v->nhffiles++;
	return 0;
}

/* Is (@dev, @ino) the index or a shard of the folder as now opened? */
static bool in_use(const struct ckpt *c, uint64_t dev, uint64_t ino)
{
	const struct ckpt_hf *hf = c->hf;
	struct stat st;

	if (!fstat(c->fd, &st) && st.st_dev == dev && st.st_ino == ino)
		return true;
	for (uint32_t i = 0; hf && i < hf->nshards; i++)
		if (hf->shards[i].c && !fstat(hf->shards[i].c->fd, &st) &&
		    st.st_dev == dev && st.st_ino == ino)
			return true;
	return false;
}

void ovl_hf_tidy(struct ovl *v, bool committed)
{
	const struct ckpt_hf *hf = v->c->hf;

	for (uint32_t i = 0; i < v->nhffiles; i++) {
		struct ovl_hffile *f = &v->hffiles[i];
		struct stat st;

		/* the folder mounted is the one the records are about: a
		   journal of another folder names nothing here (dev, ino) */
		if (hf && !v->readonly && (!f->retire || committed) &&
		    !fstatat(hf->dfd, f->name, &st, AT_SYMLINK_NOFOLLOW) &&
		    (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) &&
		    !fstatat(hf->dfd, f->name, &st, 0) &&
		    st.st_dev == f->dev && st.st_ino == f->ino &&
		    !in_use(v->c, f->dev, f->ino))
			(void)unlinkat(hf->dfd, f->name, 0);
	}
	ovl_hf_forget(v);
}

void ovl_hf_forget(struct ovl *v)
{
	for (uint32_t i = 0; i < v->nhffiles; i++)
		free(v->hffiles[i].name);
	free(v->hffiles);
	v->hffiles = NULL;
	v->nhffiles = 0;
}
