/*
 * heap.h - the allocator settings of a process that opens checkpoints
 * (the mount daemon and every tool call util_heap_setup() first).
 */
#ifndef PT_UTIL_HEAP_H
#define PT_UTIL_HEAP_H

#include <stddef.h>

void util_heap_setup(void);
/*
 * Fault in @p[0..@n), a malloc'd block about to be written whole, in one
 * call rather than a page fault a page (in a VM each costs microseconds).
 * Nothing for small blocks; failures are ignored: the faults still come.
 */
void util_populate(void *p, size_t n);

#endif
