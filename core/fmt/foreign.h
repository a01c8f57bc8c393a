/*
 * foreign.h - naming the files that are not checkpoints (foreign.c), for
 * formats.c's sniff().  Internal to core/fmt.
 */
#ifndef PT_FMT_FOREIGN_H
#define PT_FMT_FOREIGN_H

#include <stdbool.h>
#include <stddef.h>

/* True when @h (@n first bytes of a file) is a known other format; then
 * @buf (@size bytes) holds "WHAT, not a checkpoint (HINT)". */
bool ckpt_foreign(const unsigned char *h, size_t n, char *buf, size_t size);

#endif
