/*
 * ptz_copy.c - how the bytes of an archive being written reach the file:
 * from the writer's staging buffer, in order through util/seqout.h (a
 * record read through user space straight into its buffers), or by
 * pwrite against a base; copy_file_range from a record's source
 * (pread/write where the kernel refuses); and, when writing
 * against a base (the archive being replaced, ptz_writer_base()), not at
 * all where the base has the same bytes at the same offset.
 *
 * Against a base, what the writer emits (headers, descriptors, the central
 * directory, small records) is compared with the base's bytes at the same
 * offsets.  Equal bytes make up runs; a run is copied in one
 * copy_file_range when something different ends it (an edit, a changed
 * CRC field, the end of the archive) or, when the output began as a clone
 * of the base (FICLONE), left where it is: then only what differs is
 * written.  (Where the file system shares blocks, a run's head up to a
 * block boundary is copied alone, and the kernel clones the rest.)  A
 * record whose source is the base's own bytes at this very
 * offset (an unchanged record) is not read at all; one that is the base's
 * bytes except in some chunks (an edited storage: the chunks written since
 * its copy-up) is compared in those chunks only.  Its new CRC-32 is then
 * the base's, updated for each differing span [a, b) of its L bytes:
 *
 *   crc(M ^ D) = crc(M) ^ crc(D) ^ crc(0^L)                 (CRC is affine)
 *   crc(0^a X 0^n) ^ crc(0^L) = shift(crc(X) ^ crc(0^|X|), n),  n = L - b
 *   crc(X) ^ crc(0^|X|) = crc(new[a, b)) ^ crc(old[a, b))   for X = new ^ old
 *
 * where shift(c, n) is c with n zero bytes appended to its message: zlib's
 * crc32_combine(c, 0, n), O(log n).  A span costs the CRCs of its old and
 * new bytes, whatever the size of the record.  The result is byte for
 * byte what the writer writes without a base (tests/test_ptz_write.c).
 *
 * In place (w->in_place, ckpt_inplace.c), the output is the base itself:
 * the same patch, so every offset is read (compared) before it is
 * written and written once; a record that is not the base's at its own
 * place, or an archive of another size, fails with -EAGAIN before it is
 * written.  A dry run (w->dry) writes nothing and yields the CRCs.
 */

/* copy_file_range() is a GNU extension of glibc: declare it here only. */
#define _GNU_SOURCE 1

#define PTZ_BUILD 1
#include "zip/ptz_write_int.h"
#include "zip/ptz_int.h"

#include <errno.h>
#include <inttypes.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "diag/diag.h"
#include "util/io.h"
#include "util/seqout.h"

#define COPY_CHUNK	(1u << 30)	/* largest pwrite */
#define RANGE_CHUNK	0x7ffff000u	/* largest copy_file_range: what the
					   kernel does in one call anyway */
#define SPAN_GAP	256	/* equal bytes that end a differing span */

/* Without a base the archive is written in order: through w->out, at
 * archive offset @at (so after a kernel copy it goes on past it). */
static int out_at(struct ptz_writer *w, uint64_t at, struct diag *d)
{
	int rc = w->out ? seqout_seek(w->out, w->origin + at) :
		 seqout_open(&w->out, w->fd, w->origin + at);

	return rc ? diag_errno(d, rc, "cannot write the archive: %s",
			       strerror(-rc)) : 0;
}

static int out_done(struct ptz_writer *w, int rc, size_t n, struct diag *d)
{
	if (rc)
		return diag_errno(d, rc, "cannot write the archive: %s",
				  strerror(-rc));
	w->st.written += n;
	return 0;
}

int ptz_out_write(struct ptz_writer *w, const void *p, size_t n,
		  uint64_t off, struct diag *d)
{
	const unsigned char *q = p;
	int rc;

	if (w->dry) {
		w->st.written += n;
		return 0;
	}
	if (!w->has_base)
		return (rc = out_at(w, off, d)) ? rc :
		       out_done(w, seqout_put(w->out, p, n), n, d);
	while (n) {
		ssize_t got = pwrite(w->fd, q, n > COPY_CHUNK ? COPY_CHUNK : n,
				     (off_t)(w->origin + off));

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			int err = got < 0 ? errno : EIO;

			return diag_errno(d, -err, "cannot write %zu bytes at offset 0x%" PRIx64 ": %s",
					  n, off, strerror(err));
		}
		q += got;
		off += (uint64_t)got;
		n -= (size_t)got;
		w->st.written += (uint64_t)got;
	}
	return 0;
}

/* Read all of @p from @off of @fd; a short file is corrupt input. */
static int read_src(int fd, void *p, size_t n, uint64_t off, struct diag *d)
{
	unsigned char *q = p;

	while (n) {
		ssize_t got = io_pread(fd, q, n, off);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int err = errno;

			return diag_errno(d, -err, "cannot read source at offset 0x%" PRIx64 ": %s",
					  off, strerror(err));
		}
		if (!got)
			return diag_corrupt(d, off, "source ends %zu bytes early (did it shrink?)",
					    n);
		q += got;
		off += (uint64_t)got;
		n -= (size_t)got;
	}
	return 0;
}

/*
 * Copy the range of @src to @at of the output with copy_file_range (no
 * trip through user space, and a reflink on file systems that share
 * extents), from *@done on.  Returns 1 when the kernel refuses for these
 * files, to fall back.
 */
static int copy_range(struct ptz_writer *w, const struct ptz_source *src,
		      uint64_t at, uint64_t *done, struct diag *d)
{
	if (io_backed(src->fd))	/* the kernel cannot read it (util/io.h) */
		return 1;
	while (*done < src->len) {
		uint64_t left = src->len - *done, a = w->share_align;
		loff_t in = (loff_t)(src->off + *done);
		loff_t out = (loff_t)(w->origin + at + *done);
		uint64_t n = left > RANGE_CHUNK ? RANGE_CHUNK : left;
		ssize_t got;

		/* where blocks can be shared and both sides are as far from
		   a block boundary, copy up to it alone: the kernel clones
		   the rest (it clones whole blocks only) */
		if (a && (uint64_t)in % a && (uint64_t)in % a ==
		    (uint64_t)out % a && n > a - (uint64_t)in % a)
			n = a - (uint64_t)in % a;
		got = copy_file_range(src->fd, &in, w->fd, &out, n, 0);

		if (got < 0) {
			int err = errno;

			if (err == EINTR)
				continue;
			if (err == EXDEV || err == ENOSYS || err == EINVAL ||
			    err == EOPNOTSUPP) {
				w->no_copy_range = true;
				return 1;
			}
			return diag_errno(d, -err, "cannot copy %" PRIu64 " bytes to offset 0x%" PRIx64 ": %s",
					  left, at + *done, strerror(err));
		}
		if (!got)
			return diag_corrupt(d, src->off + *done, "source ends %" PRIu64 " bytes early (did it shrink?)",
					    left);
		*done += (uint64_t)got;
		w->st.copied += (uint64_t)got;
		w->st.copy_calls++;
	}
	return 0;
}

/*
 * Copy @src to @at through @buf (PTZ_WBUF bytes), from *@done on; the
 * CRC-32 of what was copied goes to *@crc (NULL: not wanted).
 */
static int copy_slow(struct ptz_writer *w, const struct ptz_source *src,
		     uint64_t at, uint64_t *done, unsigned char *buf,
		     uint32_t *crc, struct diag *d)
{
	/* in order: read straight into the output's buffer */
	bool seq = !w->has_base && !w->dry;

	while (*done < src->len) {
		uint64_t left = src->len - *done;
		size_t n = left > PTZ_WBUF ? PTZ_WBUF : (size_t)left, room;
		unsigned char *to = buf;
		int rc = seq ? out_at(w, at + *done, d) : 0;

		if (!rc && seq) {
			to = seqout_room(w->out, &room);
			n = n < room ? n : room;
		}
		if (!rc)
			rc = src->read ? src->read(src->read_arg, to, n,
						   src->off + *done, d) :
			     read_src(src->fd, to, n, src->off + *done, d);
		if (rc)
			return rc;
		if (crc)
			*crc = libdeflate_crc32(*crc, to, n);
		rc = seq ? out_done(w, seqout_commit(w->out, n), n, d) :
		     ptz_out_write(w, to, n, at + *done, d);
		if (rc)
			return rc;
		*done += n;
	}
	return 0;
}

/*
 * Whether @src goes to @at by copy_file_range: against a base, or in a
 * dry run, always; in order, where seqout would copy in the kernel too
 * (seqout_kernel_copies(): on ext4 a kernel copy goes through the page
 * cache and the fsync, the direct writes are twice as fast).
 */
static int kernel_copy(struct ptz_writer *w, const struct ptz_source *src,
		       uint64_t at, bool *yes, struct diag *d)
{
	int rc;

	*yes = false;
	if (!src->has_crc || src->read || w->no_copy_range)
		return 0;
	*yes = true;
	if (w->has_base || w->dry)
		return 0;
	rc = out_at(w, at, d);
	if (!rc)
		*yes = seqout_kernel_copies(w->out, src->fd, src->off);
	return rc;
}

int ptz_copy_data(struct ptz_writer *w, const struct ptz_source *src,
		  struct ptz_wentry *e, struct diag *d)
{
	uint32_t crc = 0;
	uint64_t done = 0;
	bool kernel;
	int rc = kernel_copy(w, src, w->cursor, &kernel, d);

	if (rc)
		return rc;
	if (kernel) {
		/* the kernel writes next: what is buffered goes first */
		rc = w->out ? out_done(w, seqout_flush(w->out), 0, d) : 0;
		if (!rc)
			rc = copy_range(w, src, w->cursor, &done, d);
		if (rc <= 0)
			return rc;
	}
	/* read through user space, 1 MiB at a time (copy_slow()) */
	rc = copy_slow(w, src, w->cursor, &done, w->buf,
		       src->has_crc ? NULL : &crc, d);
	if (!rc && !src->has_crc)
		e->crc32 = crc;
	return rc;
}

/* ---- against a base ---- */

int ptz_writer_base(struct ptz_writer *w, int base_fd, bool cloned,
		    struct diag *d)
{
	struct stat st;

	if (w->err)
		return diag_errno(d, w->err, "archive writer failed earlier");
	if (!w->buf || w->cursor || w->has_base || w->origin)
		return diag_errno(d, -EINVAL, "a base is set before the first record, once, at origin 0");
	if (fstat(base_fd, &st))
		return w->err = diag_errno(d, -errno, "base archive: %s",
					   strerror(errno));
	w->cmp = malloc(PTZ_WBUF);
	if (!w->cmp)
		return w->err = diag_nomem(d);
	w->has_base = true;
	w->base_fd = base_fd;
	w->base_size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
	w->cloned = cloned;
	w->run = 0;
	return 0;
}

/*
 * The base's bytes [@off, @off + @n) into @p: *@have of them (fewer past
 * the base's end).
 */
static int base_read(struct ptz_writer *w, unsigned char *p, size_t n,
		     uint64_t off, size_t *have, struct diag *d)
{
	*have = off >= w->base_size ? 0 :
		w->base_size - off < n ? (size_t)(w->base_size - off) : n;
	w->st.compared += *have;
	return *have ? read_src(w->base_fd, p, *have, off, d) : 0;
}

/*
 * The pending run ends at @to: copy it from the base (into a clone it is
 * there already).
 */
static int settle(struct ptz_writer *w, uint64_t to, struct diag *d)
{
	struct ptz_source src = {
		.fd = w->base_fd, .off = w->run, .len = to - w->run,
	};
	uint64_t done = 0;
	int rc = 0;

	if (w->cloned || to <= w->run) {
		w->run = to > w->run ? to : w->run;
		return 0;
	}
	if (!w->no_copy_range)
		rc = copy_range(w, &src, w->run, &done, d);
	if (rc > 0 || (!rc && done < src.len)) {
		if (!w->xbuf && !(w->xbuf = malloc(PTZ_WBUF)))
			return diag_nomem(d);
		rc = copy_slow(w, &src, w->run, &done, w->xbuf, NULL, d);
	}
	if (!rc)
		w->run = to;
	return rc;
}

/*
 * The first byte at or after @i where @x and @y differ; the base has @y's
 * first @have of @n bytes only, the others differ.  @n if none.
 */
static size_t diff_from(const unsigned char *x, const unsigned char *y,
			size_t i, size_t have, size_t n)
{
	while (i < have) {
		size_t k = have - i < 512 ? have - i : 512;

		if (memcmp(x + i, y + i, k)) {
			while (x[i] == y[i])
				i++;
			return i;
		}
		i += k;
	}
	return i < n ? i : n;
}

/*
 * The end of the differing span that starts at @i: just after its last
 * differing byte that SPAN_GAP equal bytes follow (equal bytes between
 * two differences are written with them).
 */
static size_t diff_to(const unsigned char *x, const unsigned char *y,
		      size_t i, size_t have, size_t n)
{
	size_t last = i;

	if (i >= have)
		return n;
	for (i++; i < have && i - last <= SPAN_GAP; i++)
		if (x[i] != y[i])
			last = i;
	if (i >= have && i - last <= SPAN_GAP && have < n)
		return n;
	return last + 1;
}

/*
 * Write the spans where @p (@n bytes, to go at @at) differs from the
 * base's @cmp (@have bytes); *@delta collects the CRC update for a record
 * of which @p's last byte is @tail bytes before the end, when @delta.
 */
static int patch(struct ptz_writer *w, const unsigned char *p,
		 const unsigned char *cmp, size_t have, size_t n, uint64_t at,
		 uint64_t tail, uint32_t *delta, struct diag *d)
{
	size_t a = 0, b;
	int rc;

	while ((a = diff_from(p, cmp, a, have, n)) < n) {
		b = diff_to(p, cmp, a, have, n);
		rc = settle(w, at + a, d);
		if (!rc)
			rc = ptz_out_write(w, p + a, b - a, at + a, d);
		if (rc)
			return rc;
		w->run = at + b;
		if (delta) {
			uint32_t x = libdeflate_crc32(0, p + a, b - a) ^
				     libdeflate_crc32(0, cmp + a, b - a);

			*delta ^= (uint32_t)crc32_combine(x, 0,
							  (z_off_t)(tail + n - b));
		}
		a = b;
	}
	return 0;
}

int ptz_base_emit(struct ptz_writer *w, const unsigned char *p, size_t n,
		  uint64_t at, struct diag *d)
{
	while (n) {
		size_t k = n < PTZ_WBUF ? n : PTZ_WBUF, have;
		int rc = base_read(w, w->cmp, k, at, &have, d);

		if (!rc)
			rc = patch(w, p, w->cmp, have, k, at, 0, NULL, d);
		if (rc)
			return rc;
		p += k;
		at += k;
		n -= k;
	}
	return 0;
}

static bool dirty_at(const struct ptz_source *s, uint64_t pos)
{
	uint64_t c = pos >> s->dirty_shift;

	return !s->dirty || (s->dirty[c / 64] >> (c % 64) & 1);
}

/*
 * How many bytes from @pos on (at most @max) are all in written chunks, or
 * all in chunks that were not; *@dirty says which.
 */
static uint64_t stretch(const struct ptz_source *s, uint64_t pos,
			uint64_t max, bool *dirty)
{
	uint64_t end, chunk = (uint64_t)1 << s->dirty_shift;

	if (max > s->len - pos)
		max = s->len - pos;
	*dirty = dirty_at(s, pos);
	if (!s->dirty)
		return max;
	end = (pos / chunk + 1) * chunk;
	while (end < s->len && end - pos < max && dirty_at(s, end) == *dirty)
		end += chunk;
	return end - pos < max ? end - pos : max;
}

int ptz_base_data(struct ptz_writer *w, const struct ptz_source *src,
		  struct ptz_wentry *e, struct diag *d)
{
	uint64_t at = w->cursor, pos = 0, n;
	bool same = src->based && src->fd == w->base_fd &&
		    src->off == src->base_off;
	/* the CRC over every byte: there is none to update */
	bool whole = !src->has_crc && (same || !src->base_crc_ok);
	uint32_t crc = 0, delta = 0;
	bool dirty;
	size_t have;
	int rc;

	if (!src->based || src->base_off != at || at > w->base_size ||
	    src->len > w->base_size - at) {
		if (w->cloned && (src->based || w->in_place)) {
			w->moved = true;
			return diag_errno(d, -EAGAIN, "a record would move: the clone cannot be patched");
		}
		rc = settle(w, at, d);
		return rc ? rc : 1;
	}
	if (!same && !src->dirty && !w->cloned) {
		rc = settle(w, at, d);	/* then copied whole, as before */
		return rc ? rc : 1;
	}
	while (pos < src->len) {
		n = stretch(src, pos, whole ? PTZ_WBUF : UINT64_MAX, &dirty);
		dirty &= !same;
		if (!dirty && !whole) {
			pos += n;	/* the base's bytes: part of the run */
			continue;
		}
		n = n > PTZ_WBUF ? PTZ_WBUF : n;
		rc = read_src(src->fd, w->buf, n, src->off + pos, d);
		if (!rc && dirty)
			rc = base_read(w, w->cmp, n, at + pos, &have, d);
		if (!rc && dirty)
			rc = patch(w, w->buf, w->cmp, have, n, at + pos,
				   src->len - pos - n, whole ? NULL : &delta,
				   d);
		if (rc)
			return rc;
		if (whole)
			crc = libdeflate_crc32(crc, w->buf, n);
		pos += n;
	}
	if (!src->has_crc)
		e->crc32 = whole ? crc : src->base_crc ^ delta;
	return 0;
}

int ptz_base_end(struct ptz_writer *w, struct diag *d)
{
	int rc = settle(w, w->cursor, d);

	if (!rc && w->in_place && w->base_size != w->cursor) {
		w->moved = true;
		return diag_errno(d, -EAGAIN, "the archive would change its "
				  "size: it cannot be patched in place");
	}
	if (!rc && w->cloned && !w->dry && w->base_size > w->cursor &&
	    ftruncate(w->fd, (off_t)w->cursor))
		rc = diag_errno(d, -errno, "cannot cut the archive to %" PRIu64 " bytes: %s",
				w->cursor, strerror(errno));
	return rc;
}
