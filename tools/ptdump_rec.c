/*
 * ptdump_rec.c - ptdump --records: the records of a zip checkpoint in
 * central directory order, each with its local header offset, data
 * offset, compressed and uncompressed size, method, CRC-32 as stored and
 * as recomputed from the data, and the data offset's alignment (mod 64,
 * and the largest power of two dividing it); then the end records.  Only
 * the zip index is needed, so archives ckpt_open() refuses (TorchScript,
 * a broken pickle) are listed too.  A legacy stream has no records: its
 * storage blocks are listed the same way, and so are a safetensors file's
 * header and tensors.
 */
#include "ptdump.h"

#include "ckpt/ckpt.h"
#include "cli.h"
#include "diag/diag.h"
#include "json_out.h"
#include "source/source.h"
#include "util/io.h"
#include "zip/ptz.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct row {
	bool located, crc_done, crc_ok;
	uint32_t crc;
};

static void row_text(const struct ptz_entry *e, uint32_t i,
		     const struct row *r)
{
	char crc[16] = "-";

	if (r->crc_done)
		snprintf(crc, sizeof(crc), "%08" PRIx32 "%s", r->crc,
			 r->crc_ok ? "" : "!");
	printf("%4u  0x%08" PRIx64 "  ", i, e->header_off);
	if (r->located)
		printf("0x%08" PRIx64, e->data_off);
	else
		printf("%10s", "?");
	printf("  %10" PRIu64 "  %10" PRIu64 "  %-7s  %08" PRIx32 "  %-9s",
	       e->csize, e->usize, e->method == PTZ_STORED ? "stored" :
	       e->method == PTZ_DEFLATED ? "deflate" : "other", e->crc32, crc);
	if (r->located)
		printf("  %3" PRIu64 "  %6" PRIu64, e->data_off % 64,
		       ptz_align(e->data_off) > 65536 ? 65536 :
		       ptz_align(e->data_off));
	else
		printf("  %3s  %6s", "?", "?");
	printf("  %s\n", e->name);
}

static void row_json(const struct ptz_entry *e, uint32_t i,
		     const struct row *r)
{
	fprintf(stdout, "%s\n  {\"index\":%u,\"name\":", i ? "," : "", i);
	json_cstr(stdout, e->name);
	printf(",\"header_offset\":%" PRIu64 ",\"data_offset\":", e->header_off);
	if (r->located)
		json_u64(stdout, e->data_off);
	else
		fputs("null", stdout);
	printf(",\"csize\":%" PRIu64 ",\"usize\":%" PRIu64 ",\"method\":%u,"
	       "\"flags\":%u,\"crc32\":%" PRIu32 ",\"crc32_computed\":",
	       e->csize, e->usize, e->method, e->flags, e->crc32);
	if (r->crc_done)
		printf("%" PRIu32 ",\"crc_ok\":%s", r->crc,
		       r->crc_ok ? "true" : "false");
	else
		fputs("null,\"crc_ok\":null", stdout);
	if (r->located)
		printf(",\"align_mod64\":%" PRIu64 ",\"align\":%" PRIu64 "}",
		       e->data_off % 64, ptz_align(e->data_off));
	else
		fputs(",\"align_mod64\":null,\"align\":null}", stdout);
}

static int zip_records(int fd, const struct dump_opts *o)
{
	struct ptz_reader z = { 0 };
	struct cli_progress pr = { 0 };
	uint64_t total = 0;
	struct diag d;
	int status = CLI_OK;

	diag_init(&d, o->name);
	if (ptz_reader_open(&z, fd, o->name, &d)) {
		cli_diag(&d);
		return CLI_ERROR;
	}
	for (uint32_t i = 0; i < z.nentries; i++)
		total += z.entries[i].csize;
	if (o->json) {
		fputs("{\"file\":", stdout);
		json_cstr(stdout, o->name);
		printf(",\"file_size\":%" PRIu64 ",\"cdir_offset\":%" PRIu64
		       ",\"cdir_size\":%" PRIu64 ",\"eocd_offset\":%" PRIu64
		       ",\"zip64\":%s,\"prefix\":", z.file_size, z.cdir_off,
		       z.cdir_size, z.eocd_off, z.zip64 ? "true" : "false");
		json_cstr(stdout, z.prefix);
		fputs(",\"records\":[", stdout);
	} else {
		printf("# %s: %u records, central directory at 0x%" PRIx64
		       " (%" PRIu64 " bytes), end of central directory at 0x%"
		       PRIx64 "%s, file %" PRIu64 " bytes\n", o->name, z.nentries,
		       z.cdir_off, z.cdir_size, z.eocd_off,
		       z.zip64 ? " after ZIP64 end records" : "", z.file_size);
		printf("%4s  %10s  %10s  %10s  %10s  %-7s  %-8s  %-9s  %3s  "
		       "%6s  %s\n", "#", "header", "data", "csize", "usize",
		       "method", "crc32", "computed", "%64", "align", "name");
	}
	cli_progress_start(&pr, "reading records", total);
	for (uint32_t i = 0; i < z.nentries; i++) {
		struct ptz_entry *e = &z.entries[i];
		struct row r = { 0 };
		struct diag rd;

		diag_init(&rd, o->name);
		r.located = !ptz_entry_locate(&z, e, &rd);
		if (r.located && !o->no_crc) {
			int rc = ptz_entry_crc32(&z, e, &r.crc, cli_progress_step, &pr,
						 &rd);

			r.crc_done = !rc;
			r.crc_ok = r.crc == e->crc32;
			if (rc == -EFBIG)
				rd.err = 0;
		}
		if (rd.err) {
			cli_progress_end(&pr);
			cli_diag(&rd);
			status = CLI_ERROR;
		}
		if (o->json)
			row_json(e, i, &r);
		else
			row_text(e, i, &r);
	}
	cli_progress_end(&pr);
	if (o->json)
		fputs("\n ]}\n", stdout);
	ptz_reader_release(&z);
	return status;
}

static int by_data_off(const void *a, const void *b)
{
	const struct ckpt_storage *x = *(const struct ckpt_storage *const *)a;
	const struct ckpt_storage *y = *(const struct ckpt_storage *const *)b;

	return (x->data_off > y->data_off) - (x->data_off < y->data_off);
}

/* The header line of a file without records (legacy, safetensors). */
static void stream_head(const struct ckpt *c, const struct dump_opts *o)
{
	bool st = ckpt_can(c, CKPT_CAP_FLAT);

	if (o->json) {
		fputs("{\"file\":", stdout);
		json_cstr(stdout, o->name);
		printf(",\"format\":\"%s\",\"file_size\":%" PRIu64 ",\"%s\":%"
		       PRIu64, ckpt_fmt(c)->name, c->file_size,
		       st ? "header_length" : "pickle_offset",
		       st ? c->hdr_len : c->pkl_off);
		if (st)
			printf(",\"data_end\":%" PRIu64, c->data_end);
		fputs(",\"storages\":[", stdout);
		return;
	}
	if (st) {
		char what[200];

		ckpt_fmt(c)->describe(c, what, sizeof(what));
		printf("# %s: %s; no zip records, %u tensors, data ends at 0x%"
		       PRIx64 ", file %" PRIu64 " bytes\n", o->name, what,
		       c->nstorages, c->data_end, c->file_size);
	}
	else
		printf("# %s: legacy stream (torch < 1.6), no zip records; "
		       "main pickle at 0x%" PRIx64 ", %u storage blocks, file "
		       "%" PRIu64 " bytes\n", o->name, c->pkl_off,
		       c->nstorages, c->file_size);
	printf("%4s  %10s  %10s  %10s  %3s  %6s  %s\n", "#", st ? "" :
	       "count at", "data", "bytes", "%64", "align", st ? "tensor" :
	       "key");
}

/*
 * A legacy stream: its storage blocks in file order; a safetensors file:
 * its tensors' data in file order (each tensor is one storage).
 */
static int legacy_records(const char *path, const struct dump_opts *o)
{
	struct ckpt_storage **v;
	struct ckpt_folder f;
	struct ckpt *c;
	struct diag d;

	diag_init(&d, o->name);
	if (ckpt_open(path, &c, &d)) {
		cli_diag(&d);
		return CLI_ERROR;
	}
	c->path = o->name;
	if (ckpt_folder(c, &f)) {
		dump_error(o->name, DIAG_NO_OFFSET, "a Hugging Face index: "
			   "--records takes one of its shards");
		ckpt_close(c);
		return CLI_ERROR;
	}
	v = malloc((c->nstorages + 1) * sizeof(*v));
	if (!v) {
		ckpt_close(c);
		cli_error("%s: out of memory", o->name);
		return CLI_ERROR;
	}
	if (c->nstorages)
		memcpy(v, c->storages, c->nstorages * sizeof(*v));
	qsort(v, c->nstorages, sizeof(*v), by_data_off);
	stream_head(c, o);
	for (uint32_t i = 0; i < c->nstorages; i++) {
		const struct ckpt_storage *s = v[i];
		/* a flat format: storage k is tensor k, the root's child k */
		const char *name = ckpt_can(c, CKPT_CAP_FLAT) ?
				   c->root->dir->kids[s->index]->name : NULL;
		char count[16] = "";

		if (!name)
			snprintf(count, sizeof(count), "0x%08" PRIx64,
				 s->data_off - 8);
		if (o->json) {
			printf("%s\n  {\"key\":", i ? "," : "");
			json_cstr(stdout, s->key);
			if (name) {
				fputs(",\"name\":", stdout);
				json_cstr(stdout, name);
			} else {
				printf(",\"count_offset\":%" PRIu64,
				       s->data_off - 8);
			}
			printf(",\"data_offset\":%" PRIu64 ",\"nbytes\":%"
			       PRIu64 ",\"align_mod64\":%" PRIu64
			       ",\"align\":%" PRIu64 "}", s->data_off,
			       s->nbytes, s->data_off % 64,
			       ptz_align(s->data_off));
		} else {
			printf("%4u  %10s  0x%08" PRIx64 "  %10" PRIu64
			       "  %3" PRIu64 "  %6" PRIu64 "  %s\n", i, count,
			       s->data_off, s->nbytes, s->data_off % 64,
			       ptz_align(s->data_off) > 65536 ?
			       65536 : ptz_align(s->data_off),
			       name ? name : s->key);
		}
	}
	if (o->json)
		fputs("\n ]}\n", stdout);
	free(v);
	ckpt_close(c);
	return CLI_OK;
}

int dump_records(const char *path, const struct dump_opts *o)
{
	unsigned char head[4] = { 0 };
	struct stat st;
	int fd, rc;

	struct diag d;

	diag_init(&d, o->name);
	fd = src_open_path(path, &st, &d);	/* a URL too; never a fifo */
	if (fd < 0) {
		cli_diag(&d);
		return CLI_ERROR;
	}
	if (S_ISDIR(st.st_mode)) {
		dump_error(o->name, DIAG_NO_OFFSET, "is a directory (a "
			   "sharded folder: --records takes one shard; a DCP "
			   "directory: ptls, ptverify, its .metadata: ptdump "
			   "--pickle)");
		rc = CLI_ERROR;
	} else if (io_pread(fd, head, 4, 0) == 4 && !memcmp(head, "PK\3\4", 4)) {
		rc = zip_records(fd, o);
	} else {
		rc = legacy_records(path, o);
	}
	close(fd);
	return rc;
}
