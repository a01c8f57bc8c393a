/*
 * zip_builder.h - build zip archives in memory for tests: torch's layout
 * (FB padding to 64, data descriptors, ZIP64 end records) or a plain one,
 * with the positions of every part recorded so tests can break them.
 */
#ifndef PT_TESTS_ZIP_BUILDER_H
#define PT_TESTS_ZIP_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf {
	unsigned char *p;
	size_t len, cap;
};

struct zent {
	const char *name;
	const void *data;
	size_t len;
	bool deflate;
};

struct zopt {
	bool torch;		/* FB padding to 64, descriptors, 0 sizes in
				   local headers, ZIP64 end records */
	bool zip64_end;		/* ZIP64 end records in the plain layout */
	bool eocd_sentinels;	/* classic end record all 0xffff... */
	bool cd_zip64;		/* CD sizes and offset in a ZIP64 extra */
	const char *comment;
	size_t comment_len;
	const void *head;	/* bytes before the first record (offsets
				   count from the start of them) */
	size_t head_len;
	/* per record, or NULL: the local header's name (NULL: the name),
	   the central directory's external attributes (0x10: directory) */
	const char *const *lnames;
	const uint32_t *attrs;
};

#define ZMAX 512

/* Where the builder put things, for tests that then break them. */
struct zinfo {
	size_t hdr[ZMAX], data[ZMAX], cd[ZMAX], csize[ZMAX];
	size_t cd_off, cd_size, z64_off, loc_off, eocd_off;
};

/* Append @n zero bytes to @b and return them (valid until the next put). */
unsigned char *zb_put(struct buf *b, size_t n);
void zb_put_bytes(struct buf *b, const void *s, size_t n);
/* Build an archive of @ents into @b (caller frees b->p). */
void zb_build(struct buf *b, const struct zent *ents, size_t n,
	      const struct zopt *o, struct zinfo *info);

#endif
