/*
 * seqout.c - sequential output through NBUF buffers of BUF bytes and one
 * writer thread, direct where the file system allows (seqout.h says why).
 *
 * Buffer b[i] holds the file's bytes [base + lo, base + used) at
 * p[lo..used), base a multiple of the direct alignment, so the memory
 * and the file offset of every byte agree modulo it.  Only a buffer's
 * first run after a seek starts at lo > 0; a full buffer ends aligned.
 * A buffer is written as its head up to the first aligned offset and its
 * tail after the last (through fd), the whole blocks between (through
 * dfd):
 *
 *	base      base+lo   aligned              aligned   base+used
 *	|  ----   |  fd     |  dfd: O_DIRECT ... |  fd     |
 *
 * The ring: b[fill] is being filled; b[head], ... (queued of them, ring
 * order, so fill == (head + queued) % NBUF) wait for the writer thread,
 * which takes them in order.  The caller waits for a buffer only when
 * all NBUF are queued.
 */
#define _GNU_SOURCE
#include "seqout.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io.h"

#define BUF	(4u << 20)
#define NBUF	3u
#define PAGE	4096u		/* direct runs cover whole pages: none is
				   both cached and written direct */

struct obuf {
	unsigned char *p;
	uint64_t base;
	size_t lo, used;
};

struct seqout {
	int fd, dfd;		/* dfd: O_DIRECT, or fd itself */
	size_t align;		/* of dfd's offsets, lengths and memory */
	uint32_t share;		/* io_shares_blocks() of fd's file system */
	dev_t dev;		/* fd's */
	struct obuf b[NBUF];
	unsigned fill;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned head, queued;
	bool stop, started;
	int err;		/* the first write error, under mu */
	pthread_t th;
};

/* An O_DIRECT descriptor of @fd's file and its alignment, or fd and 1. */
static void direct_open(struct seqout *s)
{
	struct statx sx;
	char path[32];
	size_t a;
	int flags;

	s->dfd = s->fd;
	s->align = 1;
	/* never more than @fd allows: not written through if read-only */
	flags = fcntl(s->fd, F_GETFL);
	if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY || flags & O_APPEND)
		return;
	if (statx(s->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) ||
	    !(sx.stx_mask & STATX_DIOALIGN) || !sx.stx_dio_offset_align)
		return;
	a = sx.stx_dio_offset_align > sx.stx_dio_mem_align ?
	    sx.stx_dio_offset_align : sx.stx_dio_mem_align;
	a = a > PAGE ? a : PAGE;
	if (a > BUF / 2 || a & (a - 1))
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", s->fd);
	s->dfd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
	if (s->dfd < 0)
		s->dfd = s->fd;
	else
		s->align = a;
}

/* Whole blocks through dfd; a refusal of direct I/O turns it off. */
static int put_direct(struct seqout *s, const unsigned char *p, size_t n,
		      uint64_t at)
{
	int rc = n ? io_pwrite_full(s->dfd, p, n, at) : 0;

	if (rc == -EINVAL && s->dfd != s->fd) {
		close(s->dfd);
		s->dfd = s->fd;
		s->align = 1;
		rc = io_pwrite_full(s->fd, p, n, at);
	}
	return rc;
}

/* b's bytes: head and tail through fd, the blocks between through dfd.
 * Called by one writer at a time (the thread, or the caller with the
 * queue empty). */
static int write_buf(struct seqout *s, const struct obuf *b)
{
	size_t a = s->align, lo = b->lo, end = b->used;
	size_t m0 = (lo + a - 1) / a * a, m1 = end / a * a;
	int rc = 0;

	m0 = m0 < end ? m0 : end;
	m1 = m1 > m0 ? m1 : m0;
	if (m0 > lo)
		rc = io_pwrite_full(s->fd, b->p + lo, m0 - lo, b->base + lo);
	if (!rc)
		rc = put_direct(s, b->p + m0, m1 - m0, b->base + m0);
	if (!rc && end > m1)
		rc = io_pwrite_full(s->fd, b->p + m1, end - m1, b->base + m1);
	return rc;
}

static void *writer(void *arg)
{
	struct seqout *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		struct obuf *b;
		int rc;

		while (!s->queued && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		if (!s->queued)
			break;
		b = &s->b[s->head];
		rc = s->err;
		pthread_mutex_unlock(&s->mu);
		if (!rc)
			rc = write_buf(s, b);
		pthread_mutex_lock(&s->mu);
		if (rc && !s->err)
			s->err = rc;
		s->head = (s->head + 1) % NBUF;
		s->queued--;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* The writer thread, with every signal blocked (they are the caller's). */
static bool start(struct seqout *s)
{
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	s->started = !pthread_create(&s->th, NULL, writer, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return s->started;
}

static void place(struct seqout *s, uint64_t pos)
{
	struct obuf *b = &s->b[s->fill];

	b->base = pos / s->align * s->align;
	b->lo = b->used = (size_t)(pos - b->base);
}

int seqout_open(struct seqout **sp, int fd, uint64_t pos)
{
	struct seqout *s = calloc(1, sizeof(*s));
	struct stat st;

	*sp = NULL;
	if (!s)
		return -ENOMEM;
	s->fd = fd;
	s->share = io_shares_blocks(fd);
	s->dev = fstat(fd, &st) ? 0 : st.st_dev;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	direct_open(s);
	for (unsigned i = 0; i < NBUF; i++) {
		if (posix_memalign((void **)&s->b[i].p, PAGE, BUF)) {
			s->b[i].p = NULL;
			seqout_close(s);
			return -ENOMEM;
		}
	}
	place(s, pos);
	*sp = s;
	return 0;
}

/* b[fill] is full: queue it (or write it here, without a thread) and
 * go on in the next buffer once it is free. */
static int hand_off(struct seqout *s)
{
	struct obuf *b = &s->b[s->fill];
	uint64_t end = b->base + b->used;
	int rc;

	if (!s->started && !start(s)) {
		rc = write_buf(s, b);
		b->base = end;
		b->lo = b->used = 0;
		return rc;
	}
	pthread_mutex_lock(&s->mu);
	s->queued++;
	pthread_cond_broadcast(&s->cv);
	while (s->queued == NBUF)
		pthread_cond_wait(&s->cv, &s->mu);
	rc = s->err;
	pthread_mutex_unlock(&s->mu);
	/* full: @end is aligned (base is, and BUF a multiple) */
	s->fill = (s->fill + 1) % NBUF;
	s->b[s->fill].base = end;
	s->b[s->fill].lo = s->b[s->fill].used = 0;
	return rc;
}

void *seqout_room(struct seqout *s, size_t *n)
{
	struct obuf *b = &s->b[s->fill];

	*n = BUF - b->used;	/* > 0: a full buffer is handed off */
	return b->p + b->used;
}

int seqout_commit(struct seqout *s, size_t n)
{
	struct obuf *b = &s->b[s->fill];

	b->used += n;
	return b->used == BUF ? hand_off(s) : 0;
}

int seqout_put(struct seqout *s, const void *p, size_t n)
{
	const unsigned char *q = p;
	int rc = 0;

	while (n && !rc) {
		size_t room, k;
		void *to = seqout_room(s, &room);

		k = room < n ? room : n;
		memcpy(to, q, k);
		q += k;
		n -= k;
		rc = seqout_commit(s, k);
	}
	return rc;
}

uint64_t seqout_pos(const struct seqout *s)
{
	const struct obuf *b = &s->b[s->fill];

	return b->base + b->used;
}

/* Everything queued written, then b[fill] here: 0 or the first error. */
static int drain(struct seqout *s)
{
	struct obuf *b = &s->b[s->fill];
	int rc;

	pthread_mutex_lock(&s->mu);
	while (s->queued)
		pthread_cond_wait(&s->cv, &s->mu);
	rc = s->err;
	pthread_mutex_unlock(&s->mu);
	if (!rc && b->used > b->lo && (rc = write_buf(s, b))) {
		pthread_mutex_lock(&s->mu);
		s->err = rc;
		pthread_mutex_unlock(&s->mu);
	}
	b->lo = b->used;	/* written */
	return rc;
}

int seqout_seek(struct seqout *s, uint64_t pos)
{
	int rc;

	if (pos == seqout_pos(s))
		return 0;
	if (!(rc = drain(s)))
		place(s, pos);
	return rc;
}

int seqout_flush(struct seqout *s)
{
	return drain(s);
}

bool seqout_kernel_copies(const struct seqout *s, int in, uint64_t in_off)
{
	uint64_t at = seqout_pos(s);
	struct stat st;

	if (io_backed(in))	/* the kernel cannot read a stand-in */
		return false;
	if (s->align == 1)	/* no direct twin: the kernel's copy saves
				   one through user space */
		return true;
	/* a clone only of whole blocks at the same place in both files */
	return s->share && in_off % s->share == at % s->share &&
	       !fstat(in, &st) && st.st_dev == s->dev;
}

/* @n bytes at @in_off of @in read straight into the buffers. */
static int copy_through(struct seqout *s, int in, uint64_t in_off,
			uint64_t n)
{
	int rc = 0;

	while (n && !rc) {
		size_t room;
		void *to = seqout_room(s, &room);

		room = room < n ? room : (size_t)n;
		rc = io_pread_full(in, to, room, in_off);
		if (!rc)
			rc = seqout_commit(s, room);
		in_off += room;
		n -= room;
	}
	return rc;
}

int seqout_copy(struct seqout *s, int in, uint64_t in_off, uint64_t n)
{
	uint64_t at = seqout_pos(s);
	int rc;

	if (!seqout_kernel_copies(s, in, in_off))
		return copy_through(s, in, in_off, n);
	rc = drain(s);
	if (!rc)
		rc = io_copy_range(in, in_off, s->fd, at, n);
	if (!rc)
		place(s, at + n);
	return rc;
}

int seqout_close(struct seqout *s)
{
	int rc;

	if (!s)
		return 0;
	rc = drain(s);
	if (s->started) {
		pthread_mutex_lock(&s->mu);
		s->stop = true;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->th, NULL);
	}
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	if (s->dfd != s->fd)
		close(s->dfd);
	for (unsigned i = 0; i < NBUF; i++)
		free(s->b[i].p);
	free(s);
	return rc;
}
