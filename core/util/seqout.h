/*
 * seqout.h - one output file written front to back, the way every
 * streaming writer (safetensors, GGUF) writes its data: bytes appended
 * through a few large buffers, which a second thread writes while the
 * caller fills the next, with O_DIRECT where the file system takes it.
 *
 * Why direct: a conversion writes gigabytes once and never reads them
 * back.  Through the page cache each byte is copied into a fresh page
 * (on a VM, often a page the host has to back first), then written back,
 * and the whole cache is evicted for it; ptfs fsyncs the result anyway.
 * Direct writes from the same reused buffers skip that copy: 2 GB
 * written and fsynced in 1.7 s instead of 5 to 7 s on the development
 * VM (docs/benchmarks.md).  Only whole aligned blocks go direct; the
 * unaligned head and tail of a run, and kernel copies (seqout_copy()
 * where the file system can clone the blocks), go through the file's own
 * descriptor, so every page of the file is written one way only.  Where O_DIRECT is refused (at open
 * or at the first write) everything goes through the descriptor.
 */
#ifndef PT_UTIL_SEQOUT_H
#define PT_UTIL_SEQOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct seqout;

/* Write to @fd (kept open by the caller, and not written by it until
 * seqout_close()) from offset @pos on.  0 or -ENOMEM. */
int seqout_open(struct seqout **sp, int fd, uint64_t pos);

/* Append @n bytes.  0, or the first write error (-errno), which sticks. */
int seqout_put(struct seqout *s, const void *p, size_t n);

/* Where the next bytes may be made in place: *@n > 0 bytes, valid until
 * the next call on @s.  seqout_commit() appends the first @n of them. */
void *seqout_room(struct seqout *s, size_t *n);
int seqout_commit(struct seqout *s, size_t n);

/* Go on at @pos (the bytes in between are left as they are).  0/-errno. */
int seqout_seek(struct seqout *s, uint64_t pos);

/*
 * Append @n bytes at @in_off of @in: copied in the kernel
 * (io_copy_range()) where seqout_kernel_copies() says so, else read into
 * the buffers and written as seqout_put() writes.  0, -errno, or
 * -ENODATA when @in ends early.
 */
int seqout_copy(struct seqout *s, int in, uint64_t in_off, uint64_t n);

/*
 * Whether seqout_copy() from @in at @in_off, appended next, is a kernel
 * copy: when there is no direct twin (the kernel's copy then saves one
 * through user space), or where the file system can clone the blocks
 * (same file system, sharing extents, the same offset within a block).
 * Else a kernel copy would go through the page cache and the fsync
 * after, at half the speed of the direct writes on the development VM
 * (docs/benchmarks.md, issue 43), so the bytes are read instead.
 */
bool seqout_kernel_copies(const struct seqout *s, int in, uint64_t in_off);

/* Everything appended so far in the file (not synced), for a caller that
 * writes the file itself next; then seqout_seek() past what it wrote.
 * 0 or the first write error. */
int seqout_flush(struct seqout *s);

/* The offset the next byte goes to. */
uint64_t seqout_pos(const struct seqout *s);

/* Write what is left and free @s (NULL: nothing).  0 or the first write
 * error; @s is gone either way. */
int seqout_close(struct seqout *s);

#endif
