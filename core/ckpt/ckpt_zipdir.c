/*
 * ckpt_zipdir.c - a zip that is not a checkpoint but holds some: a
 * Stable-Baselines3 model (policy.pth, pytorch_variables.pth beside a
 * JSON "data" file), a run's archive of epochs.  torch.load refuses it
 * ("PytorchStreamReader failed locating file data.pkl"), and so do we, but
 * with a line that says what the file is and which members are
 * checkpoints, so that the user knows to unzip one and open that.
 *
 * A member is a checkpoint when its first bytes are a zip's local header
 * ("PK\3\4", torch.save since 1.6) or a protocol 2 pickle of the legacy
 * magic number (80 02 8a).  Members are stored or deflated (APPNOTE 4.4.5
 * methods 0 and 8); a deflated one is inflated just far enough to see 8
 * bytes.  At most SNIFF_MAX members are looked at: this runs only on a
 * file that already failed to be a checkpoint, and must stay cheap.
 */
#include "ckpt_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util/io.h"

#define SNIFF_MAX	4096u		/* members looked at */
#define SNIFF_IN	4096u		/* compressed bytes read per member */
#define LIST_MAX	150u		/* bytes of names in the message */

/* The first @n bytes of member @e's contents into @out; 0 or -errno. */
static int member_head(struct ckpt *c, struct ptz_entry *e,
		       unsigned char *out, size_t n, struct diag *d)
{
	unsigned char in[SNIFF_IN];
	uint64_t len;
	z_stream zs;
	int rc;

	if (e->usize < n || (e->method != PTZ_STORED && e->method != PTZ_DEFLATED))
		return -ENOENT;
	rc = ckpt_record_locate(c, e, d);
	if (rc)
		return rc;
	if (e->method == PTZ_STORED)
		return io_pread_full(c->fd, out, n, e->data_off);
	len = e->csize < SNIFF_IN ? e->csize : SNIFF_IN;
	rc = io_pread_full(c->fd, in, len, e->data_off);
	if (rc)
		return rc;
	memset(&zs, 0, sizeof(zs));
	if (inflateInit2(&zs, -MAX_WBITS) != Z_OK)
		return -ENOMEM;
	zs.next_in = in;
	zs.avail_in = (uInt)len;
	zs.next_out = out;
	zs.avail_out = (uInt)n;
	rc = inflate(&zs, Z_SYNC_FLUSH);
	rc = (rc == Z_OK || rc == Z_STREAM_END) && !zs.avail_out ? 0 : -ENOENT;
	inflateEnd(&zs);
	return rc;
}

static bool is_checkpoint_head(const unsigned char *h)
{
	return !memcmp(h, "PK\3\4", 4) ||
	       (h[0] == 0x80 && h[1] == 0x02 && h[2] == 0x8a);
}

/* Append @name to @buf (of LIST_MAX + 8) unless it is full: 1 if added. */
static int list_add(char *buf, size_t *len, const char *name)
{
	size_t n = strlen(name);

	if (*len + n + 2 > LIST_MAX)
		return 0;
	*len += (size_t)snprintf(buf + *len, LIST_MAX + 8 - *len, "%s%s",
				 *len ? ", " : "", name);
	return 1;
}

int ckpt_zip_of_checkpoints(struct ckpt *c, struct diag *d)
{
	struct ptz_reader *z = &c->zip;
	char list[LIST_MAX + 8] = "";
	unsigned char head[8];
	uint32_t found = 0, listed = 0, n = z->nentries;
	size_t len = 0;
	struct diag scratch;

	for (uint32_t i = 0; i < n && i < SNIFF_MAX; i++) {
		struct ptz_entry *e = &z->entries[i];

		/* a member we cannot read is not one we can name */
		diag_init(&scratch, d->path);
		if (member_head(c, e, head, sizeof(head), &scratch) ||
		    !is_checkpoint_head(head))
			continue;
		found++;
		listed += list_add(list, &len, e->name);
	}
	if (!found)
		return 0;
	return diag_unsupported(d, 0, "a zip of %u files, not a checkpoint; "
				"%s %u checkpoint%s inside: %s%s (unzip one "
				"and open that)", n, n > SNIFF_MAX ?
				"at least" : "it holds", found,
				found == 1 ? "" : "s", list,
				listed < found ? ", ..." : "");
}
