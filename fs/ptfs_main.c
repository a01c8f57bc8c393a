/*
 * ptfs_main.c - ptfs CHECKPOINT MOUNTPOINT: open and check the checkpoint
 * and its overlay first (so a bad file gets ptls's one-line error and
 * nothing is mounted), then mount it and serve requests on several
 * threads; at unmount, write back what was edited.
 * The commands that talk to a running mount (ptfs umount [--discard],
 * status, revert) are ptfs_cli.c.
 *
 * Options are libfuse's (-f, -d, -s, -o ...) plus ptfs's own:
 *   -o timeout=SECONDS   entry/attribute cache time (default 3600)
 *   -o overlay=DIR       where edits are staged (.NAME.ptfs beside NAME)
 *   -o output=FILE       write back to FILE, leave the checkpoint alone
 *   -o discard           drop edits an earlier session staged
 *   -o inplace           write back into the checkpoint itself (same-size
 *                        edits of tensor bytes only; else refused)
 *   -o views             list KEY.npy and KEY.txt beside each tensor
 *   -o shards=SIZE       .ptfs/as/ as a sharded folder of SIZE-byte
 *                        shards, not one model.safetensors
 *   -o nonempty          mount over a directory with files in it, or
 *                        over another file system's mount (never over
 *                        a ptfs mount)
 *   -o ro                no edits
 *   -o dequant=TYPE      a read-only view: scaled float8 weights
 *                        (X.weight beside X.weight_scale_inv or
 *                        X.weight_scale) as TYPE, made as they are read,
 *                        their scales hidden (core/cvt/cvt_scale.h)
 *   -o insecure, endpoint=URL, cache=SIZE, connections=N
 *                        a remote checkpoint (a URL; always read-only):
 *                        https unchecked, an S3-compatible store, the
 *                        block cache, parallel range requests
 * fstab: /data/model.pt /mnt/model fuse.ptfs ro,allow_other 0 0
 */
#define _XOPEN_SOURCE 700	/* realpath */
#define _DEFAULT_SOURCE 1	/* vsyslog */
#include "ptfs.h"

#include "cvt/cvt_scale.h"
#include "diag/diag.h"
#include "remote/remote.h"
#include "source/source.h"
#include "util/heap.h"
#include "util/path.h"
#include "util/units.h"
#include "util/io.h"

#include <errno.h>
#include <limits.h>
#include <fuse_opt.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <syslog.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct opts {
	char *ckpt;
	double timeout;
	char *overlay;
	char *output;
	int discard;
	int inplace;
	int views;
	int nonempty;
	int ro;
	int insecure;
	char *endpoint;
	char *cache;
	unsigned conns;
	char *dequant;		/* -o dequant=TYPE */
	char *shards;		/* -o shards=SIZE */
	int show_help;
	int show_version;
};

#define OPT(t, p) { t, offsetof(struct opts, p), 1 }
#define PTFS_OPEN	(CKPT_OPEN_ROWS | CKPT_OPEN_LISTS)	/* the model */

static const struct fuse_opt opt_spec[] = {
	{ "timeout=%lf", offsetof(struct opts, timeout), 0 },
	{ "overlay=%s", offsetof(struct opts, overlay), 0 },
	{ "output=%s", offsetof(struct opts, output), 0 },
	OPT("discard", discard),
	OPT("inplace", inplace),
	OPT("views", views),
	OPT("nonempty", nonempty),	/* ptfs's check: libfuse 3 has none */
	OPT("insecure", insecure),
	{ "endpoint=%s", offsetof(struct opts, endpoint), 0 },
	{ "cache=%s", offsetof(struct opts, cache), 0 },
	{ "connections=%u", offsetof(struct opts, conns), 0 },
	{ "dequant=%s", offsetof(struct opts, dequant), 0 },
	{ "shards=%s", offsetof(struct opts, shards), 0 },
	/* seen, and kept for the kernel */
	{ "ro", offsetof(struct opts, ro), 1 },
	FUSE_OPT_KEY("ro", FUSE_OPT_KEY_KEEP),
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

/*
 * ptfs --help: ptfs's synopsis, its commands and its own options, then
 * libfuse's under their own heading (fuse_cmdline_help() would repeat -h
 * and -V and word -d/-f/-s as libfuse does, so those are written here).
 */
static void usage(const char *prog)
{
	printf("usage: %s [options] CHECKPOINT MOUNTPOINT\n"
	       "       %s umount [-q] [-v] [--discard] MOUNTPOINT\n"
	       "       %s status [-j] [-q] PATH\n"
	       "       %s revert [-q] PATH...\n"
	       "Mount a PyTorch checkpoint (torch.save) as a directory: "
	       "tensors are files,\nmetadata are user.* xattrs, storages are "
	       "under .ptfs/.  Edits are staged\non disk and written back at "
	       "unmount; 'ptfs umount' waits and reports.\n\n"
	       "commands ('ptfs COMMAND --help' says more):\n"
	       "    umount MOUNTPOINT      write back, wait, say what was "
	       "written, unmount\n"
	       "                           (-v: each edit; --discard: drop "
	       "them instead)\n"
	       "    status PATH            what is staged in the mount that "
	       "holds PATH\n"
	       "                           (-j: as JSON; -q: exit 1 when "
	       "edits are staged)\n"
	       "    revert PATH...         make key paths what the checkpoint "
	       "holds; keep the\n"
	       "                           other staged edits\n\n"
	       "ptfs options:\n"
	       "    -o timeout=SECONDS     kernel cache time for names and "
	       "attributes (3600)\n"
	       "    -o overlay=DIR         stage edits in DIR (default "
	       ".NAME.ptfs beside NAME)\n"
	       "    -o output=FILE         write back to FILE; leave the "
	       "checkpoint alone\n"
	       "    -o discard             drop edits staged by an earlier "
	       "session\n"
	       "    -o inplace             write back into the checkpoint "
	       "itself: tensor\n"
	       "                           bytes only, no copy (ptfs(1) says "
	       "what readers see)\n"
	       "    -o views               list the KEY.npy and KEY.txt views "
	       "(always there\n"
	       "                           by name) beside each tensor\n"
	       "    -o shards=SIZE         .ptfs/as/ as a sharded folder of "
	       "shards of at most\n"
	       "                           SIZE (5GB = 5*10^9, 2GiB), not one "
	       "model.safetensors\n"
	       "    -o ro                  read-only: no edits\n"
	       "    -o dequant=TYPE        a read-only view with scaled float8 "
	       "weights as\n"
	       "                           TYPE (bf16, float16, float32), "
	       "their scales hidden\n"
	       "    -o nonempty            mount over a directory that is not "
	       "empty, or over\n"
	       "                           another file system's mount point\n"
	       "  a remote CHECKPOINT (http://, https://, s3://; read-only):\n"
	       "    -o insecure            https without checking the "
	       "certificate\n"
	       "    -o endpoint=URL        an S3-compatible store "
	       "(AWS_ENDPOINT_URL)\n"
	       "    -o cache=SIZE          the block cache (256M)\n"
	       "    -o connections=N       parallel range requests (8)\n"
	       "    -f                     stay in the foreground\n"
	       "    -d                     print every request (-o debug; "
	       "implies -f)\n"
	       "    -s                     serve requests on one thread\n"
	       "    -h, --help             this text\n"
	       "    -V, --version          print versions\n\n"
	       "FUSE options (libfuse's):\n"
	       "    -o clone_fd            a /dev/fuse descriptor per thread\n"
	       "    -o max_threads=N       at most N threads serve requests "
	       "(10)\n"
	       "    -o max_idle_threads=N  at most N of them idle (-1: no "
	       "limit)\n", prog, prog, prog, prog);
	fuse_lowlevel_help();
}

/* Daemonized, stderr is /dev/null: failures go to syslog instead. */
static void log_syslog(enum fuse_log_level level, const char *fmt,
		       va_list ap)
{
	vsyslog(level <= FUSE_LOG_ERR ? LOG_ERR : LOG_INFO, fmt, ap);
}

static int serve(struct ptfs *fs, struct fuse_args *args,
		 struct fuse_cmdline_opts *co)
{
	struct fuse_loop_config *cfg;
	struct fuse_session *se;
	int rc = -1;	/* not served: a failure, whatever its number */

	se = fuse_session_new(args, &ptfs_ops, sizeof(ptfs_ops), fs);
	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se))
		goto out_destroy;
	ptfs_mount_log(true);
	if (fuse_session_mount(se, co->mountpoint)) {
		ptfs_mount_log(false);
		ptfs_mount_failed(co->mountpoint);
		goto out_signals;
	}
	ptfs_mount_log(false);
	ptfs_mount_said();
	ptfs_tune_mount(fs, co->mountpoint);
	fuse_daemonize(co->foreground);
	if (!co->foreground) {
		openlog("ptfs", LOG_PID, LOG_DAEMON);
		fuse_set_log_func(log_syslog);
	}
	ptfs_inval_start(fs, se, !co->singlethread);
	if (co->singlethread) {
		rc = fuse_session_loop(se);
	} else {
		cfg = fuse_loop_cfg_create();
		if (!cfg)
			goto out_unmount;
		fuse_loop_cfg_set_clone_fd(cfg, co->clone_fd);
		fuse_loop_cfg_set_max_threads(cfg, co->max_threads);
		/* UINT_MAX: not given (libfuse's default keeps every thread) */
		if (co->max_idle_threads != UINT_MAX)
			fuse_loop_cfg_set_idle_threads(cfg,
						       co->max_idle_threads);
		rc = fuse_session_loop_mt(se, cfg);
		fuse_loop_cfg_destroy(cfg);
	}
out_unmount:
	ptfs_inval_stop(fs);
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);	/* runs op_destroy: the write-back */
	/*
	 * libfuse's loop returns the signal number when SIGTERM, SIGINT or
	 * SIGHUP ended it: a clean way to stop (a supervisor's), so the
	 * status is the write-back's.  (SIGHUP is 1: a failure before the
	 * loop is -1, never taken for it.)
	 */
	if (rc == SIGTERM || rc == SIGINT || rc == SIGHUP)
		rc = 0;
	return rc || fs->commit_failed ? 1 : 0;
}

/*
 * Every staged storage keeps its data file open (core/ovl/ovl_store.c,
 * docs/design.md): take the hard limit on open files, not the soft one
 * (1024 by default, which 1,100 edited tensors exceed).  ptfs never uses
 * select(), so high descriptor numbers are fine.
 */
static void raise_nofile(void)
{
	struct rlimit lim;

	if (getrlimit(RLIMIT_NOFILE, &lim) || lim.rlim_cur == lim.rlim_max)
		return;
	lim.rlim_cur = lim.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &lim) && lim.rlim_max == RLIM_INFINITY) {
		lim.rlim_cur = 1u << 20;	/* the kernel's nr_open default */
		(void)setrlimit(RLIMIT_NOFILE, &lim);
	}
}

/*
 * Writable only if the checkpoint and its directory are (write-back
 * renames a new file into the directory); else say why.
 */
static const char *not_writable(const char *path)
{
	char *copy = strdup(path), *slash;
	const char *why = NULL;

	/* (a rank set's pattern, DIR/PREFIX_world_size_N_rank_*.pt, names
	   no file: its folder says) */
	if (access(path, W_OK) && errno != ENOENT)
		why = "the file is not writable";
	if (copy && !why) {
		slash = strrchr(copy, '/');
		if (slash)
			*(slash == copy ? slash + 1 : slash) = 0;
		if (access(slash ? copy : ".", W_OK))
			why = "its directory is not writable";
	}
	free(copy);
	return why;
}

/* Is @path the directory @mnt or inside it?  (Both absolute.) */
static bool inside(const char *path, const char *mnt)
{
	size_t n = strlen(mnt);

	if (!strcmp(mnt, "/"))
		return true;
	return !strncmp(path, mnt, n) && (path[n] == '/' || !path[n]);
}

/*
 * A mount point over the checkpoint, its overlay or its output deadlocks
 * the first edit (the daemon would reach its own files through itself):
 * refuse it with one line.  0 or 2.
 */
static int check_layout(const char *ckpt, const char *overlay,
			const char *output, const char *mountpoint)
{
	char *mnt = realpath(mountpoint, NULL), *ovl = NULL;
	const char *what = NULL;
	int rc = 0;

	if (!mnt)
		return 0;	/* libfuse says what is wrong with it */
	if (!overlay)
		ovl = io_beside(ckpt, ".ptfs");
	if (inside(ckpt, mnt))
		what = "the checkpoint";
	else if (inside(overlay ? overlay : ovl ? ovl : "", mnt))
		what = "its overlay";
	else if (output && inside(output, mnt))
		what = "the output file";
	if (what) {
		fprintf(stderr, "ptfs: %s: the mount point holds %s (%s); the "
			"mount would hide it from ptfs itself: mount somewhere "
			"else\n", mountpoint, what,
			!strcmp(what, "the checkpoint") ? ckpt :
			!strcmp(what, "the output file") ? output :
			overlay ? overlay : ovl);
		rc = 2;
	}
	free(ovl);
	free(mnt);
	return rc;
}

/* Make -o overlay= and -o output= absolute now (issue: they meant /). */
static int absolutize(char **opt, const char *what)
{
	char *abs;

	if (!*opt)
		return 0;
	if (!**opt) {
		fprintf(stderr, "ptfs: -o %s= needs a path\n", what);
		return 2;
	}
	abs = util_abs_path(*opt);
	if (!abs) {
		fprintf(stderr, "ptfs: -o %s=%s: %s\n", what, *opt,
			strerror(errno));
		return 2;
	}
	free(*opt);
	*opt = abs;
	return 0;
}

/* -o insecure, endpoint=, cache=, connections=: 0, or 2 said. */
static int remote_conf(const struct opts *o)
{
	struct rmt_conf conf = { .insecure = o->insecure,
				 .endpoint = o->endpoint, .conns = o->conns };
	struct diag d;

	if (o->cache && (!util_parse_size(o->cache, &conf.cache) ||
			 !conf.cache)) {
		fprintf(stderr, "ptfs: -o cache=%s: not a size (256M, 1G)\n",
			o->cache);
		return 2;
	}
	diag_init(&d, NULL);
	if (rmt_configure(&conf, &d)) {
		fprintf(stderr, "ptfs: -o: %s\n", d.msg);
		return 2;
	}
	return 0;
}

/* The model's open: rows save a node per plain tensor, but -o dequant
 * changes tensors, which rows never are (ckpt.h, "Rows"). */
static unsigned open_flags(const struct opts *o)
{
	return o->dequant ? PTFS_OPEN & ~CKPT_OPEN_ROWS : PTFS_OPEN;
}

/*
 * -o dequant=TYPE: the model's scaled float8 weights made TYPE values
 * when read (*@made, freed before the model), their scales out of the
 * tree, and the mount read-only: it is a view, with nothing to write
 * back.  0, or 1 with one line said.
 */
static int dequant_view(struct ptfs *fs, struct opts *o,
			struct cvt_made **made)
{
	struct cvt_scale_opt so = { .to = cvt_dequant_dtype(o->dequant) };
	struct cvt_scale_stats st = { 0 };
	char line[512];
	struct diag d;

	if (!so.to) {
		fprintf(stderr, "ptfs: -o dequant=%s: not bf16, float16 (fp16) "
			"or float32\n", o->dequant);
		return 1;
	}
	diag_init(&d, o->ckpt);
	if (cvt_dequant(fs->c, &so, made, &st, &d)) {
		fprintf(stderr, "ptfs: %s\n", diag_line(&d, line, sizeof(line)));
		return 1;
	}
	if (!st.weights) {
		fprintf(stderr, "ptfs: %s: -o dequant: no scaled float8 weight "
			"(X.weight beside X.weight_scale_inv or "
			"X.weight_scale)\n", o->ckpt);
		return 1;
	}
	o->ro = 1;
	return 0;
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct opts o = { .timeout = 3600 };
	struct fuse_cmdline_opts co = { 0 };
	struct ptfs fs = { 0 };
	struct cvt_made *made = NULL;
	struct diag d;
	char line[512], *dropped = NULL;
	int rc = 1;

	util_heap_setup();
	src_hide_urls(argc, argv);	/* no password in a line or in ps */
	/* ptfs umount|status|revert ...: a client of a running mount */
	rc = ptfs_cli_main(argc, argv);
	if (rc >= 0)
		return rc;
	raise_nofile();
	rc = 2;		/* usage errors and unreadable input */
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
	/* name it in mount(8) output; the kernel checks permissions */
	if (fuse_opt_add_arg(&args, "-osubtype=ptfs,default_permissions") ||
	    fuse_parse_cmdline(&args, &co))
		goto out_args;
	if (!o.ckpt || !co.mountpoint) {
		fprintf(stderr, "usage: %s [options] CHECKPOINT MOUNTPOINT "
			"(--help for more)\n", argv[0]);
		goto out_args;
	}
	if (absolutize(&o.overlay, "overlay") || absolutize(&o.output, "output"))
		goto out_args;
	if (remote_conf(&o))
		goto out_args;
	if (o.inplace && o.output) {
		fprintf(stderr, "ptfs: -o inplace and -o output= exclude each "
			"other: in place writes the checkpoint itself\n");
		goto out_args;
	}
	if (o.shards && !util_parse_shard_size(o.shards, &fs.as.max_shard)) {
		fprintf(stderr, "ptfs: -o shards=%s: not a size such as 5GB, "
			"500MB or 2GiB\n", o.shards);
		goto out_args;
	}
	diag_init(&d, o.ckpt);
	/* rows: what is only listed costs no node (ckpt.h, "Rows"); a long
	   list of python scalars is one value file (docs/editing.md) */
	if (ckpt_open_with(o.ckpt, open_flags(&o), &fs.c, &d)) {
		fprintf(stderr, "ptfs: %s\n", diag_line(&d, line, sizeof(line)));
		goto out_args;
	}
	if (ckpt_unmountable(fs.c, line, sizeof(line))) {
		/* a model without some of its tensors would be used as it is */
		fprintf(stderr, "ptfs: %s: %s: not mounted\n", o.ckpt, line);
		goto out_close;
	}
	if (o.dequant && dequant_view(&fs, &o, &made))
		goto out_close;
	{
		char *real = realpath(o.ckpt, NULL);

		if (real && check_layout(real, o.overlay, o.output,
					 co.mountpoint)) {
			free(real);
			goto out_close;
		}
		free(real);
	}
	rc = 1;		/* from here on: problems */
	/* before the overlay is opened: a refused mount changes nothing */
	if (ptfs_mountpoint_check(co.mountpoint, o.nonempty))
		goto out_close;
	{
		/* formats nothing could be written back as, output= or not
		   (and a remote checkpoint) */
		const char *never = ckpt_readonly_why(fs.c);
		/* a legacy (torch < 1.6) file is written back as a zip */
		const char *why = o.ro || never ? NULL : not_writable(o.ckpt);
		struct ovl_opts oo = { .dir = o.overlay, .discard = o.discard,
				       .inplace = o.inplace };
		const struct ckpt_fmt *fmt = ckpt_fmt(fs.c);
		uint32_t nf = ckpt_nfindings(fs.c);

		if (ckpt_can(fs.c, CKPT_CAP_MANY) && !never && !o.ro &&
		    (o.inplace || o.output)) {
			fprintf(stderr, "ptfs: %s: -o %s refused: %s is "
				"written back into itself, file by file, with "
				"its %s as the commit point (ptrepack writes it "
				"into one file)\n", o.ckpt,
				o.inplace ? "inplace" : "output", fmt->one,
				fmt->commit);
			goto out_close;
		}
		if (o.inplace && !o.ro && fmt->rewrite_as) {
			fprintf(stderr, "ptfs: %s: -o inplace refused: %s is "
				"written back as a new %s, never patched in "
				"place; mount without -o inplace\n", o.ckpt,
				fmt->one, fmt->rewrite_as);
			goto out_close;
		}
		if (!o.ro && never)
			fprintf(stderr, "ptfs: %s: %s mount read-only\n",
				o.ckpt, never);
		if (nf && fmt->findings_are)
			fprintf(stderr, "ptfs: %s: %s %u time%s (ptverify "
				"lists them)\n", o.ckpt, fmt->findings_are,
				nf, nf == 1 ? "" : "s");
		else if (why && !o.output)
			fprintf(stderr, "ptfs: %s: %s: mounted read-only\n",
				o.ckpt, why);
		fs.readonly = o.ro || never || (why && !o.output);
		oo.readonly = fs.readonly;
		/* what -o discard drops, counted before it is gone */
		dropped = o.discard && !fs.readonly ?
			  ptfs_discard_look(o.ckpt, &oo) : NULL;
		if (ovl_open(fs.c, o.ckpt, &oo, &fs.ovl, &d)) {
			fprintf(stderr, "ptfs: %s\n",
				diag_line(&d, line, sizeof(line)));
			goto out_close;
		}
		if (ovl_note(fs.ovl))
			fprintf(stderr, "ptfs: %s\n", ovl_note(fs.ovl));
		else if (dropped)
			fprintf(stderr, "ptfs: %s\n", dropped);
		else
			ptfs_say_staged(&fs);
		if (ovl_finished(fs.ovl)) {
			/* the checkpoint holds the edits now: mount it afresh */
			ovl_close(fs.ovl);
			cvt_made_free(made);
			made = NULL;
			ckpt_close(fs.c);
			fs.ovl = NULL;
			diag_init(&d, o.ckpt);
			if (ckpt_open_with(o.ckpt, open_flags(&o), &fs.c, &d) ||
			    (o.dequant && dequant_view(&fs, &o, &made)) ||
			    ovl_open(fs.c, o.ckpt, &oo, &fs.ovl, &d)) {
				fprintf(stderr, "ptfs: %s\n",
					diag_line(&d, line, sizeof(line)));
				goto out_close;
			}
		}
		fs.output = o.output;
		if (fs.readonly && fuse_opt_add_arg(&args, "-oro"))
			goto out_close;
	}
	pthread_rwlock_init(&fs.lock, NULL);
	pthread_mutex_init(&fs.ctl_lock, NULL);
	fs.list_views = o.views;
	if (fstat(fs.c->fd, &fs.st) || ptfs_ino_init(&fs)) {
		perror("ptfs");
		goto out_close;
	}
	fs.uid = fs.st.st_uid;	/* the checkpoint's owner (ptfs_ino.c) */
	fs.gid = fs.st.st_gid;
	fs.timeout = o.timeout;
	{
		char fsname[4200];

		/* shows the checkpoint in mount(8) and /proc/mounts, and
		   tells ptfs umount where it is when the daemon is gone:
		   absolute, so that it names the file from anywhere */
		snprintf(fsname, sizeof(fsname), "-ofsname=%s", ovl_path(fs.ovl));
		if (!strchr(ovl_path(fs.ovl), ','))
			fuse_opt_add_arg(&args, fsname);
	}
	rc = serve(&fs, &args, &co);
out_close:
	free(dropped);
	ptfs_ctl_release_all(&fs);
	ptfs_as_release_all(&fs);
	ptfs_ino_release(&fs);
	ovl_close(fs.ovl);
	cvt_made_free(made);	/* before the model it reads */
	ckpt_close(fs.c);
out_args:
	free(co.mountpoint);
	free(o.ckpt);
	free(o.overlay);
	free(o.output);
	free(o.endpoint);
	free(o.cache);
	free(o.dequant);
	free(o.shards);
	fuse_opt_free_args(&args);
	return rc;
}
