/*
 * ptverify - check a PyTorch checkpoint for everything a loader would trip
 * on, and for what torch does not check: each record's CRC-32 (torch
 * never verifies it; zip tools do), data alignment (torch.load(mmap=True)),
 * the layout torch 2.x's offset calculation assumes (.format_version),
 * records in the file that belong to nothing (gaps, trailing bytes),
 * unused storage records, the version and byteorder records, and globals
 * a plain torch.load would import.  A Hugging Face sharded folder (or its
 * index) gets each shard's checks, and the index's against the shards:
 * keys the index names a shard for that lacks them, keys a shard holds
 * that the index lacks, keys in two shards, a metadata.total_size that is
 * not the shards' (each storage counted once).  Structural problems (what ckpt_open()
 * refuses: records outside the file or overlapping, duplicate names, no
 * common prefix, storage sizes, tensors outside their storage, a version
 * outside 1..10) make the file unreadable.
 *
 * Output: one line per problem on stdout, "ptverify: FILE: offset 0x..:
 * message", then "FILE: ok" or "FILE: N problems"; with --json one JSON
 * object per file, each on one line; with --quiet nothing (the status
 * says it).  CHECKPOINT - is standard input.
 * Exit status: 0 clean, 1 problems found, 2 unreadable (one line on
 * stderr says why).
 */
#define _GNU_SOURCE 1	/* asprintf */
#include "ckpt/ckpt.h"
#include "cli.h"
#include "cli_io.h"
#include "diag/diag.h"
#include "json_out.h"
#include "util/le.h"
#include "zip/ptz.h"
#include "zrec.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define ALIGN_MIN	64u		/* torch's own; mmap users expect it */
#define SIG_DESC	0x08074b50u	/* "PK\7\8" */
#define SIG_EOCD64	0x06064b50u	/* "PK\6\6" */
#define LOCAL_LEN	30u

struct vopts {
	bool json, quiet, no_crc;
};

/* One file being verified: the problems found so far. */
struct ver {
	struct ckpt *c;
	const struct vopts *o;
	uint32_t nproblems;
	uint64_t checked;	/* bytes whose CRC was computed */
	struct cli_progress pr;
	uint64_t done;
};

static void usage(FILE *f)
{
	fputs("usage: ptverify [OPTIONS] CHECKPOINT...\n"
	      "Check PyTorch checkpoints for what torch.load would trip on "
	      "and what it\ndoes not check (CRC-32, alignment, stray bytes, "
	      "unsafe globals).\n\n"
	      "  -n, --no-crc          do not read record data to check "
	      "CRC-32s\n"
	      CLI_COMMON_HELP "\n"
	      "Exit status: 0 no problems, 1 problems found, 2 a file could "
	      "not be read.\n", f);
}

/* Report one problem: a line, or a JSON object. */
static void problem(struct ver *v, const char *check, uint64_t off,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void problem(struct ver *v, const char *check, uint64_t off,
		    const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (v->o->quiet) {	/* the exit status says it */
		v->nproblems++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cli_progress_end(&v->pr);
	if (v->o->json) {
		fputs(v->nproblems ? ",{\"check\":" : "{\"check\":", stdout);
		json_cstr(stdout, check);
		fputs(",\"offset\":", stdout);
		if (off == DIAG_NO_OFFSET)
			fputs("null", stdout);
		else
			json_u64(stdout, off);
		fputs(",\"message\":", stdout);
		json_cstr(stdout, msg);
		fputs("}", stdout);
	} else if (off == DIAG_NO_OFFSET) {
		printf("%s: %s: %s\n", cli_prog(), v->c->path, msg);
	} else {
		printf("%s: %s: offset 0x%" PRIx64 ": %s\n", cli_prog(),
		       v->c->path, off, msg);
	}
	v->nproblems++;
}

static void problem_diag(struct ver *v, const char *check,
			 const struct diag *d)
{
	problem(v, check, d->off, "%s", d->msg);
}

static void step(void *arg, uint64_t n)
{
	struct ver *v = arg;

	v->done += n;
	v->checked += n;
	cli_progress(&v->pr, v->done);
}

static bool is_storage_rec(const struct ckpt *c, const struct ptz_entry *e)
{
	return e->name_len > c->zip.prefix_len + 6 &&
	       !strncasecmp(e->name + c->zip.prefix_len + 1, "data/", 5);
}

/* ---- each record ---- */

/* The local header's name must be the central directory's. */
static void check_local_name(struct ver *v, const struct ptz_entry *e)
{
	unsigned char lh[LOCAL_LEN];
	uint16_t n;
	char *name;

	if (pread(v->c->fd, lh, sizeof(lh), (off_t)e->header_off) !=
	    (ssize_t)sizeof(lh))
		return;		/* ptz_entry_locate() read it already */
	n = le16(lh + 26);
	if (n != e->name_len) {
		problem(v, "record", e->header_off, "local header of '%s' "
			"names %u bytes, the central directory %u", e->name, n,
			e->name_len);
		return;
	}
	name = malloc(n + 1u);
	if (name && pread(v->c->fd, name, n, (off_t)e->header_off +
			  LOCAL_LEN) == n && memcmp(name, e->name, n)) {
		name[n] = '\0';
		problem(v, "record", e->header_off, "local header names '%s', "
			"the central directory '%s'", name, e->name);
	}
	free(name);
}

/* The data descriptor after the data (flag bit 3) must carry the CRC. */
static void check_descriptor(struct ver *v, const struct ptz_entry *e)
{
	unsigned char dd[8];
	uint64_t at = e->data_off + e->csize;
	uint32_t crc;

	if (!(e->flags & 0x08) || !e->csize || at + 8 > ptz_limit(e) ||
	    pread(v->c->fd, dd, sizeof(dd), (off_t)at) != (ssize_t)sizeof(dd))
		return;
	crc = le32(dd) == SIG_DESC ? le32(dd + 4) : le32(dd);
	if (crc != e->crc32)
		problem(v, "descriptor", at, "data descriptor of '%s' says "
			"CRC-32 %08" PRIx32 ", the central directory %08" PRIx32,
			e->name, crc, e->crc32);
}

static void check_crc(struct ver *v, struct ptz_entry *e)
{
	struct diag d;
	uint32_t crc;
	int rc;

	diag_init(&d, v->c->path);
	rc = zrec_crc32(&v->c->zip, e, &crc, step, v, &d);
	if (rc == -EFBIG) {
		problem(v, "crc", e->header_off, "record '%s' inflates to "
			"%" PRIu64 " bytes: CRC-32 not checked", e->name,
			e->usize);
		return;
	}
	if (rc) {
		problem_diag(v, "record", &d);
		return;
	}
	if (crc == e->crc32)
		return;
	if (!e->crc32)
		problem(v, "crc", e->header_off, "record '%s' has no CRC-32 "
			"(0, data %08" PRIx32 "): saved with torch.serialization"
			".set_crc32_options(False)? zip tools call it corrupt",
			e->name, crc);
	else
		problem(v, "crc", e->header_off, "record '%s': CRC-32 of the "
			"data is %08" PRIx32 ", the archive says %08" PRIx32
			" (changed after it was written?)", e->name, crc,
			e->crc32);
}

static void check_record(struct ver *v, struct ptz_entry *e)
{
	struct ckpt *c = v->c;
	struct diag d;

	diag_init(&d, c->path);
	if (ckpt_record_locate(c, e, &d)) {
		problem_diag(v, "record", &d);
		return;
	}
	check_local_name(v, e);
	if (e->method != PTZ_STORED && is_storage_rec(c, e))
		problem(v, "deflated", e->header_off, "record '%s' is "
			"compressed: torch.load(mmap=True) reads its raw bytes "
			"as data", e->name);
	else if (e->method == PTZ_STORED && is_storage_rec(c, e) &&
		 e->data_off % ALIGN_MIN)
		problem(v, "alignment", e->data_off, "record '%s' data is "
			"%" PRIu64 "-byte aligned, not %u: tensors mapped by "
			"torch.load(mmap=True) are misaligned (ptrepack fixes "
			"it)", e->name, zrec_align(e->data_off), ALIGN_MIN);
	check_descriptor(v, e);
	if (!v->o->no_crc)
		check_crc(v, e);
}

/* ---- the space between records ---- */

static int by_header(const void *a, const void *b)
{
	const struct ptz_entry *x = *(struct ptz_entry *const *)a;
	const struct ptz_entry *y = *(struct ptz_entry *const *)b;

	return x->header_off < y->header_off ? -1 :
	       x->header_off > y->header_off;
}

/* Bytes after @e's data that a data descriptor may fill. */
static bool descriptor_gap(const struct ptz_entry *e, uint64_t gap)
{
	if (!(e->flags & 0x08) || !e->csize)
		return gap == 0;
	return gap == 12 || gap == 16 || gap == 20 || gap == 24;
}

/*
 * Every byte of a torch archive belongs to a record, its descriptor, the
 * central directory or the end records; anything else (data before the
 * first record, between records, after the end) is hidden from torch.
 */
static void check_gaps(struct ver *v)
{
	struct ptz_reader *z = &v->c->zip;
	struct ptz_entry **s = malloc((z->nentries + 1) * sizeof(*s));
	unsigned char eocd[22];
	uint64_t at = 0, end;

	if (!s)
		return;
	for (uint32_t i = 0; i < z->nentries; i++)
		s[i] = &z->entries[i];
	qsort(s, z->nentries, sizeof(*s), by_header);
	if (z->nentries && s[0]->header_off)
		problem(v, "gap", 0, "%" PRIu64 " bytes before the first "
			"record belong to no record", s[0]->header_off);
	for (uint32_t i = 0; i < z->nentries; i++) {
		uint64_t next = i + 1 < z->nentries ? s[i + 1]->header_off :
				z->cdir_off;

		if (!s[i]->data_off)
			continue;	/* not located: reported already */
		at = s[i]->data_off + s[i]->csize;
		if (next >= at && !descriptor_gap(s[i], next - at))
			problem(v, "gap", at, "%" PRIu64 " bytes after record "
				"'%s' belong to no record", next - at,
				s[i]->name);
	}
	free(s);
	/* after the central directory: ZIP64 end record and locator */
	at = z->cdir_off + z->cdir_size;
	if (z->zip64 && pread(v->c->fd, eocd, 12, (off_t)at) == 12 &&
	    le32(eocd) == SIG_EOCD64)
		at += 12 + le64(eocd + 4) + 20;
	if (z->eocd_off > at)
		problem(v, "gap", at, "%" PRIu64 " bytes before the end of "
			"central directory belong to nothing", z->eocd_off - at);
	if (pread(v->c->fd, eocd, sizeof(eocd), (off_t)z->eocd_off) !=
	    (ssize_t)sizeof(eocd))
		return;
	end = z->eocd_off + sizeof(eocd) + le16(eocd + 20);
	if (z->file_size > end)
		problem(v, "trailing", end, "%" PRIu64 " bytes after the end "
			"of the zip archive", z->file_size - end);
}

/* ---- what torch 2.x's mmap offset calculation assumes ---- */

static int by_pkl_off(const void *a, const void *b)
{
	const struct ckpt_storage *x = *(struct ckpt_storage *const *)a;
	const struct ckpt_storage *y = *(struct ckpt_storage *const *)b;

	return x->pkl_off < y->pkl_off ? -1 : x->pkl_off > y->pkl_off;
}

/*
 * With .format_version >= 1, torch 2.x may compute (not read) where each
 * storage's data starts: data/0's real offset, then each next storage
 * right after the previous one's data and descriptor, behind a local
 * header padded to .storage_alignment (torch-format.md 2.3 and 3).  A
 * file laid out otherwise loads garbage with mmap=True and
 * calculate_storage_offsets.  Storages in the order the pickle first
 * names them.
 */
static void check_layout(struct ver *v, uint64_t align)
{
	struct ckpt *c = v->c;
	struct ckpt_storage **s;
	uint64_t cur = 0;
	bool first = true;

	s = malloc((c->nstorages + 1) * sizeof(*s));
	if (!s)
		return;
	if (c->nstorages)
		memcpy(s, c->storages, c->nstorages * sizeof(*s));
	qsort(s, c->nstorages, sizeof(*s), by_pkl_off);
	for (uint32_t i = 0; i < c->nstorages; i++) {
		struct ptz_entry *e = s[i]->rec;
		uint64_t hdr, start, expect, n = s[i]->nbytes;

		if (!e || !e->data_off)
			continue;
		if (first) {
			if (strcmp(s[i]->key, "0")) {
				problem(v, "layout", s[i]->pkl_off, "the "
					"pickle names storage '%s' first, not "
					"'0': torch 2.x's offset calculation "
					"(.format_version) refuses the file",
					s[i]->key);
				break;
			}
			hdr = e->header_off;
			expect = e->data_off;
			first = false;
		} else {
			bool big = n >= 0xffffffffu || cur >= 0xffffffffu;

			hdr = cur;
			start = cur + LOCAL_LEN + e->name_len + 4 +
				(big ? 4 + (n >= 0xffffffffu ? 16 : 0) +
				 (cur >= 0xffffffffu ? 8 : 0) : 0);
			expect = start + (align - start % align) % align;
		}
		if (expect != e->data_off) {
			problem(v, "layout", e->data_off, "record '%s' starts "
				"at 0x%" PRIx64 ", torch 2.x computes 0x%"
				PRIx64 " (.format_version): torch.load(mmap="
				"True, calculate_storage_offsets) reads wrong "
				"bytes (ptrepack fixes it)", e->name,
				e->data_off, expect);
			break;
		}
		cur = e->data_off + n;
		if (n)
			cur += hdr >= 0xffffffffu || n >= 0xffffffffu ? 24 : 16;
	}
	free(s);
}

/* ---- records torch reads ---- */

static char *small_record(struct ckpt *c, const char *rel)
{
	struct ptz_entry *e = ptz_find_rel(&c->zip, rel);
	unsigned char *buf = NULL;
	struct diag quiet;
	size_t len;

	diag_init(&quiet, c->path);
	if (!e || ptz_entry_read(&c->zip, e, 64, &buf, &len, &quiet))
		return NULL;
	return (char *)buf;
}

static void check_records_torch_reads(struct ver *v)
{
	struct ckpt *c = v->c;
	struct ptz_entry *ver = ptz_find_rel(&c->zip, "version");
	struct ptz_entry *dver = ptz_find_rel(&c->zip, ".data/version");
	struct ptz_entry *bo = ptz_find_rel(&c->zip, "byteorder");
	char *fv = small_record(c, ".format_version");
	char *sa = small_record(c, ".storage_alignment");
	uint64_t align = ALIGN_MIN;

	if (ver && dver) {
		char *a = small_record(c, "version");
		char *b = small_record(c, ".data/version");

		if (a && b && strtoul(a, NULL, 10) != strtoul(b, NULL, 10))
			problem(v, "version", dver->header_off, "'version' "
				"says %lu, '.data/version' (which torch reads) "
				"%lu", strtoul(a, NULL, 10),
				strtoul(b, NULL, 10));
		free(a);
		free(b);
	}
	if (c->byteorder && !strcmp(c->byteorder, "big"))
		problem(v, "byteorder", bo->header_off, "byteorder 'big': "
			"torch 2.x byte-swaps every storage on a little-endian "
			"host, torch 1.x does not (the two load different "
			"values)");
	if (sa) {
		unsigned long a = strtoul(sa, NULL, 10);

		if (!a || (a & (a - 1)))
			problem(v, "alignment", ptz_find_rel(&c->zip,
				".storage_alignment")->header_off,
				".storage_alignment '%.16s' is not a power of "
				"two", sa);
		else
			align = a;
	}
	for (uint32_t i = 0; i < c->nstorages && align > ALIGN_MIN; i++) {
		struct ptz_entry *e = c->storages[i]->rec;

		if (e && e->data_off && e->data_off % align)
			problem(v, "alignment", e->data_off, "record '%s' is "
				"not aligned to %" PRIu64 " as "
				".storage_alignment says", e->name, align);
	}
	if (fv && strcmp(fv, "1") >= 0)
		check_layout(v, align);
	free(fv);
	free(sa);
}

/* data/ records no storage of the model uses. */
static void check_unused(struct ver *v)
{
	struct ckpt *c = v->c;
	bool *used = calloc(c->zip.nentries + 1, sizeof(*used));

	if (!used)
		return;
	for (uint32_t i = 0; i < c->nstorages; i++)
		if (c->storages[i]->rec)
			used[c->storages[i]->rec - c->zip.entries] = true;
	for (uint32_t i = 0; i < c->zip.nentries; i++) {
		const struct ptz_entry *e = &c->zip.entries[i];

		if (!used[i] && is_storage_rec(c, e))
			problem(v, "unused", e->header_off, "record '%s' (%"
				PRIu64 " bytes) is used by no tensor (ptrepack "
				"--drop-unused leaves it out)", e->name,
				e->usize);
	}
	free(used);
}

/*
 * A legacy stream ends with its last storage block, a safetensors file
 * with its last tensor (which its own reader insists on).
 */
static void check_legacy(struct ver *v)
{
	struct ckpt *c = v->c;
	uint64_t end = 0;

	if (c->format == CKPT_SAFETENSORS) {
		if (c->file_size > c->data_end)
			problem(v, "trailing", c->data_end, "%" PRIu64 " bytes "
				"after the last tensor's data belong to nothing "
				"(safetensors refuses the file)",
				c->file_size - c->data_end);
		return;
	}

	for (uint32_t i = 0; i < c->nstorages; i++) {
		uint64_t e = c->storages[i]->data_off + c->storages[i]->nbytes;

		end = e > end ? e : end;
	}
	if (!c->nstorages)
		return;		/* where the pickles end is not kept */
	if (c->file_size > end)
		problem(v, "trailing", end, "%" PRIu64 " bytes after the last "
			"storage belong to nothing", c->file_size - end);
}

/* One problem ckpt_dcp_verify() found (@msg starts with the name of the
 * file of the directory that @off is in). */
static void dcp_problem(void *arg, const char *check, const char *path,
			uint64_t off, const char *msg)
{
	(void)path;
	problem(arg, check, off, "%s", msg);
}

/* The checks of one file: its records, its layout, its globals. */
static void check_file(struct ver *v)
{
	struct ckpt *c = v->c;

	if (c->zip.nentries) {
		for (uint32_t i = 0; i < c->zip.nentries; i++)
			check_record(v, &c->zip.entries[i]);
		cli_progress_end(&v->pr);
		check_gaps(v);
		check_records_torch_reads(v);
		check_unused(v);
	} else if (c->format == CKPT_LEGACY ||
		   c->format == CKPT_SAFETENSORS) {
		check_legacy(v);
	} else if (c->format == CKPT_DCP) {
		ckpt_dcp_verify(c, v->o->no_crc, &v->checked, dcp_problem, v);
	}
	for (uint32_t i = 0; i < c->nglobals; i++)
		problem(v, "global", c->globals[i].off, "unsafe global "
			"%s.%s: torch.load would import it (weights_only=True "
			"refuses the file)", c->globals[i].module,
			c->globals[i].name);
}

/*
 * A sharded folder: what the index and the shards disagree on (named by
 * the index, offsets in it), then each shard's own checks, on the shard
 * opened afresh as ptverify SHARD opens it (the folder's model names its
 * storages SHARD:KEY).
 */
static void check_folder(struct ver *v)
{
	struct ckpt *all = v->c;
	const char *path = all->path;
	char line[512], *index = NULL;

	/* the offsets are the index's: name it */
	if (asprintf(&index, "%s/%s", all->hf->dir, all->hf->index) < 0)
		index = NULL;
	all->path = index ? index : path;
	for (uint32_t i = 0; i < all->hf->nissues; i++)
		problem(v, "index", all->hf->issues[i].off, "%s",
			ckpt_hf_issue_line(all, i, line, sizeof(line)));
	all->path = path;
	free(index);
	for (uint32_t k = 0; k < all->hf->nshards; k++) {
		struct diag d;

		if (!all->hf->shards[k].c)
			continue;	/* absent: reported above */
		diag_init(&d, all->hf->shards[k].path);
		if (ckpt_open(all->hf->shards[k].path, &v->c, &d)) {
			v->c = all;
			problem(v, "shard", DIAG_NO_OFFSET, "%s: %s",
				all->hf->shards[k].name, d.msg);
			continue;
		}
		check_file(v);
		ckpt_close(v->c);
	}
	v->c = all;
}

static int verify(const char *path, const struct vopts *o)
{
	struct ver v = { .o = o };
	uint64_t total = 0, records = 0;
	struct diag d;

	/* a DCP directory's chunk and file problems are findings here */
	if (cli_open_with(path, CKPT_OPEN_LENIENT, &v.c, &d)) {
		if (o->json && !o->quiet)
			cli_json_error(stdout, &d, NULL, ",\"problems\":[]");
		cli_diag(&d);
		return CLI_ERROR;
	}
	path = v.c->path;
	if (o->json) {
		fputs("{\"file\":", stdout);
		json_cstr(stdout, path);
		fputs(",\"problems\":[", stdout);
	}
	for (uint32_t k = 0; k < (v.c->hf ? v.c->hf->nshards : 1); k++) {
		const struct ptz_reader *z = !v.c->hf ? &v.c->zip :
			v.c->hf->shards[k].c ? &v.c->hf->shards[k].c->zip : NULL;

		for (uint32_t i = 0; z && i < z->nentries; i++)
			total += z->entries[i].csize;
		records += z ? z->nentries : 0;
	}
	cli_progress_start(&v.pr, "checking CRC-32s", total);
	if (v.c->hf)
		check_folder(&v);
	else
		check_file(&v);
	cli_progress_end(&v.pr);
	if (o->json)
		printf("],\"status\":\"%s\",\"records\":%" PRIu64
		       ",\"storages\":%u,\"bytes_checked\":%" PRIu64 "}\n",
		       v.nproblems ? "problems" : "ok", records,
		       v.c->nstorages, v.checked);
	else if (!o->quiet && v.nproblems)
		printf("%s: %u problem%s\n", path, v.nproblems,
		       v.nproblems == 1 ? "" : "s");
	else if (!o->quiet)
		printf("%s: ok (%s, %" PRIu64 " records, %u storages, %"
		       PRIu64 " bytes CRC-checked)\n", path,
		       v.c->zip.nentries ? "zip" : ckpt_format_name(v.c->format),
		       records, v.c->nstorages, v.checked);
	ckpt_close(v.c);
	return v.nproblems ? CLI_FOUND : CLI_OK;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "quiet", no_argument, NULL, 'q' },
		{ "no-crc", no_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct vopts o = { 0 };
	int ch, status = CLI_OK;

	cli_init(argv[0], "[OPTIONS] CHECKPOINT...");
	while ((ch = getopt_long(argc, argv, "qnjhV", lopts, NULL)) != -1) {
		switch (ch) {
		case 'q': o.quiet = true; o.json = false; break;
		case 'n': o.no_crc = true; break;
		case 'j': o.json = !o.quiet; break;
		case 'h': usage(stdout); return cli_finish(CLI_OK);
		case 'V': return cli_version();
		default: return cli_usage(NULL);
		}
	}
	if (optind >= argc)
		return cli_usage("no checkpoint given");
	for (int i = optind; i < argc; i++) {
		int rc = verify(argv[i], &o);

		if (rc > status)
			status = rc;
		fflush(stdout);
	}
	return cli_finish(status);
}
