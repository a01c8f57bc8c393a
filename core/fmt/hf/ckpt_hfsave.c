/*
 * ckpt_hfsave.c - write a sharded folder's edits back into it (docs/
 * design.md, "Writing a sharded folder back").  The index is the one
 * commit point (ckpt_fsave.h: the steps, and what a crash leaves): each
 * shard touched (ckpt_hfplan.c) is written whole under a new name, then
 * the index naming it, renamed over the old one.
 *
 * A new name is the first free of BASE.EXT, BASE.g1.EXT, BASE.g2.EXT ...
 * other than the shard's own (ckpt_gen_name()):
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
#include "ckpt/ckpt_fsave.h"
#include "ckpt_hf_int.h"
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

/*
 * Shard @i written anew under a new name.  @part NULL: from its own
 * model by its own writer (only storages changed: the clone-and-patch
 * path); else from the folder's tree, the root's children at the slots
 * @part marks, by the writer of the shard's format with its own
 * __metadata__.
 */
static int write_shard(struct fsave *w, uint32_t i, const uint8_t *part)
{
	struct ckpt_shard *sh = &w->c->hf->shards[i];
	struct ckpt_write_opts so = *w->o;
	struct ckpt_write_stats one = { 0 }, *all = w->o->stats;
	struct fsave_file *f;
	struct stat like;
	int fd, rc;

	if (!part && sh->c->format != CKPT_ZIP &&
	    sh->c->format != CKPT_SAFETENSORS)
		return diag_unsupported(w->d, DIAG_NO_OFFSET, "%s: a %s shard "
					"is not written back in a folder",
					sh->path, ckpt_fmt(sh->c)->name);
	if (fstat(sh->c->fd, &like))
		return diag_errno(w->d, -errno, "%s: %s", sh->path,
				  strerror(errno));
	fd = fsave_new(w, i, sh->member);
	if (fd < 0)
		return fd;
	f = &w->f[w->nf - 1];
	so.check = NULL;
	so.stats = &one;
	if (part) {
		so.part = part;
		so.to = sh->c->format == CKPT_SAFETENSORS ? CKPT_OUT_ST :
			CKPT_OUT_ZIP;
		so.meta = sh->c;
	}
	rc = ckpt_write_into(part ? w->c : sh->c, fd, &so, !part, w->d);
	if (!rc)
		rc = fsave_finish(w, fd, f->name, &like, &f->st);
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
static int write_shards(struct fsave *w, const struct hfplan *p)
{
	const struct ckpt_hf *hf = w->c->hf;
	const struct ckpt_node *root = w->c->root;
	uint8_t *part = calloc(root->dir->nkids + 1u, 1);
	int rc = part ? 0 : diag_nomem(w->d);

	for (uint32_t i = 0; i < hf->nshards && !rc; i++) {
		if (!p->touched[i])
			continue;
		if (!p->live[i]) {	/* emptied: it only goes */
			fsave_drop(w, i, hf->shards[i].member);
			continue;
		}
		if (p->touched[i] == HF_DATA) {
			rc = write_shard(w, i, NULL);
			continue;
		}
		for (uint32_t k = 0; k < root->dir->nkids; k++)
			part[k] = root->dir->kids[k] && p->slot[k] == i;
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

/* The index as it is, with the new shards' names. */
static int names_only(struct fsave *w, const char *text, size_t len,
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
		const char *to = fsave_renamed(w, sh, strlen(sh));

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
static int index_text(struct fsave *w, const struct hfplan *p, struct sbuf *b)
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
				names[w->f[k].src] = w->f[k].name;
		rc = names ? hfplan_index(w->c, p, names, text, len, b, w->d) :
		     diag_nomem(w->d);
	}
	if (!rc && b->oom)
		rc = diag_nomem(w->d);
	free(names);
	free(text);
	return rc;
}

int ckpt_hf_save(struct ckpt *c, const struct ckpt_write_opts *o,
		 struct diag *d)
{
	struct ckpt_hf *hf = c->hf;
	struct fsave w = { .dfd = -1 };
	struct hfplan p = { 0 };
	struct sbuf b = { 0 };
	struct stat ist;
	bool keys;
	int rc;

	if (!hf)
		return diag_errno(d, -EINVAL, "not a sharded folder");
	if ((rc = ckpt_hf_whole(c, d)))
		return rc;
	keys = ckpt_changed(c);
	if (o->stats)
		memset(o->stats, 0, sizeof(*o->stats));
	rc = hfplan_make(c, &p, d);
	if (!rc)
		rc = fsave_init(&w, c, o, hf->nshards, d);
	if (!rc)
		rc = write_shards(&w, &p);
	if (!rc && !w.nf)
		goto out;	/* nothing edited after all */
	if (!rc)
		rc = index_text(&w, keys ? &p : NULL, &b);
	if (!rc)
		rc = fsave_commit_file(&w, b.p, b.n, &ist);
	if (!rc)
		rc = fsave_commit(&w, &ist);
	if (o->stats)
		o->stats->size = w.bytes;
out:
	fsave_end(&w, rc);
	free(b.p);
	hfplan_release(&p);
	return rc;
}
