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
#include "heap.h"

#include <malloc.h>

void util_heap_setup(void)
{
#ifdef M_MMAP_THRESHOLD
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}
