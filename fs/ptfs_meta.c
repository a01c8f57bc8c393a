/*
 * ptfs_meta.c - a flat format's metadata as files: .ptfs/<format>/KEY
 * (.ptfs/gguf/general.architecture, .ptfs/safetensors/format) holds the
 * entry's value as text and a newline, as a python value's file does; the
 * same entries are the root's user.meta.* (ptfs_xattr.c).  Where the
 * format takes metadata edits (its meta rule: GGUF), writing a file sets
 * its entry when the writer closes it (at its flush: the text without
 * its last newline), as setfattr -n user.meta.KEY does: one edit,
 * journaled, written back.  A text the entry's type cannot hold fails
 * the close with one line (EINVAL), and the entry keeps its value.
 *
 * Inodes: the folder after .ptfs/files/ (ptfs_ino.c), then entry i of
 * c->meta at 1 + i (a removed entry keeps its number, ckpt_meta.c).  A
 * key that cannot be a file name (a '/', ".", "..", over 255 bytes) is
 * left out here; its xattr still shows it.
 */
#include "ptfs.h"

#include "diag/diag.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* What one writer of an entry's file holds until it closes it. */
struct meta_handle {
	uint32_t i;
	char *buf;
	size_t len, cap;
	bool dirty;		/* written since the last flush */
};

void ptfs_meta_init(struct ptfs *fs)
{
	fs->has_meta = ckpt_can(fs->c, CKPT_CAP_FLAT);
}

fuse_ino_t ptfs_meta_ino(const struct ptfs *fs, uint64_t k)
{
	return ptfs_files_ino(fs, 0) + 1 + fs->nfiles + k;
}

const char *ptfs_meta_dir(const struct ptfs *fs)
{
	return ckpt_fmt(fs->c)->name;
}

static bool shown(const struct ckpt_meta *m)
{
	return !m->removed && m->klen && m->klen <= CKPT_NAME_MAX &&
	       !memchr(m->key, '/', m->klen) && !memchr(m->key, 0, m->klen) &&
	       strcmp(m->key, ".") && strcmp(m->key, "..");
}

int ptfs_meta_get(const struct ptfs *fs, uint64_t k, struct ptfs_ino *out)
{
	if (!fs->has_meta || k > fs->c->nmeta)
		return -ENOENT;
	out->kind = k ? PTFS_METAV : PTFS_META;
	out->index = (uint32_t)(k - 1);
	return k && !shown(&fs->c->meta[k - 1]) ? -ENOENT : 0;
}

int ptfs_meta_dirent(const struct ptfs *fs, uint64_t i, const char **name,
		     fuse_ino_t *ino)
{
	if (i >= fs->c->nmeta)
		return 0;
	if (!shown(&fs->c->meta[i]))
		return -1;	/* no entry in this place */
	*name = fs->c->meta[i].key;
	*ino = ptfs_meta_ino(fs, i + 1);
	return 1;
}

fuse_ino_t ptfs_meta_lookup(const struct ptfs *fs, const char *name)
{
	for (uint32_t i = 0; i < fs->c->nmeta; i++)
		if (shown(&fs->c->meta[i]) && !strcmp(fs->c->meta[i].key, name))
			return ptfs_meta_ino(fs, i + 1);
	return 0;
}

bool ptfs_meta_writable(const struct ptfs *fs)
{
	const struct ckpt_rules *r = ckpt_fmt(fs->c)->rules;

	return fs->ovl && !fs->readonly && r && r->meta;
}

uint64_t ptfs_meta_size(const struct ptfs *fs, uint32_t i)
{
	return fs->c->meta[i].vlen + 1;
}

long long ptfs_meta_read(const struct ptfs *fs, uint32_t i, char *buf,
			 size_t size, uint64_t off)
{
	const struct ckpt_meta *m = &fs->c->meta[i];
	uint64_t total = m->vlen + 1;
	size_t n;

	if (off >= total)
		return 0;
	n = total - off < size ? (size_t)(total - off) : size;
	for (size_t k = 0; k < n; k++)
		buf[k] = off + k < m->vlen ? m->val[off + k] : '\n';
	return (long long)n;
}

int ptfs_meta_open(struct ptfs *fs, uint32_t i, struct fuse_file_info *fi)
{
	struct meta_handle *h;

	fi->fh = 0;
	if ((fi->flags & O_ACCMODE) == O_RDONLY)
		return 0;
	if (!ptfs_meta_writable(fs))
		return fs->readonly || !fs->ovl ? -EROFS : -EPERM;
	if (!(h = calloc(1, sizeof(*h))))
		return -ENOMEM;
	h->i = i;
	/* without O_TRUNC a writer starts from the value it replaces */
	if (!(fi->flags & O_TRUNC)) {
		const struct ckpt_meta *m = &fs->c->meta[i];

		if (!(h->buf = malloc(m->vlen + 2))) {
			free(h);
			return -ENOMEM;
		}
		memcpy(h->buf, m->val, m->vlen);
		h->buf[m->vlen] = '\n';
		h->len = h->cap = m->vlen + 1;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	return 0;
}

long long ptfs_meta_write(struct fuse_file_info *fi, const char *buf,
			  size_t size, uint64_t off)
{
	struct meta_handle *h = (struct meta_handle *)(uintptr_t)fi->fh;

	if (!h)
		return -EBADF;
	if (off > (1u << 30) || size > (1u << 30))
		return -EFBIG;
	if (off + size > h->cap) {
		size_t cap = (size_t)(off + size) * 2;
		char *p = realloc(h->buf, cap);

		if (!p)
			return -ENOMEM;
		h->buf = p;
		h->cap = cap;
	}
	if (off > h->len)
		memset(h->buf + h->len, 0, (size_t)off - h->len);
	memcpy(h->buf + off, buf, size);
	if (off + size > h->len)
		h->len = (size_t)(off + size);
	h->dirty = true;
	return (long long)size;
}

int ptfs_meta_truncate(struct fuse_file_info *fi, uint64_t size)
{
	struct meta_handle *h = fi ? (struct meta_handle *)(uintptr_t)fi->fh :
				NULL;

	if (!h)
		return -EPERM;	/* by path: open it for writing instead */
	if (size < h->len)
		h->len = (size_t)size;
	h->dirty = true;
	return 0;
}

int ptfs_meta_flush(struct ptfs *fs, struct fuse_file_info *fi,
		    struct diag *d)
{
	struct meta_handle *h = (struct meta_handle *)(uintptr_t)fi->fh;
	char name[CKPT_NAME_MAX + 16];
	size_t len;

	if (!h || !h->dirty)
		return 0;
	h->dirty = false;
	len = h->len;
	if (len && h->buf[len - 1] == '\n')
		len--;
	snprintf(name, sizeof(name), "user.meta.%s", fs->c->meta[h->i].key);
	return ovl_setxattr(fs->ovl, fs->c->root, name, h->buf ? h->buf : "",
			    len, d);
}

void ptfs_meta_release(struct fuse_file_info *fi)
{
	struct meta_handle *h = (struct meta_handle *)(uintptr_t)fi->fh;

	if (h)
		free(h->buf);
	free(h);
	fi->fh = 0;
}
