/*
 * heap.h - the allocator settings of a process that opens checkpoints
 * (the mount daemon and every tool call util_heap_setup() first).
 */
#ifndef PT_UTIL_HEAP_H
#define PT_UTIL_HEAP_H

#include <stddef.h>

void util_heap_setup(void);
void util_populate(void *p, size_t n);

#endif
