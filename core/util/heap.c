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

void util_heap_setup(void)
{
#ifdef M_MMAP_THRESHOLD
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}

void util_populate(void *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
	uintptr_t from = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
	uintptr_t to = ((uintptr_t)p + n) & ~(uintptr_t)4095;

	if (n >= 128 * 1024 && to > from)
		madvise((void *)from, to - from, MADV_POPULATE_WRITE);
#else
	(void)p;
	(void)n;
#endif
}
