/*
 * ckpt_fsave.h - the commit of a write-back into a checkpoint of many
 * files (a Hugging Face sharded folder, a DCP directory, a per-rank shard
 * set), shared by ckpt_hfsave.c, ckpt_dcp_wb.c and ckpt_ranks_wb.c.
 * Internal to core/ckpt.
 *
 * No rename replaces several files at once, and each format's loader
 * reads one file first (the index, .metadata) and then the data files it
 * names, so that file is the one commit point:
 *
 *   step  what                                   a crash here leaves
 *   1     each data file touched written whole   the old checkpoint, and
 *         under a new name, made O_EXCL,         new files the journal
 *         journaled (CKPT_SAVE_NEW), fsync'd     names (the next mount
 *         (fsave_new(), fsave_finish())          removes them)
 *   2     the commit file written into           the old checkpoint; the
 *         ".NAME.ptfs-new.TAG" (journaled,       temporary is journaled
 *         CKPT_SAVE_START, by fsave_init()),
 *         naming the new files; fsync'd
 *   3     the old files journaled (RETIRE),      the old checkpoint
 *         then JR_COMMIT (CKPT_SAVE_RENAME)
 *   4     the temporary renamed over the commit  the new checkpoint, and
 *         file, the directory fsync'd:           the old files, which the
 *         COMMITTED                              next mount removes
 *   5     the old files unlinked (each only if   the new checkpoint
 *         its name still leads to the file
 *         opened), the directory fsync'd
 *
 * A new name is the first free of BASE.EXT, BASE.g1.EXT, BASE.g2.EXT ...
 * other than the file's own (ckpt_gen_name()).
 *
 * A set whose files keep their names (a rank set: training code loads
 * model_world_size_N_rank_R.pt by name) has no file to rename last and
 * no new names: the overlay's journal is the commit point instead
 * (fsave_init_swap()), and a mount after a crash past it finishes the
 * renames (roll-forward):
 *
 *   step  what                                   a crash here leaves
 *   1     each file touched written whole under  the old set, and
 *         ".NAME.ptfs-new.TAG" beside it,        temporaries the journal
 *         O_EXCL, journaled (CKPT_SAVE_NEW),     names (the next mount
 *         fsync'd (fsave_new(), fsave_finish())  removes them)
 *   2     one record naming every temporary and  the old set and the
 *         its file, with both (dev, ino), in the temporaries; the next
 *         journal, fsync'd (CKPT_SAVE_SWAP, by   mount renames them
 *         fsave_swap()): COMMITTED               (roll-forward)
 *   3     each temporary renamed over its file,  some files new, some
 *         the directory fsync'd                  old, until the next
 *                                                mount renames the rest
 */
#ifndef PT_CKPT_CKPT_FSAVE_H
#define PT_CKPT_CKPT_FSAVE_H

#include "ckpt_int.h"
#include "source/source.h"

#include <sys/stat.h>

/* One data file replaced (or, name NULL, only removed). */
struct fsave_file {
	uint32_t src;		/* the caller's index of the old file */
	uint32_t member;	/* the old file in c->src: its name, path, fd
				   and the directory both lie in (opened
				   beneath the root at the open) */
	char *name;		/* the new file's name; NULL: it only goes */
	struct stat st;		/* of the new file */
};

struct fsave {
	struct ckpt *c;
	const struct ckpt_write_opts *o;
	struct diag *d;
	int dfd;		/* the directory */
	const char *dir;	/* ... for messages */
	const char *commit;	/* the commit file's name in it */
	struct fsave_file *f;
	uint32_t nf;
	char *tmp;		/* the commit file's temporary */
	char *tmp_abs;		/* ... as the journal names it */
	bool swap;		/* fsave_init_swap(): no commit file; the
				   new files are temporaries renamed over
				   the old ones */
	bool committed;
	uint64_t bytes;		/* written, all files */
};

/*
 * Start a write-back of @c (at most @max data files replaced): name the
 * temporary and journal it (CKPT_SAVE_START).  0 or -errno with @d set;
 * fsave_end() in any case.
 */
int fsave_init(struct fsave *w, struct ckpt *c, const struct ckpt_write_opts *o,
	       uint32_t max, struct diag *d);

/*
 * Start a write-back of @c that keeps every file's name (at most @max
 * replaced): nothing is named yet; the checkpoint is checked
 * (CKPT_SAVE_START, with no temporary).  0 or -errno with @d set;
 * fsave_end() in any case.  fsave_new() then makes temporaries, and
 * fsave_swap() commits.
 */
int fsave_init_swap(struct fsave *w, struct ckpt *c,
		    const struct ckpt_write_opts *o, uint32_t max,
		    struct diag *d);

/* The old file of entry @f (c->src's member). */
static inline const struct src_member *fsave_old(const struct fsave *w,
						 const struct fsave_file *f)
{
	return src_at(w->c->src, f->member);
}

/*
 * Make the new file beside member @member of c->src (@src the caller's
 * index of it), O_EXCL, and journal it (CKPT_SAVE_NEW).  Its name is a
 * new one (ckpt_gen_name()), or with fsave_init_swap() the temporary
 * ".NAME.ptfs-new.TAG" (then ".TAG.1" ... if that is taken).  Returns its
 * fd, or -errno with w->d set.  The entry is w->f[w->nf - 1].
 */
int fsave_new(struct fsave *w, uint32_t src, uint32_t member);

/* Member @member only goes at the commit: no file replaces it. */
void fsave_drop(struct fsave *w, uint32_t src, uint32_t member);

/* The file @fd (@name) finished: owner (as root) and mode of @like,
 * fsync'd, *@st its stat.  0 or -errno. */
int fsave_finish(struct fsave *w, int fd, const char *name,
		 const struct stat *like, struct stat *st);

/* The new name of the old file @name (@len bytes), or NULL. */
const char *fsave_renamed(const struct fsave *w, const char *name,
			  size_t len);

/* Step 2: @len bytes of @p into the temporary, fsync'd; *@st its stat. */
int fsave_commit_file(struct fsave *w, const void *p, size_t len,
		      struct stat *st);

/* Steps 3-5; @st is the temporary's (fsave_commit_file()). */
int fsave_commit(struct fsave *w, const struct stat *st);

/*
 * fsave_init_swap()'s steps 2-3: every new file finished (fsave_finish()),
 * journal the plan (CKPT_SAVE_SWAP, one line per file: "TDEV TINO ODEV
 * OINO TLEN FLEN TEMPFINAL", the temporary's and the old file's dev and
 * ino, then the two names, of TLEN and FLEN bytes), then rename each over
 * its file and fsync the directories.  A rename that fails after the
 * commit leaves the others done and is the next mount's to finish.  0 or
 * -errno with w->d set.
 */
int fsave_swap(struct fsave *w);

/* Undo steps 1-2 unless committed (on @rc != 0), and free. */
void fsave_end(struct fsave *w, int rc);

/*
 * Candidate @g for a new name of file @name (malloc'd, NULL: no memory):
 * g 0 is BASE.EXT, g > 0 BASE.gG.EXT, where BASE.EXT is @name without a
 * ".gN" (N from 1, no leading zero) before its extension, the last '.' of
 * its last part if that is not the part's first byte.
 */
char *ckpt_gen_name(const char *name, unsigned g);

#endif
