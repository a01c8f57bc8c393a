/*
 * io.h - the few file operations every part of the core needs done the
 * same careful way: whole reads and writes at an offset (pread/pwrite
 * retried until done), a byte range copied between files, fsync of the
 * directory that holds a path, and the names ptfs gives its files beside
 * a checkpoint.
 *
 * Every read of a checkpoint's bytes goes through io_pread*(): a file may
 * be a stand-in (io_back()) whose bytes come from elsewhere, a remote
 * object's.  Its descriptor is a real one (fstat, dup and identity work
 * as on any file), but the kernel refuses to read it (EBADF), so a read
 * that bypassed these functions fails loudly, never reads zeros.
 */
#ifndef PT_UTIL_IO_H
#define PT_UTIL_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct diag;

/* Where a stand-in's bytes come from: @pread reads all @len bytes at
 * @off (0, -ENODATA past the end, or -errno with @d set when @d is not
 * NULL). */
struct io_backing {
	int (*pread)(void *obj, void *buf, size_t len, uint64_t off,
		     struct diag *d);
	void *obj;
	uint64_t size;
};

/*
 * Make @fd's file (any descriptor of it, dup'ed or not) a stand-in read
 * through @b (copied) from now on, until the process ends: the table
 * keeps a descriptor of the file, so its inode is never reused.  0 or
 * -errno.
 */
int io_back(int fd, const struct io_backing *b);

/* Is @fd a stand-in? */
bool io_backed(int fd);

/* One read, as pread(2) (a count, 0 at the end, or -1 with errno), of a
 * stand-in too: for the few readers that take what there is. */
ssize_t io_pread(int fd, void *buf, size_t len, uint64_t off);

/* Read all @len bytes at @off: 0, -errno, or -ENODATA if the file ends. */
int io_pread_full(int fd, void *buf, size_t len, uint64_t off);

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
 * (and from a stand-in) reads and writes through a 1 MiB buffer.  0, -errno, or -ENODATA when @in
 * ends early.
 */
int io_copy_range(int in, uint64_t in_off, int out, uint64_t out_off,
		  uint64_t len);

/*
 * The block size at which the file system of @fd shares extents between
 * files (XFS, btrfs: copy_file_range clones whole blocks there), or 0
 * (ext4, tmpfs, ...: a kernel copy is a copy through the page cache).
 */
uint32_t io_shares_blocks(int fd);

/* fsync the directory holding @path (so a rename in it is durable). */
int io_fsync_dir_of(const char *path);

/* "DIR/.BASE@suffix" for @path "DIR/BASE" (malloc'd; NULL on ENOMEM). */
char *io_beside(const char *path, const char *suffix);

#endif
