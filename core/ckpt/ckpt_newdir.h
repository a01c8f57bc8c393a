/*
 * ckpt_newdir.h - a new output directory (ptrepack IN OUT/: a DCP
 * directory, a Hugging Face folder), built whole under a temporary name
 * beside OUT and renamed into place, so that a failure or a crash leaves
 * OUT as it was and at most that temporary.  Internal to core.
 *
 *   newdir_begin()   OUT absent or an empty directory (rename() replaces
 *                    that); ".OUT.ptfs-new.XXXXXX" made with mode 0777
 *                    (the umask decides, as for any directory the user
 *                    makes: mkdtemp's 0700 would stay on OUT)
 *   ...              the caller writes its files into nd->dfd (openat,
 *                    O_EXCL), fsync'ing each; a small one whole with
 *                    newdir_put()
 *   newdir_commit()  the directory fsync'd, renamed to OUT, OUT's parent
 *                    fsync'd
 *   newdir_end()     unless committed, everything made in the temporary
 *                    removed, and it
 */
#ifndef PT_CKPT_CKPT_NEWDIR_H
#define PT_CKPT_CKPT_NEWDIR_H

#include <stdbool.h>
#include <stddef.h>

#include "diag/diag.h"

struct newdir {
	char *out;		/* OUT without trailing '/' */
	char *tmp;		/* the temporary beside it */
	int dfd;		/* the temporary, open */
	bool committed;
};

/* @what names the output in messages ("a DCP output").  0 or -errno with
 * @d set; newdir_end() in any case. */
int newdir_begin(struct newdir *nd, const char *dst, const char *what,
		 struct diag *d);
/* A new file @name in it holding the @len bytes of @p (@mode, under the
 * umask), fsync'd.  0 or -errno with @d set (naming the file). */
int newdir_put(struct newdir *nd, const char *name, const void *p,
	       size_t len, unsigned mode, struct diag *d);
int newdir_commit(struct newdir *nd, struct diag *d);
void newdir_end(struct newdir *nd);

#endif
