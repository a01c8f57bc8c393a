/*
 * ptfs_staged.c - what a mount says when it starts about the edits an
 * earlier mount staged in the overlay: resumed (a writable mount),
 * shown though not on disk (a read-only one), or dropped (-o discard).
 * Counted as `ptfs status` counts them (ovl_summarize() and
 * ptfs_counts_text()), never in journal records: one edit of a tensor
 * writes none, a value edited twice writes two.
 *
 * -o discard drops the overlay as it opens it, unread; so what it held is
 * counted first by a read-only look at it (its own open of the
 * checkpoint, which the replay changes; the overlay is left as it is).
 */
#define _GNU_SOURCE 1	/* open_memstream */
#include "ptfs.h"

#include "diag/diag.h"

#include <stdio.h>
#include <stdlib.h>

/* "1 tensor changed, 1 value edited" (malloc'd; NULL: no memory). */
static char *counts(const struct ovl_summary *s)
{
	char *buf = NULL;
	size_t len;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	ptfs_counts_text(f, s);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* What -o discard will have dropped, by the look at it (@v, @s). */
static char *dropped(const struct ovl *v, const struct ovl_summary *s)
{
	char *line = NULL;
	size_t len;
	FILE *f;
	int rc;

	if (!s->journal) {
		/* not shown read-only: staged for another version */
		rc = ovl_note(v) ?
		     asprintf(&line, "discarded: the edits staged for another "
			      "version of %s; %s removed, %s untouched",
			      ovl_path(v), ovl_dir(v), ovl_path(v)) :
		     asprintf(&line, "-o discard: nothing was staged in %s",
			      ovl_dir(v));
		return rc < 0 ? NULL : line;
	}
	f = open_memstream(&line, &len);
	if (!f)
		return NULL;
	ptfs_discarded_text(f, v, s);
	if (fclose(f)) {
		free(line);
		return NULL;
	}
	return line;
}

char *ptfs_discard_look(const char *ckpt, const struct ovl_opts *oo)
{
	struct ovl_opts ro = *oo;
	struct ovl_summary s = { 0 };
	struct ckpt *c = NULL;
	struct ovl *v = NULL;
	struct diag d;
	char *line = NULL;

	ro.discard = false;
	ro.readonly = true;	/* no lock, nothing written, nothing cut */
	diag_init(&d, ckpt);
	/* a failed look (an in-place write-back to finish, damage) says
	   nothing: the mount itself says what it does about it */
	if (!ckpt_open_with(ckpt, CKPT_OPEN_ROWS, &c, &d) &&
	    !ovl_open(c, ckpt, &ro, &v, &d) && !ovl_summarize(v, 0, &s, &d))
		line = dropped(v, &s);
	ovl_summary_free(&s);
	ovl_close(v);
	ckpt_close(c);
	return line;
}

void ptfs_say_staged(struct ptfs *fs)
{
	struct ovl_summary s;
	struct diag d;
	char *what;

	diag_init(&d, fs->c->path);
	/* a journal at open is an earlier mount's */
	if (ovl_summarize(fs->ovl, 0, &s, &d) || !s.journal ||
	    ptfs_nothing_staged(&s)) {
		ovl_summary_free(&s);
		return;
	}
	what = counts(&s);
	if (fs->readonly)
		fprintf(stderr, "ptfs: %s: read-only, showing the edits staged "
			"in %s, which the file on disk does not hold: %s\n",
			ovl_path(fs->ovl), ovl_dir(fs->ovl),
			what ? what : "changes");
	else
		fprintf(stderr, "ptfs: resumed the edits staged in %s: %s "
			"(ptfs umount writes them back; mount with -o discard "
			"to drop them)\n", ovl_dir(fs->ovl),
			what ? what : "changes");
	free(what);
	ovl_summary_free(&s);
}
