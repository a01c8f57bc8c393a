/*
 * ckpt_hfdir.c - the folder of a Hugging Face sharded checkpoint: which
 * file is its index (*.index.json, or a variant *.index.VARIANT.json;
 * exactly one, or the one given), which regular files it holds besides
 * the shards (config.json, tokenizer files, the index itself: shown, never
 * hidden), and the index's bytes for ckpt_hfindex.c.  ckpt_shards.c opens
 * the shards.
 */
#include "ckpt/ckpt_int.h"
#include "ckpt_hf_int.h"
#include "ckpt_hfindex.h"
#include "source/source.h"
#include "util/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HF_MAX_FILES	4096	/* other files listed; more are left out */

bool ckpt_hf_index_name(const char *path)
{
	const char *base = strrchr(path, '/'), *ix, *rest, *dot;

	base = base ? base + 1 : path;
	ix = strstr(base, ".index.");
	if (!ix || ix == base)
		return false;
	rest = ix + 7;	/* "json", or "VARIANT.json" */
	if (!strcmp(rest, "json"))
		return true;
	dot = strchr(rest, '.');
	return dot && dot > rest && !strcmp(dot, ".json");
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int by_file(const void *a, const void *b)
{
	return strcmp(((const struct ckpt_hf_file *)a)->name,
		      ((const struct ckpt_hf_file *)b)->name);
}

/*
 * The folder's regular files (symbolic links followed: the hub's cache
 * links every file into a blob), at most HF_MAX_FILES, sorted, and the
 * index among them when none was given (exactly one, or a refusal).
 */
static int scan(struct ckpt *c, bool pick, struct diag *d)
{
	struct ckpt_hf *hf = c->hf;
	int fd = dup(hf->dfd);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	const char *found[4];
	uint32_t nfound = 0, cap = 0;
	struct dirent *de;
	int rc = 0;

	if (!dir) {
		if (fd >= 0)
			close(fd);
		return diag_errno(d, -errno, "cannot list: %s", strerror(errno));
	}
	while (!rc && (de = readdir(dir))) {
		struct stat st;
		bool index;
		char *name;

		if (de->d_name[0] == '.' && (!de->d_name[1] ||
		    (de->d_name[1] == '.' && !de->d_name[2])))
			continue;
		if (fstatat(hf->dfd, de->d_name, &st, 0))
			continue;
		if (!S_ISREG(st.st_mode)) {
			/* an index that is a fifo is named, not passed over */
			if (pick && !S_ISDIR(st.st_mode) &&
			    ckpt_hf_index_name(de->d_name))
				rc = diag_set(d, -EINVAL, DIAG_NO_OFFSET, "'%s', "
					      "the index, is not a regular file",
					      de->d_name);
			continue;
		}
		index = pick && ckpt_hf_index_name(de->d_name);
		if (!index && hf->nfiles >= HF_MAX_FILES)
			continue;
		name = arena_strndup(&c->arena, de->d_name, strlen(de->d_name));
		if (!name) {
			rc = diag_nomem(d);
			break;
		}
		if (index && nfound < 4)
			found[nfound] = name;
		nfound += index;
		if (hf->nfiles == cap) {
			struct ckpt_hf_file *nf;

			cap = cap ? 2 * cap : 32;
			nf = realloc(hf->files, cap * sizeof(*nf));
			if (!nf) {
				rc = diag_nomem(d);
				break;
			}
			hf->files = nf;
		}
		hf->files[hf->nfiles++] = (struct ckpt_hf_file){ name,
			(uint64_t)st.st_size, UINT32_MAX };
	}
	closedir(dir);
	if (rc || !pick)
		goto out;
	if (!nfound) {
		rc = diag_set(d, -EISDIR, DIAG_NO_OFFSET, "is a directory "
			      "without a Hugging Face index (*.index.json) or "
			      "a .metadata: no checkpoint folder");
	} else if (nfound > 1) {
		qsort(found, nfound < 4 ? nfound : 4, sizeof(*found), by_name);
		rc = diag_set(d, -EINVAL, DIAG_NO_OFFSET, "holds %u Hugging "
			      "Face indexes (%s, %s%s): give the one to open, "
			      "DIR/NAME", nfound, found[0], found[1],
			      nfound > 2 ? ", ..." : "");
	} else {
		hf->index = found[0];
	}
out:
	if (!rc && hf->nfiles)
		qsort(hf->files, hf->nfiles, sizeof(*hf->files), by_file);
	return rc;
}

/* The folder and the index: c->fd becomes the index's, hf->dfd the
 * folder's. */
int ckpt_hf_locate(struct ckpt *c, bool is_dir, struct diag *d)
{
	struct ckpt_hf *hf = c->hf;
	const char *slash = strrchr(c->path, '/');
	size_t n = strlen(c->path);
	char *dir;
	int rc;

	if (is_dir) {
		while (n > 1 && c->path[n - 1] == '/')
			n--;
		dir = arena_strndup(&c->arena, c->path, n);
		if (!dir)
			return diag_nomem(d);
		rc = src_new(dir, c->fd, &c->src, d);	/* takes the fd */
		c->fd = -1;
	} else {
		const char *base = slash ? slash + 1 : c->path;

		dir = slash ? arena_strndup(&c->arena, c->path, slash ==
					    c->path ? 1 : slash - c->path) :
		      arena_strndup(&c->arena, ".", 1);
		hf->index = arena_strndup(&c->arena, base, strlen(base));
		if (!dir || !hf->index)
			return diag_nomem(d);
		rc = src_new(dir, -1, &c->src, d);
		if (rc)
			return diag_errno(d, rc, "cannot open its folder %s",
					  dir);
	}
	if (rc)
		return rc;
	hf->dfd = src_root_fd(c->src);
	hf->dir = dir;
	rc = scan(c, is_dir, d);
	if (rc)
		return rc;
	/* the index is member 0: a link, a fifo, are the source's to judge */
	rc = src_add(c->src, hf->index, strlen(hf->index), DIAG_NO_OFFSET, 0,
		     d);
	if (rc < 0)
		return rc;
	if (is_dir) {
		c->fd = fcntl(src_at(c->src, 0)->fd, F_DUPFD_CLOEXEC, 0);
		if (c->fd < 0)
			return diag_errno(d, -errno, "%s: %s", hf->index,
					  strerror(errno));
	}
	return 0;
}

int ckpt_hf_index_bytes(struct ckpt *c, const char *where, char **text,
			size_t *len, struct diag *d)
{
	struct stat st;
	int rc;

	*text = NULL;
	if (fstat(c->fd, &st))
		return diag_errno(d, -errno, "%s", strerror(errno));
	if (!S_ISREG(st.st_mode))
		return diag_corrupt(d, DIAG_NO_OFFSET, "%sindex is not a "
				    "regular file", where);
	if ((uint64_t)st.st_size > HFIX_MAX_BYTES)
		return diag_unsupported(d, 0, "%sindex of %llu bytes, over the "
					"%u this reader takes", where,
					(unsigned long long)st.st_size,
					HFIX_MAX_BYTES);
	*text = malloc(st.st_size + 1);
	if (!*text)
		return diag_nomem(d);
	*len = st.st_size;
	rc = io_pread_diag(c->fd, *text, st.st_size, 0, "the index", d);
	if (rc) {
		free(*text);
		*text = NULL;
	}
	return rc;
}

int ckpt_hf_read_index(struct ckpt *c, struct hfix *ix, const char *where,
		       struct diag *d)
{
	char *text;
	size_t len;
	int rc = ckpt_hf_index_bytes(c, where, &text, &len, d);

	if (rc)
		return rc;
	c->file_size = len;
	rc = hfix_parse(text, len, &c->arena, where, ix, d);
	free(text);
	return rc;
}

/* Drop the shards from the files list: they are the tree. */
void ckpt_hf_files_not_shards(struct ckpt_hf *hf, const struct hfix *ix)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < hf->nfiles; i++)
		if (!bsearch(&hf->files[i].name, ix->shards, ix->nshards,
			     sizeof(*ix->shards), by_name))
			hf->files[n++] = hf->files[i];
	hf->nfiles = n;
}

