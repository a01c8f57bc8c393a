/*
 * zip_builder.c - the in-memory zip writer behind the zip and checkpoint
 * tests (see zip_builder.h).  Deliberately independent of core/.
 */
#include "zip_builder.h"
#include "test_util.h"
#include "zip/ptz_int.h"

#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>

/* Append @n zero bytes to @b and return them (valid until the next put). */
unsigned char *zb_put(struct buf *b, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2;
		b->p = realloc(b->p, b->cap);
		cr_assert_not_null(b->p);
	}
	memset(b->p + b->len, 0, n);
	b->len += n;
	return b->p + b->len - n;
}

void zb_put_bytes(struct buf *b, const void *s, size_t n)
{
	if (n)
		memcpy(zb_put(b, n), s, n);
}

void zb_build(struct buf *b, const struct zent *ents, size_t n,
		  const struct zopt *o, struct zinfo *info)
{
	struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
	unsigned char *cdata[ZMAX];
	uint32_t crc[ZMAX];
	bool z64 = o->torch || o->zip64_end;
	unsigned char *p;

	cr_assert(n <= ZMAX && c);
	memset(b, 0, sizeof(*b));
	memset(info, 0, sizeof(*info));
	zb_put_bytes(b, o->head, o->head_len);
	for (size_t i = 0; i < n; i++) {
		const struct zent *e = &ents[i];
		const char *ln = o->lnames && o->lnames[i] ? o->lnames[i] :
				 e->name;
		size_t nl = strlen(ln), pad = 0, el = 0, cs = e->len;

		crc[i] = libdeflate_crc32(0, e->data, e->len);
		cdata[i] = malloc(e->len + 64);
		if (e->deflate)
			cs = libdeflate_deflate_compress(c, e->data, e->len,
							 cdata[i], e->len + 64);
		else if (e->len)
			memcpy(cdata[i], e->data, e->len);
		info->csize[i] = cs;
		info->hdr[i] = b->len;
		if (o->torch) {
			pad = (64 - (b->len + 30 + nl + 4) % 64) % 64;
			el = 4 + pad;
		}
		p = zb_put(b, 30);
		put_le32(p, PTZ_SIG_LOCAL);
		put_le16(p + 4, e->deflate ? 20 : 0);
		put_le16(p + 6, o->torch && e->len ? 0x0808 : 0x0800);
		put_le16(p + 8, e->deflate ? 8 : 0);
		if (!o->torch) {
			put_le32(p + 14, crc[i]);
			put_le32(p + 18, cs);
			put_le32(p + 22, e->len);
		}
		put_le16(p + 26, nl);
		put_le16(p + 28, el);
		zb_put_bytes(b, ln, nl);
		if (o->torch) {
			p = zb_put(b, el);
			p[0] = 'F';
			p[1] = 'B';
			put_le16(p + 2, pad);
			memset(p + 4, 'Z', pad);
		}
		info->data[i] = b->len;
		zb_put_bytes(b, cdata[i], cs);
		if (o->torch && e->len) {
			p = zb_put(b, 16);
			put_le32(p, 0x08074b50);
			put_le32(p + 4, crc[i]);
			put_le32(p + 8, cs);
			put_le32(p + 12, e->len);
		}
	}
	info->cd_off = b->len;
	for (size_t i = 0; i < n; i++) {
		const struct zent *e = &ents[i];
		size_t nl = strlen(e->name);

		info->cd[i] = b->len;
		p = zb_put(b, 46);
		put_le32(p, PTZ_SIG_CDIR);
		put_le16(p + 6, e->deflate ? 20 : 0);
		put_le16(p + 8, o->torch && e->len ? 0x0808 : 0x0800);
		put_le16(p + 10, e->deflate ? 8 : 0);
		put_le32(p + 16, crc[i]);
		put_le32(p + 20, o->cd_zip64 ? 0xffffffff : info->csize[i]);
		put_le32(p + 24, o->cd_zip64 ? 0xffffffff : e->len);
		put_le16(p + 28, nl);
		put_le16(p + 30, o->cd_zip64 ? 28 : 0);
		put_le32(p + 38, o->attrs ? o->attrs[i] : 0);
		put_le32(p + 42, o->cd_zip64 ? 0xffffffff : info->hdr[i]);
		zb_put_bytes(b, e->name, nl);
		if (o->cd_zip64) {
			p = zb_put(b, 28);
			put_le16(p, 1);
			put_le16(p + 2, 24);
			put_le64(p + 4, e->len);
			put_le64(p + 12, info->csize[i]);
			put_le64(p + 20, info->hdr[i]);
		}
		free(cdata[i]);
	}
	info->cd_size = b->len - info->cd_off;
	if (z64) {
		info->z64_off = b->len;
		p = zb_put(b, 56);
		put_le32(p, PTZ_SIG_EOCD64);
		put_le64(p + 4, 44);
		put_le16(p + 12, 0x031e);
		put_le16(p + 14, 0x002d);
		put_le64(p + 24, n);
		put_le64(p + 32, n);
		put_le64(p + 40, info->cd_size);
		put_le64(p + 48, info->cd_off);
		info->loc_off = b->len;
		p = zb_put(b, 20);
		put_le32(p, PTZ_SIG_LOC64);
		put_le64(p + 8, info->z64_off);
		put_le32(p + 16, 1);
	}
	info->eocd_off = b->len;
	p = zb_put(b, 22);
	put_le32(p, PTZ_SIG_EOCD);
	put_le16(p + 8, o->eocd_sentinels ? 0xffff : n);
	put_le16(p + 10, o->eocd_sentinels ? 0xffff : n);
	put_le32(p + 12, o->eocd_sentinels ? 0xffffffff : info->cd_size);
	put_le32(p + 16, o->eocd_sentinels ? 0xffffffff : info->cd_off);
	if (o->comment) {
		size_t cl = o->comment_len;

		if (!cl)
			cl = strlen(o->comment);

		put_le16(p + 20, cl);
		zb_put_bytes(b, o->comment, cl);
	}
	libdeflate_free_compressor(c);
}

