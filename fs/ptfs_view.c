/*
 * ptfs_view.c - the renderings behind the text views (KEY.txt).  A text
 * view's size is known only once it is rendered, and reads at random
 * offsets must not render it again each time, so the first stat, open or
 * read renders it into an unlinked temporary file (in $TMPDIR: never
 * memory) and later reads are spliced from there.  Any edit drops every
 * rendering: edits take the lock for writing, so no reader is using them.
 */
#define _GNU_SOURCE 1	/* O_TMPFILE */
#include "ptfs.h"

#include "diag/diag.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int tmp_file(struct diag *d)
{
	const char *dir = getenv("TMPDIR");
	int fd = open(dir && *dir ? dir : "/tmp", O_TMPFILE | O_RDWR |
		      O_CLOEXEC, 0600);

	if (fd < 0)
		return diag_errno(d, -errno, "cannot make a temporary file in "
				  "%s for a text view: %s", dir && *dir ? dir :
				  "/tmp", strerror(errno));
	return fd;
}

int ptfs_text_get(struct ptfs *fs, struct ckpt_node *n, int *fd,
		  uint64_t *size, struct diag *d)
{
	struct ptfs_text *e;
	int rc = 0;

	pthread_mutex_lock(&fs->text_lock);
	if (n->id >= fs->ntexts) {
		uint32_t cap = fs->c->nnodes > n->id ? fs->c->nnodes : n->id + 1;
		struct ptfs_text *t = realloc(fs->texts, cap * sizeof(*t));

		if (!t) {
			rc = diag_nomem(d);
			goto out;
		}
		memset(t + fs->ntexts, 0, (cap - fs->ntexts) * sizeof(*t));
		fs->texts = t;
		fs->ntexts = cap;
	}
	e = &fs->texts[n->id];
	if (!e->valid) {
		int f = tmp_file(d);

		if (f < 0) {
			rc = f;
			goto out;
		}
		rc = ovl_text_render(fs->ovl, n, f, &e->size, d);
		if (rc) {
			close(f);
			goto out;
		}
		e->fd = f;
		e->valid = true;
		fs->ncached++;
	}
	*fd = e->fd;
	*size = e->size;
out:
	pthread_mutex_unlock(&fs->text_lock);
	return rc;
}

void ptfs_texts_drop(struct ptfs *fs)
{
	for (uint32_t i = 0; fs->ncached && i < fs->ntexts; i++)
		if (fs->texts[i].valid) {
			close(fs->texts[i].fd);
			fs->texts[i].valid = false;
			fs->ncached--;
		}
}

uint64_t ptfs_view_size(struct ptfs *fs, struct ckpt_node *n, int view)
{
	struct diag d;
	uint64_t size = 0;
	int fd;

	if (view == CKPT_V_NPY)
		return ovl_npy_size(fs->ovl, n);
	if (n->vstage && n->vstage->view == CKPT_V_TXT)
		return n->vstage->len;
	diag_init(&d, fs->c->path);
	/* a failure shows as size 0 here; the read reports it */
	if (ptfs_text_get(fs, n, &fd, &size, &d))
		return 0;
	return size;
}
