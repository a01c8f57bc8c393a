/*
 * ckpt_format.c - the questions the layers above ask a checkpoint's
 * format descriptor (ckpt_format.h).  Each answer is the descriptor's
 * hook, or the default for a format that has none of that kind.  The
 * table of formats, and the door every checkpoint is opened by, are one
 * layer up (core/fmt/formats.c), so that a format in a folder of its own
 * is reached only through its descriptor.
 */
#include "ckpt_int.h"
#include "ckpt_format.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct ckpt_fmt *ckpt_fmt(const struct ckpt *c)
{
	return c->fmt;	/* ckpt_alloc() starts it as the zip's */
}

bool ckpt_folder(const struct ckpt *c, struct ckpt_folder *f)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	return m->folder && m->folder(c, f);
}

uint32_t ckpt_nparts(const struct ckpt *c)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	return m->nparts ? m->nparts(c) : 1;
}

void ckpt_part_at(const struct ckpt *c, uint32_t k, struct ckpt_part *p)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	if (m->part) {
		m->part(c, k, p);
		return;
	}
	/* the checkpoint itself: its file holds it all */
	*p = (struct ckpt_part){ NULL, (struct ckpt *)(uintptr_t)c,
				 c->root && c->root->dir ?
				 c->root->dir->nkids : 0 };
}

uint32_t ckpt_nfindings(const struct ckpt *c)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	return m->nfindings ? m->nfindings(c) : 0;
}

const char *ckpt_finding(const struct ckpt *c, uint32_t i, uint64_t *off,
			 char *buf, size_t size)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	*off = DIAG_NO_OFFSET;
	if (!m->finding || !size)
		return NULL;
	return m->finding(c, i, off, buf, size);
}

void ckpt_folder_entry(const struct ckpt *c, uint32_t i, const char **name,
		       uint64_t *size)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	*name = NULL;
	*size = 0;
	if (m->folder_entry)
		m->folder_entry(c, i, name, size);
}

const char *ckpt_unmountable(const struct ckpt *c, char *buf, size_t size)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	return m->unmountable ? m->unmountable(c, buf, size) : NULL;
}

int ckpt_records(const struct ckpt *c, ckpt_record_fn fn, void *arg)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	return m->records ? m->records(c, fn, arg) : 0;
}

void ckpt_tensor_attrs(const struct ckpt *c, const struct ckpt_tensor *t,
		       ckpt_attr_fn fn, void *arg)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	if (m->tensor_attrs)
		m->tensor_attrs(c, t, fn, arg);
}

bool ckpt_coded(const struct ckpt *c, const struct ckpt_tensor *t,
		struct ckpt_coded *k)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	return m->coded && t && m->coded(c, t, k) && k->decode;
}

#define CODED_BLOCKS	1024u	/* decoded at a time */

int ckpt_coded_values(const struct ckpt_coded *k, ckpt_bytes_fn read,
		      void *arg, float *dst, uint64_t first, uint64_t n,
		      struct diag *d)
{
	uint64_t b = first / k->block, end = first + n;
	/* buffers for the blocks asked for, up to CODED_BLOCKS: a mount's
	   read of a few values must not cost a megabyte each time */
	uint64_t span = (end + k->block - 1) / k->block - b;
	size_t most = span < CODED_BLOCKS ? (span ? span : 1) : CODED_BLOCKS;
	unsigned char *raw = malloc(most * k->bytes);
	float *val = malloc(most * k->block * sizeof(*val));
	int rc = raw && val ? 0 : diag_nomem(d);

	while (!rc && first < end) {
		uint64_t nb = (end - b * k->block + k->block - 1) / k->block;
		uint64_t skip = first - b * k->block, take;
		long long got;

		nb = nb < most ? nb : most;
		got = read(arg, raw, nb * k->bytes, b * k->bytes);
		if (got < 0) {
			rc = (int)got;
			break;
		}
		if ((uint64_t)got != nb * k->bytes) {
			rc = diag_errno(d, -EIO, "%s block %" PRIu64 ": short "
					"read", k->name, b);
			break;
		}
		k->decode(raw, val, nb);
		take = nb * k->block - skip;
		take = take < end - first ? take : end - first;
		memcpy(dst, val + skip, take * sizeof(*val));
		dst += take;
		first += take;
		b += nb;
	}
	free(raw);
	free(val);
	return rc;
}

struct tensor_rd {
	struct ckpt *c;
	const struct ckpt_tensor *t;
	struct diag *d;
};

static long long tensor_bytes(void *arg, void *buf, uint64_t len,
			      uint64_t pos)
{
	struct tensor_rd *r = arg;

	return ckpt_tensor_read(r->c, r->t, buf, len, pos, r->d);
}

int ckpt_tensor_coded_values(struct ckpt *c, const struct ckpt_tensor *t,
			     const struct ckpt_coded *k, float *dst,
			     uint64_t first, uint64_t n, struct diag *d)
{
	struct tensor_rd r = { c, t, d };

	return ckpt_coded_values(k, tensor_bytes, &r, dst, first, n, d);
}

uint32_t ckpt_verify(struct ckpt *c, bool no_crc, uint64_t *checked,
		     ckpt_problem_fn fn, void *arg)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	return m->verify ? m->verify(c, no_crc, checked, fn, arg) : 0;
}

int ckpt_write_back(struct ckpt *c, const char *output, const char *path,
		    const struct ckpt_write_opts *o, const struct stat *like,
		    struct diag *d)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	if (!m->save)
		return diag_unsupported(d, DIAG_NO_OFFSET, "%s are read-only: "
					"nothing writes them back", m->files);
	if (output && (m->caps & CKPT_CAP_MANY))
		return diag_errno(d, -EINVAL, "%s is written back into itself, "
				  "not to another file (ptrepack writes one)",
				  m->one);
	return m->save(c, output ? output : path, o, like, d);
}

/* ---- storage reads ---- */

/* The tensor over made storage @s (ckpt_model.h), or NULL. */
static const struct ckpt_tensor *made(const struct ckpt *c,
				      const struct ckpt_storage *s)
{
	return c->made && s ? c->made->tensor(c->made->arg, s) : NULL;
}

bool ckpt_storage_pieced(const struct ckpt *c, const struct ckpt_storage *s)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	return made(c, s) || (m->pieced && m->pieced(c, s));
}

const struct ckpt_tensor *ckpt_pieced_tensor(const struct ckpt *c,
					     const struct ckpt_storage *s)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);
	const struct ckpt_tensor *t = made(c, s);

	return t ? t : m->pieced_tensor ? m->pieced_tensor(c, s) : NULL;
}

int ckpt_pieced_where(struct ckpt *c, const struct ckpt_tensor *t,
		      uint64_t pos, int *fd, uint64_t *off, uint64_t *len,
		      struct diag *d)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	if (made(c, t->storage)) {	/* they lie nowhere: read them */
		*fd = -1;
		*off = 0;
		*len = 0;
		return 0;
	}
	if (!m->pieced_where)
		return diag_set(d, -EINVAL, DIAG_NO_OFFSET, "not a tensor in "
				"pieces");
	return m->pieced_where(c, t, pos, fd, off, len, d);
}

long long ckpt_pieced_read(struct ckpt *c, const struct ckpt_tensor *t,
			   void *buf, uint64_t len, uint64_t pos,
			   struct diag *d)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	if (made(c, t->storage))
		return c->made->read(c->made->arg, t, buf, len, pos, d);
	if (!m->pieced_read)
		return diag_set(d, -EINVAL, DIAG_NO_OFFSET, "not a tensor in "
				"pieces");
	return m->pieced_read(c, t, buf, len, pos, d);
}

int ckpt_whole_parts(const struct ckpt *c, struct diag *d)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	return m->whole ? m->whole(c, d) : 0;
}

uint32_t ckpt_trailing(const struct ckpt *c, uint64_t end, const char *what,
		       const char *why, ckpt_problem_fn fn, void *arg)
{
	char msg[160];

	if (c->file_size <= end)
		return 0;
	snprintf(msg, sizeof(msg), "%" PRIu64 " bytes after the last %s "
		 "belong to nothing%s", c->file_size - end, what, why);
	fn(arg, "trailing", c->path, end, msg);
	return 1;
}

/* ---- the edit rules ---- */

#define RULE(c, hook) (ckpt_fmt(c)->rules ? ckpt_fmt(c)->rules->hook : NULL)

int ckpt_rule_shape(const struct ckpt *c, const char *what, struct diag *d)
{
	return RULE(c, shape) ? RULE(c, shape)(c, what, d) : 0;
}

int ckpt_rule_dir(const struct ckpt *c, const struct ckpt_node *dir,
		  struct diag *d)
{
	return RULE(c, dir) ? RULE(c, dir)(c, dir, d) : 0;
}

int ckpt_rule_add(const struct ckpt *c, const char *name, struct diag *d)
{
	return RULE(c, add) ? RULE(c, add)(c, name, d) : 0;
}

int ckpt_rule_data(const struct ckpt *c, const struct ckpt_storage *s,
		   struct diag *d)
{
	return RULE(c, data) ? RULE(c, data)(c, s, d) : 0;
}

int ckpt_rule_mkdir(const struct ckpt *c, const char *name, struct diag *d)
{
	return RULE(c, mkdir) ? RULE(c, mkdir)(c, name, d) : 0;
}

int ckpt_rule_key(const struct ckpt *c, const char *key, size_t len,
		  struct diag *d)
{
	return RULE(c, key) ? RULE(c, key)(c, key, len, d) : 0;
}

int ckpt_rule_dtype(const struct ckpt *c, const struct ckpt_dtype *dt,
		    struct diag *d)
{
	return RULE(c, dtype) ? RULE(c, dtype)(c, dt, d) : 0;
}

int ckpt_rule_tensor(const struct ckpt *c, const struct ckpt_tensor *t,
		     const char *name, struct diag *d)
{
	return RULE(c, tensor) ? RULE(c, tensor)(c, t, name, d) : 0;
}

int ckpt_rule_xattr(const struct ckpt *c, const char *name, struct diag *d)
{
	return RULE(c, xattr) ? RULE(c, xattr)(c, name, d) : 0;
}

int ckpt_rule_npy(const struct ckpt *c, const char *what, bool reshape,
		  struct diag *d)
{
	if (RULE(c, npy))
		return RULE(c, npy)(c, what, reshape, d);
	return reshape ? 0 : ckpt_rule_shape(c, what, d);
}
