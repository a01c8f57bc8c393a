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
 *                                 storages nothing uses are dropped (in
 *                                 the order of the keys as strings if
 *                                 the file had it: torch < 2 wrote that)
 *   version                       kept
 *   .data/serialization_id        kept (torch only logs it)
 *   anything else                 kept, in its original order
 *
 * Unchanged storages are copied from the checkpoint (copy_file_range) with
 * the CRC of its central directory; edited ones from their overlay file
 * with a CRC computed while copying.  Every record is written stored: a
 * deflated storage from its inflated copy (ckpt_inflate.c), a deflated
 * small record from memory.
 *
 * Everything is written against the original (ptz_writer_base()): what
 * lies at the same offsets there is copied in runs of one copy_file_range,
 * not a call per record.  ckpt_save() goes further when the structure is
 * unchanged: it clones the checkpoint into its temporary file (FICLONE,
 * where the file system shares extents), and the writer writes only what
 * differs: the changed bytes of edited storages (compared in the chunks
 * written since their copy-up, ckpt_patch.c) and their CRC fields.  Should
 * a record move after all (a deflated record written stored), it starts
 * again from an empty file.  Either way the bytes are the same.
 */
#define _XOPEN_SOURCE 700	/* ftruncate, strcasecmp */
#include "ckpt_stint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pickle/pkl_int.h"
#include "util/io.h"
#include "zip/ptz_write.h"

#define SMALL_MAX	(UINT64_C(1) << 30)	/* deflated other records we
						   inflate in memory */

/* One archive being written, and what is reported about it. */
struct out {
	struct ptz_writer zw;
	struct ckpt *c;
	struct diag *d;
	const struct ckpt_write_opts *o;
	const struct ckpt_repickle *r;	/* NULL: data.pkl kept */
	struct ckpt_write_stats st;
	uint64_t done, total;	/* bytes of record data, for progress */
	char align[24];		/* the .storage_alignment record we write */
	const uint32_t *crc;	/* in place: record i's CRC is crc[i] where */
	const uint8_t *has;	/* has[i] (ckpt_write_in_place()) */
	struct ckpt_tread pieced;	/* a DCP tensor being copied */
};

int ckpt_tread(void *arg, void *buf, size_t n, uint64_t off, struct diag *d)
{
	struct ckpt_tread *r = arg;
	long long got = ckpt_tensor_read(r->c, r->t, buf, n, off, d);

	if (got < 0)
		return (int)got;
	return (size_t)got == n ? 0 : diag_corrupt(d, DIAG_NO_OFFSET,
						   "storage %s ends early",
						   r->t->storage->key);
}

/*
 * What a storage record copies: its overlay file or its original bytes,
 * all of them or the part a --clone cut keeps.
 */
static int storage_source(struct out *w, struct ckpt_storage *s,
			  struct ptz_source *src)
{
	struct ckpt *c = w->c;
	bool cut = w->r && w->r->trim && w->r->trim[s->index];
	uint64_t from = cut ? w->r->cut[s->index] : 0, off = 0;
	struct ckpt *owner = ckpt_storage_owner(c, s);	/* a shard? */
	int rc;

	memset(src, 0, sizeof(*src));
	src->len = cut ? w->r->keep[s->index] : s->nbytes;
	if (ckpt_storage_pieced(c, s)) {
		/* a DCP tensor cut in chunks (never one staged in an
		   overlay), or one made when read: gathered in order */
		w->pieced = (struct ckpt_tread){ c, ckpt_pieced_tensor(c, s) };
		src->read = ckpt_tread;
		src->read_arg = &w->pieced;
		src->off = from;
		rc = 0;
	} else if (s->fd != owner->fd) {
		src->fd = s->fd;
		src->off = s->data_off + from;	/* 0 in an overlay file */
		rc = 0;
	} else {
		/* a deflated record is written stored, from its inflated
		   copy */
		rc = ckpt_storage_data(c, s, &src->fd, &off, w->d);
		src->off = off + from;
		src->has_crc = !rc && !cut && ckpt_storage_crc(s, &src->crc32);
	}
	if (!rc && !cut && owner == c && !src->read)
		ckpt_patch_source(c, s->rec, s, src);
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
	/* CRC 0: a CRC-less torch 2.x file; computed while copying */
	src->has_crc = e->crc32 || !e->usize;
	src->crc32 = e->crc32;
	if (!rc)
		ckpt_patch_source(c, e, NULL, src);
	return rc;
}

/* Append one record and report the progress. */
static int put(struct out *w, const char *name, const struct ptz_source *src)
{
	uint32_t i = w->zw.nents;
	struct ptz_source fixed;
	int rc;

	if (w->has && w->has[i]) {
		/* the plan's CRC: the base may hold new bytes already */
		fixed = *src;
		fixed.has_crc = true;
		fixed.crc32 = w->crc[i];
		src = &fixed;
	}
	rc = ptz_writer_add(&w->zw, name, src, w->d);

	if (rc)
		return rc;
	w->st.records++;
	w->done += src->len;
	if (w->o->progress)
		w->o->progress(w->o->progress_arg, w->done, w->total);
	return 0;
}

static int put_text(struct out *w, const char *name, const char *text)
{
	struct ptz_source src = { .buf = text, .len = strlen(text) };

	return put(w, name, &src);
}

static const char *rel_name(const struct ckpt *c, const struct ptz_entry *e)
{
	return e->name + c->zip.prefix_len + 1;
}

static bool is_data_rec(const struct ckpt *c, const struct ptz_entry *e)
{
	return !strncasecmp(rel_name(c, e), "data/", 5);
}

/*
 * Add record @e of the original under @name.  .storage_alignment says
 * the alignment we write (torch 2.x's mmap offset calculation reads it).
 */
static int add_record(struct out *w, const char *name, struct ptz_entry *e)
{
	struct ptz_source src;
	unsigned char *tmp = NULL;
	int rc;

	if (!strcasecmp(rel_name(w->c, e), ".storage_alignment"))
		return put_text(w, name, w->align);
	rc = record_source(w->c, e, &src, &tmp, w->d);
	if (!rc)
		rc = put(w, name, &src);
	free(tmp);
	return rc;
}

static int add_storage(struct out *w, const char *name,
		       struct ckpt_storage *s)
{
	struct ptz_source src;
	int rc = storage_source(w, s, &src);

	if (!rc)
		rc = put(w, name, &src);
	if (!rc)
		w->st.storages++;
	return rc;
}

/*
 * Keys of persistent ids anywhere in data.pkl (reachable or not: torch's
 * unpickler runs every BINPERSID) that name no storage of the model.
 * Normally none; a record they name must stay.  Caller frees.
 */
static const char **stray_keys(struct ckpt *c, uint32_t *n, struct diag *d)
{
	const char **v = NULL;
	uint32_t cap = 0;

	*n = 0;
	if (ckpt_whole(c, d))
		return NULL;
	for (const struct pkl_chunk *ch = pkl_doc_all(c->doc)->chunks; ch;
	     ch = ch->next)
		for (uint32_t i = 0; i < ch->n; i++) {
			const struct pkl_value *t = pkl_call_args(&ch->v[i]);
			const char *key;

			if (ch->v[i].kind != PKL_PERSID)
				continue;
			key = as_str(arg(t, 2));
			if (key && ckpt_storage_find(c->b, key))
				continue;
			key = key ? key : "";	/* not a str: keep every record */
			if (*n == cap) {
				const char **nv;

				cap = cap ? 2 * cap : 8;
				nv = realloc(v, cap * sizeof(*v));
				if (!nv) {
					free(v);
					diag_nomem(d);
					return NULL;
				}
				v = nv;
			}
			v[(*n)++] = key;
		}
	if (!*n && !v)
		v = malloc(sizeof(*v));	/* "none" is not a failure */
	if (!v)
		diag_nomem(d);
	return v;
}

/*
 * --drop-unused with data.pkl kept: a data/ record no persistent id names
 * is left out.  Keys stay as they are.
 */
static bool unused_record(struct ckpt *c, const struct ptz_entry *e,
			  const char **stray, uint32_t nstray)
{
	const char *key = rel_name(c, e) + 5;

	for (uint32_t i = 0; i < nstray; i++)
		if (!strcmp(stray[i], key) || !stray[i][0])
			return false;	/* "" : an int key, be careful */
	return true;
}

/* Write all records as they were, storages from wherever they are now. */
static int write_same(struct out *w)
{
	struct ckpt *c = w->c;
	struct ckpt_storage **by_rec = calloc(c->zip.nentries + 1,
					      sizeof(*by_rec));
	const char **stray = NULL;
	uint32_t nstray = 0;
	bool *skip = calloc(c->zip.nentries + 1, sizeof(*skip));
	int rc = 0;

	if (!by_rec || !skip) {
		rc = diag_nomem(w->d);
		goto out;
	}
	for (uint32_t i = 0; i < c->nstorages; i++)
		if (c->storages[i]->rec)
			by_rec[c->storages[i]->rec - c->zip.entries] =
				c->storages[i];
	if (w->o->drop_unused && !(stray = stray_keys(c, &nstray, w->d))) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < c->zip.nentries; i++) {
		struct ptz_entry *e = &c->zip.entries[i];

		skip[i] = stray && !by_rec[i] && is_data_rec(c, e) &&
			  unused_record(c, e, stray, nstray);
		if (skip[i]) {
			w->st.dropped++;
			w->st.saved += e->usize;
		} else {
			w->total += by_rec[i] ? by_rec[i]->nbytes : e->usize;
		}
	}
	for (uint32_t i = 0; i < c->zip.nentries && !rc; i++) {
		struct ptz_entry *e = &c->zip.entries[i];

		if (skip[i])
			continue;
		rc = by_rec[i] ? add_storage(w, e->name, by_rec[i]) :
		     add_record(w, e->name, e);
	}
out:
	free(by_rec);
	free(skip);
	free(stray);
	return rc;
}

static const char *const before_data[] = {
	".format_version", ".storage_alignment", "byteorder",
};
static const char *const after_data[] = {
	"version", ".data/version", ".data/serialization_id",
};

/* Records torch does not know are kept, after its own. */
static bool known_record(const struct ckpt *c, const struct ptz_entry *e)
{
	const char *rel = rel_name(c, e);
	bool known = is_data_rec(c, e) || !strcasecmp(rel, "data.pkl");

	for (size_t j = 0; j < 3; j++)
		known |= !strcasecmp(rel, before_data[j]) ||
			 !strcasecmp(rel, after_data[j]);
	return known;
}

/* What write_new() will write, for the progress and the statistics. */
static void count_new(struct out *w)
{
	struct ckpt *c = w->c;
	const struct ckpt_repickle *r = w->r;
	struct ptz_entry *e;

	w->total = r->len;
	for (uint32_t k = 0; k < r->nout; k++) {
		struct ckpt_storage *s = r->order[k];
		bool cut = r->trim && r->trim[s->index];

		w->total += cut ? r->keep[s->index] : s->nbytes;
		if (cut) {
			w->st.trimmed++;
			w->st.saved += s->nbytes - r->keep[s->index];
		}
	}
	for (uint32_t i = 0; i < c->zip.nentries; i++) {
		e = &c->zip.entries[i];
		if (!is_data_rec(c, e))
			w->total += e->usize;
	}
}

/*
 * torch before 2.x wrote the data/ records in the order of sorted(keys),
 * as strings ("0", "1", "10", "11", "2", ...).  Is the checkpoint such a
 * file (it differs from numeric order from 11 storages on)?  Then a
 * structural edit keeps that order: the storages that keep their keys
 * then keep their places too when data.pkl keeps its size to within the
 * padding, and are copied in runs, or cloned on XFS and btrfs.
 */
static bool string_order(const struct ckpt *c)
{
	const char *prev = NULL;
	bool inverted = false;

	for (uint32_t i = 0; i < c->zip.nentries; i++) {
		const struct ptz_entry *e = &c->zip.entries[i];
		const char *k = rel_name(c, e) + 5;
		size_t n;

		if (!is_data_rec(c, e))
			continue;
		n = strlen(k);
		if (!n || strspn(k, "0123456789") != n || (k[0] == '0' && n > 1))
			return false;
		if (prev && strcmp(prev, k) >= 0)
			return false;
		if (prev && (strlen(prev) > n ||
			     (strlen(prev) == n && strcmp(prev, k) > 0)))
			inverted = true;
		prev = k;
	}
	return inverted;
}

/* The key after @k among 0..@n-1 in the order of their decimal strings. */
static uint32_t next_string_key(uint32_t k, uint32_t n)
{
	if (!k)
		return 1;
	if ((uint64_t)k * 10 < n)
		return k * 10;
	while (k && (k % 10 == 9 || k + 1 >= n))
		k /= 10;
	return k + 1;
}

/*
 * Write the new pickle and the storages it uses, in torch's order.  A
 * legacy or safetensors file, which has no records of its own, gets
 * torch.save's: prefix "archive", byteorder "little" (their storages
 * always are), version 3.
 */
static int write_new(struct out *w)
{
	struct ckpt *c = w->c;
	const struct ckpt_repickle *r = w->r;
	struct ptz_source src = { .buf = r->pkl, .len = r->len };
	bool anew = c->format != CKPT_ZIP;	/* no archive to follow */
	const char *pre = anew ? "archive" : c->zip.prefix;
	size_t size = strlen(pre) + 32;	/* "/data/<u32>" fits */
	char *name = malloc(size);
	struct ptz_entry *e;
	bool strs;
	int rc;

	if (!name)
		return diag_nomem(w->d);
	count_new(w);
	snprintf(name, size, "%s/data.pkl", pre);
	rc = put(w, name, &src);
	for (size_t i = 0; i < 3 && !rc; i++)
		if ((e = ptz_find_rel(&c->zip, before_data[i])))
			rc = add_record(w, e->name, e);
	if (!rc && anew) {
		snprintf(name, size, "%s/byteorder", pre);
		rc = put_text(w, name, "little");
	}
	strs = !anew && string_order(c);
	for (uint32_t i = 0, k = 0; i < r->nout && !rc; i++) {
		snprintf(name, size, "%s/data/%u", pre, k);
		rc = add_storage(w, name, r->order[k]);
		k = strs ? next_string_key(k, r->nout) : k + 1;
	}
	for (size_t i = 0; i < 3 && !rc; i++)
		if ((e = ptz_find_rel(&c->zip, after_data[i])))
			rc = add_record(w, e->name, e);
	if (!rc && anew) {
		snprintf(name, size, "%s/version", pre);
		rc = put_text(w, name, "3\n");
	}
	for (uint32_t i = 0; i < c->zip.nentries && !rc; i++)
		if (!known_record(c, &c->zip.entries[i]))
			rc = add_record(w, c->zip.entries[i].name,
					&c->zip.entries[i]);
	/* what is not written: storages nothing uses, records of none */
	if (!rc) {
		bool *used = calloc(c->zip.nentries + 1, sizeof(*used));

		if (!used)
			rc = diag_nomem(w->d);
		for (uint32_t k = 0; k < r->nout && used; k++) {
			struct ckpt_storage *s = r->order[k];

			/* (a shard's or a DCP item's records are not ours) */
			if (s->rec && c->zip.nentries &&
			    ckpt_storage_owner(c, s) == c)
				used[s->rec - c->zip.entries] = true;
		}
		for (uint32_t i = 0; used && i < c->zip.nentries; i++) {
			e = &c->zip.entries[i];
			if (is_data_rec(c, e) && !used[i]) {
				w->st.dropped++;
				w->st.saved += e->usize;
			}
		}
		free(used);
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

int ckpt_write_into(struct ckpt *c, int fd, const struct ckpt_write_opts *o,
		    bool clone, struct diag *d)
{
	struct ckpt_write_opts none = { 0 };
	struct ckpt_repickle r = { 0 };
	struct out w = { .c = c, .d = d };
	uint32_t align, orig;
	bool same;
	int rc;

	if (!o)
		o = &none;
	/* whatever the output: a file that loads but lacks tensors */
	if ((rc = ckpt_whole_parts(c, d)))
		return rc;
	if (o->to == CKPT_OUT_ST ||
	    (o->to == CKPT_OUT_SAME && ckpt_fmt(c)->out == CKPT_OUT_ST))
		return ckpt_st_write(c, fd, o, clone, d);
	if (o->to == CKPT_OUT_FMT)
		return o->fmt->write(c, fd, o, d);
	if (o->to == CKPT_OUT_SAME && ckpt_fmt(c)->out == CKPT_OUT_FMT)
		return ckpt_fmt(c)->write(c, fd, o, d);
	if (ckpt_can(c, CKPT_CAP_MANY)) {
		if (o->to != CKPT_OUT_ZIP)
			return diag_unsupported(d, DIAG_NO_OFFSET, "%s are "
						"written into one new file "
						"only, a .pt or a .safetensors "
						"(ptrepack --format)",
						ckpt_fmt(c)->files);
	} else if (!ckpt_can(c, CKPT_CAP_WRITE)) {
		return diag_unsupported(d, DIAG_NO_OFFSET, "%s are read-only: "
					"nothing writes them back",
					ckpt_fmt(c)->files);
	}
	w.o = o;
	orig = alignment(c);
	align = o->align ? o->align : orig;
	snprintf(w.align, sizeof(w.align), "%u", align);
	same = !o->repickle && !o->clone_pct && !o->nroots &&
	       c->format == CKPT_ZIP && !ckpt_changed(c);
	if (!same) {
		r.clone_pct = o->clone_pct;
		r.part = o->part;
		r.roots = o->roots;
		r.root_keys = o->root_keys;
		r.nroots = o->nroots;
		rc = ckpt_repickle(c, &r, d);
		if (rc)
			goto out;
		w.r = &r;
		w.st.repickled = true;
		/* (a folder's or DCP directory's pickle is no data.pkl) */
		w.st.proto_was = c->format == CKPT_ZIP && c->doc ?
				 c->doc->proto : 0;
	}
	/* records keep their places only if the alignment does */
	clone = clone && same && align == orig;
again:
	rc = ptz_writer_init(&w.zw, fd, align, d);
	/* against the original: what it has already is left in place in a
	   clone, or copied in runs where the copies can share blocks;
	   elsewhere (ext4) those copies would go through the page cache,
	   and everything is written in order through seqout instead */
	if (!rc && c->format == CKPT_ZIP) {
		bool cloned = clone && !(rc = ckpt_clone_file(fd, c->fd));
		uint32_t share = io_shares_blocks(fd);

		if (rc < 0)
			rc = diag_errno(d, rc, "cannot clone the checkpoint "
					"into the new file: %s", strerror(-rc));
		else if (cloned || share)
			rc = ptz_writer_base(&w.zw, c->fd, cloned, d);
		else
			rc = 0;
		w.zw.share_align = share;
	}
	if (!rc)
		rc = same ? write_same(&w) : write_new(&w);
	if (!rc)
		rc = ptz_writer_finish(&w.zw, d);
	if (rc == -EAGAIN && w.zw.moved) {
		/* a record moves after all: write it all out, from empty */
		ptz_writer_release(&w.zw);
		diag_init(d, d->path);
		memset(&w.st, 0, sizeof(w.st));
		w.st.repickled = !same;
		w.st.proto_was = !same && c->format == CKPT_ZIP && c->doc ?
				 c->doc->proto : 0;
		w.done = w.total = 0;
		clone = false;
		rc = ftruncate(fd, 0) ? diag_errno(d, -errno, "%s",
						   strerror(errno)) : 0;
		if (!rc)
			goto again;
	}
	if (!rc && o->stats) {
		w.st.size = w.zw.cursor;
		w.st.cloned = w.zw.cloned;
		w.st.written = w.zw.st.written;
		w.st.copied = w.zw.st.copied;
		w.st.copy_calls = w.zw.st.copy_calls;
		*o->stats = w.st;
	}
out:
	ptz_writer_release(&w.zw);
	ckpt_repickle_release(&r);
	return rc;
}

int ckpt_write_in_place(struct ckpt *c, int fd, bool dry, const uint32_t *crc,
		       const uint8_t *has, struct ptz_writer *zw,
		       struct diag *d)
{
	struct ckpt_write_opts none = { 0 };
	struct out w = { .c = c, .d = d, .o = &none, .crc = crc, .has = has };
	uint32_t align = alignment(c);
	int rc;

	snprintf(w.align, sizeof(w.align), "%u", align);
	rc = ptz_writer_init(&w.zw, fd, align, d);
	if (!rc)
		rc = ptz_writer_base(&w.zw, c->fd, true, d);
	w.zw.in_place = true;
	w.zw.dry = dry;
	if (!rc)
		rc = write_same(&w);
	if (!rc)
		rc = ptz_writer_finish(&w.zw, d);
	*zw = w.zw;
	return rc;
}

int ckpt_write(struct ckpt *c, int fd, const struct ckpt_write_opts *o,
	       struct diag *d)
{
	return ckpt_write_into(c, fd, o, false, d);
}
