/*
 * ckpt_inplace.c - write-back into the checkpoint itself (ptfs -o inplace,
 * issue 18), for files too big to copy where nothing can clone them.
 *
 * It is the clone-and-patch write-back (ckpt_patch.c, ptz_copy.c) applied
 * to the original instead of to a clone, in two passes over the same
 * writer: a dry run that writes nothing and yields the new CRC-32 of each
 * changed record (the plan, which the overlay journals before the first
 * byte is written), then the patch itself with those CRCs given, so that
 * nothing depends on the checkpoint's old bytes.  Running it again over a
 * half-patched file therefore gives the same file: the staged storages'
 * bytes are compared with the checkpoint's and written where they differ,
 * the headers, descriptors and central directory likewise.  Eligible is a
 * file whose records all stay where and as large as they are: docs/design.md
 * ("In-place write-back") says why each rule is there.
 */
#include "ckpt_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zip/ptz_write.h"

void ckpt_plan_release(struct ckpt_plan *p)
{
	free(p->rec);
	memset(p, 0, sizeof(*p));
}

/* The staged storage of each record (NULL: the checkpoint's own bytes). */
static struct ckpt_storage **staged_by_entry(struct ckpt *c, struct diag *d)
{
	struct ckpt_storage **by = calloc(c->zip.nentries + 1, sizeof(*by));

	if (!by) {
		diag_nomem(d);
		return NULL;
	}
	for (uint32_t i = 0; i < c->nstorages; i++) {
		struct ckpt_storage *s = c->storages[i];

		if (s->rec && s->fd != c->fd)
			by[s->rec - c->zip.entries] = s;
	}
	return by;
}

/* The rules a dry run does not check by itself; 0 or -ENOTSUP. */
static int eligible(struct ckpt *c, struct diag *d)
{
	if (c->format != CKPT_ZIP)
		return diag_unsupported(d, DIAG_NO_OFFSET, "%s is written "
					"back as a new zip archive",
					c->format == CKPT_LEGACY ? "a legacy "
					"(torch < 1.6) checkpoint" :
					"this format");
	if (ckpt_changed(c))
		return diag_unsupported(d, DIAG_NO_OFFSET, "the structure "
					"changed (keys, values or dtypes): "
					"data.pkl must be written anew");
	for (uint32_t i = 0; i < c->zip.nentries; i++) {
		const struct ptz_entry *e = &c->zip.entries[i];

		if (e->method != PTZ_STORED || e->csize != e->usize)
			return diag_unsupported(d, DIAG_NO_OFFSET, "record "
						"%.64s is compressed (stored, "
						"it would move)", e->name);
	}
	for (uint32_t i = 0; i < c->nstorages; i++) {
		const struct ckpt_storage *s = c->storages[i];

		if (s->fd != c->fd && (!s->rec || s->fresh || s->retyped ||
				       s->nbytes != s->rec->usize))
			return diag_unsupported(d, DIAG_NO_OFFSET, "storage "
						"%s changed its size or dtype",
						s->key ? s->key : "(new)");
	}
	return 0;
}

int ckpt_plan_inplace(struct ckpt *c, struct ckpt_plan *p, struct diag *d)
{
	struct ckpt_storage **by = NULL;
	struct ptz_writer zw = { 0 };
	struct stat st;
	int rc;

	memset(p, 0, sizeof(*p));
	rc = eligible(c, d);
	if (!rc && fstat(c->fd, &st))
		rc = diag_errno(d, -errno, "%s", strerror(errno));
	/* the dry run's output is never written: any fd does */
	if (!rc)
		rc = ckpt_write_in_place(c, c->fd, true, NULL, NULL, &zw, d);
	if (rc == -EAGAIN && zw.moved) {
		diag_init(d, d->path);
		rc = diag_unsupported(d, DIAG_NO_OFFSET, "a record would "
				      "move (not torch's layout)");
	}
	if (!rc && zw.nents != c->zip.nentries)
		rc = diag_unsupported(d, DIAG_NO_OFFSET, "%u records would be "
				      "written for %u", zw.nents,
				      c->zip.nentries);
	if (!rc && !(by = staged_by_entry(c, d)))
		rc = -ENOMEM;
	if (!rc && !(p->rec = calloc(zw.nents + 1, sizeof(*p->rec))))
		rc = diag_nomem(d);
	for (uint32_t i = 0; !rc && i < zw.nents; i++) {
		/* a staged storage even when its CRC came out the same: the
		   redo must take its bytes from the overlay */
		if (!by[i] && zw.ents[i].crc32 == c->zip.entries[i].crc32)
			continue;
		p->rec[p->n].entry = i;
		p->rec[p->n].storage = by[i] ? by[i]->index : CKPT_NO_STORAGE;
		p->rec[p->n].crc32 = zw.ents[i].crc32;
		p->n++;
	}
	if (!rc) {
		p->size = (uint64_t)st.st_size;
		p->bytes = zw.st.written;
	}
	free(by);
	ptz_writer_release(&zw);
	return rc;
}

int ckpt_apply_inplace(struct ckpt *c, int fd, const struct ckpt_plan *p,
		       struct diag *d)
{
	uint32_t n = c->zip.nentries;
	struct ckpt_storage **by = staged_by_entry(c, d);
	uint32_t *crc = calloc(n + 1, sizeof(*crc));
	uint8_t *has = calloc(n + 1, 1);
	struct ptz_writer zw = { 0 };
	struct stat st;
	int rc = by && crc && has ? eligible(c, d) : diag_nomem(d);

	for (uint32_t k = 0; !rc && k < p->n; k++) {
		const struct ckpt_patch_rec *r = &p->rec[k];
		bool want = r->storage != CKPT_NO_STORAGE;

		if (r->entry >= n || has[r->entry] || want != !!by[r->entry] ||
		    (want && by[r->entry]->index != r->storage))
			rc = diag_errno(d, -ESTALE, "the in-place plan does "
					"not match the staged edits (record "
					"%u)", r->entry);
		else
			has[r->entry] = 1;
		if (!rc)
			crc[r->entry] = r->crc32;
	}
	for (uint32_t i = 0; !rc && i < n; i++)
		if (by[i] && !has[i])
			rc = diag_errno(d, -ESTALE, "storage %s is staged but "
					"not in the in-place plan",
					by[i]->key);
	if (!rc && (fstat(fd, &st) || (uint64_t)st.st_size != p->size))
		rc = diag_errno(d, -ESTALE, "the checkpoint is not the size "
				"the in-place plan was made for");
	if (!rc)
		rc = ckpt_write_in_place(c, fd, false, crc, has, &zw, d);
	if (!rc && fdatasync(fd))
		rc = diag_errno(d, -errno, "fdatasync: %s", strerror(errno));
	ptz_writer_release(&zw);
	free(by);
	free(crc);
	free(has);
	return rc;
}
