/*
 * formats.c - the table of formats, and the door every checkpoint is
 * opened by: ckpt_open() asks each descriptor in turn whether it takes
 * the file, and the one that does opens it (core/ckpt/ckpt_format.h).
 *
 *   a folder   bid_dir(): its file that marks it (DCP: .metadata), else
 *              the HF folder, which says why when it has no index
 *   a file     bid_name(): its name (.metadata, *.index.json), then
 *              bid(): its first 512 bytes, after the refusals of what a
 *              checkpoint is often mistaken for (an empty zip, a Git LFS
 *              pointer, a pre-1.0 container; an HTML page and the
 *              other formats of foreign.c last)
 *
 * The table also names the writers a format has (ckpt_fmt_writer(): by
 * --format's name or OUT's extension), so ptrepack writes a new format
 * without knowing it.
 *
 * A layer above core/ckpt: the formats call the model, the model reaches
 * a format only through its descriptor (c->fmt), and a folder's open
 * opens its parts through c->open_part, which is this door.  So a format
 * may live in a folder of its own without a call cycle between folders.
 */
#include "ckpt/ckpt_int.h"
#include "ckpt/ckpt_format.h"
#include "source/source.h"
#include "util/io.h"
#include "foreign.h"
#include "gguf/ckpt_fmt_gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bidding order: folders by their marks, files by name, then by their
 * first bytes, the formats whose start says what they are first (a
 * legacy pickle or a safetensors header may hold "ustar" or "PK"). */
const struct ckpt_fmt *const ckpt_formats[] = {
	&ckpt_fmt_dcp, &ckpt_fmt_ranks, &ckpt_fmt_hf, &ckpt_fmt_gguf,
	&ckpt_fmt_zip, &ckpt_fmt_tar,
	&ckpt_fmt_safetensors, &ckpt_fmt_legacy, &ckpt_fmt_torchscript, NULL
};

static bool starts(const unsigned char *p, size_t n, const char *s)
{
	size_t k = strlen(s);

	return n >= k && !memcmp(p, s, k);
}

/*
 * What is this file?  The descriptor of the first format that bids for
 * its first bytes, or NULL with a message naming what it is instead.
 */
static const struct ckpt_fmt *sniff(struct ckpt *c, struct diag *d)
{
	unsigned char h[512];
	char what[200];
	ssize_t n = io_pread(c->fd, h, sizeof(h), 0);

	if (n < 0)
		return diag_errno(d, -errno, "cannot read: %s", strerror(errno)),
		       NULL;
	if (n == 0)
		return diag_corrupt(d, 0, "empty file, not a checkpoint"), NULL;
	if (starts(h, n, "PK\5\6"))
		return diag_corrupt(d, 0, "empty zip archive, not a "
				    "checkpoint"), NULL;
	if (starts(h, n, "version https://git-lfs"))
		return diag_corrupt(d, 0, "Git LFS pointer file, not the "
				    "checkpoint itself (run 'git lfs pull')"),
		       NULL;
	if (starts(h, n, "PYTORCH1"))
		return diag_unsupported(d, 0, "pre-1.0 PYTORCH1 container, "
					"which torch no longer reads either"),
		       NULL;
	for (size_t i = 0; ckpt_formats[i]; i++)
		if (ckpt_formats[i]->bid && ckpt_formats[i]->bid(h, (size_t)n))
			return ckpt_formats[i];
	if (ckpt_head_is_html(h, n))
		return diag_corrupt(d, 0, "HTML page, not a checkpoint (a "
				    "download that saved an error or login "
				    "page?)"), NULL;
	if (ckpt_foreign(h, (size_t)n, what, sizeof(what)))
		return diag_corrupt(d, 0, "%s", what), NULL;
	/* torch.load unpickles any file that is no zip or tar: one that
	   starts as a pickle does is read as torch reads it (a bare
	   pickle, a stub in front of something else) */
	if ((h[0] && strchr("(c]})NISVXKJMUTGFCBi", h[0])) || h[0] == 0x8c ||
	    h[0] == 0x95)
		return &ckpt_fmt_legacy;
	return diag_corrupt(d, 0, "not a PyTorch checkpoint (starts with "
			    "%02x %02x %02x %02x)", h[0], n > 1 ? h[1] : 0,
			    n > 2 ? h[2] : 0, n > 3 ? h[3] : 0), NULL;
}

const struct ckpt_fmt *ckpt_fmt_writer(const char *name, bool by_ext)
{
	size_t n = strlen(name);

	for (size_t i = 0; ckpt_formats[i]; i++) {
		const struct ckpt_fmt *f = ckpt_formats[i];
		const char *ext = f->out_ext;

		if (!f->write)
			continue;
		if (!by_ext && !strcmp(name, f->name))
			return f;
		if (by_ext && ext && n > strlen(ext) &&
		    !strcmp(name + n - strlen(ext), ext))
			return f;
	}
	return NULL;
}

int ckpt_open(const char *path, struct ckpt **out, struct diag *d)
{
	return ckpt_open_with(path, 0, out, d);
}

/* Open @c (c->fd open on c->path, @st its fstat) as what it is: the
 * first format of the table that bids for it (ckpt_format.h). */
static int open_as(struct ckpt *c, const struct stat *st, unsigned flags,
		   struct diag *d)
{
	const char *path = c->path;
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	const struct ckpt_fmt *m = NULL;
	int rc;

	if (S_ISDIR(st->st_mode)) {
		/* a pattern of names that opened its folder (open_path()) */
		for (size_t i = 0; !m && ckpt_formats[i]; i++)
			if (ckpt_formats[i]->bid_name && strchr(base, '*') &&
			    ckpt_formats[i]->bid_name(base))
				m = ckpt_formats[i];
		for (size_t i = 0; !m && ckpt_formats[i]; i++)
			if (ckpt_formats[i]->bid_dir &&
			    ckpt_formats[i]->bid_dir(c->fd))
				m = ckpt_formats[i];
		if (!m)		/* the HF folder's bids for any, to say why */
			return diag_set(d, -EISDIR, DIAG_NO_OFFSET, "is a "
					"directory, no checkpoint");
		flags |= CKPT_OPEN_IS_DIR;
	} else {
		c->file_size = st->st_size;
		for (size_t i = 0; !m && ckpt_formats[i]; i++)
			if (ckpt_formats[i]->bid_name &&
			    ckpt_formats[i]->bid_name(base))
				m = ckpt_formats[i];
		if (!m && !(m = sniff(c, d)))
			return d->err;
	}
	c->format = m->id;
	c->fmt = m;
	c->open_part = ckpt_open_member;	/* a folder's shards: this door */
	c->lists = flags & CKPT_OPEN_LISTS;
	rc = m->open(c, flags, d);
	if (!rc)
		ckpt_open_done(c);
	return rc;
}

/*
 * @path opened as src_open_path() does, but a name with a '*' that is no
 * file and that a format bids for (DIR/model_world_size_4_rank_*.pt, one
 * set of a folder of rank files) opens its folder: the format reads the
 * pattern from c->path.
 */
static int open_path(const char *path, struct stat *st, struct diag *d)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	char dir[4096];

	if (src_is_url(path) || !strchr(base, '*') || !access(path, F_OK))
		return src_open_path(path, st, d);
	for (size_t i = 0; ckpt_formats[i]; i++)
		if (ckpt_formats[i]->bid_name &&
		    ckpt_formats[i]->bid_name(base)) {
			snprintf(dir, sizeof(dir), "%.*s", !slash ? 1 :
				 slash == path ? 1 : (int)(slash - path),
				 slash ? path : ".");
			return src_open_path(dir, st, d);
		}
	return src_open_path(path, st, d);
}

/* The end of an open: @c in *@out, or closed when @rc failed and
 * CKPT_OPEN_KEEP was not asked for; an unsafe refusal is one of its
 * findings. */
static int opened(struct ckpt *c, int rc, unsigned flags, struct ckpt **out,
		  struct diag *d)
{
	if (rc && d->unsafe &&
	    ckpt_unsafe_add(c, CKPT_U_ARCHIVE, "", d->off, NULL, NULL,
			    d->msg))
		rc = diag_nomem(d);
	if (rc && !(flags & CKPT_OPEN_KEEP)) {
		ckpt_close(c);
		return rc;
	}
	*out = c;
	return rc;
}

int ckpt_open_with(const char *path, unsigned flags, struct ckpt **out,
		   struct diag *d)
{
	struct ckpt *c;
	struct stat st;
	int rc;

	*out = NULL;
	c = ckpt_alloc(path);
	if (!c)
		return diag_nomem(d);
	if (src_is_url(path)) {		/* shown without its password */
		char shown[4096];

		src_shown(path, shown, sizeof(shown));
		c->path = arena_strndup(&c->arena, shown, strlen(shown));
		c->remote = true;
		if (!c->path) {
			ckpt_close(c);
			return diag_nomem(d);
		}
	}
	/* never blocks: a fifo or device is refused before any open */
	c->fd = open_path(path, &st, d);
	rc = c->fd < 0 ? c->fd : open_as(c, &st, flags, d);
	if (rc && c->fd < 0)
		c->fd = -1;
	return opened(c, rc, flags, out, d);
}

int ckpt_open_member(const struct src_member *m, unsigned flags,
		     struct ckpt **out, struct diag *d)
{
	struct ckpt *c;
	struct stat st;
	int rc;

	*out = NULL;
	c = ckpt_alloc(m->path);
	if (!c)
		return diag_nomem(d);
	/* its own descriptor of the same open file (the source made sure
	   it is a regular file): closed with it */
	c->fd = fcntl(m->fd, F_DUPFD_CLOEXEC, 0);
	rc = c->fd < 0 || fstat(c->fd, &st) ?
	     diag_errno(d, -errno, "%s", strerror(errno)) :
	     open_as(c, &st, flags, d);
	return opened(c, rc, flags, out, d);
}

