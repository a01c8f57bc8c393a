/*
 * ckpt_shards.c - a Hugging Face sharded folder as one checkpoint
 * (multi-file-formats.md 1; docs/design.md "Sharded Hugging Face
 * folders"); ckpt_hfsave.c writes edits back:
 *
 *   FOLDER/                              (or the index file given itself)
 *     pytorch_model.bin.index.json       the index (ckpt_hfindex.c); one
 *     model-00001-of-00002.safetensors   shards the index names: torch.save
 *     pytorch_model-00001-of-00002.bin   zip, legacy or safetensors files,
 *     config.json, tokenizer.json, ...   each opened by its own reader;
 *                                        other files: c->hf->files
 *
 *   c->storages  shard 0's, then shard 1's, ...   (ckpt_shard.storage0)
 *   c->tensors   the same, shard after shard      (ckpt_shard.tensor0)
 *   c->nodes     [0] the root dict, then each shard's nodes but its root
 *   c->root      each shard root's children, shards in name order (as
 *                transformers loads them), each in its own key order; of
 *                a key two shards hold, the one the index names (else the
 *                first)
 *
 * A storage keeps its shard's fd and record, and every read goes through
 * its shard's ckpt (ckpt_storage_owner()), so a read touches no other
 * shard, deflated records inflate on their shard's lock, and memory is
 * the shards' metadata only.  Disagreements between the index and the
 * shards are kept as findings for ptverify, not refusals; what makes the
 * folder unreadable or unsafe (no index, a bad one, a shard outside the
 * folder, absent or unreadable) is refused with one line.
 */
#include "ckpt/ckpt_int.h"
#include "ckpt_hf_int.h"
#include "source/source.h"
#include "ckpt_hfindex.h"
#include "source/ident.h"
#include "util/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int issue(struct ckpt *c, int kind, const char *key, uint32_t shard,
		 uint32_t other, uint64_t off, struct diag *d)
{
	struct ckpt_hf *hf = c->hf;
	struct ckpt_hf_issue *v;

	if ((hf->nissues & (hf->nissues - 1)) == 0) {	/* 0, 1, 2, 4 ... */
		v = realloc(hf->issues, (hf->nissues ? 2 * hf->nissues : 1) *
			    sizeof(*v));
		if (!v)
			return diag_nomem(d);
		hf->issues = v;
	}
	hf->issues[hf->nissues++] = (struct ckpt_hf_issue){ .kind = kind,
		.key = key, .shard = shard, .other = other, .off = off };
	return 0;
}

/* Open shard @i on its own, through the folder's source (beneath the
 * folder, a regular file, one file under one name); its failure becomes
 * one line of @d. */
static int shard_open(struct ckpt *c, const struct hfix *ix, uint32_t i,
		      const char *where, struct diag *d)
{
	struct ckpt_hf *hf = c->hf;
	struct ckpt_shard *sh = &hf->shards[i];
	uint64_t at = ix->shard_off[i];
	const struct src_member *m;
	char line[512];
	struct diag ds;
	uint32_t k;
	int rc;

	/* an index named as a shard would open an index again, and so on */
	if (ckpt_hf_index_name(sh->name))
		return diag_corrupt(d, at, "%sshard '%s' is named like an "
				    "index", where, sh->name);
	diag_init(&ds, NULL);
	rc = src_add(c->src, sh->name, strlen(sh->name), at, SRC_OPTIONAL,
		     &ds);
	if (rc == -ENOENT) {
		/* absent: a finding (ptverify says it; ptfs refuses to
		   mount), so that the rest is still checked */
		hf->nabsent++;
		return issue(c, CKPT_HF_ABSENT, NULL, i, UINT32_MAX, at, d);
	}
	if (rc < 0)
		return diag_set(d, rc, at, "%sshard %s", where, ds.msg);
	sh->member = k = (uint32_t)rc;
	m = src_at(c->src, k);
	sh->path = m->path;
	/* one file under two names: an edit of one would write the other
	   anew, and write-back would leave a name dangling */
	if (src_alias(c->src, k) != k)
		return diag_corrupt(d, at, "%sshards '%s' and '%s' are one "
				    "file (a link): a folder names each shard "
				    "once", where,
				    src_at(c->src, src_alias(c->src, k))->name,
				    sh->name);
	diag_init(&ds, sh->name);
	rc = c->open_part(m, CKPT_OPEN_KEEP, &sh->c, &ds); /* the door */
	if (rc) {	/* what torch.load would run is the folder's, too */
		if (ckpt_unsafe_take(c, sh->c, sh->name))
			rc = diag_nomem(&ds);
		ckpt_close(sh->c);
		sh->c = NULL;
		diag_set(d, rc, DIAG_NO_OFFSET, "shard %s",
			 diag_line(&ds, line, sizeof(line)));
		d->unsafe |= ds.unsafe;
		return rc;
	}
	if (sh->c->format != CKPT_ZIP && sh->c->format != CKPT_LEGACY &&
	    sh->c->format != CKPT_SAFETENSORS)
		return diag_unsupported(d, DIAG_NO_OFFSET, "shard %s is one of "
					"the %s, not a state dict", sh->name,
					ckpt_fmt(sh->c)->files);
	if (sh->c->root->kind != CKPT_N_DIR)
		return diag_corrupt(d, DIAG_NO_OFFSET, "shard %s holds a %s, "
				    "not a state dict", sh->name,
				    sh->c->root->type);
	/* a hundred shards would each keep their arenas' unused ends */
	arena_trim(&sh->c->arena);
	if (sh->c->doc)
		arena_trim(&sh->c->doc->arena);
	return 0;
}

/*
 * The folder's byte order: the shards' one (a tensor's bytes are served as
 * they are, and the mount has one user.byteorder), or a refusal.
 */
static int byteorder(struct ckpt *c, struct diag *d)
{
	const struct ckpt_shard *first = NULL;
	const char *bo0 = NULL;

	for (uint32_t i = 0; i < c->hf->nshards; i++) {
		const struct ckpt_shard *sh = &c->hf->shards[i];
		const char *bo;

		if (!sh->c)
			continue;
		bo = sh->c->byteorder ? sh->c->byteorder : "little";
		if (!first) {
			first = sh;
			bo0 = bo;
		} else if (strcmp(bo, bo0)) {
			return diag_unsupported(d, DIAG_NO_OFFSET, "shard %s is "
						"%s-endian, shard %s %s-endian: "
						"one byte order per folder",
						sh->name, bo, first->name,
						bo0);
		}
	}
	if (bo0 && strcmp(bo0, "little") && !(c->byteorder = strdup(bo0)))
		return diag_nomem(d);
	return 0;
}

/* The key of a shard root's child as a string: a str key's, else its
 * file name (which no index key can be). */
static const char *key_of(const struct ckpt_node *n, size_t *len)
{
	if (n->key && (n->key->kind == PKL_STR || n->key->kind == PKL_STRING)) {
		*len = n->key->u.s.n;
		return n->key->u.s.p;
	}
	*len = 0;
	return NULL;
}

/* Take shard @i's storages, tensors and nodes into the folder's arrays. */
static int adopt(struct ckpt *c, struct ckpt_shard *sh, struct diag *d)
{
	struct ckpt_build *b = c->b;
	struct ckpt *s = sh->c;
	int rc = 0;

	sh->storage0 = c->nstorages;
	sh->nstorages = s->nstorages;
	sh->tensor0 = c->ntensors;
	sh->ntensors = s->ntensors;
	for (uint32_t k = 0; k < s->nstorages && !rc; k++) {
		struct ckpt_storage *st = s->storages[k];
		size_t nn = strlen(sh->name), nk = strlen(st->key);
		char *key = arena_alloc(&c->arena, nn + nk + 2);

		/* keys are the shard's own ("0", "1" ...): unique with its
		   name (the builder's key table, which needs the old ones,
		   served its open only) */
		if (!key)
			return diag_nomem(d);
		memcpy(key, sh->name, nn);
		key[nn] = ':';
		memcpy(key + nn + 1, st->key, nk + 1);
		st->key = key;
		st->index = c->nstorages;
		rc = ckpt_push((void ***)&c->storages, &c->nstorages,
			       &b->storages_cap, st);
		/* found by it when the shard's pickle is written anew */
		rc = rc ? rc : ckpt_storage_file(b, st);
	}
	for (uint32_t k = 0; k < s->ntensors && !rc; k++) {
		s->tensors[k]->index = c->ntensors;
		rc = ckpt_push((void ***)&c->tensors, &c->ntensors,
			       &b->tensors_cap, s->tensors[k]);
	}
	if (!rc) {
		char *pre = malloc(strlen(sh->name) + 2);

		if (pre)
			sprintf(pre, "%s:", sh->name);
		rc = pre ? ckpt_vdoc_add(c, c->nnodes, pre, s->format, d) :
		     diag_nomem(d);
		free(pre);
		if (rc)
			return rc;
	}
	sh->node0 = c->nnodes;
	for (uint32_t k = 0; k < s->nnodes && !rc; k++) {
		if (s->nodes[k] == s->root)
			continue;
		sh->nnodes++;
		s->nodes[k]->id = c->nnodes;
		rc = ckpt_push((void ***)&c->nodes, &c->nnodes, &b->nodes_cap,
			       s->nodes[k]);
	}
	return rc ? diag_nomem(d) : 0;
}

struct merge {
	struct ckpt_node **kids;	/* the root's, so far */
	uint32_t *owner;		/* the shard of each */
	uint32_t *slot;			/* by name: position + 1, or 0 */
	uint32_t n, mask;
};

static uint32_t *slot_of(const struct merge *m, const char *name)
{
	uint32_t i = ckpt_name_hash(name) & m->mask;

	while (m->slot[i] && strcmp(m->kids[m->slot[i] - 1]->name, name))
		i = (i + 1) & m->mask;
	return &m->slot[i];
}

/* Shard @i's keys into the root, checked against the index. */
static int merge_shard(struct ckpt *c, struct hfix *ix, struct merge *m,
		       uint32_t i, struct diag *d)
{
	const struct ckpt_node *root = c->hf->shards[i].c->root;
	int rc = 0;

	for (uint32_t k = 0; k < root->dir->nkids && !rc; k++) {
		struct ckpt_node *kid = root->dir->kids[k];
		size_t klen;
		const char *key = key_of(kid, &klen);
		struct hfix_entry *e = key ? hfix_find(ix, key, klen) : NULL;
		uint32_t *s = slot_of(m, kid->name), p;

		if (e && e->shard == i)
			e->found = true;
		else if (!e)
			rc = issue(c, CKPT_HF_NOT_IN_INDEX, key ? key :
				   kid->name, i, UINT32_MAX, DIAG_NO_OFFSET, d);
		if (rc)
			break;
		if (!*s) {
			m->kids[m->n] = kid;
			m->owner[m->n] = i;
			*s = ++m->n;
			continue;
		}
		p = *s - 1;
		rc = issue(c, CKPT_HF_TWICE, key ? key : kid->name, m->owner[p],
			   i, e ? e->off : DIAG_NO_OFFSET, d);
		if (e && e->shard == i) {	/* the index's choice wins */
			m->kids[p] = kid;
			m->owner[p] = i;
		}
	}
	return rc;
}

/* Index keys their shard lacks (and which shard has them, if any). */
static int missing(struct ckpt *c, const struct hfix *ix,
		   const struct merge *m, struct diag *d)
{
	int rc = 0;

	for (uint32_t k = 0; k < ix->n && !rc; k++) {
		const struct hfix_entry *e = &ix->e[k];
		const struct ckpt_node *n;
		uint32_t other = UINT32_MAX;
		char *name;

		if (e->found || !c->hf->shards[e->shard].c)
			continue;	/* an absent shard is one finding */
		name = ckpt_key_name(c, ckpt_str_key(c, e->key, e->klen));
		if (!name)
			return diag_nomem(d);
		n = ckpt_node_child(c->root, name);
		if (n && m->owner[n->index] != e->shard)
			other = m->owner[n->index];
		rc = issue(c, CKPT_HF_NOT_IN_SHARD, e->key, e->shard, other,
			   e->off, d);
	}
	return rc;
}

/*
 * Mark the tensors the tree shows, and count total_size the writers'
 * way: walking keys in order, the first tensor on each storage counts its
 * numel * itemsize (transformers' shard_checkpoint), or (*@alt) its whole
 * storage (huggingface_hub's get_torch_storage_size).
 */
static void walk(struct ckpt *c, struct ckpt_node *n, int depth,
		 uint8_t *seen, uint64_t *alt)
{
	struct ckpt_tensor *t = n->tensor;

	if (t && n->kind == CKPT_N_TENSOR) {
		if (!t->shown)
			c->nshown++;
		t->shown = true;
		if (t->kind == CKPT_T_INLINE) {
			c->hf->total += ckpt_tensor_nbytes(t);
			*alt += ckpt_tensor_nbytes(t);
		} else if (t->storage && !seen[t->storage->index]) {
			seen[t->storage->index] = 1;
			c->hf->total += ckpt_tensor_size(t);
			*alt += t->storage->nbytes;
		}
	}
	if (!ckpt_node_is_dir(n) || depth >= CKPT_MAX_DEPTH)
		return;
	for (uint32_t i = 0; i < n->dir->nkids; i++)
		if (n->dir->kids[i])
			walk(c, n->dir->kids[i], depth + 1, seen, alt);
}

static int totals(struct ckpt *c, const struct hfix *ix, struct diag *d)
{
	uint8_t *seen = calloc(c->nstorages + 1u, 1);
	uint64_t alt = 0;
	int rc = 0;

	if (!seen)
		return diag_nomem(d);
	for (uint32_t i = 0; i < c->ntensors; i++)
		c->tensors[i]->shown = false;
	c->nshown = 0;
	walk(c, c->root, 0, seen, &alt);
	c->hf->total_alt = alt;
	free(seen);
	/* with a shard absent, what the others hold proves nothing */
	if (ix->has_total && !c->hf->nabsent && (ix->bad_total ||
			      (ix->total != c->hf->total && ix->total != alt))) {
		rc = issue(c, CKPT_HF_TOTAL_SIZE, NULL, UINT32_MAX, UINT32_MAX,
			   ix->total_off, d);
		if (!rc) {
			struct ckpt_hf_issue *v = &c->hf->issues[c->hf->nissues - 1];

			v->want = ix->bad_total ? UINT64_MAX : ix->total;
			v->got = c->hf->total;
			v->alt = alt;
		}
	}
	return rc;
}

/* The shards' keys as the root's children, then what disagrees. */
static int merge(struct ckpt *c, struct hfix *ix, struct diag *d)
{
	struct ckpt_hf *hf = c->hf;
	struct merge m = { 0 };
	uint64_t total = 0;
	uint32_t cap = 8;
	int rc = 0;

	for (uint32_t i = 0; i < hf->nshards; i++)
		total += hf->shards[i].c ? hf->shards[i].c->root->dir->nkids
					 : 0;
	while (cap < 2 * total && cap < (1u << 31))
		cap *= 2;
	m.mask = cap - 1;
	m.kids = malloc((total + 1) * sizeof(*m.kids));
	m.owner = malloc((total + 1) * sizeof(*m.owner));
	m.slot = calloc(cap, sizeof(*m.slot));
	c->root = ckpt_node_synth(c->b, CKPT_N_DIR, "dict");
	if (!m.kids || !m.owner || !m.slot || !c->root ||
	    !(c->root->name = arena_strndup(&c->arena, "", 0)))
		rc = diag_nomem(d);
	for (uint32_t i = 0; i < hf->nshards && !rc; i++) {
		if (!hf->shards[i].c) {	/* absent: an empty range */
			hf->shards[i].storage0 = c->nstorages;
			hf->shards[i].tensor0 = c->ntensors;
			continue;
		}
		rc = adopt(c, &hf->shards[i], d);
		if (!rc)
			rc = merge_shard(c, ix, &m, i, d);
	}
	if (!rc)
		rc = ckpt_dir_fill(c->b, c->root, m.kids, m.n);
	for (uint32_t k = 0; k < m.n && !rc; k++)
		hf->shards[m.owner[k]].nkeys++;
	if (!rc)
		rc = missing(c, ix, &m, d);
	if (!rc)
		rc = totals(c, ix, d);
	free(m.kids);
	free(m.owner);
	free(m.slot);
	return rc;
}

int ckpt_hf_open(struct ckpt *c, bool is_dir, struct diag *d)
{
	struct hfix ix = { 0 };
	struct ckpt_hf *hf;
	char *where = NULL;
	int rc;

	c->format = CKPT_HF_SHARDED;
	c->fmt = &ckpt_fmt_hf;
	hf = c->hf = arena_alloc(&c->arena, sizeof(*hf));
	if (!hf)
		return diag_nomem(d);
	memset(hf, 0, sizeof(*hf));
	hf->dfd = -1;
	rc = ckpt_hf_locate(c, is_dir, d);
	/* messages about the index name it when the folder was given */
	if (!rc && is_dir) {
		size_t n = strlen(hf->index) + 3;

		where = arena_alloc(&c->arena, n);
		if (where)
			snprintf(where, n, "%s: ", hf->index);
		else
			rc = diag_nomem(d);
	}
	if (!rc)
		rc = ckpt_hf_read_index(c, &ix, where ? where : "", d);
	if (!rc)
		rc = ckpt_build_begin(c, d);
	if (rc)
		goto out;
	hf->nentries = ix.n;
	hf->shards = arena_alloc(&c->arena, (ix.nshards + 1u) *
				 sizeof(*hf->shards));
	if (!hf->shards) {
		rc = diag_nomem(d);
		goto out;
	}
	memset(hf->shards, 0, (ix.nshards + 1u) * sizeof(*hf->shards));
	for (uint32_t i = 0; i < ix.nshards && !rc; i++) {
		hf->shards[i].name = ix.shards[i];
		hf->shards[i].name_off = ix.shard_off[i];
		hf->nshards = i + 1;
		rc = shard_open(c, &ix, i, where ? where : "", d);
	}
	if (!rc)
		rc = byteorder(c, d);
	if (!rc)
		rc = merge(c, &ix, d);
	if (!rc)
		ckpt_hf_files_not_shards(hf, &ix);
out:
	hfix_release(&ix);
	return rc;
}

void ckpt_hf_close(struct ckpt *c)
{
	struct ckpt_hf *hf = c->hf;

	for (uint32_t i = 0; i < hf->nshards; i++)
		ckpt_close(hf->shards[i].c);
	free(hf->issues);
	free(hf->files);
	/* the shards owned all of these: nothing is left to free */
	c->nnodes = c->ntensors = c->nstorages = 0;
	c->hf = NULL;
}

/* The shard whose storages (tensors) hold number @k, or -1. */
static long shard_at(const struct ckpt_hf *hf, uint32_t k, bool tensors)
{
	uint32_t lo = 0, hi = hf->nshards, first, count;

	if (!hf->nshards)
		return -1;
	while (hi - lo > 1) {	/* the last shard starting at or before k */
		uint32_t mid = lo + (hi - lo) / 2;

		if ((tensors ? hf->shards[mid].tensor0 :
		     hf->shards[mid].storage0) <= k)
			lo = mid;
		else
			hi = mid;
	}
	first = tensors ? hf->shards[lo].tensor0 : hf->shards[lo].storage0;
	count = tensors ? hf->shards[lo].ntensors : hf->shards[lo].nstorages;
	return k >= first && k - first < count ? (long)lo : -1;
}

struct ckpt *ckpt_hf_owner(struct ckpt *c, const struct ckpt_storage *s)
{
	long k = shard_at(c->hf, s->index, false);

	return k < 0 ? c : c->hf->shards[k].c;
}

uint32_t ckpt_hf_node_shard(const struct ckpt *c, const struct ckpt_node *n)
{
	const struct ckpt_hf *hf = c->hf;
	uint32_t lo = 0, hi = hf ? hf->nshards : 0;

	while (hi - lo > 1) {	/* the last shard starting at or before n */
		uint32_t mid = lo + (hi - lo) / 2;

		if (hf->shards[mid].node0 <= n->id)
			lo = mid;
		else
			hi = mid;
	}
	if (hi && n->id >= hf->shards[lo].node0 &&
	    n->id - hf->shards[lo].node0 < hf->shards[lo].nnodes)
		return lo;
	return UINT32_MAX;
}

int ckpt_storage_home(const struct ckpt *c, const struct ckpt_storage *s)
{
	long k = c->hf ? shard_at(c->hf, s->index, false) : -1;

	return k < 0 ? c->fd : c->hf->shards[k].c->fd;
}

const struct ckpt_shard *ckpt_tensor_shard(const struct ckpt *c,
					   const struct ckpt_tensor *t)
{
	long k = c->hf ? shard_at(c->hf, t->index, true) : -1;

	return k < 0 ? NULL : &c->hf->shards[k];
}

const struct ckpt_shard *ckpt_storage_shard(const struct ckpt *c,
					    const struct ckpt_storage *s)
{
	long k = c->hf && s ? shard_at(c->hf, s->index, false) : -1;

	return k < 0 ? NULL : &c->hf->shards[k];
}

const char *ckpt_hf_issue_line(const struct ckpt *c, uint32_t i, char *buf,
			       size_t size)
{
	const struct ckpt_hf *hf = c->hf;
	const struct ckpt_hf_issue *v = &hf->issues[i];
	const char *sh = v->shard < hf->nshards ? hf->shards[v->shard].name :
			 "", *ot = v->other < hf->nshards ?
			 hf->shards[v->other].name : NULL;

	switch (v->kind) {
	case CKPT_HF_NOT_IN_SHARD:
		snprintf(buf, size, "key '%s': the index says shard %s, which "
			 "does not hold it%s%s", v->key, sh,
			 ot ? "; shard holding it: " : "", ot ? ot : "");
		break;
	case CKPT_HF_NOT_IN_INDEX:
		snprintf(buf, size, "key '%s' of shard %s is not in the index",
			 v->key, sh);
		break;
	case CKPT_HF_ABSENT:
		snprintf(buf, size, "shard '%s' the index names is absent", sh);
		break;
	case CKPT_HF_TWICE:
		snprintf(buf, size, "key '%s' is in two shards, %s and %s",
			 v->key, sh, ot ? ot : "?");
		break;
	default:
		if (v->want == UINT64_MAX)
			snprintf(buf, size, "metadata.total_size is not a byte "
				 "count");
		else if (v->alt != v->got)
			snprintf(buf, size, "metadata.total_size is %llu, but "
				 "the shards hold %llu bytes (%llu counting "
				 "whole storages)",
				 (unsigned long long)v->want,
				 (unsigned long long)v->got,
				 (unsigned long long)v->alt);
		else
			snprintf(buf, size, "metadata.total_size is %llu, but "
				 "the shards hold %llu bytes (each storage "
				 "counted once)", (unsigned long long)v->want,
				 (unsigned long long)v->got);
	}
	return buf;
}

int ckpt_hf_whole(const struct ckpt *c, struct diag *d)
{
	uint32_t n = c->hf ? c->hf->nabsent : 0;

	if (!n)
		return 0;
	return diag_unsupported(d, DIAG_NO_OFFSET, "%u shard%s of the index "
				"%s absent: their tensors would be missing", n,
				n == 1 ? "" : "s", n == 1 ? "is" : "are");
}
