/*
 * ptfs_tune.c - what the mount asks of the kernel for many readers at
 * once (a loader's threads, mmap faults, O_DIRECT reads; issue 43): the
 * size of a read request, spliced replies, the queue of background
 * requests, the mount's readahead and the checkpoint descriptors'.  What
 * each does and measured is in docs/design.md ("Many readers"), the
 * figures in docs/benchmarks.md (tests/bench/bench_parallel.py).
 */
#define _XOPEN_SOURCE 700	/* realpath */
#include "ptfs.h"

#include "source/source.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Background requests (readahead, mmap faults) in flight at once. */
#define PTFS_BACKGROUND	64u

void ptfs_tune_conn(struct fuse_conn_info *conn)
{
	/* from cached pages a spliced reply is 1.7-2.4x a copied one */
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	if (conn->capable & FUSE_CAP_SPLICE_MOVE)
		conn->want |= FUSE_CAP_SPLICE_MOVE;
	/*
	 * Requests of 252 pages (1008 KiB; max_write also sets the kernel's
	 * max_pages).  Not 256: libfuse 3.14 splices a reply only through a
	 * pipe of data + 16-byte header + 3 pages, which must fit
	 * pipe-max-size (1 MiB; F_SETPIPE_SZ beyond it is refused here even as
	 * root).  A bigger reply falls back to malloc + pread + writev, at
	 * half the throughput.  Nor more than 256: libfuse 3.14's buffer is
	 * 256 pages, and so is the kernel's fs.fuse.max_pages_limit.
	 */
	conn->max_write = PTFS_REQUEST;
	conn->max_readahead = PTFS_REQUEST;
	/*
	 * Readahead and mmap faults are background requests, at most 12 in
	 * flight by default (FUSE_DEFAULT_MAX_BACKGROUND), and past the
	 * congestion threshold (9) the kernel skips asynchronous readahead:
	 * 8 loader threads keep that queue full.  The kernel takes any value
	 * from root and clamps an unprivileged mount to the fuse module's
	 * max_user_bgreq / max_user_congthresh.
	 */
	conn->max_background = PTFS_BACKGROUND;
	conn->congestion_threshold = PTFS_BACKGROUND * 3 / 4;
}

/*
 * The kernel caps a FUSE mount's readahead at the bdi default (128 KiB)
 * whatever INIT asks for, so reads arrive in 128-256 KiB requests.  Raise
 * the bdi's read_ahead_kb to PTFS_REQUEST (root only; best effort).  The
 * device comes from mountinfo: a stat() of the mount point would wait for
 * the loop that is not running yet.  More (4 or 8 MiB) helps one cold
 * reader and costs eight up to a third.
 */
static void raise_readahead(const char *mountpoint)
{
	char line[4096], path[128], *real = realpath(mountpoint, NULL);
	unsigned maj, min;
	FILE *f;

	if (!real)
		return;
	f = fopen("/proc/self/mountinfo", "r");
	while (f && fgets(line, sizeof(line), f)) {
		char mnt[4096];

		/* id parent maj:min root mountpoint ... */
		if (sscanf(line, "%*s %*s %u:%u %*s %4095s", &maj, &min, mnt) != 3
		    || strcmp(mnt, real))
			continue;
		snprintf(path, sizeof(path),
			 "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
		FILE *ra = fopen(path, "w");

		if (ra) {
			fprintf(ra, "%u\n", PTFS_REQUEST / 1024);
			fclose(ra);
		}
	}
	if (f)
		fclose(f);
	free(real);
}

/*
 * Every read of the mount is a request of at most PTFS_REQUEST bytes, and
 * all the threads share one descriptor per file, whose readahead state
 * (file->f_ra) sees their requests interleaved.  POSIX_FADV_SEQUENTIAL
 * doubles that descriptor's window, so a cold reader's next requests find
 * their pages already coming.  Best effort: a remote checkpoint's
 * stand-in may refuse it.
 */
static void advise_sequential(const struct ckpt *c)
{
	(void)posix_fadvise(c->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	for (uint32_t i = 0; c->src && i < src_count(c->src); i++)
		(void)posix_fadvise(src_at(c->src, i)->fd, 0, 0,
				    POSIX_FADV_SEQUENTIAL);
}

void ptfs_tune_mount(const struct ptfs *fs, const char *mountpoint)
{
	raise_readahead(mountpoint);
	advise_sequential(fs->c);
}
