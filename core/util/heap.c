/*
 * heap.c - the allocator settings of a process that opens checkpoints.
 *
 * glibc serves a request of 128 KiB or more with a mapping of its own and,
 * each time such a block is freed, raises that threshold to the block's
 * size (up to 32 MiB).  Opening a checkpoint frees big blocks early (the
 * zip reader's central directory: 6 MB for 100,000 tensors), so the pickle
 * memo and the growing arrays that came after it were served from the
 * heap, where every realloc left the old copy behind, resident: 48 bytes
 * a tensor of the open's peak (docs/design.md, "Memory per tensor").  A
 * fixed threshold keeps big blocks in their own mappings, grown with
 * mremap and returned to the kernel when freed.
 */
#define _DEFAULT_SOURCE		/* MADV_POPULATE_WRITE */
#include "heap.h"

#include <malloc.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* from this size on, a block is a mapping of its own */
#define MMAP_THRESHOLD	(128 * 1024)

void util_heap_setup(void)
{
#ifdef M_MMAP_THRESHOLD
	mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD);
#endif
}

void util_populate(void *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
	long ps = sysconf(_SC_PAGESIZE);
	uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
	uintptr_t from = ((uintptr_t)p + page - 1) & ~(page - 1);
	uintptr_t to = ((uintptr_t)p + n) & ~(page - 1);

	/* a smaller block shares its pages with the heap's other blocks */
	if (n >= MMAP_THRESHOLD && to > from)
		madvise((void *)from, to - from, MADV_POPULATE_WRITE);
#else
	(void)p;
	(void)n;
#endif
}
