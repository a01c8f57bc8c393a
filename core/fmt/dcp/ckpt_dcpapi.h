/*
 * ckpt_dcpapi.h - what callers of the model ask of a DCP directory
 * (ckpt_dcp.c, ckpt_dcp_read.c, ckpt_dcp_verify.c): pieced storages, where
 * a tensor's bytes lie, its chunks, a full check.  The DCP reader's own
 * shared state is ckpt_dcp.h (internal).  Part of ckpt.h.
 */
#ifndef PT_CKPT_CKPT_DCPAPI_H
#define PT_CKPT_CKPT_DCPAPI_H

#include "ckpt/ckpt_format.h"
#include "ckpt/ckpt_model.h"

/* ---- DCP directories (ckpt_dcp.c, ckpt_dcp_read.c) ---- */

/* Is node @n a value of a DCP directory, or inside one (its item's
 * pickle, written back as it is)? */
bool ckpt_dcp_in_value(const struct ckpt *c, const struct ckpt_node *n);

/*
 * The attribute @name of a tensor @t in chunks (user.dcp.chunks, a rank
 * set's user.ranks): its chunks, one line each, "offsets=0,4 sizes=8,4
 * file=__1_0.distcp offset=1261 length=1577", given to @fn; none for
 * another tensor, or when it would pass an xattr value's 64 KiB.
 */
void ckpt_dcp_chunks_attr(const struct ckpt *c, const struct ckpt_tensor *t,
			  const char *name, ckpt_attr_fn fn, void *arg);

/*
 * Check a DCP directory through: what a lenient open found (holes and
 * overlaps among chunks, items past the end of their file, chunks without
 * an item, missing data files), then every chunk's item archive (opened
 * as ckpt_dcp_where() would, and its data record's CRC-32 unless
 * @no_crc).  @fn gets one call per problem (@path the file @off is in, or
 * DIAG_NO_OFFSET).  *@checked gets the bytes whose CRC-32 was computed.
 * Returns the number of problems.
 */
uint32_t ckpt_dcp_verify(struct ckpt *c, bool no_crc, uint64_t *checked,
			 void (*fn)(void *arg, const char *check,
				    const char *path, uint64_t off,
				    const char *msg),
			 void *arg);

#endif
