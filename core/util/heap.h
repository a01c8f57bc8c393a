/*
 * heap.h - the allocator settings of a process that opens checkpoints
 * (the mount daemon and every tool call util_heap_setup() first).
 */
#ifndef PT_UTIL_HEAP_H
#define PT_UTIL_HEAP_H

void util_heap_setup(void);

#endif
