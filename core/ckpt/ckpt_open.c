/*
 * ckpt_open.c - open a checkpoint: tell what the file is (torch zip, legacy
 * stream, or one of the things people mistake for a checkpoint), read the
 * zip's data.pkl, version and byteorder records (torch-format.md 3), parse
 * the pickle, build the model and tie each storage to its record.
 */
#include "ckpt_int.h"
#include "ckpt_format.h"
#include "source/source.h"
#include "util/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define PKL_MAX_BYTES	(UINT64_C(1) << 32)	/* data.pkl; offsets are u32 */
#define SMALL_RECORD	4096			/* version, byteorder */

static bool has_ci(const unsigned char *p, size_t n, const char *s)
{
	size_t k = strlen(s);

	for (size_t i = 0; i + k <= n; i++)
		if (!strncasecmp((const char *)p + i, s, k))
			return true;
	return false;
}

bool ckpt_head_is_html(const unsigned char *h, size_t n)
{
	return has_ci(h, n, "<!doctype html") || has_ci(h, n, "<html");
}

/* Read a small record (version, byteorder) as a string. */
static int small_record(struct ckpt *c, const char *rel, char **out,
			struct diag *d)
{
	struct ptz_entry *e = ptz_find_rel(&c->zip, rel);
	size_t len;

	*out = NULL;
	if (!e)
		return 0;
	return ptz_entry_read(&c->zip, e, SMALL_RECORD,
			      (unsigned char **)out, &len, d);
}

static int zip_records(struct ckpt *c, struct diag *d)
{
	struct ptz_reader *z = &c->zip;
	const struct ptz_entry *ts;
	char *ver = NULL, *dver = NULL, *end;
	unsigned long long v;
	int rc;

	/* a zip that starts with a local header may still list nothing */
	if (z->nentries == 0)
		return diag_corrupt(d, z->cdir_off, "zip archive without "
				    "records, not a checkpoint");
	/* a Stable-Baselines3 model and the like: checkpoints inside */
	if ((!z->prefix || (!ptz_find_rel(z, "data.pkl") &&
			    !ptz_find_rel(z, "constants.pkl") &&
			    !ptz_find_rel(z, "model.json"))) &&
	    (rc = ckpt_zip_of_checkpoints(c, d)))
		return rc;
	if (!z->prefix)
		return diag_corrupt(d, z->entries[0].header_off, "record '%s' "
				    "is not in a folder (torch needs one top "
				    "folder)", z->entries[0].name);
	for (uint32_t i = 0; i < z->nentries; i++) {
		const struct ptz_entry *e = &z->entries[i];

		if (e->name_len <= z->prefix_len ||
		    memcmp(e->name, z->prefix, z->prefix_len) ||
		    e->name[z->prefix_len] != '/')
			return diag_corrupt(d, e->header_off, "record '%s' is "
					    "outside the top folder '%s'",
					    e->name, z->prefix);
	}
	/* torch.load hands an archive with constants.pkl to torch.jit.load */
	ts = ptz_find_rel(z, "constants.pkl");
	if (!ts)
		ts = ptz_find_rel(z, "model.json");
	if (ts) {
		c->format = CKPT_TORCHSCRIPT;
		c->fmt = &ckpt_fmt_torchscript;
	}
	c->pkl_rec = ptz_find_rel(z, "data.pkl");
	if (!c->pkl_rec && !ts)
		return diag_corrupt(d, z->cdir_off, "no data.pkl record: "
				    "not a torch.save checkpoint (an aborted "
				    "save?)");
	rc = small_record(c, ".data/version", &dver, d);
	if (!rc && !dver)
		rc = small_record(c, "version", &ver, d);
	if (rc)
		goto out;
	if (!dver && !ver) {
		rc = diag_corrupt(d, z->cdir_off, "no version record");
		goto out;
	}
	errno = 0;
	v = strtoull(dver ? dver : ver, &end, 10);
	if (end == (dver ? dver : ver) || errno || v < 1 || v > 10) {
		const struct ptz_entry *e = ptz_find_rel(z, dver ? ".data/version"
							 : "version");

		rc = diag_corrupt(d, e->header_off, "version record '%.16s' is "
				  "not a number from 1 to 10", dver ? dver : ver);
		goto out;
	}
	c->version = (int)v;
	rc = small_record(c, "byteorder", &c->byteorder, d);
	if (!rc && c->byteorder && strcmp(c->byteorder, "little") &&
	    strcmp(c->byteorder, "big"))
		rc = diag_corrupt(d, ptz_find_rel(z, "byteorder")->header_off,
				  "byteorder record '%.16s' is neither 'little' "
				  "nor 'big'", c->byteorder);
out:
	free(ver);
	free(dver);
	return rc;
}

/*
 * Tie every storage to its data/<key> record and check its size: one pass
 * over the records with the builder's key table (a name lookup per storage
 * would be a binary search each).
 */
static int zip_storages(struct ckpt *c, struct diag *d)
{
	struct ptz_reader *z = &c->zip;
	size_t skip = z->prefix_len + 1 + 5;	/* "<prefix>/data/" */
	int rc;

	for (uint32_t i = 0; i < z->nentries; i++) {
		struct ptz_entry *e = &z->entries[i];
		struct ckpt_storage *s;

		if (e->name_len <= skip ||
		    strncasecmp(e->name + z->prefix_len + 1, "data/", 5))
			continue;
		s = ckpt_storage_find(c->b, e->name + skip);
		if (s && ckpt_is_row(s))
			ckpt_row_of(s)->rec = i + 1;
		else if (s)
			s->rec = e;
	}
	for (uint32_t i = 0; i < c->nstorages; i++) {
		struct ckpt_rowview v;
		const struct ckpt_storage *s = ckpt_storage_at(c, i, &v);
		struct ptz_entry *e = s->rec;

		if (!strcmp(s->location, "meta") && !s->nbytes)
			continue;
		if (!e)
			return diag_corrupt(d, s->pkl_off, "storage '%s' has "
					    "no record %s/data/%s", s->key,
					    c->zip.prefix, s->key);
		rc = ckpt_storage_fits(s, e, d);
		if (rc)
			return rc;
	}
	return 0;
}

static int zip_read(void *z, unsigned char *buf, size_t n, uint64_t off,
		    struct diag *d)
{
	return ptz_pread(z, buf, n, off, d);
}

/*
 * Parse data.pkl into c->doc.  The document holds copies of everything,
 * so a stored record is read through a window (pkl_parse_src()) and its
 * bytes are never whole in memory beside the graph; a deflated one
 * (rare: torch stores) is inflated whole and freed before the build.
 */
static int parse_pkl(struct ckpt *c, unsigned flags, struct diag *d)
{
	struct pkl_src src = { .read = zip_read, .ctx = &c->zip };
	struct ptz_entry *e = c->pkl_rec;
	size_t len;
	int rc;

	rc = ptz_entry_fits(&c->zip, e, PKL_MAX_BYTES - 1, d);
	if (rc)
		return rc;
	c->pkl_off = e->data_off;
	if (e->method == PTZ_STORED) {
		rc = pkl_parse_src(&src, c->pkl_off, e->usize, flags,
				   &c->doc, d);
		/* what torch.load met before the failure, scanned */
		return rc ? ckpt_scan_src(c, &src, c->pkl_off, e->usize,
					  "data.pkl", NULL, d) : 0;
	}
	rc = ptz_entry_read(&c->zip, e, PKL_MAX_BYTES - 1, &c->pkl, &len,
			    d);
	if (!rc && (rc = pkl_parse_with(c->pkl, len, c->pkl_off, flags,
					&c->doc, d)))
		ckpt_scan_failed(c, c->pkl, len, c->pkl_off, "data.pkl", NULL,
				 d);
	free(c->pkl);
	c->pkl = NULL;
	return rc;
}

static bool ends_with(const char *s, const char *sfx)
{
	size_t n = strlen(s), k = strlen(sfx);

	return n >= k && !strcasecmp(s + n - k, sfx);
}

/*
 * The archive's other pickles (constants.pkl, TorchScript's debug
 * pickles under code/, any extra .pkl): torch.load reads only some, a
 * tool may read any, so each is scanned for what it would run
 * (ckpt_scan.c).  One that is no pickle, or cannot be read, is passed
 * over: it is not the checkpoint's.
 */
static int scan_records(struct ckpt *c, struct diag *d)
{
	struct pkl_src src = { .read = zip_read, .ctx = &c->zip };
	struct ptz_reader *z = &c->zip;
	ckpt_allow_fn allow = c->format == CKPT_TORCHSCRIPT ?
			      ckpt_global_any : NULL;

	for (uint32_t i = 0; i < z->nentries; i++) {
		struct ptz_entry *e = &z->entries[i];
		const char *rel = e->name + z->prefix_len + 1;
		unsigned char *buf = NULL;
		struct diag tmp;
		size_t len;

		if (e == c->pkl_rec || (!ends_with(rel, ".pkl") &&
					!ends_with(rel, ".debug_pkl")))
			continue;
		diag_init(&tmp, d->path);
		if (ptz_entry_fits(z, e, PKL_MAX_BYTES - 1, &tmp))
			continue;
		if (e->method == PTZ_STORED) {
			if (ckpt_scan_src(c, &src, e->data_off, e->usize, rel,
					  allow, d))
				return d->err;
			continue;
		}
		if (!ptz_entry_read(z, e, PKL_MAX_BYTES - 1, &buf, &len, &tmp))
			ckpt_scan_failed(c, buf, len, 0, rel, allow, d);
		free(buf);
		if (diag_failed(d))
			return d->err;
	}
	return 0;
}

/*
 * An archive refused as unsafe, one torch reads otherwise than other zip
 * readers do (core/zip/ptz_amb.c): its pickles are still scanned, read as
 * torch reads the archive (ptz_reader_open_torch(): its end records, the
 * data.pkl its lookup finds), so that what torch.load would run is named
 * beside the refusal.  The refusal in @d stays the open's result.
 */
static void scan_as_torch(struct ckpt *c, uint64_t base, const struct diag *d)
{
	struct pkl_src src = { .read = zip_read, .ctx = &c->zip };
	unsigned char *buf = NULL;
	struct ptz_entry *e;
	struct diag sd;
	size_t len;

	diag_init(&sd, d->path);
	if (ptz_reader_open_torch(&c->zip, c->fd, c->path, base,
				  c->file_size, &sd))
		return;
	e = ptz_find_rel(&c->zip, "data.pkl");
	if (e && !ptz_entry_fits(&c->zip, e, PKL_MAX_BYTES - 1, &sd)) {
		if (e->method == PTZ_STORED)
			ckpt_scan_src(c, &src, e->data_off, e->usize,
				      "data.pkl", NULL, &sd);
		else if (!ptz_entry_read(&c->zip, e, PKL_MAX_BYTES - 1, &buf,
					 &len, &sd))
			ckpt_scan_failed(c, buf, len, e->data_off, "data.pkl",
					 NULL, &sd);
		free(buf);
	}
	c->pkl_rec = e;
	scan_records(c, &sd);
	c->pkl_rec = NULL;
	ptz_reader_release(&c->zip);
	c->zip.fd = c->fd;
	c->zip.path = c->path;
}

/*
 * The zip archive at @base of c->fd (c->file_size bytes from there);
 * @fold: fold data.pkl's tensor rebuild calls (PKL_FOLD, ckpt_whole()).
 */
static int open_zip(struct ckpt *c, uint64_t base, bool fold, struct diag *d)
{
	int rc;

	rc = ptz_reader_open_at(&c->zip, c->fd, c->path, base, c->file_size,
				d);
	if (rc && d->unsafe)
		scan_as_torch(c, base, d);
	if (!rc)
		rc = zip_records(c, d);
	if (!rc)
		rc = scan_records(c, d);
	if (!rc && c->format == CKPT_TORCHSCRIPT) {
		c->rows = false;
		return ckpt_script_open(c, d);
	}
	if (!rc)
		rc = parse_pkl(c, fold ? PKL_FOLD : 0, d);
	if (!rc)
		rc = ckpt_build_model(c, d);
	if (!rc)
		rc = zip_storages(c, d);
	return rc;
}

int ckpt_zip_open(struct ckpt *c, bool fold, struct diag *d)
{
	return open_zip(c, 0, fold, d);
}

int ckpt_whole(struct ckpt *c, struct diag *d)
{
	unsigned char *buf;
	size_t len;
	int rc;

	/* a folder's values live in its parts (shards) */
	for (uint32_t i = 0; ckpt_fmt(c)->nparts && i < ckpt_nparts(c); i++) {
		struct ckpt_part p;

		ckpt_part_at(c, i, &p);
		if (p.c && (rc = ckpt_whole(p.c, d)))
			return rc;
	}
	if (!c->doc || !c->doc->nfolded || c->doc->whole)
		return 0;
	rc = ptz_entry_read(&c->zip, c->pkl_rec, PKL_MAX_BYTES - 1, &buf,
			    &len, d);
	if (rc)
		return rc;
	rc = pkl_unfold(c->doc, buf, len, c->pkl_off, d);
	free(buf);
	return rc;
}

struct ckpt *ckpt_alloc(const char *path)
{
	struct ckpt *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->path = path;
	c->fmt = &ckpt_fmt_zip;	/* c->format 0 until a format takes it */
	pthread_mutex_init(&c->locate_lock, NULL);
	pthread_mutex_init(&c->inflate_lock, NULL);
	return c;
}

void ckpt_open_done(struct ckpt *c)
{
	/* the document holds copies of everything: drop the raw pickle */
	free(c->pkl);
	c->pkl = NULL;
	/* keep the key table and array capacities: write-back and edits
	   use them; the memo only served the build */
	if (c->b) {
		ckpt_memo_release(&c->b->memo);
		c->b->d = NULL;
	}
}

int ckpt_open_embedded(int fd, const char *path, uint64_t base, uint64_t len,
		       struct ckpt **out, struct diag *d)
{
	unsigned char sig[4];
	struct ckpt *c;
	int rc;

	*out = NULL;
	rc = io_pread_full(fd, sig, sizeof(sig), base);
	if (rc || len < 4 || memcmp(sig, "PK\3\4", 4))
		return rc && rc != -ENODATA ?
		       diag_errno(d, rc, "read at %llu: %s",
				  (unsigned long long)base, strerror(-rc)) :
		       diag_corrupt(d, base, "item of %llu bytes is not a "
				    "torch.save archive", (unsigned long long)
				    len);
	c = ckpt_alloc(path);
	if (!c)
		return diag_nomem(d);
	c->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (c->fd < 0) {
		rc = diag_errno(d, -errno, "%s", strerror(errno));
		goto fail;
	}
	c->file_size = len;
	c->format = CKPT_ZIP;
	c->fmt = &ckpt_fmt_zip;
	rc = open_zip(c, base, false, d);
	if (rc)
		goto fail;
	ckpt_open_done(c);
	*out = c;
	return 0;
fail:
	ckpt_close(c);
	return rc;
}

void ckpt_close(struct ckpt *c)
{
	if (!c)
		return;
	if (ckpt_fmt(c)->close)	/* a folder's shards own the nodes ... */
		ckpt_fmt(c)->close(c);
	for (uint32_t i = 0; i < c->nnodes; i++)
		if (!ckpt_is_row(c->nodes[i]))
			free(c->nodes[i]->text);
	free(c->nodes);
	free(c->tensors);
	for (uint32_t i = 0; i < c->nstorages; i++) {
		if (ckpt_is_row(c->storages[i]))
			continue;	/* never read, never edited */
		ckpt_storage_uninflate(c->storages[i]);
		ckpt_dirty_drop(c->storages[i]);
	}
	free(c->storages);
	free(c->vdocs);
	src_free(c->src);
	arena_release(&c->arena);
	free(c->globals);
	if (c->b) {
		ckpt_memo_release(&c->b->memo);
		free(c->b->stab);
		free(c->b);
	}
	pkl_doc_free(c->doc);
	pkl_doc_free(c->doc2);
	free(c->pkl);
	free(c->byteorder);
	ptz_reader_release(&c->zip);
	if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_destroy(&c->locate_lock);
	pthread_mutex_destroy(&c->inflate_lock);
	free(c);
}
