/*
 * ident.c - is the open checkpoint still the file that was opened?
 *
 * A training job that calls torch.save (or cp) on the mounted path
 * truncates and rewrites the same inode: every offset the model holds now
 * points into other bytes.  The descriptor cannot tell by itself, but
 * fstat can: a rewrite changes the size or, at least, mtime and ctime
 * (nanoseconds where the file system keeps them).  A rename over the path
 * leaves our inode's bytes as they were, which is what the mount showed,
 * so that is not stale.
 */
#include "ident.h"

#include "diag/diag.h"

#include <errno.h>
#include <string.h>

void src_ident_of(const struct stat *st, struct src_ident *id)
{
	memset(id, 0, sizeof(*id));
	id->dev = st->st_dev;
	id->ino = st->st_ino;
	id->nlink = st->st_nlink;
	id->size = st->st_size;
	id->mtime_s = st->st_mtim.tv_sec;
	id->mtime_ns = st->st_mtim.tv_nsec;
	id->ctime_s = st->st_ctim.tv_sec;
	id->ctime_ns = st->st_ctim.tv_nsec;
}

int src_ident_check(int fd, const struct src_ident *id, struct diag *d)
{
	struct src_ident now;
	struct stat st;

	if (fstat(fd, &st))
		return diag_errno(d, -errno, "fstat: %s", strerror(errno));
	src_ident_of(&st, &now);
	if (now.dev != id->dev || now.ino != id->ino)
		return diag_errno(d, -ESTALE, "changed under the mount: "
				  "another file");
	if (now.size != id->size)
		return diag_errno(d, -ESTALE, "changed under the mount: size "
				  "%lld, was %lld", (long long)now.size,
				  (long long)id->size);
	/*
	 * ctime catches a rewrite whose mtime was put back (cp -p, rsync -t
	 * --inplace of a file of the same size).  It also moves when the file
	 * is renamed over (unlinked: our inode keeps its bytes) or linked;
	 * those change the link count, a rewrite does not.  chmod/chown under
	 * the mount do move it alone, and count as a change.
	 */
	if (now.mtime_s != id->mtime_s || now.mtime_ns != id->mtime_ns ||
	    ((now.ctime_s != id->ctime_s || now.ctime_ns != id->ctime_ns) &&
	     now.nlink == id->nlink))
		return diag_errno(d, -ESTALE, "changed under the mount: "
				  "rewritten in place (new mtime/ctime)");
	return 0;
}
