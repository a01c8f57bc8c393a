/*
 * ptrepack - write a checkpoint again without mounting it, in the spirit
 * of h5repack: the same writer as ptfs's write-back, so a repack of an
 * untouched torch file is byte-identical to it.  --repickle rewrites
 * data.pkl from the object tree (renumbering storages, dropping unused
 * ones) the way a structural edit through the mount would; a legacy
 * (torch < 1.6) file is converted to the zip format that way; --clone cuts
 * storages down to the part their tensors use; --align changes the data
 * alignment.
 *
 * Exit status: 0 written, 2 error (one line on stderr says why; OUT is
 * then untouched).
 */
#include "ckpt/ckpt.h"
#include "cli.h"
#include "ptrepack_cvt.h"
#include "diag/diag.h"
#include "json_out.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f)
{
	fputs("usage: ptrepack [OPTIONS] IN OUT\n"
	      "Write PyTorch checkpoint IN to OUT in torch's own archive "
	      "layout.\n\n"
	      "  -p, --repickle     write a new data.pkl from the object tree "
	      "(keys 0..N-1\n"
	      "                     in first-use order, unused storages "
	      "dropped)\n"
	      "  -d, --drop-unused  leave out data/ records nothing refers to "
	      "(data.pkl\n"
	      "                     and keys kept)\n"
	      "  -c, --clone[=PCT]  cut a storage to the span its tensors use "
	      "when that\n"
	      "                     is at most PCT% of it (default 50); "
	      "implies --repickle\n"
	      "  -a, --align N      align record data to N bytes (a power of "
	      "two, 64 to\n"
	      "                     32768; default: the file's "
	      ".storage_alignment, or 64)\n"
	      "  -t, --dtype TYPE   convert every floating tensor to TYPE "
	      "(float64, float32,\n"
	      "                     float16, bfloat16, float8_e4m3fn, "
	      "float8_e5m2,\n"
	      "                     float8_e4m3fnuz, float8_e5m2fnuz), rounding "
	      "as .to() does\n"
	      "  -o, --only GLOB    with --dtype: only tensors whose key path "
	      "matches GLOB\n"
	      "      --torch VER    with --dtype: NaN patterns of torch VER "
	      "(2 or 1.13)\n"
	      "  -v, --verbose      say what was written\n"
	      "  -j, --json         the same as a JSON object\n"
	      "  -h, --help         this text\n"
	      "  -V, --version      print the version\n\n"
	      "A legacy (torch < 1.6) IN is converted to the zip format.  OUT "
	      "is written\nto a temporary file beside it, fsync'd and renamed."
	      "\nExit status: 0 ok, 2 error.\n", f);
}

static void progress(void *arg, uint64_t done, uint64_t total)
{
	struct cli_progress *p = arg;

	p->total = total;
	cli_progress(p, done);
}

static void summary(const char *in, const char *out, const struct ckpt *c,
		    const struct ckpt_write_stats *st, bool json)
{
	char a[16], b[16];

	if (json) {
		fputs("{\"in\":", stdout);
		json_cstr(stdout, in);
		fputs(",\"out\":", stdout);
		json_cstr(stdout, out);
		printf(",\"converted\":%s,\"repickled\":%s,\"records\":%u,"
		       "\"storages\":%u,\"dropped\":%u,\"trimmed\":%u,"
		       "\"saved\":%" PRIu64 ",\"size\":%" PRIu64 "}\n",
		       c->format == CKPT_LEGACY ? "true" : "false",
		       st->repickled ? "true" : "false", st->records,
		       st->storages, st->dropped, st->trimmed, st->saved,
		       st->size);
		return;
	}
	printf("%s: %u record%s, %u storage%s%s, %s (was %s)", out,
	       st->records, st->records == 1 ? "" : "s", st->storages,
	       st->storages == 1 ? "" : "s",
	       c->format == CKPT_LEGACY ? ", converted from the legacy format"
	       : st->repickled ? ", new data.pkl" : "",
	       cli_size(st->size, a, sizeof(a)),
	       cli_size(c->file_size, b, sizeof(b)));
	if (st->dropped)
		printf("; %u unused storage record%s left out", st->dropped,
		       st->dropped == 1 ? "" : "s");
	if (st->trimmed)
		printf("; %u storage%s cut to what %s tensors use",
		       st->trimmed, st->trimmed == 1 ? "" : "s",
		       st->trimmed == 1 ? "its" : "their");
	if (st->dropped || st->trimmed)
		printf(", %s saved", cli_size(st->saved, a, sizeof(a)));
	putchar('\n');
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "repickle", no_argument, NULL, 'p' },
		{ "drop-unused", no_argument, NULL, 'd' },
		{ "clone", optional_argument, NULL, 'c' },
		{ "align", required_argument, NULL, 'a' },
		{ "dtype", required_argument, NULL, 't' },
		{ "only", required_argument, NULL, 'o' },
		{ "torch", required_argument, NULL, 'T' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct ckpt_write_stats st = { 0 };
	struct ckpt_write_opts o = { .stats = &st };
	struct cli_progress pr;
	bool verbose = false, json = false;
	struct cvt_opt cv = { .tmpfd = -1 };
	struct ckpt *c;
	struct diag d;
	struct stat sb;
	char *end;
	unsigned long a;
	int ch, rc;

	cli_init(argv[0], "[OPTIONS] IN OUT");
	while ((ch = getopt_long(argc, argv, "pdc::a:t:o:vjhV", lopts,
				 NULL)) != -1) {
		switch (ch) {
		case 'p':
			o.repickle = true;
			break;
		case 'd':
			o.drop_unused = true;
			break;
		case 'c':
			a = optarg ? strtoul(optarg, &end, 10) : 50;
			if ((optarg && (*end || end == optarg)) || !a ||
			    a > 100)
				return cli_usage("--clone=%s: not a percentage "
						 "from 1 to 100", optarg);
			o.clone_pct = (uint8_t)a;
			break;
		case 'a':
			a = strtoul(optarg, &end, 10);
			if (*end || a < 64 || a > 32768 || (a & (a - 1)))
				return cli_usage("--align %s: not a power of "
						 "two from 64 to 32768",
						 optarg);
			o.align = a;
			break;
		case 't':
		case 'o':
		case 'T':
			if (cvt_opt_parse(&cv, ch, optarg))
				return CLI_ERROR;
			break;
		case 'v':
			verbose = true;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return cli_finish(CLI_OK);
		case 'V':
			return cli_version();
		default:
			return cli_usage(NULL);
		}
	}
	if (argc - optind != 2)
		return cli_usage("expected IN and OUT, got %d file name%s",
				 argc - optind, argc - optind == 1 ? "" : "s");
	if (cvt_opt_check(&cv, o.clone_pct))
		return CLI_ERROR;
	diag_init(&d, argv[optind]);
	if (ckpt_open(argv[optind], &c, &d)) {
		cli_diag(&d);
		return CLI_ERROR;
	}
	cli_progress_start(&pr, "writing", c->file_size);
	o.progress = progress;
	o.progress_arg = &pr;
	rc = fstat(c->fd, &sb) ? -errno : 0;
	if (!rc && cv.to)
		rc = cvt_opt_run(&cv, c, argv[optind + 1], &d);
	if (!rc)
		rc = ckpt_save(c, argv[optind + 1], &o, &sb, NULL, NULL, &d);
	cli_progress_end(&pr);
	if (rc) {
		if (!d.err)
			diag_errno(&d, rc, "%s", strerror(-rc));
		cli_diag(&d);
		cvt_opt_release(&cv);
		ckpt_close(c);
		return CLI_ERROR;
	}
	if (verbose || json)
		summary(argv[optind], argv[optind + 1], c, &st, json);
	if (verbose && cv.to && !json)
		cvt_opt_report(&cv);
	cvt_opt_release(&cv);
	ckpt_close(c);
	return cli_finish(CLI_OK);
}
