/*
 * ovl_undo.c - giving up staged edits without writing them back: all of
 * them (ovl_discard(), `ptfs umount --discard`), which removes the overlay
 * by its manifest exactly as a successful write-back does, never a file
 * ptfs did not create, and never the checkpoint.  Before this, the only
 * way to drop an `rm -r` mistake was kill -9 and a new mount with
 * -o discard, which dropped the good edits too.
 */
#include "ovl_int.h"


int ovl_discard(struct ovl *v, struct diag *d)
{
	int rc = 0;

	if (v->readonly || v->committed)
		return ovl_check_writable(v, d);
	/* nothing on disk yet, or the directory was removed under the
	   mount (its path may name another directory now): nothing to
	   remove */
	if (v->dfd >= 0 && ovl_dir_alive(v))
		rc = ovl_forget(v, d);
	if (rc)
		return rc;
	v->committed = true;
	v->discarded = true;
	return 0;
}
