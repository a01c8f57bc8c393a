/*
 * ovl_summary.c - what is staged, said in key paths: the tensors whose
 * values changed, the keys renamed, removed and added, the python values
 * edited, and what the overlay holds on disk.  `ptfs status`, `ptfs
 * umount`'s report and .ptfs/status are made from it (fs/ptfs_ctl.c).
 *
 * It needs no record of the edits: every node of the checkpoint stays in
 * memory for the whole mount with its place at open (home, home_name), so
 * the live tree compared with those places says what changed, whatever
 * sequence of edits (or journal replay) led there.  Two kinds of node
 * stand for another: a new file renamed over a key takes the key's
 * identity (ovl.c's transfer: same home and home_name), and a shared
 * container whose first name was removed lives on in the slot of a link
 * to it (ckpt_node_drop()).
 */
#include "ovl_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ovl_live_map(const struct ckpt *c, uint8_t **out)
{
	struct ckpt_node **stack;
	uint8_t *live = calloc(c->nnodes ? c->nnodes : 1, 1);
	uint32_t n = 0;

	*out = NULL;
	stack = live ? malloc((c->nnodes ? c->nnodes : 1) * sizeof(*stack)) :
		NULL;
	if (!stack) {
		free(live);
		return -ENOMEM;
	}
	/* every node is in at most one slot: the stack never overflows */
	stack[n++] = c->root;
	live[c->root->id] = 1;
	while (n) {
		const struct ckpt_node *p = stack[--n];

		if (!ckpt_node_is_dir(p))
			continue;
		for (uint32_t i = 0; i < p->dir->nkids; i++) {
			struct ckpt_node *k = p->dir->kids[i];

			if (k && !live[k->id]) {
				live[k->id] = 1;
				stack[n++] = k;
			}
		}
	}
	free(stack);
	*out = live;
	return 0;
}

char *ovl_home_path(const struct ckpt_node *n)
{
	const struct ckpt_node *p;
	size_t len = 0;
	char *buf, *q;

	/* each name and a '/' before it but the first, and the NUL */
	for (p = n; p && ckpt_node_home(p); p = ckpt_node_home(p))
		len += strlen(ckpt_node_home_name(p)) + 1;
	len += !len;
	buf = malloc(len);
	if (!buf)
		return NULL;
	q = buf + len - 1;
	*q = 0;
	for (p = n; p && ckpt_node_home(p); p = ckpt_node_home(p)) {
		size_t k = strlen(ckpt_node_home_name(p));

		q -= k;
		memcpy(q, ckpt_node_home_name(p), k);
		if (q > buf)
			*--q = '/';
	}
	return buf;
}

bool ovl_standin(const struct ckpt_node *l, const uint8_t *live)
{
	const struct ckpt_node *t = l->target;

	return l->kind == CKPT_N_LINK && l->dead && t && live[t->id] &&
	       t->parent == l->parent && t->index == l->index;
}

static int cmp_home_name(const void *a, const void *b)
{
	const struct ckpt_node *x = *(struct ckpt_node *const *)a;
	const struct ckpt_node *y = *(struct ckpt_node *const *)b;
	uintptr_t p = (uintptr_t)ckpt_node_home_name(x);
	uintptr_t q = (uintptr_t)ckpt_node_home_name(y);

	return p < q ? -1 : p > q;
}

/* Does a live node stand for @x (it took @x's identity)? */
static bool carried(const struct ckpt_node *x, struct ckpt_node **xf,
		    size_t nxf)
{
	const char *name = ckpt_node_home_name(x);
	const struct ckpt_node *home = ckpt_node_home(x);
	size_t lo = 0, hi = nxf;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if ((uintptr_t)ckpt_node_home_name(xf[mid]) < (uintptr_t)name)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < nxf && ckpt_node_home_name(xf[lo]) == name; lo++)
		if (ckpt_node_home(xf[lo]) == home)
			return true;
	return false;
}

/* The first line of @s (at most 60 bytes), malloc'd. */
static char *line_of(const char *s, size_t n)
{
	size_t k = 0;
	char *out;

	while (k < n && k < 60 && s[k] != '\n' && s[k])
		k++;
	out = malloc(k + (k < n ? 4 : 1));
	if (!out)
		return NULL;
	memcpy(out, s, k);
	strcpy(out + k, k < n ? "..." : "");
	return out;
}

struct acc {
	struct ovl_summary *s;
	size_t max;
	struct diag *d;
};

/* Count a change of @kind: true when it is to be listed too. */
static bool room(struct acc *a, int kind)
{
	return a->s->count[kind]++ < a->max;
}

/* List a change at @n; takes @path, @from and @to (NULL: no memory). */
static int add(struct acc *a, int kind, const struct ckpt_node *n,
	       char *path, char *from, char *to, bool want_from)
{
	struct ovl_summary *s = a->s;
	struct ovl_change *it = NULL;

	if (path && (from || !want_from) && (to || kind != OVL_C_VALUE))
		it = realloc(s->items, (s->nitems + 1) * sizeof(*it));
	if (!it) {
		free(path);
		free(from);
		free(to);
		return diag_nomem(a->d);
	}
	s->items = it;
	it += s->nitems++;
	it->kind = kind;
	it->dir = ckpt_node_is_dir(n);
	it->path = path;
	it->from = from;
	it->to = to;
	return 0;
}

static bool staged(const struct ovl *v, const struct ckpt_storage *s)
{
	return s && s->index < v->nstorages0 && (s->modified || s->retyped);
}

/* Changes at live node @n (@standin: it shows a removed link's key). */
static int live_node(const struct ovl *v, struct acc *a, struct ckpt_node *n,
		     bool standin)
{
	const struct ckpt_node *p = n->parent;
	bool root = n == v->c->root;
	int rc = 0;

	if (n->fresh)
		return root || (p && p->fresh) || !room(a, OVL_C_NEW) ? 0 :
		       add(a, OVL_C_NEW, n, ckpt_node_path(n), NULL, NULL,
			   false);
	if (!root && !standin && ckpt_node_rekeyed(n) &&
	    room(a, OVL_C_RENAME))
		rc = add(a, OVL_C_RENAME, n, ckpt_node_path(n),
			 ovl_home_path(n), NULL, true);
	if (!rc && n->kind == CKPT_N_TENSOR &&
	    (n->edited || staged(v, n->tensor->storage)) &&
	    room(a, OVL_C_DATA))
		rc = add(a, OVL_C_DATA, n, ckpt_node_path(n), NULL, NULL,
			 false);
	if (!rc && n->kind == CKPT_N_VALUE && n->edited &&
	    room(a, OVL_C_VALUE)) {
		size_t len = 0;
		char *was = n->val ? ckpt_value_text(n->val, &len) : NULL;

		rc = add(a, OVL_C_VALUE, n, ckpt_node_path(n),
			 was ? line_of(was, len) : strdup("?"),
			 line_of(n->text ? n->text : "", n->textlen), true);
		free(was);
	}
	return rc;
}

/* The overlay's files: the journal and the data files it names. */
static void disk_usage(const struct ovl *v, struct ovl_summary *s)
{
	struct stat st;
	char name[64];

	if (v->jfd >= 0 && !fstat(v->jfd, &st))
		s->journal_bytes = st.st_size;
	if (v->dfd < 0)
		return;
	for (uint32_t i = 0; i < v->nnamed; i++) {
		if (!v->named[i])
			continue;
		ovl_data_name(v, i, "", name, sizeof(name));
		if (!fstatat(v->dfd, name, &st, AT_SYMLINK_NOFOLLOW) &&
		    S_ISREG(st.st_mode)) {
			s->files++;
			s->file_bytes += st.st_size;
		}
	}
}

int ovl_summarize(const struct ovl *v, size_t max, struct ovl_summary *s,
		  struct diag *d)
{
	const struct ckpt *c = v->c;
	struct acc a = { s, max, d };
	struct ckpt_node **xf = NULL;
	uint8_t *live = NULL, *standin = NULL;
	size_t nxf = 0;
	int rc;

	memset(s, 0, sizeof(*s));
	s->journal = v->jfd >= 0;
	s->resumed = v->resumed;
	s->changed = ovl_changed(v);
	if (c->nrows) {
		/* rows: nothing staged (every change makes them nodes) */
		disk_usage(v, s);
		return 0;
	}
	for (uint32_t i = 0; i < v->nstorages0 && i < c->nstorages; i++)
		s->storages += staged(v, c->storages[i]);
	disk_usage(v, s);
	rc = ovl_live_map(c, &live);
	standin = rc ? NULL : calloc(c->nnodes ? c->nnodes : 1, 1);
	xf = standin ? malloc((c->nnodes ? c->nnodes : 1) * sizeof(*xf)) :
	     NULL;
	if (!xf) {
		rc = diag_nomem(d);
		goto out;
	}
	/* who stands for whom: links' slots, files renamed over keys */
	for (uint32_t i = 0; i < c->nnodes; i++) {
		struct ckpt_node *n = c->nodes[i];

		if (i < v->nnodes0 && ovl_standin(n, live))
			standin[n->target->id] = 1;
		if (i >= v->nnodes0 && live[i] && !n->fresh &&
		    ckpt_node_home(n))
			xf[nxf++] = n;
	}
	qsort(xf, nxf, sizeof(*xf), cmp_home_name);
	for (uint32_t i = 0; i < c->nnodes && !rc; i++) {
		struct ckpt_node *n = c->nodes[i];

		if (live[i]) {
			rc = live_node(v, &a, n, standin[i]);
			/* a shared container in a link's slot: its own
			   place was removed */
			if (!rc && standin[i] && room(&a, OVL_C_REMOVE))
				rc = add(&a, OVL_C_REMOVE, n, ovl_home_path(n),
					 NULL, NULL, false);
			continue;
		}
		/* removed: a node of the checkpoint that nothing stands
		   for, at the top of what went (its old parent stayed) */
		if (i >= v->nnodes0 || n->fresh || !ckpt_node_home(n) ||
		    !live[ckpt_node_home(n)->id] || ovl_standin(n, live) ||
		    carried(n, xf, nxf) || !room(&a, OVL_C_REMOVE))
			continue;
		rc = add(&a, OVL_C_REMOVE, n, ovl_home_path(n), NULL, NULL,
			 false);
	}
	/* metadata entries (ckpt_meta.c): set or added, and removed */
	for (uint32_t i = 0; i < c->nmeta && !rc; i++) {
		const struct ckpt_meta *m = &c->meta[i];
		char *to;

		if (!ckpt_meta_changed(m) || !room(&a, OVL_C_META))
			continue;
		to = m->removed ? NULL : strndup(m->val, m->vlen);
		rc = !m->removed && !to ? diag_nomem(d) :
		     add(&a, OVL_C_META, c->root, strndup(m->key, m->klen),
			 NULL, to, false);
	}
out:
	free(live);
	free(standin);
	free(xf);
	return rc;
}

void ovl_summary_free(struct ovl_summary *s)
{
	for (size_t i = 0; i < s->nitems; i++) {
		free(s->items[i].path);
		free(s->items[i].from);
		free(s->items[i].to);
	}
	free(s->items);
	s->items = NULL;
	s->nitems = 0;
}
