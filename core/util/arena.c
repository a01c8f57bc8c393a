/*
 * arena.c - bump allocation in blocks that double up to 1 MiB; see arena.h.
 *
 * Blocks are populated ahead of use, ARENA_STEP at a time
 * (MADV_POPULATE_WRITE): in a VM a page fault costs microseconds, and a
 * 100,000-tensor model touches tens of thousands of pages; one call per
 * 256 KiB replaces 64 faults.  A populated page counts in RSS whether it
 * is used or not, so the step, not the block, bounds what is resident
 * for nothing at the end of a block: populating whole blocks
 * (MAP_POPULATE) left half a block on average in each of the model's and
 * the pickle's arenas, about 10 bytes a tensor of a 100,000-tensor open
 * (50 with 4 MiB blocks; docs/benchmarks.md, "Memory per tensor").
 */
#define _DEFAULT_SOURCE		/* MAP_ANONYMOUS, MADV_POPULATE_WRITE */
#include "arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * Blocks are mmap'd, and LeakSanitizer looks for pointers in the heap, not
 * in mappings of our own: what only arena memory points to (a value
 * node's malloc'd text) would be reported as leaked whenever a leak check
 * runs while a checkpoint is open (libFuzzer runs one after any input
 * that allocated more than it freed).  Under ASan the blocks are roots.
 */
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_LSAN 1
#endif
#endif
#ifdef ARENA_LSAN
#include <sanitizer/lsan_interface.h>
#define lsan_root(p, n)		__lsan_register_root_region(p, n)
#define lsan_unroot(p, n)	__lsan_unregister_root_region(p, n)
#else
#define lsan_root(p, n)		((void)(p), (void)(n))
#define lsan_unroot(p, n)	((void)(p), (void)(n))
#endif

#define ARENA_MIN	(64u << 10)
#define ARENA_MAX	(1u << 20)
#define ARENA_STEP	(256u << 10)	/* a multiple of the page size */
#ifndef MADV_POPULATE_WRITE	/* Linux 5.14, asm-generic/mman-common.h */
#define MADV_POPULATE_WRITE	23
#endif
/*
 * 8, not alignof(max_align_t) (16): what arenas hold is pointers, 64-bit
 * integers, doubles and strings, and 16 cost about 8 bytes on each of the
 * several names and strings a tensor has (docs/design.md, "Memory per
 * tensor").  Nothing here may hold a long double.
 */
#define ARENA_ALIGN	8u

struct arena_block {
	struct arena_block *next;
	size_t size;
	alignas(ARENA_ALIGN) char data[];
};

/*
 * Populate the newest block from a->pop past a->next, in whole steps.  A
 * kernel without MADV_POPULATE_WRITE refuses it, and the pages then come
 * one fault at a time, as they would without the call.
 */
static void populate(struct arena *a)
{
	size_t need = (size_t)(a->next - a->pop);
	size_t len = (need + ARENA_STEP - 1) / ARENA_STEP * ARENA_STEP;

	if (len > (size_t)(a->end - a->pop))
		len = (size_t)(a->end - a->pop);
	(void)madvise(a->pop, len, MADV_POPULATE_WRITE);
	a->pop += len;
}

void *arena_alloc(struct arena *a, size_t n)
{
	size_t align = ARENA_ALIGN;
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
		b = mmap(NULL, sizeof(*b) + size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (b == MAP_FAILED)
			return NULL;
		lsan_root(b, sizeof(*b) + size);
		b->size = size;
		b->next = a->head;
		a->head = b;
		a->next = b->data;
		a->end = b->data + size;
		a->pop = (char *)b;	/* page-aligned */
	}
	p = a->next;
	a->next += n;
	if (a->next > a->pop)
		populate(a);
	return p;	/* fresh anonymous pages, never reused: zero */
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);

	if (p)
		memcpy(p, s, n);
	return p;
}

void arena_trim(struct arena *a)
{
	long ps = sysconf(_SC_PAGESIZE);
	uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096, from, to;

	if (!a->head)
		return;
	from = ((uintptr_t)a->next + page - 1) & ~(page - 1);
	to = (uintptr_t)a->end & ~(page - 1);
	/* private anonymous pages read as zero after this, as arena_alloc()
	   promises */
	if (to > from) {
		madvise((void *)from, to - from, MADV_DONTNEED);
		if (a->pop > (char *)from)
			a->pop = (char *)from;
	}
}

void arena_release(struct arena *a)
{
	struct arena_block *b, *next;

	for (b = a->head; b; b = next) {
		next = b->next;
		lsan_unroot(b, sizeof(*b) + b->size);
		munmap(b, sizeof(*b) + b->size);
	}
	memset(a, 0, sizeof(*a));
}
