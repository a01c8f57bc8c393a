/*
 * ckpt_hfplan.c - what a sharded folder's write-back writes when keys
 * changed (docs/design.md, "Writing a sharded folder back"): which shard
 * each of the root's children goes to, which shards must be written
 * anew, and the new index.
 *
 *   a child read from a shard      stays in it (renamed or not): so the
 *                                  tensors of one storage stay together
 *   a new child                    goes to the shard of its nearest
 *                                  sibling: the most leading dotted parts
 *                                  in common, the first such; never a
 *                                  new shard
 *   a shard                        written anew when a child of it was
 *                                  removed, renamed or added (its pickle
 *                                  or header changes), or a storage of it
 *                                  edited; left out of the index when no
 *                                  child is left in it
 *
 * The new index is the old one's text with two spans replaced: the
 * weight_map's members and total_size's value.  Members keep their
 * order (the index's, a renamed key where its old one was, then new keys
 * in the tree's order; sorted by key if the index was) and their style (the blanks around
 * the first member, ", " or ",\n    " between them); a key that did not
 * change keeps its token byte for byte.
 */
#include "ckpt/ckpt_int.h"
#include "ckpt_hf_int.h"
#include "ckpt_hfindex.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pickle/pkl.h"
#include "util/sbuf.h"

/* Leading dotted parts @a and @b share ("a.b.c", "a.b.d": 2). */
static uint32_t common_parts(const char *a, const char *b)
{
	uint32_t n = 0;
	size_t i = 0;

	for (; a[i] && a[i] == b[i]; i++)
		n += a[i] == '.';
	/* a whole last part in common counts too ("a.b" and "a.b.c") */
	return n + (a[i] == b[i] || (!a[i] && b[i] == '.') ||
		    (!b[i] && a[i] == '.'));
}

/* The shard of a new child @k: its nearest sibling's. */
static uint32_t nearest(const struct ckpt *c, const struct hfplan *p,
			const struct ckpt_node *k)
{
	const struct ckpt_node *root = c->root;
	uint32_t best = UINT32_MAX, most = 0;

	for (uint32_t i = 0; i < root->dir->nkids; i++) {
		const struct ckpt_node *o = root->dir->kids[i];
		uint32_t n;

		if (!o || o->fresh || p->slot[i] == UINT32_MAX)
			continue;
		n = common_parts(k->name, o->name);
		if (best == UINT32_MAX || n > most) {
			best = p->slot[i];
			most = n;
		}
	}
	if (best != UINT32_MAX)
		return best;
	for (uint32_t s = 0; s < c->hf->nshards; s++)
		if (c->hf->shards[s].c)
			return s;	/* nothing else is left: the first */
	return 0;
}

static void touch(struct hfplan *p, uint32_t sh, uint8_t how)
{
	if (sh != UINT32_MAX && p->touched[sh] < how)
		p->touched[sh] = how;
}

int hfplan_make(struct ckpt *c, struct hfplan *p, struct diag *d)
{
	const struct ckpt_hf *hf = c->hf;
	const struct ckpt_node *root = c->root;

	memset(p, 0, sizeof(*p));
	p->slot = malloc((root->dir->nkids + 1u) * sizeof(*p->slot));
	p->touched = calloc(hf->nshards + 1u, 1);
	p->live = calloc(hf->nshards + 1u, sizeof(*p->live));
	if (!p->slot || !p->touched || !p->live)
		return diag_nomem(d);
	/* children read from a shard first: new ones look at them */
	for (uint32_t i = 0; i < root->dir->nkids; i++) {
		const struct ckpt_node *k = root->dir->kids[i];

		p->slot[i] = k && !k->fresh ? ckpt_hf_node_shard(c, k) :
			     UINT32_MAX;
		if (k && !k->fresh && p->slot[i] == UINT32_MAX)
			return diag_unsupported(d, DIAG_NO_OFFSET, "%s: not "
						"from any shard", k->name);
	}
	for (uint32_t i = 0; i < root->dir->nkids; i++) {
		const struct ckpt_node *k = root->dir->kids[i];

		if (k && k->fresh) {
			p->slot[i] = nearest(c, p, k);
			touch(p, p->slot[i], HF_KEYS);
		}
		if (k && ckpt_node_rekeyed(k))
			touch(p, p->slot[i], HF_KEYS);
		if (k)
			p->live[p->slot[i]]++;
	}
	/* what left the root (removed, or renamed over) */
	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct ckpt_node *n = c->nodes[i];

		if (ckpt_node_home(n) == root && (n->dead || n->parent != root))
			touch(p, ckpt_hf_node_shard(c, n), HF_KEYS);
	}
	for (uint32_t s = 0; s < hf->nshards; s++) {
		const struct ckpt_shard *sh = &hf->shards[s];

		for (uint32_t k = 0; sh->c && k < sh->nstorages; k++)
			if (c->storages[sh->storage0 + k]->modified)
				touch(p, s, HF_DATA);
	}
	return 0;
}

void hfplan_release(struct hfplan *p)
{
	free(p->slot);
	free(p->touched);
	free(p->live);
	memset(p, 0, sizeof(*p));
}

/* ---- the new index ---- */

/* One weight_map member to write. */
struct member {
	const char *key;	/* its key's bytes (NUL-terminated) */
	size_t klen;
	const char *raw;	/* its old token, if the index had the key */
	size_t rawlen;
	uint64_t order;		/* the index's offset, else after those */
	const char *shard;	/* the shard's name */
};

static int by_key(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	int r = memcmp(x->key, y->key, x->klen < y->klen ? x->klen : y->klen);

	return r ? r : (x->klen > y->klen) - (x->klen < y->klen);
}

static int by_order(const void *a, const void *b)
{
	const struct member *x = a, *y = b;

	return (x->order > y->order) - (x->order < y->order);
}

/* total_size of the tree now, both ways (ckpt_shards.c's walk()). */
static void totals(const struct ckpt_node *n, uint8_t *seen,
		   uint64_t *first, uint64_t *whole, int depth)
{
	const struct ckpt_tensor *t = n->tensor;

	if (n->kind == CKPT_N_TENSOR && t) {
		if (t->kind == CKPT_T_INLINE) {
			*first += ckpt_tensor_nbytes(t);
			*whole += ckpt_tensor_nbytes(t);
		} else if (t->storage && !seen[t->storage->index]) {
			seen[t->storage->index] = 1;
			*first += ckpt_tensor_size(t);
			*whole += t->storage->nbytes;
		}
	}
	if (!ckpt_node_is_dir(n) || depth >= CKPT_MAX_DEPTH)
		return;
	for (uint32_t i = 0; i < n->dir->nkids; i++)
		if (n->dir->kids[i])
			totals(n->dir->kids[i], seen, first, whole, depth + 1);
}

/* The members: the index's order, then new keys; sorted if it was. */
static int members(struct ckpt *c, const struct hfplan *p,
		   const char *const *names, const char *text,
		   const struct hfix *ix, struct arena *a, struct member **out,
		   uint32_t *nout, struct diag *d)
{
	const struct ckpt_node *root = c->root;
	struct member *m = calloc(root->dir->nkids + 1u, sizeof(*m));
	struct sbuf key = { 0 };
	uint32_t n = 0;
	int rc = 0;

	if (!m)
		return diag_nomem(d);
	for (uint32_t i = 0; i < root->dir->nkids && !rc; i++) {
		const struct ckpt_node *k = root->dir->kids[i];
		const struct hfix_entry *e;
		struct member *x = &m[n];

		if (!k)
			continue;
		sb_cut(&key, 0);
		rc = ckpt_key_text(k, 0, &key, "Hugging Face index", d);
		if (!rc && key.oom)
			rc = diag_nomem(d);
		if (!rc && !(x->key = arena_strndup(a, key.p, key.n)))
			rc = diag_nomem(d);
		if (rc)
			break;
		x->klen = key.n;
		x->shard = names[p->slot[i]];
		x->order = UINT64_MAX / 2 + n;	/* tree order, after */
		e = hfix_find(ix, key.p, key.n);
		if (e) {
			x->raw = text + e->off;
			x->rawlen = e->kend - e->off;
			x->order = e->off;
		} else if (!k->fresh && k->key && (k->key->kind == PKL_STR ||
						   k->key->kind == PKL_STRING)) {
			/* renamed: where its old key was */
			e = hfix_find(ix, k->key->u.s.p, k->key->u.s.n);
			x->order = e ? e->off : x->order;
		}
		n++;
	}
	free(key.p);
	if (rc) {
		free(m);
		return rc;
	}
	qsort(m, n, sizeof(*m), ix->sorted ? by_key : by_order);
	*out = m;
	*nout = n;
	return 0;
}

/* The blanks of the index's weight_map: before the first member, between
 * key and value, between members, after the last. */
struct style {
	const char *lead, *colon, *sep, *tail;
	size_t nlead, ncolon, nsep, ntail;
};

static void style_of(const char *text, const struct hfix *ix,
		     struct style *st)
{
	const struct hfix_entry *a = NULL, *b = NULL, *z = NULL;

	*st = (struct style){ "\n    ", ": ", ",\n    ", "\n  ", 5, 2, 6, 3 };
	for (uint32_t i = 0; i < ix->n; i++) {
		const struct hfix_entry *e = &ix->e[i];

		if (!a || e->off < a->off) {
			b = a;
			a = e;
		} else if (!b || e->off < b->off) {
			b = e;
		}
		if (!z || e->off > z->off)
			z = e;
	}
	if (!a)
		return;
	st->lead = text + ix->wm_open + 1;
	st->nlead = a->off - ix->wm_open - 1;
	st->colon = text + a->kend;
	st->ncolon = a->voff - a->kend;
	st->tail = text + z->voff + z->vlen;
	st->ntail = ix->wm_close - (z->voff + z->vlen);
	if (b) {
		st->sep = text + a->voff + a->vlen;
		st->nsep = b->off - (a->voff + a->vlen);
	} else {
		st->sep = NULL;	/* "," and the lead */
	}
}

int hfplan_index(struct ckpt *c, const struct hfplan *p,
		 const char *const *names, const char *text, size_t len,
		 struct sbuf *out, struct diag *d)
{
	const struct ckpt_hf *hf = c->hf;
	struct hfix ix = { 0 };
	struct arena a = { 0 };
	struct member *m = NULL;
	struct style st;
	uint32_t n = 0;
	uint8_t *seen = NULL;
	uint64_t first = 0, whole = 0, cut[2][2];
	int rc = hfix_parse(text, len, &a, "", &ix, d);

	if (!rc)
		rc = members(c, p, names, text, &ix, &a, &m, &n, d);
	if (!rc && !(seen = calloc(c->nstorages + 1u, 1)))
		rc = diag_nomem(d);
	if (rc)
		goto out;
	style_of(text, &ix, &st);
	totals(c->root, seen, &first, &whole, 0);
	/* the two spans replaced, in text order */
	cut[0][0] = ix.wm_open + 1;
	cut[0][1] = ix.wm_close;
	cut[1][0] = cut[1][1] = len;
	if (ix.has_total && !ix.bad_total) {
		cut[1][0] = ix.total_off;
		cut[1][1] = ix.total_off + ix.total_len;
	}
	for (int k = 0, at = 0; k < 2; k++) {
		int which = (cut[0][0] < cut[1][0]) == !k ? 0 : 1;

		sb_add(out, text + at, cut[which][0] - at);
		at = cut[which][1];
		if (which == 1 && cut[1][0] < len) {
			/* huggingface_hub's whole storages, if that was it */
			bool alt = ix.total == hf->total_alt &&
				   hf->total_alt != hf->total;

			sb_printf(out, "%llu", (unsigned long long)(alt ?
				  whole : first));
		}
		for (uint32_t i = 0; which == 0 && i < n; i++) {
			if (!i)
				sb_add(out, st.lead, st.nlead);
			else if (st.sep)
				sb_add(out, st.sep, st.nsep);
			else {
				sb_add(out, ",", 1);
				sb_add(out, st.lead, st.nlead);
			}
			if (m[i].raw)
				sb_add(out, m[i].raw, m[i].rawlen);
			else
				sb_json_str(out, m[i].key, m[i].klen);
			sb_add(out, st.colon, st.ncolon);
			sb_json_str(out, m[i].shard, strlen(m[i].shard));
		}
		if (which == 0 && n)
			sb_add(out, st.tail, st.ntail);
		if (k == 1)
			sb_add(out, text + at, len - at);
	}
	if (out->oom)
		rc = diag_nomem(d);
out:
	free(seen);
	free(m);
	hfix_release(&ix);
	arena_release(&a);
	return rc;
}
