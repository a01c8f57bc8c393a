/*
 * ckpt_dcp_files.c - the files of a DCP directory that are not the
 * checkpoint: what a training script saves beside .metadata (config.json,
 * generation_config.json, tokenizer files).  Like a Hugging Face folder's
 * other files they are shown under .ptfs/files/ and copied beside
 * ptrepack's folder output, so a DCP directory saved with its config
 * loads with from_pretrained once converted.
 *
 * Listed on the first ask (only the mount and the writers want them), not
 * at the open.  Left out: the metadata files (.metadata, __R.metadata),
 * the data files (*.distcp, and any file storage_data names), subfolders
 * and whatever is no regular file once links are followed.  Each one
 * listed is opened through the source (src_add()), so a link out of the
 * directory is read through with its target's owner and mode, and a fifo
 * is never opened.
 */
#include "ckpt_dcp.h"
#include "source/source.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DCP_MAX_OTHERS	4096	/* other files listed; more are left out */

bool ckpt_dcp_meta_name(const char *name)
{
	size_t i = 2;

	if (!strcmp(name, ".metadata"))
		return true;
	if (strncmp(name, "__", 2))
		return false;
	while (name[i] >= '0' && name[i] <= '9')
		i++;
	return i > 2 && !strcmp(name + i, ".metadata");
}

/* Is @name (an entry of the directory) part of the checkpoint itself? */
static bool is_ckpt_file(const struct ckpt_dcp *p, const char *name)
{
	size_t n = strlen(name);

	if (ckpt_dcp_meta_name(name))
		return true;
	if (n >= 7 && !strcmp(name + n - 7, ".distcp"))
		return true;
	for (uint32_t i = 0; i < p->nfiles; i++)
		if (!strcmp(p->files[i].name, name))
			return true;
	return false;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct dcp_other *)a)->name,
		      ((const struct dcp_other *)b)->name);
}

/* The directory's other regular files, sorted by name: 0 or -ENOMEM (a
 * directory that cannot be listed has none to show). */
static int list(struct ckpt *c)
{
	struct ckpt_dcp *p = c->dcp;
	int fd = p->dirfd >= 0 ? dup(p->dirfd) : -1;
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	uint32_t cap = 0;
	struct dirent *de;
	int rc = 0;

	if (!dir) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while (!rc && (de = readdir(dir)) && p->nothers < DCP_MAX_OTHERS) {
		struct stat st;
		char *name;

		if (de->d_name[0] == '.' && (!de->d_name[1] ||
		    (de->d_name[1] == '.' && !de->d_name[2])))
			continue;
		/* links followed (the source reads them through); a fifo
		   is stat'ed, never opened */
		if (is_ckpt_file(p, de->d_name) ||
		    fstatat(p->dirfd, de->d_name, &st, 0) ||
		    !S_ISREG(st.st_mode))
			continue;
		name = arena_strndup(&c->arena, de->d_name, strlen(de->d_name));
		if (!name) {
			rc = -ENOMEM;
			break;
		}
		if (p->nothers == cap) {
			struct dcp_other *no;

			cap = cap ? 2 * cap : 16;
			no = realloc(p->others, cap * sizeof(*no));
			if (!no) {
				rc = -ENOMEM;
				break;
			}
			p->others = no;
		}
		p->others[p->nothers++] = (struct dcp_other){ name,
			(uint64_t)st.st_size, UINT32_MAX };
	}
	closedir(dir);
	if (!rc && p->nothers)
		qsort(p->others, p->nothers, sizeof(*p->others), by_name);
	return rc;
}

int ckpt_dcp_open_files(struct ckpt *c)
{
	struct ckpt_dcp *p = c->dcp;
	int rc;

	if (!p->others_listed) {
		rc = list(c);
		if (rc)
			return rc;
		p->others_listed = true;
	}
	for (; p->nopened < p->nothers; p->nopened++) {
		struct dcp_other *f = &p->others[p->nopened];
		int k = src_add(c->src, f->name, strlen(f->name),
				DIAG_NO_OFFSET, SRC_QUIET, NULL);

		if (k == -ENOMEM)
			return k;
		f->member = k < 0 ? UINT32_MAX : (uint32_t)k;
	}
	return (int)p->nothers;
}

uint32_t ckpt_dcp_file_member(const struct ckpt *c, uint32_t i)
{
	const struct ckpt_dcp *p = c->dcp;

	return i < p->nopened ? p->others[i].member : UINT32_MAX;
}

void ckpt_dcp_file_entry(const struct ckpt *c, uint32_t i, const char **name,
			 uint64_t *size)
{
	const struct ckpt_dcp *p = c->dcp;

	if (i < p->nothers) {
		*name = p->others[i].name;
		*size = p->others[i].size;
	}
}
