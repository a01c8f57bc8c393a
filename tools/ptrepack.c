/*
 * ptrepack - write a checkpoint again without mounting it, in the spirit
 * of h5repack: the same writer as ptfs's write-back, so a repack of an
 * untouched torch file is byte-identical to it, and --repickle rewrites
 * data.pkl from the object tree (renumbering storages, dropping unused
 * ones) the way a structural edit through the mount would.
 *
 * Exit status: 0 written, 2 error (one line on stderr says why; OUT is
 * then untouched).
 */
#include "ckpt/ckpt.h"
#include "diag/diag.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f)
{
	fputs("usage: ptrepack [OPTIONS] IN OUT\n"
	      "Write PyTorch checkpoint IN to OUT in torch's own archive "
	      "layout.\n\n"
	      "  -p, --repickle   write a new data.pkl from the object tree "
	      "(keys 0..N-1\n"
	      "                   in first-use order, unused storages "
	      "dropped)\n"
	      "  -a, --align N    align record data to N bytes (a power of "
	      "two, 64 to\n"
	      "                   32768; default: the file's "
	      ".storage_alignment, or 64)\n"
	      "  -h, --help       this text\n"
	      "  -V, --version    print the version\n\n"
	      "OUT is written to a temporary file beside it, fsync'd and "
	      "renamed.\nExit status: 0 ok, 2 error.\n", f);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "repickle", no_argument, NULL, 'p' },
		{ "align", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct ckpt_write_opts o = { 0 };
	struct ckpt *c;
	struct diag d;
	struct stat st;
	char line[512], *end;
	unsigned long a;
	int ch;

	while ((ch = getopt_long(argc, argv, "pa:hV", lopts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			o.repickle = true;
			break;
		case 'a':
			a = strtoul(optarg, &end, 10);
			if (*end || a < 64 || a > 32768 || (a & (a - 1))) {
				fprintf(stderr, "ptrepack: --align %s: not a "
					"power of two from 64 to 32768\n",
					optarg);
				return 2;
			}
			o.align = a;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("ptrepack %s\n", PT_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	diag_init(&d, argv[optind]);
	if (ckpt_open(argv[optind], &c, &d)) {
		fprintf(stderr, "ptrepack: %s\n", diag_line(&d, line,
							   sizeof(line)));
		return 2;
	}
	if (fstat(c->fd, &st) ||
	    ckpt_save(c, argv[optind + 1], &o, &st, NULL, NULL, &d)) {
		if (!d.err)
			diag_errno(&d, -errno, "%s", strerror(errno));
		fprintf(stderr, "ptrepack: %s\n", diag_line(&d, line,
							   sizeof(line)));
		ckpt_close(c);
		return 2;
	}
	ckpt_close(c);
	return 0;
}
