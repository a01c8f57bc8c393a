/*
 * ptrepack_in.h - what ptrepack asks of its input before it writes: the
 * subtrees KEYPATH... names (the new root), the CRC-32 of every record
 * (a damaged one is refused, not copied under a fresh CRC), and the
 * size of the whole input, every shard of a folder included, for the
 * summary's "(was N)".  Kept apart so that ptrepack.c only calls it.
 */
#ifndef PT_TOOLS_PTREPACK_IN_H
#define PT_TOOLS_PTREPACK_IN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "diag/diag.h"

struct in_roots {
	struct ckpt_node **nodes;	/* what each path names */
	const char **keys;		/* the paths, as given (borrowed) */
	uint32_t n;
};

/*
 * Find the nodes @paths[0..@n) name (as ptls prints paths:
 * "model/fc.weight", links followed) and put them into @o as the new
 * root.  A path that names nothing, or one given twice: -ENOENT or
 * -EINVAL with @d set (one line).  Release @r either way.
 */
int in_roots_find(struct ckpt *c, char **paths, int n, struct in_roots *r,
		  struct ckpt_write_opts *o, struct diag *d);
void in_roots_release(struct in_roots *r);

/*
 * Read every record and compare its CRC-32 with the one the archive
 * keeps (ckpt_verify()'s check, every shard of a folder too).  The first
 * that differs: -EILSEQ with @d set, naming the record and its offset.
 * A record with no CRC at all (torch's set_crc32_options(False)) is not
 * damage.  0 when all agree.
 */
int in_check_crc(struct ckpt *c, bool progress, struct diag *d);

/*
 * The same check while the output is written: on a second opening of
 * the input (its own model, so nothing is shared with the writer), in a
 * thread, joined before OUT is replaced (in_crc_before(), ckpt_save()'s
 * @before), so a damaged record still leaves OUT as it was.  Reading the
 * input twice one after the other cost as much as the write itself on
 * 1 GB (docs/benchmarks.md, issue 43); on two cores the check overlaps
 * it.  Worth it when the bytes dominate the second model's cost
 * (in_crc_worth(): on average IN_CRC_PER_TENSOR bytes a tensor, or
 * $PT_CRC_OVERLAP_BYTES for the tests), and never for a remote input,
 * which would be fetched twice.
 */
#define IN_CRC_PER_TENSOR	(UINT64_C(1) << 20)

struct in_crc {
	const char *path;	/* borrowed */
	const struct ckpt *first;	/* the opening written from */
	struct ckpt *c;		/* the second opening */
	struct diag d;		/* what the check found */
	int rc;
	bool started, joined;
	pthread_t th;
};

bool in_crc_worth(const struct ckpt *c);
/* Start checking @path (as cli_open() opens it; @first is its opening
 * the output is written from): 0, or -EAGAIN when no thread could start
 * (then check first, with in_check_crc()). */
int in_crc_start(struct in_crc *k, const struct ckpt *first,
		 const char *path);
/* Wait for the check: 0, or its -errno with *@d its diagnostic; -ESTALE
 * when the second opening found other files than the first (one was
 * replaced between them: its CRCs say nothing of what was written). */
int in_crc_join(struct in_crc *k, struct diag *d);
/* in_crc_join() as ckpt_save()'s @before (@arg the struct in_crc). */
int in_crc_before(void *arg, const struct stat *st, struct diag *d);
/* Join if still running, close the second opening.  Zeroed: fine. */
void in_crc_release(struct in_crc *k);

/* Bytes of the whole input: the file, or a folder's index and shards. */
uint64_t in_size(const struct ckpt *c);

#endif
