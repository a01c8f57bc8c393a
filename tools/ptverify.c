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
 * outside 1..10) make the file unreadable.  A zip's checks are
 * core/zip/ptz_verify.c's; this file opens, asks and prints.
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
#include "globals.h"
#include "json_out.h"
#include "zip/ptz.h"
#include "zip/ptz_verify.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

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

static void step(void *arg, uint64_t n)
{
	struct ver *v = arg;

	v->checked += n;
	cli_progress_step(&v->pr, n);
}

/* One problem ckpt_verify() found, the format's own checks (a DCP
 * directory's @msg starts with the name of the file @off is in). */
static void fmt_problem(void *arg, const char *check, const char *path,
			uint64_t off, const char *msg)
{
	(void)path;
	problem(arg, check, off, "%s", msg);
}

/* One problem ptz_verify_records() or ptz_verify_archive() found. */
static void zip_problem(void *arg, const char *check, uint64_t off,
			const char *msg)
{
	problem(arg, check, off, "%s", msg);
}

/* A zip's checks (core/zip/ptz_verify.c), given the storages the model
 * reads from its records. */
static void check_zip(struct ver *v)
{
	struct ckpt *c = v->c;
	struct ptz_use *u = malloc((c->nstorages + 1) * sizeof(*u));
	struct ptz_verify zv = {
		.z = &c->zip, .no_crc = v->o->no_crc,
		.big_endian = c->byteorder && !strcmp(c->byteorder, "big"),
		.uses = u, .nuses = u ? c->nstorages : 0,
		.problem = zip_problem, .step = step, .arg = v,
	};

	for (uint32_t i = 0; u && i < c->nstorages; i++)
		u[i] = (struct ptz_use){ c->storages[i]->rec,
			c->storages[i]->key, c->storages[i]->nbytes,
			c->storages[i]->pkl_off };
	ptz_verify_records(&zv);
	cli_progress_end(&v->pr);
	ptz_verify_archive(&zv);
	free(u);
}

/* The checks of one file: its records, its layout, its globals. */
static void check_file(struct ver *v)
{
	struct ckpt *c = v->c;

	if (c->zip.nentries)
		check_zip(v);
	ckpt_verify(c, v->o->no_crc, &v->checked, fmt_problem, v);
	/* a rank set's parts are its rank files: each one's own, by name */
	for (uint32_t k = 0; k < ckpt_nparts(c); k++) {
		struct ckpt_part p;

		ckpt_part_at(c, k, &p);
		for (uint32_t i = 0; p.c && i < p.c->nglobals; i++) {
			char text[8192];

			fmt_global_text(p.c, i, "", text, sizeof(text));
			problem(v, "global", p.c->globals[i].off, "%s%s%s",
				p.c != c ? p.name : "", p.c != c ? ": " : "",
				text);
		}
	}
}

/*
 * A file that could not be opened: unreadable (exit 2), unless torch.load
 * would run something in it before it failed too, or would read it
 * otherwise than ptfs (an unsafe refusal): then those are its problems
 * (exit 1), and the refusal is said on stderr as well.
 */
static int unopened(struct ver *v, const struct diag *d)
{
	const struct ckpt *c = v->c;

	if (!c || !c->nglobals) {
		if (v->o->json && !v->o->quiet)
			cli_json_error(stdout, d, NULL, ",\"problems\":[]");
		cli_diag(d);
		return CLI_ERROR;
	}
	cli_diag(d);
	if (v->o->json) {
		fputs("{\"file\":", stdout);
		json_cstr(stdout, c->path);
		fputs(",\"problems\":[", stdout);
	}
	for (uint32_t i = 0; i < c->nglobals; i++) {
		char text[8192];

		fmt_global_text(c, i, "", text, sizeof(text));
		problem(v, "global", c->globals[i].off, "%s", text);
	}
	if (v->o->json)
		printf("],\"status\":\"unsafe\"}\n");
	return CLI_FOUND;
}

/*
 * A folder of parts (a sharded one): what its index and its parts
 * disagree on (the findings, named by the index, offsets in it), then
 * each part's own checks, on the part opened afresh as ptverify PART
 * opens it (the folder's model names its storages PART:KEY).
 */
static void check_folder(struct ver *v, const struct ckpt_folder *f)
{
	struct ckpt *all = v->c;
	const char *path = all->path, *dir = ".", *commit;
	char line[512], *index = NULL;

	/* the offsets are the index's: name it */
	ckpt_many_dir(all, &dir, &commit);
	if (asprintf(&index, "%s/%s", dir, f->index) < 0)
		index = NULL;
	all->path = index ? index : path;
	for (uint32_t i = 0; i < ckpt_nfindings(all); i++) {
		uint64_t off;
		const char *text = ckpt_finding(all, i, &off, line,
						sizeof(line));

		problem(v, "index", off, "%s", text);
	}
	all->path = path;
	free(index);
	for (uint32_t k = 0; k < ckpt_nparts(all); k++) {
		struct ckpt_part p;
		struct diag d;

		ckpt_part_at(all, k, &p);
		if (!p.c)
			continue;	/* absent: a finding above */
		diag_init(&d, p.c->path);
		if (ckpt_open(p.c->path, &v->c, &d)) {
			v->c = all;
			problem(v, "shard", DIAG_NO_OFFSET, "%s: %s", p.name,
				d.msg);
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
	struct ckpt_folder f;
	struct diag d;

	/* a DCP directory's chunk and file problems are findings here */
	if (cli_open_with(path, CKPT_OPEN_LENIENT | CKPT_OPEN_KEEP, &v.c,
			  &d)) {
		int rc = unopened(&v, &d);

		ckpt_close(v.c);
		return rc;
	}
	path = v.c->path;
	if (o->json) {
		fputs("{\"file\":", stdout);
		json_cstr(stdout, path);
		fputs(",\"problems\":[", stdout);
	}
	for (uint32_t k = 0; k < ckpt_nparts(v.c); k++) {
		const struct ptz_reader *z;
		struct ckpt_part p;

		ckpt_part_at(v.c, k, &p);
		z = p.c ? &p.c->zip : NULL;
		for (uint32_t i = 0; z && i < z->nentries; i++)
			total += z->entries[i].csize;
		records += z ? z->nentries : 0;
	}
	cli_progress_start(&v.pr, "checking CRC-32s", total);
	if (ckpt_folder(v.c, &f))
		check_folder(&v, &f);
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
		       v.c->zip.nentries ? "zip" : ckpt_fmt(v.c)->name,
		       records, v.c->nstorages, v.checked);
	ckpt_close(v.c);
	return v.nproblems ? CLI_FOUND : CLI_OK;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		CLI_LOPT_QUIET,
		{ "no-crc", no_argument, NULL, 'n' },
		CLI_LOPT_JSON,
		CLI_LOPT_HELP,
		CLI_LOPT_VERSION,
		{ NULL, 0, NULL, 0 },
	};
	struct vopts o = { 0 };
	int ch, status = CLI_OK;

	cli_init(argv[0], "[OPTIONS] CHECKPOINT...");
	if (cli_remote_args(&argc, argv))
		return CLI_ERROR;
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
