/*
 * ident.h - which file a checkpoint was opened from, and whether the
 * file behind an open descriptor is still that one.  Reads through a mount
 * use it to refuse bytes from a checkpoint that was rewritten in place
 * under them (torch.save or cp to the same path keeps the inode).
 */
#ifndef PT_SOURCE_IDENT_H
#define PT_SOURCE_IDENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct diag;

/* What fstat said when the checkpoint was opened. */
struct src_ident {
	uint64_t dev, ino, nlink;
	int64_t size;
	int64_t mtime_s, mtime_ns, ctime_s, ctime_ns;
};

/* The identity in @st (of the checkpoint, fstat'ed when opened). */
void src_ident_of(const struct stat *st, struct src_ident *id);

/*
 * Is @fd still the file @id describes, unchanged?  One fstat(2), so cheap
 * enough for every read.  0 when it is; -ESTALE with @d set (naming what
 * changed) when its inode, size or mtime differ, or its ctime while its
 * link count stayed (a rename over the path or a new hard link moves the
 * ctime and changes no byte); fstat's -errno.
 */
int src_ident_check(int fd, const struct src_ident *id, struct diag *d);

#endif
