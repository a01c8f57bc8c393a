/*
 * ptfs_files.c - the files of a Hugging Face sharded folder that are not
 * shards (config.json, tokenizer files, the index itself, README.md ...),
 * shown read-only under .ptfs/files/ (docs/design.md, "Sharded Hugging
 * Face folders"): no key can be called ".ptfs" (a leading dot is escaped,
 * names.md), so they never collide with a tensor.  The core lists them
 * (c->hf->files); each is opened here once, at mount, and read with
 * splice from that descriptor, so a file replaced later is still shown as
 * it was.  Subfolders are not shown.
 */
#include "ptfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ptfs_files_init(struct ptfs *fs)
{
	const struct ckpt_hf *hf = fs->c->hf;

	fs->files = calloc(hf->nfiles + 1u, sizeof(*fs->files));
	if (!fs->files)
		return -ENOMEM;
	fs->has_files = true;
	for (uint32_t i = 0; i < hf->nfiles; i++) {
		/* O_NONBLOCK: a FIFO put there since the listing must not
		   hang the mount; it is then no regular file and left out */
		int fd = openat(hf->dfd, hf->files[i].name, O_RDONLY |
				O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		struct stat st;

		if (fd < 0)
			continue;
		if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
			close(fd);
			continue;
		}
		fs->files[fs->nfiles++] = (struct ptfs_file){
			hf->files[i].name, fd, (uint64_t)st.st_size };
	}
	return 0;
}

void ptfs_files_release(struct ptfs *fs)
{
	for (uint32_t i = 0; i < fs->nfiles; i++)
		close(fs->files[i].fd);
	free(fs->files);
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
		if (!strcmp(fs->files[i].name, name))
			return ptfs_files_ino(fs, i + 1);
	return 0;
}
