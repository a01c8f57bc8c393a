/*
 * ckpt_dcp_verify.c - ptverify's pass over a DCP directory: what a lenient
 * open found in .metadata (chunks that overlap, leave holes or lie outside
 * their tensor, chunks without an item, items past the end of their file
 * or of no key, data files that cannot be opened), then every chunk's item
 * opened as a read would open it, and the CRC-32 of its data record.
 */
#include "ckpt_dcp.h"
#include "util/io.h"

#include <errno.h>
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CRC_BLOCK	(1u << 20)

/* The CRC-32 of @len bytes at @off of @fd, read into @buf (CRC_BLOCK
 * bytes, one for the whole pass: a block malloc'd a chunk was an mmap
 * and a munmap each): 0, or -errno. */
static int crc_of(int fd, uint64_t off, uint64_t len, unsigned char *buf,
		  uint32_t *crc)
{
	uint32_t c = 0;
	int rc = 0;

	while (len && !rc) {
		size_t n = len < CRC_BLOCK ? len : CRC_BLOCK;

		rc = io_pread_full(fd, buf, n, off);
		c = libdeflate_crc32(c, buf, n);
		off += n;
		len -= n;
	}
	*crc = c;
	return rc;
}

uint32_t ckpt_dcp_verify(struct ckpt *c, bool no_crc, uint64_t *checked,
			 void (*fn)(void *arg, const char *check,
				    const char *path, uint64_t off,
				    const char *msg),
			 void *arg)
{
	struct ckpt_dcp *p = c->dcp;
	unsigned char *buf = NULL;
	uint32_t n = 0;

	*checked = 0;
	if (!p)
		return 0;
	for (uint32_t i = 0; i < p->nfindings; i++, n++)
		fn(arg, p->findings[i].check, p->findings[i].path,
		   p->findings[i].off, p->findings[i].msg);
	for (uint32_t k = 0; k < c->nstorages; k++) {
		const struct ckpt_tensor *t = p->tens[k];

		for (uint32_t i = p->first[k]; t && i < p->first[k + 1]; i++) {
			struct dcp_chunk *ch = &p->chunks[i];
			const struct dcp_item *it;
			const struct dcp_file *f;
			uint64_t len = 1;
			uint32_t crc;
			struct diag d;
			char msg[300];

			if (ch->item == DCP_NO_ITEM)
				continue;	/* a finding already */
			it = &p->items[ch->item];
			f = &p->files[it->file];
			if (f->fd < 0 || it->off > f->size ||
			    it->len > f->size - it->off)
				continue;	/* a finding already */
			diag_init(&d, p->meta_path);
			if (ckpt_dcp_resolve(c, i, &d)) {
				snprintf(msg, sizeof(msg), "%s%s%s",
					 strncmp(d.msg, f->name,
						 strlen(f->name)) ? f->name :
					 "", strncmp(d.msg, f->name,
						     strlen(f->name)) ? ": " :
					 "", d.msg);
				fn(arg, "item", f->path, d.off, msg);
				n++;
				continue;
			}
			for (int j = 0; j < t->ndim; j++)
				len *= (uint64_t)ch->sizes[j];
			len *= t->dtype->size;
			if (no_crc || !ch->crc || !len)
				continue;
			if (!buf)
				buf = malloc(CRC_BLOCK);
			if (buf)
				*checked += len;
			if (!buf || crc_of(f->fd, ch->data, len, buf, &crc)) {
				snprintf(msg, sizeof(msg), "%s: cannot read "
					 "the chunk of '%s'", f->name,
					 p->fqn[k]);
				fn(arg, "crc", f->path, ch->data, msg);
				n++;
			} else if (crc != ch->crc) {
				snprintf(msg, sizeof(msg), "%s: chunk of '%s': "
					 "CRC-32 %08x, its record says %08x",
					 f->name, p->fqn[k], crc, ch->crc);
				fn(arg, "crc", f->path, ch->data, msg);
				n++;
			}
		}
	}
	free(buf);
	return n;
}
