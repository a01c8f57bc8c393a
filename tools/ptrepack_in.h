/*
 * ptrepack_in.h - what ptrepack asks of its input before it writes: the
 * subtrees KEYPATH... names (the new root), the CRC-32 of every record
 * (a damaged one is refused, not copied under a fresh CRC), and the
 * size of the whole input, every shard of a folder included, for the
 * summary's "(was N)".  Kept apart so that ptrepack.c only calls it.
 */
#ifndef PT_TOOLS_PTREPACK_IN_H
#define PT_TOOLS_PTREPACK_IN_H

#include <stdint.h>

#include "ckpt/ckpt.h"

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
int in_check_crc(struct ckpt *c, struct diag *d);

/* Bytes of the whole input: the file, or a folder's index and shards. */
uint64_t in_size(const struct ckpt *c);

#endif
