/*
 * ckpt_write.c - write a checkpoint back as a torch zip archive, with its
 * edits (torch-format.md section 9).
 *
 * Two paths.  When the object structure is unchanged (only storage bytes
 * were edited), every record is written in its original order under its
 * original name, data.pkl byte for byte: a repack of an untouched torch
 * file is then byte-identical to it.  When the structure changed, a new
 * data.pkl is emitted from the tree (pkl_emit.c does the pickling, we
 * substitute what the edits changed) and the records are laid out as
 * torch.save lays them out:
 *
 *   data.pkl                      the new pickle
 *   .format_version               kept if present: our layout is torch's
 *   .storage_alignment            kept if present (its value is our align)
 *   byteorder                     kept if present
 *   data/0 .. data/N-1            storages in first-use order, renumbered;
 *                                 storages nothing uses are dropped
 *   version                       kept
 *   .data/serialization_id        kept (torch only logs it)
 *   anything else                 kept, in its original order
 *
 * Unchanged storages are copied from the checkpoint (copy_file_range) with
 * the CRC of its central directory; edited ones from their overlay file
 * with a CRC computed while copying.
 */
#include "ckpt_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/io.h"
#include "zip/ptz_write.h"

#define SMALL_MAX	(UINT64_C(1) << 30)	/* deflated records we inflate */

/* What a storage record copies: its overlay file or its original bytes. */
static int storage_source(struct ckpt *c, struct ckpt_storage *s,
			  struct ptz_source *src, unsigned char **tmp,
			  struct diag *d)
{
	size_t len;
	int rc;

	memset(src, 0, sizeof(*src));
	src->len = s->nbytes;
	if (s->fd != c->fd) {
		src->fd = s->fd;
		return 0;
	}
	if (s->rec && s->rec->method != PTZ_STORED) {
		rc = ptz_entry_read(&c->zip, s->rec, SMALL_MAX, tmp, &len, d);
		src->buf = *tmp;
		return rc;
	}
	rc = ckpt_storage_locate(c, s, d);
	src->fd = c->fd;
	src->off = s->data_off;
	src->has_crc = s->rec != NULL;
	src->crc32 = s->rec ? s->rec->crc32 : 0;
	return rc;
}

static int record_source(struct ckpt *c, struct ptz_entry *e,
			 struct ptz_source *src, unsigned char **tmp,
			 struct diag *d)
{
	size_t len;
	int rc;

	memset(src, 0, sizeof(*src));
	if (e->method != PTZ_STORED) {
		rc = ptz_entry_read(&c->zip, e, SMALL_MAX, tmp, &len, d);
		src->buf = *tmp;
		src->len = len;
		return rc;
	}
	rc = ckpt_record_locate(c, e, d);
	src->fd = c->fd;
	src->off = e->data_off;
	src->len = e->usize;
	src->has_crc = true;
	src->crc32 = e->crc32;
	return rc;
}

/* Add record @e (or storage @s) of the original under @name. */
static int add(struct ptz_writer *zw, struct ckpt *c, const char *name,
	       struct ptz_entry *e, struct ckpt_storage *s, struct diag *d)
{
	struct ptz_source src;
	unsigned char *tmp = NULL;
	int rc = s ? storage_source(c, s, &src, &tmp, d) :
		 record_source(c, e, &src, &tmp, d);

	if (!rc)
		rc = ptz_writer_add(zw, name, &src, d);
	free(tmp);
	return rc;
}

static const char *rel_name(const struct ckpt *c, const struct ptz_entry *e)
{
	return e->name + c->zip.prefix_len + 1;
}

static bool is_data_rec(const struct ckpt *c, const struct ptz_entry *e)
{
	return !strncasecmp(rel_name(c, e), "data/", 5);
}

/* Write all records as they were, storages from wherever they are now. */
static int write_same(struct ptz_writer *zw, struct ckpt *c,
		      struct diag *d)
{
	struct ckpt_storage **by_rec = calloc(c->zip.nentries + 1,
					      sizeof(*by_rec));
	int rc = 0;

	if (!by_rec)
		return diag_nomem(d);
	for (uint32_t i = 0; i < c->nstorages; i++)
		if (c->storages[i]->rec)
			by_rec[c->storages[i]->rec - c->zip.entries] =
				c->storages[i];
	for (uint32_t i = 0; i < c->zip.nentries && !rc; i++)
		rc = add(zw, c, c->zip.entries[i].name, &c->zip.entries[i],
			 by_rec[i], d);
	free(by_rec);
	return rc;
}

/* Write the new pickle and the storages it uses, in torch's order. */
static int write_new(struct ptz_writer *zw, struct ckpt *c,
		     const struct ckpt_repickle *r, struct diag *d)
{
	static const char *const before[] = {
		".format_version", ".storage_alignment", "byteorder",
	};
	static const char *const after[] = {
		"version", ".data/version", ".data/serialization_id",
	};
	struct ptz_source src = { .buf = r->pkl, .len = r->len };
	const char *pre = c->zip.prefix;
	size_t size = strlen(pre) + 32;	/* "/data/<u32>" fits */
	char *name = malloc(size);
	struct ptz_entry *e;
	int rc;

	if (!name)
		return diag_nomem(d);
	snprintf(name, size, "%s/data.pkl", pre);
	rc = ptz_writer_add(zw, name, &src, d);
	for (size_t i = 0; i < 3 && !rc; i++)
		if ((e = ptz_find_rel(&c->zip, before[i])))
			rc = add(zw, c, e->name, e, NULL, d);
	for (uint32_t k = 0; k < r->nout && !rc; k++) {
		snprintf(name, size, "%s/data/%u", pre, k);
		rc = add(zw, c, name, NULL, r->order[k], d);
	}
	for (size_t i = 0; i < 3 && !rc; i++)
		if ((e = ptz_find_rel(&c->zip, after[i])))
			rc = add(zw, c, e->name, e, NULL, d);
	/* records torch does not know: kept, in their order */
	for (uint32_t i = 0; i < c->zip.nentries && !rc; i++) {
		const char *rel = rel_name(c, &c->zip.entries[i]);
		bool known = is_data_rec(c, &c->zip.entries[i]) ||
			     !strcasecmp(rel, "data.pkl");

		for (size_t j = 0; j < 3; j++)
			known |= !strcasecmp(rel, before[j]) ||
				 !strcasecmp(rel, after[j]);
		if (!known)
			rc = add(zw, c, c->zip.entries[i].name,
				 &c->zip.entries[i], NULL, d);
	}
	free(name);
	return rc;
}

/* The alignment: .storage_alignment if it is a sane power of two. */
static uint32_t alignment(struct ckpt *c)
{
	struct ptz_entry *e = ptz_find_rel(&c->zip, ".storage_alignment");
	unsigned char *txt = NULL;
	unsigned long a = PTZ_ALIGN_DEFAULT;
	size_t len;
	struct diag quiet;

	diag_init(&quiet, c->path);
	if (e && !ptz_entry_read(&c->zip, e, 64, &txt, &len, &quiet)) {
		unsigned long v = strtoul((char *)txt, NULL, 10);

		if (v && !(v & (v - 1)) && v <= PTZ_ALIGN_MAX)
			a = v;
	}
	free(txt);
	return a;
}

int ckpt_write(struct ckpt *c, int fd, const struct ckpt_write_opts *o,
	       struct diag *d)
{
	struct ckpt_write_opts none = { 0 };
	struct ptz_writer zw = { 0 };
	struct ckpt_repickle r = { 0 };
	bool same;
	int rc;

	if (!o)
		o = &none;
	if (c->format != CKPT_ZIP)
		return diag_unsupported(d, 0, "writing back a legacy "
					"checkpoint: not supported yet");
	same = !o->repickle && !ckpt_changed(c);
	if (!same) {
		rc = ckpt_repickle(c, &r, d);
		if (rc)
			goto out;
	}
	rc = ptz_writer_init(&zw, fd, o->align ? o->align : alignment(c),
			     d);
	if (!rc)
		rc = same ? write_same(&zw, c, d) : write_new(&zw, c, &r, d);
	if (!rc)
		rc = ptz_writer_finish(&zw, d);
out:
	ptz_writer_release(&zw);
	ckpt_repickle_release(&r);
	return rc;
}

int ckpt_save(struct ckpt *c, const char *target,
	      const struct ckpt_write_opts *o, const struct stat *like,
	      int (*before)(void *arg, const struct stat *st, struct diag *d),
	      void *arg, struct diag *d)
{
	/* ".NAME.ptfs-new.XXXXXX" beside the target: same file system, so
	   rename works; the overlay removes what a killed write-back left */
	char *tmp = io_beside(target, CKPT_TMP_SUFFIX "XXXXXX");
	struct stat st;
	int fd, rc;

	if (!tmp)
		return diag_nomem(d);
	fd = mkstemp(tmp);
	if (fd < 0) {
		rc = diag_errno(d, -errno, "cannot create a temporary file "
				"beside %s: %s", strcmp(target, c->path) ?
				target : "it", strerror(errno));
		free(tmp);
		return rc;
	}
	rc = ckpt_write(c, fd, o, d);
	if (!rc && ((like && !geteuid() &&
		     fchown(fd, like->st_uid, like->st_gid)) ||
		    fchmod(fd, like ? like->st_mode & 07777 : 0644)))
		rc = diag_errno(d, -errno, "%s: %s", tmp, strerror(errno));
	if (!rc && (fsync(fd) || fstat(fd, &st)))
		rc = diag_errno(d, -errno, "%s: %s", tmp, strerror(errno));
	if (!rc && before)
		rc = before(arg, &st, d);
	if (!rc && rename(tmp, target))
		rc = diag_errno(d, -errno, "%s: cannot replace it: %s", target,
				strerror(errno));
	if (!rc && (rc = io_fsync_dir_of(target)))
		rc = diag_errno(d, rc, "%s: fsync of its directory: %s",
				target, strerror(-rc));
	close(fd);
	if (rc)
		unlink(tmp);
	free(tmp);
	return rc;
}
