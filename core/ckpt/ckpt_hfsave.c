/*
 * ckpt_hfsave.c - write a sharded folder's edits back into it (docs/
 * design.md, "Writing a sharded folder back").  No rename replaces
 * several files at once, and a loader reads the index first and then the
 * shards it names, so the index is the one commit point:
 *
 *   step  what                                   a crash here leaves
 *   1     each shard touched (ckpt_hfplan.c)     the old folder, and new
 *         written whole under a new name, made   files the journal names
 *         O_EXCL, journaled (CKPT_SAVE_NEW),     (the next mount removes
 *         fsync'd                                them)
 *   2     the index copied into ".INDEX.ptfs-    the old folder; the
 *         new.TAG" with only those shards'       temporary is journaled
 *         names changed, fsync'd                 (CKPT_SAVE_START)
 *   3     the old shards journaled (RETIRE),     the old folder
 *         then JR_COMMIT (CKPT_SAVE_RENAME)
 *   4     the index renamed over the old one,    the new folder, and the
 *         the folder fsync'd: COMMITTED          old shards, which the
 *                                                next mount removes
 *   5     the old shards unlinked (each only     the new folder
 *         if it is still the file opened), the
 *         folder fsync'd
 *
 * A new name is the first free of BASE.EXT, BASE.g1.EXT, BASE.g2.EXT ...
 * other than the shard's own, BASE being the name without its ".gN":
 * model-00002-of-00004.safetensors becomes model-00002-of-00004.g1
 * .safetensors, and the next write-back brings it back.  Readers never
 * parse shard names (transformers loads sorted(set(weight_map values))),
 * and the order of that set is unchanged: only the ".gN" differs.
 *
 * A shard whose storages only were edited is written by its own writer
 * from its own model (zip: the clone-and-patch path; safetensors: the
 * same header), and the index keeps every other byte.  A shard whose keys
 * changed (renamed, removed, added) is written from the folder's tree,
 * the root's children planned for it only (ckpt_write_opts.part), a
 * .bin shard as a new torch zip, a safetensors one with its own
 * __metadata__; the index gets a new weight_map in its old style and
 * total_size counted again (hfplan_index()).  A shard left without keys
 * is only removed, and drops out of the index.
 */
#define _GNU_SOURCE 1	/* asprintf, realpath */
#include "ckpt_int.h"
#include "ckpt_hfindex.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/io.h"
#include "util/sbuf.h"

#define GEN_MAX	1000	/* names tried for one new shard */

/* One shard written anew. */
struct fresh {
	uint32_t shard;		/* into c->hf->shards */
	char *name;		/* its new name in the folder; NULL: no key is
				   left in it, it goes */
	struct stat st;		/* of the new file */
};

struct hfw {
	struct ckpt *c;
	const struct ckpt_write_opts *o;
	struct diag *d;
	struct fresh *f;
	uint32_t nf;
	char *tmp;		/* the index's temporary, in the folder */
	char *tmp_abs;		/* ... as the journal names it */
	bool committed;
	uint64_t bytes;		/* written, all files */
};

char *ckpt_hf_gen_name(const char *name, unsigned g)
{
	const char *part = strrchr(name, '/'), *ext, *stem_end;
	size_t n = strlen(name);
	char *out;

	part = part ? part + 1 : name;
	ext = strrchr(part, '.');
	if (!ext || ext == part)
		ext = name + n;
	stem_end = ext;
	/* ".gN", N a number without leading zeros */
	for (const char *p = ext - 1; p > part; p--) {
		if (*p >= '0' && *p <= '9')
			continue;
		if (*p == 'g' && p[-1] == '.' && p + 1 < ext && p[1] != '0' &&
		    p - 1 > part)
			stem_end = p - 1;
		break;
	}
	out = malloc(n + 16);
	if (!out)
		return NULL;
	if (g)
		sprintf(out, "%.*s.g%u%s", (int)(stem_end - name), name, g,
			ext);
	else
		sprintf(out, "%.*s%s", (int)(stem_end - name), name, ext);
	return out;
}

/* Make shard @i's new file: the first free candidate, O_EXCL. */
static int new_file(struct hfw *w, uint32_t i, struct fresh *f)
{
	struct ckpt_hf *hf = w->c->hf;
	const char *name = hf->shards[i].name;
	int fd = -1;

	for (unsigned g = 0; g < GEN_MAX && fd < 0; g++) {
		char *cand = ckpt_hf_gen_name(name, g);

		if (!cand)
			return diag_nomem(w->d);
		if (!strcmp(cand, name) || !strcmp(cand, hf->index)) {
			free(cand);
			continue;
		}
		fd = openat(hf->dfd, cand, O_RDWR | O_CREAT | O_EXCL |
			    O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST) {
			int rc = diag_errno(w->d, -errno, "%s: cannot make "
					    "%s beside it: %s",
					    hf->shards[i].path, cand,
					    strerror(errno));

			free(cand);
			return rc;
		}
		if (fd >= 0)
			f->name = cand;
		else
			free(cand);
	}
	if (fd < 0)
		return diag_errno(w->d, -EEXIST, "%s: no free name for its new "
				  "version (%u tried)", hf->shards[i].path,
				  GEN_MAX);
	f->shard = i;
	w->nf++;	/* removed on failure from here on */
	if (fstat(fd, &f->st)) {
		int rc = diag_errno(w->d, -errno, "%s: %s", f->name,
				    strerror(errno));

		close(fd);
		return rc;
	}
	return fd;
}

/* The file's owner (as root) and mode become @like's; fsync'd; stat. */
static int finish_file(struct hfw *w, int fd, const char *name,
		       const struct stat *like, struct stat *st)
{
	if ((!geteuid() && fchown(fd, like->st_uid, like->st_gid)) ||
	    fchmod(fd, like->st_mode & 07777) || fsync(fd) || fstat(fd, st))
		return diag_errno(w->d, -errno, "%s: %s", name,
				  strerror(errno));
	w->bytes += st->st_size;
	return 0;
}

/*
 * Shard @i written anew under a new name.  @part NULL: from its own
 * model by its own writer (only storages changed: the clone-and-patch
 * path); else from the folder's tree, the root's children at the slots
 * @part marks, by the writer of the shard's format with its own
 * __metadata__.
 */
static int write_shard(struct hfw *w, uint32_t i, const uint8_t *part)
{
	struct ckpt_shard *sh = &w->c->hf->shards[i];
	struct ckpt_write_opts so = *w->o;
	struct ckpt_write_stats one = { 0 }, *all = w->o->stats;
	struct fresh *f = &w->f[w->nf];
	struct stat like;
	int fd, rc;

	if (!part && sh->c->format != CKPT_ZIP &&
	    sh->c->format != CKPT_SAFETENSORS)
		return diag_unsupported(w->d, DIAG_NO_OFFSET, "%s: a %s shard "
					"is not written back in a folder",
					sh->path, ckpt_format_name(sh->c->format));
	if (fstat(sh->c->fd, &like))
		return diag_errno(w->d, -errno, "%s: %s", sh->path,
				  strerror(errno));
	fd = new_file(w, i, f);
	if (fd < 0)
		return fd;
	rc = w->o->check ? w->o->check(w->o->check_arg, CKPT_SAVE_NEW,
				       f->name, &f->st, w->d) : 0;
	so.check = NULL;
	so.stats = &one;
	if (part) {
		so.part = part;
		so.to = sh->c->format == CKPT_SAFETENSORS ? CKPT_OUT_ST :
			CKPT_OUT_ZIP;
		so.meta = sh->c;
	}
	if (!rc)
		rc = ckpt_write_into(part ? w->c : sh->c, fd, &so, !part,
				     w->d);
	if (!rc)
		rc = finish_file(w, fd, f->name, &like, &f->st);
	if (!rc && all) {
		all->cloned |= one.cloned;
		all->repickled |= one.repickled || part;
		all->written += one.written;
		all->copied += one.copied;
		all->copy_calls += one.copy_calls;
		all->records += one.records;
		all->storages += one.storages;
	}
	close(fd);
	return rc;
}

/* Write what @p says: the shards touched, anew or dropped. */
static int write_shards(struct hfw *w, const struct hfplan *p)
{
	const struct ckpt_hf *hf = w->c->hf;
	const struct ckpt_node *root = w->c->root;
	uint8_t *part = calloc(root->nkids + 1u, 1);
	int rc = part ? 0 : diag_nomem(w->d);

	for (uint32_t i = 0; i < hf->nshards && !rc; i++) {
		if (!p->touched[i])
			continue;
		if (!p->live[i]) {	/* emptied: it only goes */
			w->f[w->nf++].shard = i;
			continue;
		}
		if (p->touched[i] == HF_DATA) {
			rc = write_shard(w, i, NULL);
			continue;
		}
		for (uint32_t k = 0; k < root->nkids; k++)
			part[k] = root->kids[k] && p->slot[k] == i;
		rc = write_shard(w, i, part);
	}
	free(part);
	return rc;
}

static int by_voff(const void *a, const void *b)
{
	const struct hfix_entry *x = a, *y = b;

	return (x->voff > y->voff) - (x->voff < y->voff);
}

/* The new name of the shard named @name (@len bytes), or NULL. */
static const char *renamed(const struct hfw *w, const char *name, size_t len)
{
	for (uint32_t k = 0; k < w->nf; k++) {
		const char *old = w->c->hf->shards[w->f[k].shard].name;

		if (w->f[k].name && strlen(old) == len &&
		    !memcmp(old, name, len))
			return w->f[k].name;
	}
	return NULL;
}

/* The index as it is, with the new shards' names. */
static int names_only(struct hfw *w, const char *text, size_t len,
		      struct sbuf *b)
{
	struct hfix ix = { 0 };
	struct arena a = { 0 };
	uint64_t at = 0;
	int rc = hfix_parse(text, len, &a, "", &ix, w->d);

	if (!rc)
		qsort(ix.e, ix.n, sizeof(*ix.e), by_voff);
	for (uint32_t k = 0; k < ix.n && !rc; k++) {
		const struct hfix_entry *e = &ix.e[k];
		const char *sh = ix.shards[e->shard];
		const char *to = renamed(w, sh, strlen(sh));

		if (!to)
			continue;
		sb_add(b, text + at, e->voff - at);
		sb_json_str(b, to, strlen(to));
		at = e->voff + e->vlen;
	}
	if (!rc)
		sb_add(b, text + at, len - at);
	hfix_release(&ix);
	arena_release(&a);
	return rc;
}

/* The new index into @b: only shard names changed, or (@p: keys changed)
 * a weight_map made anew (ckpt_hfplan.c). */
static int index_text(struct hfw *w, const struct hfplan *p, struct sbuf *b)
{
	const struct ckpt_hf *hf = w->c->hf;
	const char **names = NULL;
	char *text;
	size_t len;
	int rc = ckpt_hf_index_bytes(w->c, "", &text, &len, w->d);

	if (!rc && !p) {
		rc = names_only(w, text, len, b);
	} else if (!rc) {
		names = calloc(hf->nshards + 1u, sizeof(*names));
		for (uint32_t i = 0; names && i < hf->nshards; i++)
			names[i] = hf->shards[i].name;
		for (uint32_t k = 0; names && k < w->nf; k++)
			if (w->f[k].name)
				names[w->f[k].shard] = w->f[k].name;
		rc = names ? hfplan_index(w->c, p, names, text, len, b, w->d) :
		     diag_nomem(w->d);
	}
	if (!rc && b->oom)
		rc = diag_nomem(w->d);
	free(names);
	free(text);
	return rc;
}

/* The absolute name of @name in the folder, as the journal keeps one. */
static char *abs_name(const struct ckpt_hf *hf, const char *name)
{
	char link[64], *dir, *out = NULL;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", hf->dfd);
	dir = realpath(link, NULL);
	if (dir && asprintf(&out, "%s/%s", dir, name) < 0)
		out = NULL;
	free(dir);
	return out;
}

/* The index's temporary named and journaled, before anything is read. */
static int start(struct hfw *w)
{
	struct ckpt_hf *hf = w->c->hf;

	if (asprintf(&w->tmp, ".%s" CKPT_TMP_SUFFIX "%s", hf->index,
		     w->o->tmp_tag ? w->o->tmp_tag : "0") < 0) {
		w->tmp = NULL;
		return diag_nomem(w->d);
	}
	w->tmp_abs = abs_name(hf, w->tmp);
	if (!w->tmp_abs)
		return diag_errno(w->d, -errno, "%s: %s", hf->dir,
				  strerror(errno));
	return w->o->check ? w->o->check(w->o->check_arg, CKPT_SAVE_START,
					 w->tmp_abs, NULL, w->d) : 0;
}

/* Step 2: the new index, beside the old one. */
static int write_index(struct hfw *w, const struct hfplan *p,
		       struct stat *st)
{
	struct ckpt_hf *hf = w->c->hf;
	struct sbuf b = { 0 };
	struct stat like;
	int fd, rc;

	/* ours if it is there: the journal named it for a write-back that
	   did not finish */
	(void)unlinkat(hf->dfd, w->tmp, 0);
	fd = openat(hf->dfd, w->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
	if (fd < 0)
		return diag_errno(w->d, -errno, "cannot create %s in %s: %s",
				  w->tmp, hf->dir, strerror(errno));
	rc = fstat(w->c->fd, &like) ? diag_errno(w->d, -errno, "%s",
						 strerror(errno)) : 0;
	if (!rc)
		rc = index_text(w, p, &b);
	if (!rc && (rc = io_pwrite_full(fd, b.p, b.n, 0)))
		rc = diag_errno(w->d, rc, "%s: %s", w->tmp, strerror(-rc));
	if (!rc)
		rc = finish_file(w, fd, w->tmp, &like, st);
	free(b.p);
	close(fd);
	return rc;
}

/* Is @name in the folder still the file @fd is open on? */
static bool same_file(int dfd, const char *name, int fd)
{
	struct stat a, b;

	return !fstatat(dfd, name, &a, 0) && !fstat(fd, &b) &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Undo steps 1-2 (before the commit): the new files go. */
static void remove_new(struct hfw *w)
{
	struct ckpt_hf *hf = w->c->hf;

	for (uint32_t k = 0; k < w->nf; k++) {
		struct stat st;

		if (w->f[k].name &&
		    !fstatat(hf->dfd, w->f[k].name, &st, AT_SYMLINK_NOFOLLOW) &&
		    st.st_dev == w->f[k].st.st_dev &&
		    st.st_ino == w->f[k].st.st_ino)
			(void)unlinkat(hf->dfd, w->f[k].name, 0);
	}
	if (w->tmp)
		(void)unlinkat(hf->dfd, w->tmp, 0);
}

/* Steps 3-5. */
static int commit(struct hfw *w, const struct stat *ist)
{
	struct ckpt_hf *hf = w->c->hf;
	int rc = 0;

	for (uint32_t k = 0; k < w->nf && !rc; k++) {
		const struct ckpt_shard *sh = &hf->shards[w->f[k].shard];
		struct stat st;

		if (fstat(sh->c->fd, &st))
			return diag_errno(w->d, -errno, "%s: %s", sh->path,
					  strerror(errno));
		if (w->o->check)
			rc = w->o->check(w->o->check_arg, CKPT_SAVE_RETIRE,
					 sh->name, &st, w->d);
	}
	if (!rc && w->o->check)
		rc = w->o->check(w->o->check_arg, CKPT_SAVE_RENAME, w->tmp_abs,
				 ist, w->d);
	if (rc)
		return rc;
	if (renameat(hf->dfd, w->tmp, hf->dfd, hf->index))
		return diag_errno(w->d, -errno, "%s/%s: cannot replace it: %s",
				  hf->dir, hf->index, strerror(errno));
	w->committed = true;
	if (fsync(hf->dfd))
		return diag_errno(w->d, -errno, "%s: fsync: %s", hf->dir,
				  strerror(errno));
	for (uint32_t k = 0; k < w->nf; k++) {
		const struct ckpt_shard *sh = &hf->shards[w->f[k].shard];

		/* another program's file by now is left alone */
		if (same_file(hf->dfd, sh->name, sh->c->fd))
			(void)unlinkat(hf->dfd, sh->name, 0);
	}
	if (fsync(hf->dfd))
		return diag_errno(w->d, -errno, "%s: fsync: %s", hf->dir,
				  strerror(errno));
	return 0;
}

int ckpt_hf_save(struct ckpt *c, const struct ckpt_write_opts *o,
		 struct diag *d)
{
	struct ckpt_hf *hf = c->hf;
	struct hfw w = { .c = c, .o = o, .d = d };
	struct hfplan p = { 0 };
	struct stat ist;
	bool keys;
	int rc;

	if (!hf)
		return diag_errno(d, -EINVAL, "not a sharded folder");
	if ((rc = ckpt_hf_whole(c, d)))
		return rc;
	keys = ckpt_changed(c);
	w.f = calloc(hf->nshards + 1, sizeof(*w.f));
	if (!w.f)
		return diag_nomem(d);
	if (o->stats)
		memset(o->stats, 0, sizeof(*o->stats));
	rc = hfplan_make(c, &p, d);
	if (!rc)
		rc = start(&w);
	if (!rc)
		rc = write_shards(&w, &p);
	if (!rc && !w.nf)
		goto out;	/* nothing edited after all */
	if (!rc)
		rc = write_index(&w, keys ? &p : NULL, &ist);
	if (!rc)
		rc = commit(&w, &ist);
	if (rc && !w.committed)
		remove_new(&w);
	if (o->stats)
		o->stats->size = w.bytes;
out:
	hfplan_release(&p);
	for (uint32_t k = 0; k < w.nf; k++)
		free(w.f[k].name);
	free(w.f);
	free(w.tmp);
	free(w.tmp_abs);
	return rc;
}
