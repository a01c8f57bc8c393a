/*
 * ckpt_script.c - TorchScript archives (torch.jit.save; torch-format.md 8),
 * shown read-only.  The zip holds more than a torch.save file:
 *
 *   data.pkl          the module: GLOBAL '__torch__ Net' NEWOBJ, then BUILD
 *                     with a dict of all its attributes (C++ pickler)
 *   data/<key>        the storages data.pkl names
 *   constants.pkl     a tuple of the constants code/ calls CONSTANTS.c<i>
 *   constants/<key>   the storages constants.pkl names
 *   code/<path>.py    TorchScript source of each class, deflated > 200 B
 *   model.json        torch 1.0-1.1 instead of data.pkl (ckpt_script_json.c)
 *
 * The mount shows the module's attributes at the root, "code" (the sources
 * as a tree) and "constants" (items named c0, c1, ...).  Parameters are
 * the attributes a class lists in its __parameters__ in code/.
 */
#include "ckpt_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#define PKL_MAX_BYTES	(UINT64_C(1) << 32)	/* data.pkl, constants.pkl */
#define CODE_MAX_FILE	(UINT64_C(1) << 26)	/* one source file */
#define CODE_MAX_TOTAL	(UINT64_C(1) << 30)	/* all of code/ in memory */
#define CODE_MAX_DEPTH	64			/* folders in code/ */

/* The record <prefix>/<rel>, or NULL. */
static struct ptz_entry *rec(struct ckpt *c, const char *rel)
{
	return ptz_find_rel(&c->zip, rel);
}

int ckpt_script_pickle(struct ckpt *c, struct ptz_entry *e,
		       struct pkl_doc **doc, struct diag *d)
{
	unsigned char *buf;
	size_t len;
	int rc = ptz_entry_read(&c->zip, e, PKL_MAX_BYTES - 1, &buf, &len, d);

	if (rc)
		return rc;
	rc = pkl_parse(buf, len, e->method == PTZ_STORED ? e->data_off : 0,
		       doc, d);
	free(buf);
	return rc;
}

/* ---- code/: the sources as a tree ---- */

struct code_file {
	const char *path;	/* after "<prefix>/code/" */
	struct ptz_entry *e;
};

struct code {
	struct ckpt *c;
	struct diag *d;
	struct code_file *f;
	uint32_t n;
	uint64_t bytes;		/* read so far */
	const struct ptz_entry *setstate;	/* the first source with a
						   __setstate__, of n */
	uint32_t nsetstate;
};

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct code_file *)a)->path,
		      ((const struct code_file *)b)->path);
}

const struct pkl_value *ckpt_str_key(struct ckpt *c, const char *s,
				     size_t len)
{
	struct pkl_value *k = arena_alloc(&c->arena, sizeof(*k));

	if (!k)
		return NULL;
	k->kind = PKL_STR;
	k->u.s.n = len;
	k->u.s.p = arena_strndup(&c->arena, s, len);
	return k->u.s.p ? k : NULL;
}

char *ckpt_key_name(struct ckpt *c, const struct pkl_value *key)
{
	char *esc = ckpt_name_escape(key), *name;

	if (!esc)
		return NULL;
	name = arena_strndup(&c->arena, esc, strlen(esc));
	free(esc);
	return name;
}

char *ckpt_synth_name(struct ckpt *c, const char *s, size_t len)
{
	struct pkl_value v = { .kind = PKL_STR };
	char *copy = malloc(len + 1), *name;

	if (!copy)
		return NULL;
	memcpy(copy, s, len);
	copy[len] = 0;
	v.u.s.p = copy;
	v.u.s.n = len;
	name = ckpt_key_name(c, &v);
	free(copy);
	return name;
}

/*
 * Does source @text define a __setstate__?  torch.load hands an archive
 * with constants.pkl to torch.jit.load (before torch 2.6 even with
 * weights_only=True: CVE-2025-32434), which calls the __setstate__ of
 * every object of such a class it restores: the archive's own code runs.
 */
static bool has_setstate(const unsigned char *text, size_t len)
{
	static const char def[] = "def __setstate__(";
	const char *p = (const char *)text, *end = p + len;

	while (p && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *q = p, *eol = nl ? nl : end;

		while (q < eol && (*q == ' ' || *q == '\t'))
			q++;
		if ((size_t)(eol - q) >= sizeof(def) - 1 &&
		    !memcmp(q, def, sizeof(def) - 1))
			return true;
		p = nl ? nl + 1 : NULL;
	}
	return false;
}

/* The finding of the sources that define a __setstate__: one for the
 * archive, naming the first. */
static int note_setstate(struct code *k)
{
	char why[512];

	if (!k->setstate)
		return 0;
	snprintf(why, sizeof(why), "%u TorchScript __setstate__ method%s "
		 "(code/%.200s%s): torch.load hands the archive to "
		 "torch.jit.load, which runs %s as it loads (before torch 2.6 "
		 "even with weights_only=True, CVE-2025-32434)", k->nsetstate,
		 k->nsetstate == 1 ? "" : "s", k->setstate->name +
		 k->c->zip.prefix_len + 1 + 5, k->nsetstate == 1 ? "" :
		 " and others", k->nsetstate == 1 ? "it" : "them");
	return ckpt_unsafe_add(k->c, CKPT_U_CALL, "code/",
			       k->setstate->header_off, NULL, NULL, why) ?
	       diag_nomem(k->d) : 0;
}

/* A source file: a bytes value holding the record, inflated. */
static int code_file(struct code *k, struct ptz_entry *e,
		     struct ckpt_node **out)
{
	struct ckpt *c = k->c;
	struct pkl_value *v = arena_alloc(&c->arena, sizeof(*v));
	struct ckpt_node *n;
	unsigned char *text;
	size_t len;
	int rc;

	if (!v)
		return diag_nomem(k->d);
	if (e->usize > CODE_MAX_TOTAL - k->bytes)
		return diag_unsupported(k->d, e->header_off, "code/ sources "
					"larger than 1 GiB in all");
	rc = ptz_entry_read(&c->zip, e, CODE_MAX_FILE, &text, &len, k->d);
	if (rc)
		return rc;
	if (has_setstate(text, len) && !k->nsetstate++)
		k->setstate = e;
	k->bytes += len;
	n = ckpt_node_synth(c->b, CKPT_N_VALUE, "bytes");
	if (!n) {
		free(text);
		return diag_nomem(k->d);
	}
	/* a pickle-like value, so that every consumer of values copes */
	v->kind = PKL_BYTES;
	v->off = e->header_off;
	v->u.s.p = (char *)text;
	v->u.s.n = len;
	n->val = v;
	n->text = (char *)text;		/* freed with the node's text */
	n->textlen = len;
	*out = n;
	return 0;
}

/*
 * The folder for files [@lo, @hi) of k->f, which share their first @skip
 * bytes of path (the folders above); @depth bounds hostile nesting.
 */
static int code_dir(struct code *k, uint32_t lo, uint32_t hi, size_t skip,
		    int depth, struct ckpt_node **out)
{
	struct ckpt_node *dir, **kids = NULL;
	uint32_t n = 0;
	int rc = 0;

	if (depth > CODE_MAX_DEPTH)
		return diag_corrupt(k->d, k->f[lo].e->header_off, "code record "
				    "'%s' is nested deeper than %d folders",
				    k->f[lo].e->name, CODE_MAX_DEPTH);
	dir = ckpt_node_synth(k->c->b, CKPT_N_DIR, "code");
	kids = calloc(hi - lo, sizeof(*kids));
	if (!dir || !kids) {
		free(kids);
		return diag_nomem(k->d);
	}
	for (uint32_t i = lo, j; i < hi && !rc; i = j) {
		const char *comp = k->f[i].path + skip;
		size_t len = strcspn(comp, "/");
		struct ckpt_node *kid = NULL;

		j = i + 1;
		if (comp[len] == '/') {
			/* sorted: everything under comp/ comes in a row */
			while (j < hi && !strncmp(k->f[j].path + skip, comp,
						  len + 1))
				j++;
			rc = code_dir(k, i, j, skip + len + 1, depth + 1, &kid);
		} else {
			rc = code_file(k, k->f[i].e, &kid);
		}
		if (rc)
			break;
		kid->step = CKPT_S_PART;
		kid->name = ckpt_synth_name(k->c, comp, len);
		if (!kid->name)
			rc = diag_nomem(k->d);
		kids[n++] = kid;
	}
	if (!rc)
		rc = ckpt_dir_fill(k->c->b, dir, kids, n);
	free(kids);
	if (!rc)
		*out = dir;
	return rc;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);

	return n >= t && !strcmp(s + n - t, tail);
}

/* "code": every record under code/ but the .debug_pkl source maps. */
static int code_tree(struct ckpt *c, struct ckpt_node **out, struct diag *d)
{
	struct ptz_reader *z = &c->zip;
	struct code k = { .c = c, .d = d };
	size_t skip = z->prefix_len + 1 + 5;	/* "<prefix>/code/" */
	int rc;

	*out = NULL;
	k.f = calloc(z->nentries + 1, sizeof(*k.f));
	if (!k.f)
		return diag_nomem(d);
	for (uint32_t i = 0; i < z->nentries; i++) {
		struct ptz_entry *e = &z->entries[i];

		if (e->name_len > skip &&
		    !strncmp(e->name + z->prefix_len + 1, "code/", 5) &&
		    !ends_with(e->name, ".debug_pkl")) {
			k.f[k.n].path = e->name + skip;
			k.f[k.n++].e = e;
		}
	}
	qsort(k.f, k.n, sizeof(*k.f), by_path);
	rc = code_dir(&k, 0, k.n, 0, 0, out);
	if (!rc)
		rc = note_setstate(&k);
	free(k.f);
	return rc;
}

/* ---- parameters: the __parameters__ list of each class in code/ ---- */

/* The line after the one at @p (or @end). */
static const char *next_line(const char *p, const char *end)
{
	while (p < end && *p != '\n')
		p++;
	return p < end ? p + 1 : end;
}

static bool line_starts(const char *p, const char *end, const char *s)
{
	size_t n = strlen(s);

	return (size_t)(end - p) >= n && !memcmp(p, s, n);
}

/*
 * In source @text, the body of class @cls's "__parameters__ = [...]"
 * (between the brackets), or NULL.  The printer writes
 *   class Linear(Module):
 *     __parameters__ = ["weight", "bias", ]
 */
static const char *params_of(const char *text, size_t len, const char *cls,
			     size_t *plen)
{
	const char *end = text + len, *p = text;
	size_t cl = strlen(cls);

	for (; p < end; p = next_line(p, end)) {
		if (!line_starts(p, end, "class ") ||
		    (size_t)(end - p) < 6 + cl + 1 || memcmp(p + 6, cls, cl) ||
		    (p[6 + cl] != '(' && p[6 + cl] != ':'))
			continue;
		for (p = next_line(p, end); p < end && *p == ' ';
		     p = next_line(p, end)) {
			const char *q = p, *close;

			while (q < end && *q == ' ')
				q++;
			if (!line_starts(q, end, "__parameters__ = ["))
				continue;
			q += 18;
			for (close = q; close < end && *close != ']' &&
			     *close != '\n'; close++)
				;
			if (close == end || *close != ']')
				return NULL;
			*plen = close - q;
			return q;
		}
		return NULL;
	}
	return NULL;
}

/* The code/ file of class module @mod ("__torch__.torch.nn.modules.linear"
 * is code/__torch__/torch/nn/modules/linear.py), or NULL. */
static const struct ckpt_node *class_file(const struct ckpt_node *code,
					  const char *mod)
{
	char name[256];

	while (code && code->kind == CKPT_N_DIR) {
		size_t n = strcspn(mod, ".");

		if (n + 4 > sizeof(name))
			return NULL;
		memcpy(name, mod, n);
		strcpy(name + n, mod[n] ? "" : ".py");
		code = ckpt_node_child(code, name);
		if (!mod[n])
			return code && code->kind == CKPT_N_VALUE ? code : NULL;
		mod += n + 1;
	}
	return NULL;
}

/* Mark the tensors each TorchScript object's class lists as parameters. */
static void mark_parameters(struct ckpt *c, const struct ckpt_node *code)
{
	/* each class's list, by its GLOBAL (one node per class: the C++
	   pickler memoizes them): a model repeats few classes many times */
	static const char none[] = "";
	struct {
		const struct pkl_value *g;
		const char *p;
		size_t len;
	} cache[256] = { { NULL, NULL, 0 } };

	for (uint32_t i = 0; i < c->nnodes; i++) {
		struct ckpt_node *n = c->nodes[i];
		const struct pkl_value *g;
		const struct ckpt_node *src;
		const char *p, *end;
		size_t len, h;

		if (n->kind != CKPT_N_DIR || !n->val ||
		    n->val->kind != PKL_CALL)
			continue;
		g = n->val->u.call.func;
		if (!g || g->kind != PKL_GLOBAL ||
		    strncmp(g->u.global.module, "__torch__", 9))
			continue;
		h = ((uintptr_t)g >> 4) % 256;
		if (cache[h].g != g) {
			src = class_file(code, g->u.global.module);
			p = src ? params_of(src->text, src->textlen,
					    g->u.global.name, &len) : NULL;
			cache[h].g = g;
			cache[h].p = p ? p : none;
			cache[h].len = p ? len : 0;
		}
		p = cache[h].p;
		len = cache[h].len;
		for (end = p + len; p < end; p++) {
			const char *q;
			char name[256];
			struct ckpt_node *kid;

			if (*p != '"')
				continue;
			for (q = ++p; q < end && *q != '"'; q++)
				;
			if (q == end || (size_t)(q - p) >= sizeof(name))
				break;
			memcpy(name, p, q - p);
			name[q - p] = 0;
			p = q;
			kid = ckpt_node_child(n, name);
			if (kid && kid->kind == CKPT_N_TENSOR)
				kid->tensor->parameter = true;
		}
	}
	for (uint32_t i = 0; i < c->nnodes; i++) {
		struct ckpt_node *n = c->nodes[i];

		if (n->kind == CKPT_N_TENSOR && n->tensor->parameter)
			n->type = "Parameter";
	}
}

/* ---- constants.pkl ---- */

static int constants(struct ckpt *c, struct ptz_entry *e,
		     struct ckpt_node **out, struct diag *d)
{
	struct ckpt_node *n;
	int rc = ckpt_script_pickle(c, e, &c->doc2, d);

	if (rc)
		return rc;
	c->b->key_prefix = "constants/";
	rc = ckpt_build_doc(c, c->doc2, &n, d);
	c->b->key_prefix = NULL;
	if (rc)
		return rc;
	/* code/ calls item i CONSTANTS.c<i>: name them so */
	if (n->kind == CKPT_N_SEQ && n->val && n->val->kind == PKL_TUPLE &&
	    n->dir->nkids) {
		for (uint32_t i = 0; i < n->dir->nkids; i++) {
			char buf[16];
			struct ckpt_node *k = n->dir->kids[i];

			snprintf(buf, sizeof(buf), "c%u", i);
			k->name = arena_strndup(&c->arena, buf, strlen(buf));
			if (!k->name)
				return diag_nomem(d);
		}
		rc = ckpt_dir_fill(c->b, n, NULL, 0);	/* index the names */
	}
	*out = n;
	return rc;
}

/* ---- storages: data/<key> and constants/<key> ---- */

static struct ptz_entry *find2(struct ckpt *c, const char *dir,
			       const char *key)
{
	size_t n = strlen(dir) + strlen(key) + 1;
	char *rel = malloc(n);
	struct ptz_entry *e = NULL;

	if (rel) {
		snprintf(rel, n, "%s%s", dir, key);
		e = rec(c, rel);
		free(rel);
	}
	return e;
}

/*
 * Tie each storage to its record: data/<key> for data.pkl's, constants/
 * <key> for constants.pkl's (keyed "constants/<key>" here).  The mobile
 * exporter shares one storage context between the two pickles: its keys
 * ("3.storage") may name a record in the other folder.  torch skips
 * reading empty storages, so they may have none.
 */
static int storages(struct ckpt *c, struct diag *d)
{
	for (uint32_t i = 0; i < c->nstorages; i++) {
		struct ckpt_storage *s = c->storages[i];
		bool cst = !strncmp(s->key, "constants/", 10);
		const char *key = cst ? s->key + 10 : s->key;
		struct ptz_entry *e;
		int rc;

		if (s->rec)
			continue;	/* model.json names its records */
		e = find2(c, cst ? "constants/" : "data/", key);
		if (!e && ends_with(key, ".storage"))
			e = find2(c, cst ? "data/" : "constants/", key);
		if (!e && !s->nbytes)
			continue;
		if (!e)
			return diag_corrupt(d, s->pkl_off, "storage '%s' has "
					    "no record %s/%s%s", key,
					    c->zip.prefix, cst ? "constants/" :
					    "data/", key);
		rc = ckpt_storage_fits(s, e, d);
		if (rc)
			return rc;
		s->rec = e;
	}
	return 0;
}

/* ---- the whole archive ---- */

/* Put @extra (named already) beside the module's attributes, or, when
 * data.pkl's root is not an object, all under a new root. */
static int attach(struct ckpt *c, struct ckpt_node **extra, uint32_t n,
		  struct diag *d)
{
	struct ckpt_node *root = c->root, *all[4];

	if (root->kind == CKPT_N_DIR)
		return ckpt_dir_fill(c->b, root, extra, n);
	c->root = ckpt_node_synth(c->b, CKPT_N_DIR, "archive");
	if (!c->root)
		return diag_nomem(d);
	c->root->name = root->name;
	root->name = arena_strndup(&c->arena, "module", 6);
	root->step = CKPT_S_PART;
	if (!root->name)
		return diag_nomem(d);
	all[0] = root;
	memcpy(all + 1, extra, n * sizeof(*extra));
	return ckpt_dir_fill(c->b, c->root, all, n + 1);
}

int ckpt_script_open(struct ckpt *c, struct diag *d)
{
	static const unsigned char empty[] = "}.";	/* {} */
	struct ptz_entry *data = rec(c, "data.pkl");
	struct ptz_entry *cst = rec(c, "constants.pkl");
	struct ptz_entry *mj = rec(c, "model.json");
	struct ckpt_node *extra[2], *code;
	uint32_t n = 0;
	int rc;

	c->pkl_rec = data;
	if (!data && !mj)
		return diag_corrupt(d, c->zip.cdir_off, "TorchScript archive "
				    "without data.pkl or model.json");
	if (data) {
		rc = ckpt_script_pickle(c, data, &c->doc, d);
		c->pkl_off = data->data_off;
		if (!rc)
			rc = ckpt_build_model(c, d);
	} else {
		/* torch 1.0: the module is model.json's; data.pkl is {} */
		rc = pkl_parse(empty, 2, 0, &c->doc, d);
		if (!rc)
			rc = ckpt_build_begin(c, d);
		if (!rc)
			rc = ckpt_modeljson(c, mj, d);
		if (!rc)
			c->root->name = arena_strndup(&c->arena, "", 0);
		if (!rc && !c->root->name)
			rc = diag_nomem(d);
	}
	if (!rc)
		rc = code_tree(c, &code, d);
	if (rc)
		return rc;
	code->name = arena_strndup(&c->arena, "code", 4);
	code->step = CKPT_S_PART;
	extra[n++] = code;
	mark_parameters(c, code);
	/* a model.json archive's second document is its attributes.pkl */
	if (cst && !c->doc2) {
		rc = constants(c, cst, &extra[n], d);
		if (rc)
			return rc;
		extra[n]->name = arena_strndup(&c->arena, "constants", 9);
		extra[n++]->step = CKPT_S_PART;
	}
	if (!code->name || (n > 1 && !extra[1]->name))
		return diag_nomem(d);
	rc = attach(c, extra, n, d);
	if (!rc)
		rc = storages(c, d);
	return rc;
}
