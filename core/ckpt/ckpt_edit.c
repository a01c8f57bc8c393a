/*
 * ckpt_edit.c - the in-memory half of editing a checkpoint: new nodes,
 * storages and tensors, new values for python values, and the question the
 * writer asks, "does the object structure still match data.pkl?".  The
 * on-disk half (journal, data files, write-back) is core/ovl.
 *
 * A new file becomes a python value at its close() when its directory
 * holds values, not tensors, and its text is one (ckpt_dir_takes_values(),
 * ckpt_value_parse_new()); else it is a tensor of its bytes.
 *
 * A directory stays *clean* while its first norig slots hold the children
 * it was opened with, under their own names and values, and nothing lives
 * after them.  Children that leave become NULL slots, new ones are
 * appended, so readdir offsets (slot numbers) stay stable while a tool
 * deletes what it is listing.
 */
#include "ckpt_int.h"
#include "util/utf8.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ckpt_node *ckpt_node_fresh(struct ckpt *c, int kind, const char *type)
{
	struct ckpt_node *n;

	if (c->nnodes >= CKPT_MAX_NODES)
		return NULL;
	n = arena_alloc(&c->arena, sizeof(*n));
	if (!n || ckpt_node_parts(c, n, kind) ||
	    ckpt_push((void ***)&c->nodes, &c->nnodes, &c->b->nodes_cap, n))
		return NULL;
	n->kind = kind;
	n->type = type;
	n->fresh = true;
	n->step = CKPT_S_KEY;
	n->id = c->nnodes - 1;
	return n;
}

struct ckpt_storage *ckpt_storage_fresh(struct ckpt *c)
{
	struct ckpt_storage *s = arena_alloc(&c->arena, sizeof(*s));

	if (!s || ckpt_push((void ***)&c->storages, &c->nstorages,
			    &c->b->storages_cap, s))
		return NULL;
	s->key = "";
	s->dtype = ckpt_dtype_by_name("uint8");
	s->location = "cpu";
	s->index = c->nstorages - 1;
	s->fd = -1;
	s->fresh = true;
	s->modified = true;
	return s;
}

struct ckpt_tensor *ckpt_tensor_fresh(struct ckpt *c, struct ckpt_storage *s)
{
	struct ckpt_tensor *t;

	t = arena_alloc(&c->arena, sizeof(*t) +
			2 * CKPT_MAX_DIMS * sizeof(int64_t));
	if (!t || ckpt_push((void ***)&c->tensors, &c->ntensors,
			    &c->b->tensors_cap, t))
		return NULL;
	t->shape = (int64_t *)(t + 1);
	t->index = c->ntensors - 1;
	t->x = &ckpt_no_ext;
	t->kind = CKPT_T_STRIDED;
	t->fresh = true;
	t->shown = true;
	t->contiguous = true;
	t->dtype = s->dtype;
	t->storage = s;
	s->ntensors = 1;
	ckpt_tensor_fresh_sync(t);
	return t;
}

void ckpt_tensor_fresh_sync(struct ckpt_tensor *t)
{
	struct ckpt_storage *s = t->storage;
	uint64_t isz = t->dtype->size;

	if (!t->shape_set) {
		t->ndim = 1;
		t->shape[0] = s->nbytes / isz;
	}
	/* user.shape bounded the element count; an empty tensor whose
	   strides overflow is never read through them */
	(void)ckpt_tensor_c_strides(t);
	t->numel = 1;
	for (int i = 0; i < t->ndim; i++)
		t->numel *= t->shape[i];
	s->dtype = t->dtype;
	s->numel = s->nbytes / isz;
}

int ckpt_tensor_fresh_fits(const struct ckpt_tensor *t)
{
	if (t->storage->nbytes % t->dtype->size)
		return -EINVAL;
	if (t->shape_set && ckpt_tensor_nbytes(t) != t->storage->nbytes)
		return -EINVAL;
	return 0;
}

bool ckpt_dict_type(const char *type)
{
	return !strcmp(type, "OrderedDict") || !strcmp(type, "dict") ||
	       !strcmp(type, "Counter") || !strcmp(type, "defaultdict");
}

int ckpt_dir_step(const struct ckpt_node *dir)
{
	if (dir->kind == CKPT_N_SEQ)
		return CKPT_S_INDEX;
	if (dir->val && dir->val->kind == PKL_CALL && !ckpt_dict_type(dir->type))
		return CKPT_S_ATTR;
	return CKPT_S_KEY;
}

const struct pkl_value *ckpt_node_state(const struct ckpt_node *n)
{
	const struct pkl_value *v = n->val;

	return v && v->kind == PKL_CALL ? pkl_call_x(v)->state : NULL;
}

bool ckpt_node_rekeyed(const struct ckpt_node *n)
{
	return n->fresh || !ckpt_node_home(n) ||
	       n->parent != ckpt_node_home(n) ||
	       strcmp(n->name, ckpt_node_home_name(n));
}

bool ckpt_dir_clean(const struct ckpt_node *dir)
{
	if (dir->fresh)
		return false;
	for (uint32_t i = 0; i < dir->dir->nkids; i++) {
		const struct ckpt_node *k = dir->dir->kids[i];

		/* (a row is as the pickle has it: a change makes it a node) */
		if (i >= dir->dir->norig ? k != NULL :
		    !k || (!ckpt_is_row(k) && (k->edited || k->fresh ||
					       ckpt_node_rekeyed(k))))
			return false;
	}
	return true;
}

bool ckpt_changed(const struct ckpt *c)
{
	for (uint32_t i = 0; i < c->nmeta; i++)
		if (ckpt_meta_changed(&c->meta[i]))
			return true;	/* metadata edited (ckpt_meta.c) */
	/* (a row is never changed: a change makes it a node first) */
	for (uint32_t i = 0; i < c->nstorages; i++)
		if (!ckpt_is_row(c->storages[i]) && c->storages[i]->retyped)
			return true;	/* new storage classes (core/cvt) */
	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct ckpt_node *n = c->nodes[i];

		if (ckpt_is_row(n))
			continue;
		if ((n->kind == CKPT_N_DIR || n->kind == CKPT_N_SEQ) &&
		    !n->dead && !ckpt_dir_clean(n))
			return true;
	}
	return false;
}

/* The types a value file may be rewritten as. */
static const char *const literal_types[] = {
	"int", "float", "bool", "NoneType", "str", "bytes", "list", "tuple",
};

bool ckpt_value_editable(const struct ckpt_node *n)
{
	if (n->kind != CKPT_N_VALUE)
		return false;
	for (size_t i = 0; i < sizeof(literal_types) / sizeof(*literal_types);
	     i++)
		if (!strcmp(n->type, literal_types[i]))
			return true;
	return false;
}

/* Python's int() of @s (no underscores): 0 or -EINVAL / -ERANGE. */
static int parse_int(const char *s, int64_t *out)
{
	char *end;
	long long v;

	while (*s == ' ' || *s == '\t')
		s++;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s)
		return -EINVAL;
	while (*end == ' ' || *end == '\t')
		end++;
	if (*end)
		return -EINVAL;
	if (errno)
		return -ERANGE;
	*out = v;
	return 0;
}

static int parse_float(const char *s, double *out)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	if (!*s || (*s != '-' && *s != '+' && *s != '.' &&
		    (*s < '0' || *s > '9') && strncmp(s, "inf", 3) &&
		    strncmp(s, "nan", 3)))
		return -EINVAL;
	*out = strtod(s, &end);
	while (*end == ' ' || *end == '\t')
		end++;
	return *end ? -EINVAL : 0;
}

/* A scalar literal; an int past 64 bits -ERANGE, or with @wide a float
 * (a value file's: refused then as a change of type from an int). */
static int literal(const char *text, size_t len, bool wide,
		   struct ckpt_literal *out)
{
	char buf[64];
	int64_t i;
	double f;
	int rc;

	memset(out, 0, sizeof(*out));
	/* a literal: one line, surrounding blanks and one newline ignored */
	while (len && (text[len - 1] == '\n' || text[len - 1] == ' ' ||
		       text[len - 1] == '\t'))
		len--;
	if (len >= sizeof(buf) || memchr(text, '\n', len) ||
	    memchr(text, 0, len))
		return -EINVAL;
	memcpy(buf, text, len);
	buf[len] = 0;
	if (!strcmp(buf, "True") || !strcmp(buf, "False")) {
		out->type = "bool";
		out->i = buf[0] == 'T';
	} else if (!strcmp(buf, "None")) {
		out->type = "NoneType";
	} else if (!(rc = parse_int(buf, &i))) {
		out->type = "int";
		out->i = i;
	} else if (rc == -ERANGE && !wide) {
		return rc;
	} else if (!parse_float(buf, &f)) {
		out->type = "float";
		out->f = f;
	} else {
		return -EINVAL;
	}
	return 0;
}

/* Is @text (@len bytes) text: UTF-8 without surrogates, and no control
 * character but tab, newline and carriage return? */
static bool is_text(const char *text, size_t len)
{
	const unsigned char *p = (const unsigned char *)text;

	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t k = utf8_get(p + i, len - i, &cp);

		if (!k || (cp >= 0xd800 && cp <= 0xdfff) || cp == 0x7f ||
		    (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r'))
			return false;
		i += k;
	}
	return true;
}

/*
 * A quoted str, 'x' or "x" (blanks and one newline around it ignored),
 * with python's escapes \\ \' \" \n \t \r: its text into @buf (@len
 * bytes at least), its length in *@outlen.  false if @text is none.
 */
static bool parse_quoted(const char *text, size_t len, char *buf,
			 size_t *outlen)
{
	size_t k = 0;
	char q;

	while (len && strchr(" \t\n", text[len - 1]))
		len--;
	while (len && (*text == ' ' || *text == '\t'))
		text++, len--;
	if (len < 2 || (text[0] != '\'' && text[0] != '"') ||
	    text[len - 1] != text[0])
		return false;
	q = text[0];
	for (size_t i = 1; i < len - 1; i++) {
		char ch = text[i];

		if (ch == q || ch == '\n')
			return false;	/* the quote ends before the end */
		if (ch == '\\') {
			if (++i >= len - 1)
				return false;
			ch = text[i];
			ch = ch == 'n' ? '\n' : ch == 't' ? '\t' :
			     ch == 'r' ? '\r' : ch;
			if (!strchr("\\'\"\n\t\r", ch))
				return false;	/* \x41 and the like: no */
		}
		buf[k++] = ch;
	}
	*outlen = k;
	return true;
}

bool ckpt_dir_takes_values(const struct ckpt_node *dir)
{
	for (uint32_t i = 0; i < dir->dir->nkids; i++) {
		const struct ckpt_node *k = dir->dir->kids[i];
		const struct ckpt_tensor *t;

		if (!k)
			continue;
		if (ckpt_is_row(k))
			return false;	/* (rows stand for tensors) */
		if (k->kind == CKPT_N_LINK && k->target)
			k = k->target;
		if (k->kind != CKPT_N_TENSOR)
			continue;
		t = k->tensor;
		/* another new file of plain bytes is no tensor yet */
		if (!t || !ckpt_tensor_untyped(t))
			return false;
	}
	return true;
}

bool ckpt_tensor_untyped(const struct ckpt_tensor *t)
{
	return t->fresh && !t->fixed && !t->shape_set &&
	       !strcmp(t->dtype->name, "uint8");
}

int ckpt_value_parse_new(const char *text, size_t len, char *buf,
			 struct ckpt_literal *out)
{
	int rc;

	memset(out, 0, sizeof(*out));
	if (!len || !is_text(text, len))
		return -EINVAL;
	rc = literal(text, len, false, out);
	if (rc != -EINVAL)
		return rc;	/* a literal, or an int past 64 bits */
	out->type = "str";
	if (parse_quoted(text, len, buf, &out->len)) {
		out->text = buf;
		return 0;
	}
	/* any other text: a str of it, as a str value file takes it */
	if (text[len - 1] == '\n')
		len--;
	out->text = text;
	out->len = len;
	return 0;
}

int ckpt_value_new(struct ckpt *c, struct ckpt_node *n,
		   const struct ckpt_literal *lit)
{
	struct ckpt_tensor *t = n->tensor;

	if (!ckpt_node_ed(c, n))
		return -ENOMEM;
	n->ed->file = t;
	n->kind = CKPT_N_VALUE;
	n->tensor = NULL;
	n->text = NULL;
	if (ckpt_value_set(c, n, lit)) {
		n->kind = CKPT_N_TENSOR;
		n->tensor = t;
		n->ed->file = NULL;
		return -ENOMEM;
	}
	return 0;
}

int ckpt_literal_parse(const char *text, size_t len, struct ckpt_literal *out)
{
	return literal(text, len, false, out);
}

int ckpt_value_parse(const struct ckpt_node *n, const char *text,
		     size_t len, struct ckpt_literal *out)
{
	memset(out, 0, sizeof(*out));
	if (!strcmp(n->type, "str") || !strcmp(n->type, "bytes")) {
		bool is_str = n->type[1] == 't';

		if (is_str && len && text[len - 1] == '\n')
			len--;
		if (is_str && memchr(text, 0, len))
			return -EINVAL;
		out->type = is_str ? "str" : "bytes";
		out->text = text;
		out->len = len;
		return 0;
	}
	/* a list of scalars: "[...]" or "(...)", checked whole here */
	if ((!strcmp(n->type, "list") || !strcmp(n->type, "tuple")) &&
	    ckpt_scalars_bracketed(text, len)) {
		struct ckpt_scalars s;
		int rc = ckpt_scalars_parse(text, len, &s);

		if (rc)
			return rc == -ENOMEM ? rc : -EINVAL;
		free(s.v);
		out->type = s.tuple ? "tuple" : "list";
		out->text = text;
		out->len = len;
		return 0;
	}
	return literal(text, len, true, out);
}

const char *ckpt_value_wants(const struct ckpt_node *n)
{
	if (!strcmp(n->type, "list"))
		return "a list of python scalars: [item, ...], each an int, "
		       "float, True, False or None";
	if (!strcmp(n->type, "tuple"))
		return "a tuple of python scalars: (item, ...), each an int, "
		       "float, True, False or None";
	return "a python literal";
}

int ckpt_value_set(struct ckpt *c, struct ckpt_node *n,
		   const struct ckpt_literal *lit)
{
	char buf[40], *text;
	size_t len;

	(void)c;
	if (!strcmp(lit->type, "list") || !strcmp(lit->type, "tuple")) {
		struct ckpt_scalars s;
		int rc = ckpt_scalars_parse(lit->text, lit->len, &s);

		if (rc)
			return rc;
		text = ckpt_scalars_text(&s, &len);
		free(s.v);
		if (!text)
			return -ENOMEM;
	} else if (!strcmp(lit->type, "str") || !strcmp(lit->type, "bytes")) {
		len = lit->len;
		text = malloc(len + 1);
		if (!text)
			return -ENOMEM;
		memcpy(text, lit->text, len);
		text[len] = 0;
	} else {
		if (!strcmp(lit->type, "bool"))
			snprintf(buf, sizeof(buf), "%s", lit->i ? "True" :
				 "False");
		else if (!strcmp(lit->type, "NoneType"))
			snprintf(buf, sizeof(buf), "None");
		else if (!strcmp(lit->type, "int"))
			snprintf(buf, sizeof(buf), "%lld", (long long)lit->i);
		else
			ckpt_float_repr(lit->f, buf, sizeof(buf));
		len = strlen(buf);
		text = strdup(buf);
		if (!text)
			return -ENOMEM;
	}
	free(n->text);
	n->text = text;
	n->textlen = len;
	n->type = lit->type;
	n->edited = true;
	return 0;
}

/* ---- shared containers (ckpt_node_drop) ---- */

static int link_cmp(const void *a, const void *b)
{
	const struct ckpt_node *x = *(struct ckpt_node *const *)a;
	const struct ckpt_node *y = *(struct ckpt_node *const *)b;

	if (x->target->id != y->target->id)
		return x->target->id < y->target->id ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* The link index: every LINK node, sorted by target, then by id. */
static int links_make(struct ckpt *c)
{
	struct ckpt_build *b = c->b;
	uint32_t n = 0;

	if (b->links_made)
		return 0;
	for (uint32_t i = 0; i < c->nnodes; i++)
		n += c->nodes[i]->kind == CKPT_N_LINK;
	b->links = arena_alloc(&c->arena, (n ? n : 1) * sizeof(*b->links));
	if (!b->links)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i]->kind == CKPT_N_LINK)
			b->links[b->nlinks++] = c->nodes[i];
	qsort(b->links, b->nlinks, sizeof(*b->links), link_cmp);
	b->links_made = true;
	return 0;
}

/* Is @n in the tree: not dead, nor any directory above it? */
static bool node_live(const struct ckpt *c, const struct ckpt_node *n)
{
	for (int depth = 0; n && depth <= CKPT_MAX_DEPTH + 8; depth++) {
		if (n->dead)
			return false;
		if (n == c->root)
			return true;
		n = n->parent;
	}
	return false;
}

/* The first live link to @n, or NULL. */
static struct ckpt_node *live_link(struct ckpt *c, const struct ckpt_node *n)
{
	struct ckpt_build *b = c->b;
	uint32_t lo = 0, hi = b->nlinks;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (b->links[mid]->target->id < n->id)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < b->nlinks && b->links[lo]->target == n; lo++)
		if (node_live(c, b->links[lo]))
			return b->links[lo];
	return NULL;
}

/* Is @p @top or inside it, through live directories? */
static bool under(const struct ckpt_node *p, const struct ckpt_node *top)
{
	for (int depth = 0; p && depth <= CKPT_MAX_DEPTH + 8; depth++) {
		if (p == top)
			return true;
		if (p->dead)
			return false;
		p = p->parent;
	}
	return false;
}

/*
 * Bring back what removals took out of @top's subtree: dead nodes still
 * parented there whose slot is empty and whose name is free.  Nodes are
 * made parents first (ckpt_tree.c builds a container before its
 * children), so one pass in id order restores a directory before its
 * children are considered.
 */
static void restore_subtree(struct ckpt *c, struct ckpt_node *top)
{
	for (uint32_t i = top->id + 1; i < c->nnodes; i++) {
		struct ckpt_node *m = c->nodes[i], *p = m->parent;

		if (!m->dead || m->fresh || !p || p != ckpt_node_home(m) ||
		    m->index >= p->dir->nkids || p->dir->kids[m->index] ||
		    strcmp(m->name, ckpt_node_home_name(m)) || !under(p, top) ||
		    ckpt_node_child(p, m->name))
			continue;
		if (ckpt_dir_restore(c, p, m))
			return;	/* ENOMEM: the rest stays removed */
		m->dead = false;
	}
}

struct ckpt_node *ckpt_node_drop(struct ckpt *c, struct ckpt_node *dir,
				 struct ckpt_node *n)
{
	struct ckpt_node *l;

	ckpt_dir_remove(dir, n);
	n->dead = true;
	if ((n->kind != CKPT_N_DIR && n->kind != CKPT_N_SEQ) || n->fresh ||
	    !c->b || links_make(c) || !(l = live_link(c, n)) ||
	    ckpt_node_keep_home(c, n))
		return NULL;
	(void)ckpt_dir_swap(c, l->parent, l, n);	/* home kept: no fail */
	l->dead = true;
	n->dead = false;
	restore_subtree(c, n);
	return n;
}
