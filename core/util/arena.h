/*
 * arena.h - a bump allocator for objects that live and die together (the
 * checkpoint model: nodes, tensors, names).  One malloc per 64 KiB or more
 * instead of one per object, and one free for all of them.
 */
#ifndef PT_UTIL_ARENA_H
#define PT_UTIL_ARENA_H

#include <stddef.h>

struct arena {
	struct arena_block *head;
	char *next, *end;
	char *pop;	/* the newest block is populated below this */
};

/* @n zeroed bytes aligned to 8 (not for long double), or NULL on ENOMEM. */
void *arena_alloc(struct arena *a, size_t n);

/* A copy of @s[0..@n) plus a NUL, or NULL on ENOMEM. */
char *arena_strndup(struct arena *a, const char *s, size_t n);

/*
 * Hand the whole pages at the end of the newest block that nothing uses
 * yet back to the kernel (blocks are populated ahead of use): for models
 * that stay open by the hundred, a sharded folder's shards.  They come
 * back, zeroed, if the arena grows again.
 */
void arena_trim(struct arena *a);

/* Free every block; a zeroed arena is fine and stays usable. */
void arena_release(struct arena *a);

#endif
