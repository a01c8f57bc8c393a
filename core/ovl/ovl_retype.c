/*
 * ovl_retype.c - setfattr user.dtype on a tensor that has values: its
 * storage is converted as torch's .to() converts (core/cvt, the code
 * ptrepack --dtype runs), and with it every tensor viewing that storage,
 * so tied weights stay tied and views stay views (docs/editing.md,
 * "Converting a tensor's dtype through the mount").
 *
 * The overlay's usual order, data first, then the journal, then memory:
 *   - a JR_DATA record with a dtype names storage i's converted copies
 *     "<jid>.<i>.<dtype>" before the first one exists (the manifest);
 *   - the converted bytes stream into "<jid>.<i>.<to>.tmp", which is
 *     fsync'd and renamed to "<jid>.<i>.<to>" (the directory fsync'd).
 *     That name is never the copy the storage lives in now: that is the
 *     checkpoint's record, the plain "<jid>.<i>", or the copy of the
 *     dtype it has, and @to differs from it;
 *   - one JR_RETYPE record (i, from, to) makes that copy the storage's
 *     bytes (ovl_data_name() names it from then on); then memory.
 * A crash before the record leaves the storage as it was, the copy
 * unused (it goes with the overlay); after it, replay re-types the
 * storage over the copy that is there.  Earlier copies of a storage stay
 * until the overlay is removed: replaying the records before a later
 * conversion opens them.
 */
#include "ovl_int.h"
#include "cvt/cvt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TELL_NAMES	4	/* other names a cast lists by name */

/* The dtype @value names ("bfloat16\n" from echo is fine), or NULL;
 * its text into @buf (32 bytes) for messages. */
static const struct ckpt_dtype *dtype_of(const char *value, size_t len,
					 char *buf)
{
	snprintf(buf, 32, "%.*s", (int)(len < 31 ? len : 31), value);
	buf[strcspn(buf, "\n ")] = 0;
	return ckpt_dtype_by_name(buf);
}

/* Is a tensor viewing @s being rewritten (its file or a view)? */
static const struct ckpt_node *busy(const struct ckpt *c,
				    const struct ckpt_storage *s)
{
	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct ckpt_node *x = c->nodes[i];

		if (x->kind == CKPT_N_TENSOR && x->tensor &&
		    x->tensor->storage == s && (x->ed->stage || x->ed->vstage))
			return x;
	}
	return NULL;
}

/* Name storage @s's converted copies in the journal, once. */
static int name_copies(struct ovl *v, const struct ckpt_storage *s,
		       const struct ckpt_dtype *to, struct diag *d)
{
	struct jrec r = { .op = JR_DATA };
	char idx[16];
	int rc;

	if (ovl_named_cvt(v, s->index))
		return 0;
	snprintf(idx, sizeof(idx), "%u", s->index);
	jr_field(&r, idx);
	jr_field(&r, to->name);
	rc = jr_append(v, &r, d);
	if (!rc && ovl_name_mark_cvt(v, s->index))
		rc = diag_nomem(d);
	return rc;
}

/* Write @s's bytes converted @from -> @to as its copy of @to, whole and
 * durable; the fd in *@out. */
static int write_copy(struct ovl *v, struct ckpt_storage *s,
		      const struct ckpt_dtype *from,
		      const struct ckpt_dtype *to, int *out, struct diag *d)
{
	char tmp[64], name[64];
	int fd, rc = ovl_ensure_dir(v, d);

	if (!rc)
		rc = name_copies(v, s, to, d);
	if (rc)
		return rc;
	ovl_data_name_as(v, s->index, to, ".tmp", tmp, sizeof(tmp));
	ovl_data_name_as(v, s->index, to, "", name, sizeof(name));
	fd = openat(v->dfd, tmp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
	if (fd < 0)
		return ovl_sys_err(v, d, -errno, tmp);
	rc = cvt_storage_write(v->c, s, from, to, CVT_TORCH2, fd, 0, d);
	if (!rc && (fsync(fd) || renameat(v->dfd, tmp, v->dfd, name) ||
		    fsync(v->dfd)))
		rc = ovl_sys_err(v, d, -errno, "cannot stage the converted "
				 "storage");
	if (rc) {
		close(fd);
		(void)unlinkat(v->dfd, tmp, 0);
		return rc;
	}
	*out = fd;
	return 0;
}

/* Memory: @s (and its tensors) of dtype @to over copy @fd. */
static void install(struct ovl *v, struct ckpt_storage *s,
		    const struct ckpt_dtype *from, const struct ckpt_dtype *to,
		    int fd)
{
	if (ovl_copied(v, s))
		close(s->fd);
	cvt_storage_retype(v->c, s, from, to, fd, 0);
}

/* Tell the other names over @s that the cast of @n changed them too. */
static void tell_others(struct ovl *v, const struct ckpt_node *n,
			const struct ckpt_storage *s,
			const struct ckpt_dtype *from,
			const struct ckpt_dtype *to)
{
	char *list = ovl_names_over(v, s, n, TELL_NAMES);
	char *me = list ? ckpt_node_path(n) : NULL;

	if (me)
		ovl_tell(v, "%s: converted from %s to %s, and with it %s (they "
			 "view the same storage '%s', which stays shared)", me,
			 from->name, to->name, list, s->key);
	free(me);
	free(list);
}

int ovl_retype(struct ovl *v, struct ckpt_node *n, const char *value,
	       size_t len, struct diag *d)
{
	struct ckpt_tensor *t = n->tensor;
	struct ckpt_storage *s = t->storage;
	const struct ckpt_dtype *to, *from;
	const struct ckpt_node *x;
	const char *why = NULL;
	char want[32], idx[16];
	struct jrec r = { .op = JR_RETYPE };
	int fd = -1, rc;

	to = dtype_of(value, len, want);
	if (!to)
		return diag_errno(d, -EINVAL, "%s: '%s' is not a torch dtype "
				  "(float32, bfloat16, ...)", ovl_label(n),
				  want);
	if (n->dead)
		return diag_errno(d, -ENOENT, "%s was removed", ovl_label(n));
	if (to == t->dtype)
		return 0;
	if (!cvt_supported(t->dtype) || !cvt_supported(to))
		return diag_errno(d, -ENOTSUP, "%s: %s to %s is not a cast "
				  "ptfs makes: only between float64, "
				  "float32, float16, bfloat16 and the float8 "
				  "types; it stays %s", ovl_label(n),
				  t->dtype->name, to->name, t->dtype->name);
	if (s && t->kind == CKPT_T_STRIDED)
		from = cvt_storage_plan(v->c, s, to, &why);
	else
		from = NULL;
	if (!from)
		return diag_errno(d, -EINVAL, "%s: cannot convert it to %s: %s",
				  ovl_label(n), to->name, why ? why :
				  "not a plain tensor over a storage");
	if ((x = busy(v->c, s)))
		return diag_errno(d, -EBUSY, "%s is being written; close it "
				  "first", ovl_label(x));
	rc = write_copy(v, s, from, to, &fd, d);
	if (rc)
		return rc;
	snprintf(idx, sizeof(idx), "%u", s->index);
	jr_field(&r, idx);
	jr_field(&r, from->name);
	jr_field(&r, to->name);
	rc = jr_append(v, &r, d);
	if (rc) {
		close(fd);	/* the copy stays unused, named */
		return rc;
	}
	install(v, s, from, to, fd);
	ovl_notify(v, s, NULL);
	tell_others(v, n, s, from, to);
	return 0;
}

int ovl_replay_retype(struct ovl *v, const struct jrec *r, struct diag *d)
{
	struct ckpt *c = v->c;
	const struct ckpt_dtype *from, *to;
	struct ckpt_storage *s;
	const char *why;
	char a[32], b[32], name[64];
	struct stat st;
	uint64_t i;
	int fd;

	if (r->nf != 3 || !jr_num(r, 0, &i) || i >= c->nstorages ||
	    r->len[1] >= sizeof(a) || r->len[2] >= sizeof(b))
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s: offset 0x%llx: bad "
				    "conversion record", v->jpath,
				    (unsigned long long)r->off);
	s = c->storages[i];
	from = dtype_of(r->f[1], r->len[1], a);
	to = dtype_of(r->f[2], r->len[2], b);
	if (!from || !to || !cvt_supported(to) ||
	    cvt_storage_plan(c, s, to, &why) != from)
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s: offset 0x%llx: a "
				    "conversion of storage %u from %s to %s, "
				    "which does not fit it", v->jpath,
				    (unsigned long long)r->off, s->index, a, b);
	/* the copy is there: it was whole before the record */
	ovl_data_name_as(v, s->index, to, "", name, sizeof(name));
	fd = openat(v->dfd, name, (v->readonly ? O_RDONLY : O_RDWR) |
		    O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return ovl_sys_err(v, d, -errno, name);
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != s->nbytes / from->size * to->size) {
		close(fd);
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s/%s is not storage "
				    "%u converted to %s (%llu bytes)", v->dir,
				    name, s->index, to->name,
				    (unsigned long long)st.st_size);
	}
	install(v, s, from, to, fd);
	return 0;
}
