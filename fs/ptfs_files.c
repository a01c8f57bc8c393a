/*
 * ptfs_files.c - the files of a checkpoint's folder that are not the
 * checkpoint (a Hugging Face folder's config.json, tokenizer files, the
 * index itself, README.md ...; what a DCP directory holds beside
 * .metadata and its .distcp files), as the descriptor lists them,
 * shown read-only under .ptfs/files/ (docs/design.md): no key can be
 * called ".ptfs" (a leading dot is escaped, names.md), so they never
 * collide with a tensor.  The core's source opened each once, at the open
 * (ckpt_folder_file()), with its owner and mode, and they are read with
 * splice from that descriptor, so a file replaced later is still shown as
 * it was.  Subfolders are not shown.
 */
#include "ptfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ptfs_files_init(struct ptfs *fs)
{
	uint32_t n;
	int rc = ckpt_folder_files(fs->c, &n);

	if (rc <= 0)
		return rc;
	fs->files = calloc(n + 1u, sizeof(*fs->files));
	if (!fs->files)
		return -ENOMEM;
	fs->has_files = true;
	for (uint32_t i = 0; i < n; i++) {
		/* the source opened it (never blocking, a regular file
		   beneath the folder or a link's target); NULL: left out */
		const struct src_member *m = ckpt_folder_file(fs->c, i);

		if (m)
			fs->files[fs->nfiles++] = (struct ptfs_file){ m };
	}
	return 0;
}

void ptfs_files_release(struct ptfs *fs)
{
	free(fs->files);	/* the descriptors are the source's */
	fs->files = NULL;
	fs->nfiles = 0;
	fs->has_files = false;
}

fuse_ino_t ptfs_files_ino(const struct ptfs *fs, uint32_t k)
{
	return fs->plumb + 2 + fs->nstor + fs->nrecs + PTFS_NCTL + k;
}

fuse_ino_t ptfs_files_lookup(const struct ptfs *fs, const char *name)
{
	for (uint32_t i = 0; i < fs->nfiles; i++)
		if (!strcmp(fs->files[i].m->leaf, name))
			return ptfs_files_ino(fs, i + 1);
	return 0;
}
