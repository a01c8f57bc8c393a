/*
 * zrec.h - checks of one zip record that ptdump --records and ptverify
 * share: its CRC-32 recomputed (streamed with pread, never the whole
 * record in memory unless it is deflated) and its data alignment.
 */
#ifndef PT_TOOLS_ZREC_H
#define PT_TOOLS_ZREC_H

#include <stdint.h>

struct diag;
struct ptz_reader;
struct ptz_entry;

/* Deflated records larger than this are not inflated to check them. */
#define ZREC_MAX_INFLATE	(UINT64_C(1) << 30)

/*
 * CRC-32 of @e's uncompressed data (located first) into *@crc.  @step,
 * if given, is called with each chunk's size as it is read.  Returns 0,
 * -EFBIG for a deflated record over ZREC_MAX_INFLATE, or -errno with @d
 * set.
 */
int zrec_crc32(const struct ptz_reader *z, struct ptz_entry *e,
	       uint32_t *crc, void (*step)(void *arg, uint64_t n), void *arg,
	       struct diag *d);

/* The largest power of two dividing @off (@off 0: 2^63). */
uint64_t zrec_align(uint64_t off);

#endif
