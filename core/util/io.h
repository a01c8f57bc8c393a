/*
 * io.h - the few file operations every part of the core needs done the
 * same careful way: whole reads and writes at an offset (pread/pwrite
 * retried until done), a byte range copied between files, fsync of the
 * directory that holds a path, and the names ptfs gives its files beside
 * a checkpoint.
 */
#ifndef PT_UTIL_IO_H
#define PT_UTIL_IO_H

#include <stddef.h>
#include <stdint.h>

/* Read all @len bytes at @off: 0, -errno, or -ENODATA if the file ends. */
int io_pread_full(int fd, void *buf, size_t len, uint64_t off);

struct diag;

/*
 * io_pread_full() for readers of a checkpoint: a failure is said in @d,
 * an I/O error with its offset, a file that ends too soon as corruption
 * at the offset where its bytes ran out, naming @what was being read
 * ("tensor data"; NULL: "the data").  0 or -errno.
 */
int io_pread_diag(int fd, void *buf, size_t len, uint64_t off,
		  const char *what, struct diag *d);

/* Write all @len bytes at @off: 0 or -errno. */
int io_pwrite_full(int fd, const void *buf, size_t len, uint64_t off);

/*
 * Copy @len bytes at @in_off of @in to @out_off of @out: copy_file_range
 * (in the kernel; a reflink where the file system shares extents), else
 * pread/pwrite through a 1 MiB buffer.  0, -errno, or -ENODATA when @in
 * ends early.
 */
int io_copy_range(int in, uint64_t in_off, int out, uint64_t out_off,
		  uint64_t len);

/* fsync the directory holding @path (so a rename in it is durable). */
int io_fsync_dir_of(const char *path);

/* "DIR/.BASE@suffix" for @path "DIR/BASE" (malloc'd; NULL on ENOMEM). */
char *io_beside(const char *path, const char *suffix);

#endif
