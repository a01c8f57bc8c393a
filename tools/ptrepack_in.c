/*
 * ptrepack_in.c - ptrepack's look at its input before writing (see
 * ptrepack_in.h): key paths into nodes, the CRC-32 check, the input's
 * whole size.
 *
 * Why the CRC check refuses: a record is copied with the CRC the archive
 * keeps when it stays as it was, but --repickle renumbers, --clone cuts,
 * --dtype converts and safetensors or DCP output has no CRC of its own:
 * each of those would write the damaged bytes under a fresh, correct CRC,
 * and no later check could tell.  So nothing is written (exit 2, the
 * record and offset named); ptverify lists every damaged record, and
 * --no-crc skips the check for whoever means to copy the damage.
 */
#include "ptrepack_in.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_io.h"
#include "diag/diag.h"
#include "source/ident.h"
#include "source/source.h"
#include "zip/ptz.h"

int in_roots_find(struct ckpt *c, char **paths, int n, struct in_roots *r,
		  struct ckpt_write_opts *o, struct diag *d)
{
	memset(r, 0, sizeof(*r));
	if (n <= 0)
		return 0;
	r->nodes = calloc((size_t)n, sizeof(*r->nodes));
	r->keys = calloc((size_t)n, sizeof(*r->keys));
	if (!r->nodes || !r->keys)
		return diag_nomem(d);
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < i; j++)
			if (!strcmp(paths[i], paths[j]))
				return diag_set(d, -EINVAL, DIAG_NO_OFFSET,
						"%s: key path given twice",
						paths[i]);
		r->nodes[i] = ckpt_node_by_path(c, paths[i]);
		if (!r->nodes[i])
			return diag_set(d, -ENOENT, DIAG_NO_OFFSET, "%s: no "
					"such key path (ptls %s lists the "
					"paths)", paths[i], c->path);
		r->keys[i] = paths[i];
	}
	r->n = (uint32_t)n;
	o->roots = r->nodes;
	o->root_keys = r->keys;
	o->nroots = r->n;
	return 0;
}

void in_roots_release(struct in_roots *r)
{
	free(r->nodes);
	free(r->keys);
	memset(r, 0, sizeof(*r));
}

struct crc_seen {
	struct diag *d;
	int rc;
};

/* ckpt_verify()'s problems of kind "crc": a DCP chunk whose CRC-32 is
 * not its record's, or that cannot be read (the zip records are
 * check_records()'s; the zip problems ptverify also reports of CRCs of 0
 * and records too big to check come from ptz_verify, not called here). */
static void crc_problem(void *arg, const char *check, const char *path,
			uint64_t off, const char *msg)
{
	struct crc_seen *s = arg;

	if (s->rc || strcmp(check, "crc"))
		return;
	diag_init(s->d, path);
	s->rc = diag_corrupt(s->d, off, "%s: damaged, nothing written "
			     "(ptverify lists every damaged record; "
			     "--no-crc copies it as it is)", msg);
}

/* The zip records of @c (a file, or one shard), as ptverify reads them. */
static int check_records(struct ckpt *c, struct cli_progress *p,
			 struct diag *d)
{
	for (uint32_t i = 0; i < c->zip.nentries; i++) {
		struct ptz_entry *e = &c->zip.entries[i];
		uint32_t crc;
		int rc;

		diag_init(d, c->path);
		rc = ptz_entry_crc32(&c->zip, e, &crc, cli_progress_step, p,
				     d);
		if (rc == -EFBIG)
			continue;	/* a huge deflated record: unchecked */
		if (rc)
			return rc;
		/* CRC 0: saved without CRCs (set_crc32_options(False)) */
		if (e->crc32 && crc != e->crc32)
			return diag_corrupt(d, e->header_off, "record '%s': "
					    "CRC-32 of the data is %08x, the "
					    "archive says %08x: damaged, "
					    "nothing written (ptverify lists "
					    "every damaged record; --no-crc "
					    "copies it as it is)", e->name,
					    crc, e->crc32);
	}
	return 0;
}

int in_check_crc(struct ckpt *c, bool progress, struct diag *d)
{
	struct crc_seen s = { .d = d };
	struct cli_progress pr = { 0 };
	uint64_t checked = 0;
	struct ckpt_folder f;
	int rc;

	/* a terminal hears of a long check, as of the write after it */
	cli_progress_start(&pr, "checking CRCs", in_size(c));
	pr.on = pr.on && progress;
	rc = check_records(c, &pr, d);
	for (uint32_t k = 0; !rc && ckpt_folder(c, &f) &&
	     k < ckpt_nparts(c); k++) {
		struct ckpt_part p;

		ckpt_part_at(c, k, &p);
		if (p.c && p.c != c)
			rc = check_records(p.c, &pr, d);
	}
	cli_progress_end(&pr);
	if (rc)
		return rc;
	/* the format's own CRCs (a DCP item's chunks) */
	ckpt_verify(c, false, &checked, crc_problem, &s);
	if (!s.rc)
		diag_init(d, c->path);
	return s.rc;
}

uint64_t in_size(const struct ckpt *c)
{
	struct ckpt_folder f;
	uint64_t n = c->file_size;

	if (!ckpt_folder(c, &f))
		return n;
	for (uint32_t k = 0; k < ckpt_nparts(c); k++) {
		struct ckpt_part p;

		ckpt_part_at(c, k, &p);
		if (p.c && p.c != c)
			n += p.c->file_size;
	}
	return n;
}

/* The thread: the input opened again, its own model, checked. */
static void *crc_thread(void *arg)
{
	struct in_crc *k = arg;

	diag_init(&k->d, k->path);
	k->rc = cli_open(k->path, &k->c, &k->d);
	if (!k->rc)
		k->rc = in_check_crc(k->c, false, &k->d);
	return NULL;
}

bool in_crc_worth(const struct ckpt *c)
{
	const char *env = getenv("PT_CRC_OVERLAP_BYTES");	/* tests */
	uint64_t n = c->ntensors ? c->ntensors : 1, bytes = 0;
	uint64_t min = env ? strtoull(env, NULL, 10) : IN_CRC_PER_TENSOR;

	/* the storages, not in_size(): a DCP directory's is its .metadata */
	for (uint32_t k = 0; k < c->nstorages; k++)
		bytes += c->storages[k]->nbytes;
	return !c->remote && bytes / n >= min;
}

int in_crc_start(struct in_crc *k, const struct ckpt *first,
		 const char *path)
{
	memset(k, 0, sizeof(*k));
	k->path = path;
	k->first = first;
	if (pthread_create(&k->th, NULL, crc_thread, k))
		return -EAGAIN;
	k->started = true;
	return 0;
}

/* Are the files of @b (the second opening) those of @a, unchanged?  Each
 * member of @b against @a's of the same name; a single file, its fd. */
static int same_files(const struct ckpt *a, const struct ckpt *b,
		      struct diag *d)
{
	struct src_ident id;
	struct stat st;
	int rc = 0;

	if (!a->src || !b->src) {
		if (fstat(b->fd, &st))
			return diag_errno(d, -errno, "cannot stat: %s",
					  strerror(errno));
		src_ident_of(&st, &id);
		return src_ident_check(a->fd, &id, d);
	}
	for (uint32_t i = 0; !rc && i < src_count(b->src); i++) {
		const struct src_member *m = src_at(b->src, i);

		for (uint32_t j = 0; j < src_count(a->src); j++) {
			const struct src_member *n = src_at(a->src, j);

			if (!strcmp(m->name, n->name)) {
				rc = src_ident_check(n->fd, &m->id, d);
				break;
			}
		}
	}
	return rc;
}

int in_crc_join(struct in_crc *k, struct diag *d)
{
	if (k->started) {
		pthread_join(k->th, NULL);
		k->started = false;
		k->joined = true;
		/* the CRCs checked must be those of the files read */
		if (!k->rc && k->first) {
			diag_init(&k->d, k->path);
			k->rc = same_files(k->first, k->c, &k->d);
		}
	}
	if (k->joined && k->rc)
		*d = k->d;	/* its path is k->c's, open until release */
	return k->joined ? k->rc : 0;
}

int in_crc_before(void *arg, const struct stat *st, struct diag *d)
{
	(void)st;
	return in_crc_join(arg, d);
}

void in_crc_release(struct in_crc *k)
{
	struct diag quiet;

	in_crc_join(k, &quiet);
	ckpt_close(k->c);
	k->c = NULL;
}
