/*
 * pkl_value.c - the value graph a pickle decodes into: node allocation in
 * chunks owned by the document, growable item arrays, freeing (a walk over
 * the chunks, never over the graph, which may be cyclic), and the small
 * accessors consumers use.  See pkl.h for the node layout.
 */
#ifndef PT_INTERNAL
#define PT_INTERNAL 1
#endif
#include "pkl_int.h"
#include "util/heap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_FIRST	32u
#define CHUNK_MAX	65536u
#define POP_STEP	8192u	/* nodes: 256 KiB */

struct pkl_call_ext pkl_no_ext;

int pkl_call_own(struct pkl_value *v)
{
	struct pkl_call_ext *x;

	if (v->has_x)
		return 0;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->args = v->u.call.ax.args;
	v->u.call.ax.x = x;
	v->has_x = true;
	return 0;
}

struct pkl_value *pkl_node_new(struct pkl_doc *doc, int kind, uint64_t off)
{
	struct pkl_chunk *c = doc->chunks;
	struct pkl_value *v;

	/* a node folding released (pkl_fold.c), but never for a global:
	   pkl_doc_each_global() goes by place, which must be their order */
	if (doc->free_nodes && kind != PKL_GLOBAL) {
		v = doc->free_nodes;
		doc->free_nodes = v->u.call.func;
		memset(v, 0, sizeof(*v));
		goto init;
	}
	if (!c || c->n == c->cap) {
		uint32_t cap = c ? c->cap * 2 : CHUNK_FIRST;

		if (cap > CHUNK_MAX)
			cap = CHUNK_MAX;
		/* Zeroing in bulk (or fresh pages) beats a memset per node. */
		c = calloc(1, sizeof(*c) + (size_t)cap * sizeof(c->v[0]));
		if (!c)
			return NULL;
		c->n = c->pop = 0;
		c->cap = cap;
		c->next = doc->chunks;
		doc->chunks = c;
	}
	if (c->n == c->pop) {
		/* a chunk's pages a step ahead, one call instead of a fault
		   each (heap.h); not all at once: they count in RSS */
		uint32_t k = c->cap - c->pop < POP_STEP ? c->cap - c->pop :
			     POP_STEP;

		util_populate(&c->v[c->pop], (size_t)k * sizeof(c->v[0]));
		c->pop += k;
	}
	v = &c->v[c->n++];
init:
	v->kind = (uint8_t)kind;
	v->id = doc->nnodes++;
	v->off = off;
	return v;
}

struct pkl_value **pkl_array_new(struct pkl_doc *doc, size_t k)
{
	struct pkl_value **a;

	if (k < sizeof(doc->free_arrays) / sizeof(doc->free_arrays[0]) &&
	    (a = doc->free_arrays[k])) {
		doc->free_arrays[k] = (struct pkl_value **)a[0];
		return a;
	}
	return arena_alloc(&doc->arena, k * sizeof(*a));
}

int pkl_vec_grow(struct pkl_value ***v, size_t *cap, size_t need)
{
	struct pkl_value **nv;
	size_t ncap;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 4;
	while (ncap < need)
		ncap *= 2;
	nv = realloc(*v, ncap * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = ncap;
	return 0;
}

/*
 * Free what @v owns besides itself (the node lives in a chunk).  Strings,
 * globals' names and tuples' items live in the document's arena; only
 * growable arrays (cap != 0) are malloc'd.
 */
static void node_release(struct pkl_value *v)
{
	switch (v->kind) {
	case PKL_TUPLE:
	case PKL_LIST:
	case PKL_DICT:
	case PKL_SET:
	case PKL_FROZENSET:
		if (v->u.items.cap)
			free(v->u.items.v);
		break;
	case PKL_CALL:
	case PKL_PERSID:
		if (v->has_x) {
			free(v->u.call.ax.x->list);
			free(v->u.call.ax.x->dict);
			free(v->u.call.ax.x);
		}
		break;
	default:
		break;
	}
}

void pkl_doc_free(struct pkl_doc *doc)
{
	struct pkl_chunk *c, *next;

	if (!doc)
		return;
	for (c = doc->chunks; c; c = next) {
		next = c->next;
		for (uint32_t i = 0; i < c->n; i++)
			node_release(&c->v[i]);
		free(c);
	}
	arena_release(&doc->arena);
	pkl_doc_free(doc->whole);
	free(doc->notes);
	free(doc);
}

bool pkl_is_global(const struct pkl_value *v, const char *module,
		   const char *name)
{
	return v && v->kind == PKL_GLOBAL &&
	       strcmp(v->u.global.module, module) == 0 &&
	       strcmp(v->u.global.name, name) == 0;
}

size_t pkl_len(const struct pkl_value *v)
{
	if (!v)
		return 0;
	switch (v->kind) {
	case PKL_TUPLE:
	case PKL_LIST:
	case PKL_SET:
	case PKL_FROZENSET:
		return v->u.items.n;
	case PKL_DICT:
		return v->u.items.n / 2;
	default:
		return 0;
	}
}

struct pkl_value *pkl_item(const struct pkl_value *v, size_t i)
{
	if (!v || (v->kind != PKL_TUPLE && v->kind != PKL_LIST) ||
	    i >= v->u.items.n)
		return NULL;
	return v->u.items.v[i];
}

const char *pkl_kind_name(int kind)
{
	static const char *const names[] = {
		[PKL_NONE] = "None",
		[PKL_BOOL] = "bool",
		[PKL_INT] = "int",
		[PKL_BIGINT] = "big int",
		[PKL_FLOAT] = "float",
		[PKL_STR] = "str",
		[PKL_BYTES] = "bytes",
		[PKL_STRING] = "string",
		[PKL_TUPLE] = "tuple",
		[PKL_LIST] = "list",
		[PKL_DICT] = "dict",
		[PKL_SET] = "set",
		[PKL_FROZENSET] = "frozenset",
		[PKL_GLOBAL] = "global",
		[PKL_CALL] = "call",
		[PKL_PERSID] = "persistent id",
		[PKL_EXT] = "extension",
		[PKL_BUFFER] = "buffer",
		[PKL_FOLDED] = "call",
	};

	if (kind < 0 || (size_t)kind >= sizeof(names) / sizeof(names[0]) ||
	    !names[kind])
		return "unknown";
	return names[kind];
}

void pkl_doc_each(const struct pkl_doc *doc,
		  void (*fn)(const struct pkl_value *v, void *arg), void *arg)
{
	const struct pkl_chunk *c, *prev = NULL;

	/* chunks are newest first: visit the oldest chunk, then the next */
	for (;;) {
		for (c = doc->chunks; c && c->next != prev; c = c->next)
			;
		if (!c)
			return;
		for (uint32_t i = 0; i < c->n; i++)
			fn(&c->v[i], arg);
		if (c == doc->chunks)
			return;
		prev = c;
	}
}

struct each_global {
	void (*fn)(const struct pkl_value *g, void *arg);
	void *arg;
};

static void if_global(const struct pkl_value *v, void *arg)
{
	const struct each_global *e = arg;

	if (v->kind == PKL_GLOBAL)
		e->fn(v, e->arg);
}

void pkl_doc_each_global(const struct pkl_doc *doc,
			 void (*fn)(const struct pkl_value *g, void *arg),
			 void *arg)
{
	struct each_global e = { fn, arg };

	pkl_doc_each(doc, if_global, &e);
}
