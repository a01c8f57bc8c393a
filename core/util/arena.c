/*
 * arena.c - bump allocation in blocks that double up to 1 MiB; see arena.h.
 */
#include "arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_MIN	(64u << 10)
#define ARENA_MAX	(1u << 20)

struct arena_block {
	struct arena_block *next;
	size_t size;
	alignas(max_align_t) char data[];
};

void *arena_alloc(struct arena *a, size_t n)
{
	size_t align = alignof(max_align_t);
	struct arena_block *b;
	size_t size;
	char *p;

	n = (n + align - 1) & ~(align - 1);
	if (n == 0)
		n = align;
	if ((size_t)(a->end - a->next) < n || !a->next) {
		size = a->head ? a->head->size * 2 : ARENA_MIN;
		if (size > ARENA_MAX)
			size = ARENA_MAX;
		if (size < n)
			size = n;
		b = calloc(1, sizeof(*b) + size);
		if (!b)
			return NULL;
		b->size = size;
		b->next = a->head;
		a->head = b;
		a->next = b->data;
		a->end = b->data + size;
	}
	p = a->next;
	a->next += n;
	return p;	/* calloc'd and never reused: already zero */
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);

	if (p)
		memcpy(p, s, n);
	return p;
}

void arena_release(struct arena *a)
{
	struct arena_block *b, *next;

	for (b = a->head; b; b = next) {
		next = b->next;
		free(b);
	}
	memset(a, 0, sizeof(*a));
}
