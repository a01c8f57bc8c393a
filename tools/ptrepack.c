/*
 * ptrepack - write a checkpoint again without mounting it, in the spirit
 * of h5repack: the same writer as ptfs's write-back, so a repack of an
 * untouched torch file is byte-identical to it.  --repickle rewrites
 * data.pkl from the object tree (renumbering storages, dropping unused
 * ones) the way a structural edit through the mount would; a legacy
 * (torch < 1.6) file is converted to the zip format that way; --clone cuts
 * storages down to the part their tensors use; --align changes the data
 * alignment.  OUT may be a safetensors file, and IN one (ptrepack_st.c),
 * or a new DCP directory (--format dcp, or OUT ending in '/'): the format
 * is --format's, else OUT's name's, else IN's.  KEYPATHs after OUT make
 * those subtrees the new root (one as it is, several as a dict keyed by
 * path); every record's CRC-32 is checked first, and a damaged one
 * refused (ptrepack_in.c says why).  A new data.pkl is protocol 2
 * whatever IN's was, with a note when that was higher (ptrepack(1)).
 *
 * OUT "-" (or a path that is standard output, such as /dev/stdout) is
 * standard output: written in place when it is a regular file at offset
 * 0, else (a pipe) written to a deleted temporary file in $TMPDIR and
 * copied out sequentially: the zip writer seeks back to patch headers.
 * An OUT that is a symlink to a regular file replaces the file it names
 * (the link stays); a directory, device or dangling link is refused.
 *
 * Exit status: 0 written, 2 error (one line on stderr says why; OUT is
 * then untouched).
 */
#include "ckpt/ckpt.h"
#include "cli.h"
#include "cli_io.h"
#include "ptrepack_cvt.h"
#include "ptrepack_in.h"
#include "ptrepack_quant.h"
#include "ptrepack_st.h"
#include "diag/diag.h"
#include "json_out.h"
#include "util/tmpreg.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fputs("usage: ptrepack [OPTIONS] IN OUT [KEYPATH...]\n"
	      "Write PyTorch checkpoint IN to OUT in torch's own archive "
	      "layout, or as a\nsafetensors file; with KEYPATHs "
	      "(\"model\"), what torch.save(ck[KEY]) writes,\nand a "
	      "dict of them for several.\n\n"
	      "      --format F     pt, safetensors, dcp or hf (default: by "
	      "OUT's name,\n"
	      "                     .safetensors, .pt/.pth/.bin/.ckpt, or "
	      "dcp for a\n"
	      "                     trailing '/'; else IN's format)\n", f);
	/* the formats with writers of their own, from the table, and
	   their writers' options (the completions read them here) */
	for (size_t i = 0; ckpt_formats[i]; i++) {
		const struct ckpt_fmt *w = ckpt_formats[i];
		const char *o = w->out_opts ? w->out_opts : "";

		if (!w->write)
			continue;
		fprintf(f, "                     or %s (%s); its writer's "
			"options:", w->name, w->out_ext);
		while (*o) {
			size_t n = strcspn(o, " ");

			fprintf(f, " --%s-%.*s", w->name, (int)n, o);
			o += n + (o[n] == ' ');
		}
		fputs(" VALUE (ptrepack(1))\n", f);
	}
	fputs(
	      "      --max-shard-size SIZE  write OUT/ as a Hugging Face "
	      "folder of\n"
	      "                     safetensors shards of at most SIZE (5GB "
	      "= 5*10^9,\n"
	      "                     5GiB = 5*2^30), as save_pretrained "
	      "cuts them\n"
	      "      --ranks M      DCP output: as M ranks would save it, "
	      "each tensor\n"
	      "                     cut into M chunks as Shard(0) cuts it\n"
	      "      --drop-values  safetensors output: leave out python "
	      "values instead\n"
	      "                     of refusing them\n"
	      "  -P, --repickle     write a new data.pkl from the object tree "
	      "(keys 0..N-1\n"
	      "                     in first-use order, unused storages "
	      "dropped)\n"
	      "  -d, --drop-unused  leave out data/ records nothing refers to "
	      "(data.pkl\n"
	      "                     and keys kept)\n"
	      "  -C, --clone[=PCT]  cut a storage to the span its tensors use "
	      "when that\n"
	      "                     is at most PCT% of it (default 50); "
	      "implies --repickle\n"
	      "  -A, --align N      align record data to N bytes (a power of "
	      "two, 64 to\n"
	      "                     32768; default: the file's "
	      ".storage_alignment, or 64)\n"
	      "      --dtype TYPE   convert every floating tensor to TYPE "
	      "(float64, float32,\n"
	      "                     float16, bfloat16, float8_e4m3fn, "
	      "float8_e5m2,\n"
	      "                     float8_e4m3fnuz, float8_e5m2fnuz), rounding "
	      "as .to() does\n"
	      "      --dequant TYPE scaled float8 weights (X.weight with "
	      "X.weight_scale_inv\n"
	      "                     or X.weight_scale) to TYPE (bf16, float16, "
	      "float32),\n"
	      "                     the scale tensors dropped\n"
	      "      --quant fp8-block[:N]  2-d *.weight tensors to "
	      "float8_e4m3fn in NxN\n"
	      "                     blocks (default 128) with "
	      "X.weight_scale_inv, as\n"
	      "                     DeepSeek-V3 ships them\n"
	      "      --only GLOB    with --dtype, --dequant or --quant: only "
	      "tensors whose\n"
	      "                     key path matches GLOB\n"
	      "      --torch VER    with --dtype: NaN patterns of torch VER "
	      "(2 or 1.13)\n"
	      "  -n, --no-crc       do not check the records' CRC-32s first "
	      "(a damaged\n"
	      "                     record is then copied as it is)\n"
	      "  -v, --verbose      say what was written (on stderr when OUT "
	      "is -)\n"
	      CLI_COMMON_HELP
	      "\nA legacy (torch < 1.6) IN is converted to the zip format.  OUT "
	      "is written\nto a temporary file beside it, fsync'd and renamed; "
	      "OUT - (or a pipe, or a\ncharacter device) is written in "
	      "order, never to a terminal.  A symlink OUT\nreplaces its "
	      "target.  A record whose CRC-32 is wrong is refused: nothing "
	      "is written.\n"
	      "\nExit status: 0 ok, 2 error.\n", f);
}

static void progress(void *arg, uint64_t done, uint64_t total)
{
	struct cli_progress *p = arg;

	p->total = total;
	cli_progress(p, done);
}

/*
 * The summary line (-v) or JSON object (-j) of a torch zip output.
 * "converted" is true when the output holds the input in another form:
 * another format (legacy, safetensors, a folder) or, with --dtype,
 * another dtype ("dtype" then says what; null without --dtype).
 */
static void summary(FILE *f, const char *in, const char *out,
		    const struct ckpt *c, const struct ckpt_write_stats *st,
		    const struct cvt_opt *cv_o, bool json)
{
	const char *cv = ckpt_fmt(c)->converted;
	char a[16], b[16];

	if (json) {
		repack_json_head(f, in, out);
		fprintf(f, ",\"converted\":%s,\"repickled\":%s,\"records\":%u,"
		       "\"storages\":%u,\"dropped\":%u,\"trimmed\":%u,"
		       "\"saved\":%" PRIu64 ",\"size\":%" PRIu64,
		       !ckpt_can(c, CKPT_CAP_TORCH_ZIP) || cv_o->to ? "true" :
		       "false", st->repickled ? "true" : "false", st->records,
		       st->storages, st->dropped, st->trimmed, st->saved,
		       st->size);
		fprintf(f, ",\"was\":%" PRIu64 ",\"protocol\":", in_size(c));
		if (st->repickled)
			fprintf(f, "2,\"protocol_was\":%d", st->proto_was);
		else
			fputs("null,\"protocol_was\":null", f);
		if (cv_o->to)
			fprintf(f, ",\"dtype\":{\"to\":\"%s\",\"tensors\":%u,"
				"\"storages\":%u,\"bytes_in\":%" PRIu64
				",\"bytes_out\":%" PRIu64 "}}\n", cv_o->to->name,
				cv_o->st.tensors, cv_o->st.storages,
				cv_o->st.bytes_in, cv_o->st.bytes_out);
		else
			fputs(",\"dtype\":null}\n", f);
		return;
	}
	fprintf(f, "%s: %u record%s, %u storage%s%s, %s (was %s)", out,
	       st->records, st->records == 1 ? "" : "s", st->storages,
	       st->storages == 1 ? "" : "s",
	       cv && cv[0] ? cv : st->repickled ? ", new data.pkl" : "",
	       cli_size(st->size, a, sizeof(a)),
	       cli_size(in_size(c), b, sizeof(b)));
	if (st->dropped)
		fprintf(f, "; %u unused storage record%s left out", st->dropped,
		       st->dropped == 1 ? "" : "s");
	if (st->trimmed)
		fprintf(f, "; %u storage%s cut to what %s tensors use",
		       st->trimmed, st->trimmed == 1 ? "" : "s",
		       st->trimmed == 1 ? "its" : "their");
	if (st->dropped || st->trimmed)
		fprintf(f, ", %s saved", cli_size(st->saved, a, sizeof(a)));
	fputc('\n', f);
}

/*
 * Write @c to the stream @out (standard output, a pipe, a device): in
 * place when it is a regular file at offset 0 (not O_APPEND: pwrite
 * would append), else through a spooled temporary file, since the zip
 * writer patches headers it wrote before.  Not atomic: the shell already
 * truncated a redirected file.  0 or -errno.
 */
static int write_stream(struct ckpt *c, int out,
			const struct ckpt_write_opts *o, const struct stat *in,
			struct diag *d)
{
	struct stat st;
	int fd, fl, rc;

	if (isatty(out))
		return diag_set(d, -ENOTTY, DIAG_NO_OFFSET, "is a terminal: "
				"redirect it to a file or a pipe");
	if (fstat(out, &st))
		return diag_errno(d, -errno, "%s", strerror(errno));
	if (st.st_dev == in->st_dev && st.st_ino == in->st_ino)
		return diag_set(d, -EINVAL, DIAG_NO_OFFSET, "is the input "
				"file itself");
	fl = fcntl(out, F_GETFL);
	if (S_ISREG(st.st_mode) && fl >= 0 && !(fl & O_APPEND) &&
	    lseek(out, 0, SEEK_CUR) == 0) {
		rc = ckpt_write(c, out, o, d);
		if (!rc && (ftruncate(out, (off_t)o->stats->size) ||
			    lseek(out, (off_t)o->stats->size, SEEK_SET) < 0))
			rc = diag_errno(d, -errno, "%s", strerror(errno));
		return rc;
	}
	fd = cli_spool_fd();
	if (fd < 0)
		return diag_errno(d, fd, "cannot make a temporary file in "
				  "$TMPDIR: %s", strerror(-fd));
	rc = ckpt_write(c, fd, o, d);
	if (!rc && lseek(fd, 0, SEEK_SET))
		rc = diag_errno(d, -errno, "%s", strerror(errno));
	if (!rc) {
		rc = cli_copy_fd(fd, out);
		if (rc)
			diag_errno(d, rc, "%s", strerror(-rc));
	}
	close(fd);
	return rc;
}

/* A name in $TMPDIR for spooling beside (the file is never made). */
static const char *spool_near(void)
{
	static char path[4096];
	const char *t = getenv("TMPDIR");

	snprintf(path, sizeof(path), "%s/ptrepack", t && *t ? t : "/tmp");
	return path;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "repickle", no_argument, NULL, 'P' },
		{ "drop-unused", no_argument, NULL, 'd' },
		{ "clone", optional_argument, NULL, 'C' },
		{ "align", required_argument, NULL, 'A' },
		/* long only: -t and -o mean other things in the family */
		{ "dtype", required_argument, NULL, 't' + 256 },
		{ "only", required_argument, NULL, 'o' + 256 },
		{ "torch", required_argument, NULL, 'T' + 256 },
		{ "dequant", required_argument, NULL, 'q' + 256 },
		{ "quant", required_argument, NULL, 'Q' + 256 },
		{ "format", required_argument, NULL, 'f' + 256 },
		{ "drop-values", no_argument, NULL, 'D' + 256 },
		{ "ranks", required_argument, NULL, 'R' + 256 },
		{ "max-shard-size", required_argument, NULL, 'M' + 256 },
		{ "no-crc", no_argument, NULL, 'n' },
		CLI_LOPT_VERBOSE,
		CLI_LOPT_QUIET,
		CLI_LOPT_JSON,
		CLI_LOPT_HELP,
		CLI_LOPT_VERSION,
		{ NULL, 0, NULL, 0 },
	};
	struct ckpt_write_stats st = { 0 };
	struct ckpt_dcp_stats ds = { 0 };
	struct ckpt_hf_stats hs = { 0 };
	struct ckpt_write_opts o = { .stats = &st };
	struct cli_progress pr;
	bool verbose = false, json = false, quiet = false, no_crc = false;
	struct in_roots roots = { 0 };
	struct in_crc crc = { 0 };
	bool overlap;
	struct cvt_opt cv = { .dec_fd = -1 };
	struct qnt_opt qo = { .tmpfd = -1 };
	/* static: the writer options it holds (malloc'd) stay reachable to
	   the end, whichever return ends main */
	static struct st_opt so;
	enum cli_out how;
	char *target = NULL;
	const char *out, *near;
	FILE *sf;
	struct ckpt *c;
	struct diag d, d2;
	struct stat sb;
	char *end;
	unsigned long a;
	int ch, rc, sfd;

	cli_init(argv[0], "[OPTIONS] IN OUT [KEYPATH...]");
	tmpreg_on_signals();	/* ^C leaves no .OUT.ptfs-new. behind */
	if (cli_remote_args(&argc, argv) || st_opt_fmt_args(&so, &argc, argv))
		return CLI_ERROR;
	while ((ch = getopt_long(argc, argv, "PdC::A:nvqjhV", lopts,
				 NULL)) != -1) {
		switch (ch) {
		case 'P':
			o.repickle = true;
			break;
		case 'd':
			o.drop_unused = true;
			break;
		case 'C':
			a = optarg ? strtoul(optarg, &end, 10) : 50;
			if ((optarg && (*end || end == optarg)) || !a ||
			    a > 100)
				return cli_usage("--clone=%s: not a percentage "
						 "from 1 to 100", optarg);
			o.clone_pct = (uint8_t)a;
			break;
		case 'A':
			a = strtoul(optarg, &end, 10);
			if (*end || a < 64 || a > 32768 || (a & (a - 1)))
				return cli_usage("--align %s: not a power of "
						 "two from 64 to 32768",
						 optarg);
			o.align = a;
			break;
		case 't' + 256:
		case 'o' + 256:
		case 'T' + 256:
			if (cvt_opt_parse(&cv, ch - 256, optarg))
				return CLI_ERROR;
			break;
		case 'q' + 256:
		case 'Q' + 256:
			if (qnt_opt_parse(&qo, ch - 256, optarg))
				return CLI_ERROR;
			break;
		case 'f' + 256:
			if (st_opt_parse(&so, optarg))
				return CLI_ERROR;
			break;
		case 'D' + 256:
			so.drop = true;
			break;
		case 'R' + 256:
			a = strtoul(optarg, &end, 10);
			if (*end || end == optarg || !a || a > 65536)
				return cli_usage("--ranks %s: not a number of "
						 "ranks from 1 to 65536",
						 optarg);
			o.dcp_ranks = (uint32_t)a;
			break;
		case 'M' + 256:
			if (st_opt_shard_size(&so, optarg))
				return CLI_ERROR;
			break;
		case 'n':
			no_crc = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'q':
			quiet = true;
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
	if (argc - optind < 2)
		return cli_usage("expected IN and OUT, got %d file name%s",
				 argc - optind, argc - optind == 1 ? "" : "s");
	if (argc - optind > 2 && st_opt_dcp(&so, argv[optind + 1])) {
		cli_error("%s: KEYPATH: not for a DCP output (write the "
			  "subtree into a .pt first)", argv[optind + 1]);
		return CLI_ERROR;
	}
	if (qnt_opt_check(&qo, &cv, o.clone_pct) ||
	    cvt_opt_check(&cv, o.clone_pct))
		return CLI_ERROR;
	out = argv[optind + 1];
	if (st_opt_dcp(&so, out) && cv.to)
		return cli_usage("--dtype: not for a DCP output");
	if (o.dcp_ranks && !st_opt_dcp(&so, out))
		return cli_usage("--ranks: only for a DCP output (OUT/)");
	/* a DCP directory or an HF folder is made new, beside OUT
	   (ckpt_newdir.h) */
	how = st_opt_newdir(&so, out) ? CLI_OUT_FILE : cli_output(out, &target);
	if (how == CLI_OUT_REFUSED)
		return CLI_ERROR;
	/* what is wrong with IN: one line, and one JSON object under -j
	   (on stderr when the archive was to go to stdout) */
	if (cli_open(argv[optind], &c, &d)) {
		if (json && !quiet)
			cli_json_error(how == CLI_OUT_STDOUT ? stderr :
				       stdout, &d, NULL, NULL);
		cli_diag(&d);
		free(target);
		return CLI_ERROR;
	}
	rc = in_roots_find(c, argv + optind + 2, argc - optind - 2, &roots, &o,
			   &d);
	/* one file out: the CRCs checked while it is written, on a second
	   opening of IN, before it replaces OUT (ptrepack_in.h) */
	overlap = !rc && !no_crc && how == CLI_OUT_FILE &&
		  !st_opt_newdir(&so, out) && in_crc_worth(c) &&
		  !in_crc_start(&crc, c, argv[optind]);
	if (!rc && !no_crc && !overlap)
		rc = in_check_crc(c, true, &d);
	if (rc) {
		in_crc_release(&crc);
		if (json && !quiet)
			cli_json_error(how == CLI_OUT_STDOUT ? stderr :
				       stdout, &d, NULL, NULL);
		cli_diag(&d);
		in_roots_release(&roots);
		ckpt_close(c);
		free(target);
		return CLI_ERROR;
	}
	so.verbose = verbose && !quiet;
	so.quiet = quiet;
	so.in = cli_name(argv[optind]);
	if (st_opt_apply(&so, out, c, &o)) {
		in_crc_release(&crc);
		in_roots_release(&roots);
		ckpt_close(c);
		free(target);
		return CLI_ERROR;
	}
	cli_progress_start(&pr, "writing", c->file_size);
	o.progress = progress;
	o.progress_arg = &pr;
	rc = fstat(c->fd, &sb) ? -errno : 0;
	if (c->remote) {	/* a stand-in's 0444 is no owner's choice */
		mode_t mask = umask(0);

		umask(mask);
		sb.st_mode = S_IFREG | (0666 & ~mask);
	}
	/* converted storages are spooled beside OUT, or in $TMPDIR for a
	   stream */
	near = how == CLI_OUT_STDOUT || how == CLI_OUT_STREAM ? spool_near() :
	       target ? target : out;
	if (!rc)
		rc = cvt_opt_decode(&cv, c, &o, near, &d);
	if (!rc && cv.to)
		rc = cvt_opt_run(&cv, c, &d);
	qo.verbose = verbose;
	if (!rc && qnt_opt_on(&qo))
		rc = qnt_opt_run(&qo, c, near, &o, &d);
	if (!rc && how == CLI_OUT_STDOUT) {
		diag_init(&d, "(stdout)");
		rc = write_stream(c, STDOUT_FILENO, &o, &sb, &d);
	} else if (!rc && how == CLI_OUT_STREAM) {
		diag_init(&d, out);
		sfd = open(out, O_WRONLY | O_NOCTTY | O_CLOEXEC);
		rc = sfd < 0 ? diag_errno(&d, -errno, "%s", strerror(errno)) :
		     write_stream(c, sfd, &o, &sb, &d);
		if (sfd >= 0 && close(sfd) && !rc)
			rc = diag_errno(&d, -errno, "%s", strerror(errno));
	} else if (!rc && o.to == CKPT_OUT_DCP) {
		rc = ckpt_dcp_save(c, out, &o, &ds, &d);
	} else if (!rc && o.to == CKPT_OUT_HF) {
		rc = ckpt_hf_write(c, out, &o, &hs, &d);
	} else if (!rc) {
		rc = ckpt_save(c, target ? target : out, &o, &sb,
			       overlap ? in_crc_before : NULL, &crc, &d);
	}
	/* a damaged record may be why the write failed: it is said first */
	if (rc && overlap && in_crc_join(&crc, &d2))
		d = d2;
	cli_progress_end(&pr);
	free(target);
	if (rc) {
		if (!d.err)
			diag_errno(&d, rc, "%s", strerror(-rc));
		cli_diag(&d);
		cvt_opt_release(&cv);
		qnt_opt_release(&qo);
		in_crc_release(&crc);
		in_roots_release(&roots);
		ckpt_close(c);
		return CLI_ERROR;
	}
	/* the archive owns stdout when OUT is -: the summary goes aside */
	sf = how == CLI_OUT_STDOUT ? stderr : stdout;
	if (!quiet && o.to != CKPT_OUT_DCP && o.to != CKPT_OUT_HF)
		st_opt_report(&so, c, &o);
	if (!quiet && o.to == CKPT_OUT_HF)
		hf_report(&so, &hs);
	/* why not the protocol it was: ptrepack(1), "The pickle" */
	if (!quiet && st.repickled && st.proto_was > 2)
		fprintf(stderr, "%s: note: data.pkl was pickle protocol %d, "
			"written as protocol 2 (torch.save's default; the "
			"weights-only torch.load of torch 2.x refuses "
			"protocol 5)\n", cli_prog(), st.proto_was);
	if ((verbose || json) && !quiet && o.to == CKPT_OUT_DCP)
		dcp_summary(sf, cli_name(argv[optind]), out, c, &ds, json);
	else if ((verbose || json) && !quiet && o.to == CKPT_OUT_HF)
		hf_summary(sf, cli_name(argv[optind]), out, c, &hs, json);
	else if ((verbose || json) && !quiet)
	{
		if (st_opt_out_st(&o, c))
			st_summary(sf, cli_name(argv[optind]),
				   how == CLI_OUT_STDOUT ? "(stdout)" : out, c,
				   &o, json);
		else
			summary(sf, cli_name(argv[optind]),
				how == CLI_OUT_STDOUT ? "(stdout)" : out, c, &st,
				&cv, json);
	}
	if (verbose && cv.to && !json && !quiet && how != CLI_OUT_STDOUT)
		cvt_opt_report(&cv);
	if (qnt_opt_on(&qo) && !quiet)
		qnt_opt_report(&qo, json || how == CLI_OUT_STDOUT ? stderr :
			       stdout, out, o.to == CKPT_OUT_HF ?
			       (hs.shards ? hs.shards : 1) : 0);
	cvt_opt_release(&cv);
	qnt_opt_release(&qo);
	in_crc_release(&crc);
	in_roots_release(&roots);
	ckpt_close(c);
	return cli_finish(CLI_OK);
}
