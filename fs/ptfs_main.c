/*
 * ptfs_main.c - ptfs CHECKPOINT MOUNTPOINT: open and check the checkpoint
 * first (so a bad file gets ptls's one-line error and nothing is mounted),
 * then mount it read-only and serve requests on several threads.
 *
 * Options are libfuse's (-f, -d, -s, -o ...) plus ptfs's own:
 *   -o timeout=SECONDS   entry/attribute cache time (default 3600)
 * fstab: /data/model.pt /mnt/model fuse.ptfs ro,allow_other 0 0
 */
#define _XOPEN_SOURCE 700	/* realpath */
#include "ptfs.h"

#include "diag/diag.h"

#include <fuse_opt.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct opts {
	char *ckpt;
	double timeout;
	int show_help;
	int show_version;
};

#define OPT(t, p) { t, offsetof(struct opts, p), 1 }

static const struct fuse_opt opt_spec[] = {
	{ "timeout=%lf", offsetof(struct opts, timeout), 0 },
	OPT("-h", show_help),
	OPT("--help", show_help),
	OPT("-V", show_version),
	OPT("--version", show_version),
	FUSE_OPT_END
};

static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct opts *o = data;

	(void)outargs;
	if (key == FUSE_OPT_KEY_NONOPT && !o->ckpt) {
		o->ckpt = strdup(arg);
		return o->ckpt ? 0 : -1;
	}
	return 1;	/* keep: the mount point and libfuse's options */
}

static void usage(const char *prog)
{
	printf("usage: %s [options] CHECKPOINT MOUNTPOINT\n"
	       "Mount a PyTorch checkpoint (torch.save) read-only as a "
	       "directory:\ntensors are files, metadata are user.* xattrs, "
	       "storages are under .ptfs/.\n\n"
	       "ptfs options:\n"
	       "    -o timeout=SECONDS     kernel cache time for names and "
	       "attributes (3600)\n"
	       "    -h, --help             this text\n"
	       "    -V, --version          print versions\n\n", prog);
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

/*
 * The kernel caps a FUSE mount's readahead at the bdi default (128 KiB)
 * whatever INIT asks for, so reads arrive in 128-256 KiB requests.  Raise
 * the bdi's read_ahead_kb to PTFS_REQUEST (root only; best effort).  The device
 * comes from mountinfo: a stat() of the mount point would wait for the
 * loop that is not running yet.
 */
static void raise_readahead(const char *mountpoint)
{
	char line[4096], path[128], *real = realpath(mountpoint, NULL);
	unsigned maj, min;
	FILE *f;

	if (!real)
		return;
	f = fopen("/proc/self/mountinfo", "r");
	while (f && fgets(line, sizeof(line), f)) {
		char mnt[4096];

		/* id parent maj:min root mountpoint ... */
		if (sscanf(line, "%*s %*s %u:%u %*s %4095s", &maj, &min, mnt) != 3
		    || strcmp(mnt, real))
			continue;
		snprintf(path, sizeof(path),
			 "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
		FILE *ra = fopen(path, "w");

		if (ra) {
			fprintf(ra, "%u\n", PTFS_REQUEST / 1024);
			fclose(ra);
		}
	}
	if (f)
		fclose(f);
	free(real);
}

static int serve(struct ptfs *fs, struct fuse_args *args,
		 struct fuse_cmdline_opts *co)
{
	struct fuse_loop_config *cfg;
	struct fuse_session *se;
	int rc = 1;

	se = fuse_session_new(args, &ptfs_ops, sizeof(ptfs_ops), fs);
	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se))
		goto out_destroy;
	if (fuse_session_mount(se, co->mountpoint))
		goto out_signals;
	raise_readahead(co->mountpoint);
	fuse_daemonize(co->foreground);
	if (co->singlethread) {
		rc = fuse_session_loop(se);
	} else {
		cfg = fuse_loop_cfg_create();
		if (!cfg)
			goto out_unmount;
		fuse_loop_cfg_set_clone_fd(cfg, co->clone_fd);
		fuse_loop_cfg_set_max_threads(cfg, co->max_threads);
		rc = fuse_session_loop_mt(se, cfg);
		fuse_loop_cfg_destroy(cfg);
	}
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct opts o = { .timeout = 3600 };
	struct fuse_cmdline_opts co = { 0 };
	struct ptfs fs = { 0 };
	struct diag d;
	char line[512];
	int rc = 1;

	if (fuse_opt_parse(&args, &o, opt_spec, opt_proc))
		goto out_args;
	if (o.show_help) {
		usage(argv[0]);
		rc = 0;
		goto out_args;
	}
	if (o.show_version) {
		printf("ptfs %s\nFUSE library version %s\n", PT_VERSION,
		       fuse_pkgversion());
		fflush(stdout);	/* fusermount3 -V writes to fd 1 next */
		fuse_lowlevel_version();
		rc = 0;
		goto out_args;
	}
	/* read-only until write-back exists; name it in mount(8) output */
	if (fuse_opt_add_arg(&args, "-oro,subtype=ptfs,default_permissions") ||
	    fuse_parse_cmdline(&args, &co))
		return 1;
	if (!o.ckpt || !co.mountpoint) {
		fprintf(stderr, "usage: %s [options] CHECKPOINT MOUNTPOINT "
			"(--help for more)\n", argv[0]);
		goto out_args;
	}
	diag_init(&d, o.ckpt);
	if (ckpt_open(o.ckpt, &fs.c, &d)) {
		fprintf(stderr, "ptfs: %s\n", diag_line(&d, line, sizeof(line)));
		goto out_args;
	}
	if (fstat(fs.c->fd, &fs.st) || ptfs_ino_init(&fs)) {
		perror("ptfs");
		goto out_close;
	}
	fs.uid = getuid();
	fs.gid = getgid();
	fs.timeout = o.timeout;
	{
		char fsname[4200];

		/* shows the checkpoint in mount(8) and /proc/mounts */
		snprintf(fsname, sizeof(fsname), "-ofsname=%s", o.ckpt);
		if (!strchr(o.ckpt, ','))
			fuse_opt_add_arg(&args, fsname);
	}
	rc = serve(&fs, &args, &co);
out_close:
	ptfs_ino_release(&fs);
	ckpt_close(fs.c);
out_args:
	free(co.mountpoint);
	free(o.ckpt);
	fuse_opt_free_args(&args);
	return rc;
}
