/*
 * ovl_data.c - the data of tensor and value files through the overlay:
 * size, read, in-place write (copy-up on first write), and rewrites that
 * are staged (a scratch file or a text buffer) and applied at close().
 * In-place writes go to the storage's data file directly and are fsync'd
 * at close().  A new file whose text is a python value, among values,
 * becomes that value at its close() (ovl_value_of_text()).
 */
#define _GNU_SOURCE 1	/* fdatasync, O_TMPFILE */
#include "ovl_int.h"
#include "util/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK	(1u << 20)

uint64_t ovl_size(const struct ovl *v, const struct ckpt_node *n)
{
	(void)v;
	if (n->ed->stage)
		return n->ed->stage->len;
	if (n->kind == CKPT_N_TENSOR && n->tensor->fresh)
		return n->tensor->storage->nbytes;
	if (n->kind == CKPT_N_TENSOR)
		return ckpt_tensor_size(n->tensor);
	if (n->kind == CKPT_N_VALUE && !strcmp(n->type, "bytes"))
		return n->textlen;
	return n->text ? n->textlen + 1 : 0;
}

int ovl_data_locate(struct ovl *v, struct ckpt_node *n, uint64_t off,
		    struct ovl_loc *loc, struct diag *d)
{
	const struct ckpt_tensor *t = n->tensor;
	uint64_t base;
	int rc;

	loc->fd = -1;
	loc->pos = off;
	loc->size = ovl_size(v, n);
	loc->len = off < loc->size ? loc->size - off : 0;
	if (n->ed->stage) {
		if (n->ed->stage->scratch)	/* a rewrite being written */
			loc->fd = n->ed->stage->scratch->fd;
		return 0;		/* else its text, in memory */
	}
	if (n->kind != CKPT_N_TENSOR || !t->storage)
		return 0;		/* values; inline and meta tensors */
	if (t->fresh) {			/* a new file: its data file */
		loc->fd = t->storage->fd;
		return 0;
	}
	if (!t->contiguous)
		return 0;		/* gathered by ckpt_tensor_read() */
	if (ckpt_storage_pieced(v->c, t->storage)) {
		/* a DCP tensor's chunks: the run at @off lies in one file */
		if (off >= loc->size)
			return 0;
		return ckpt_pieced_where(v->c, t, off, &loc->fd, &loc->pos,
				      &loc->len, d);
	}
	rc = ckpt_storage_data(v->c, t->storage, &loc->fd, &base, d);
	if (rc)
		return rc;
	loc->pos = base + t->offset * t->dtype->size + off;
	return 0;
}

long long ovl_read(struct ovl *v, struct ckpt_node *n, void *buf,
		   uint64_t len, uint64_t off, struct diag *d)
{
	struct ovl_loc loc;
	int rc = ovl_data_locate(v, n, off, &loc, d);

	if (rc)
		return rc;
	if (len > loc.size - (off < loc.size ? off : loc.size))
		len = loc.size - (off < loc.size ? off : loc.size);
	if (!len)
		return 0;
	/* loc.len < len: a DCP tensor's run ends inside the request */
	if (loc.fd >= 0 && loc.len >= len) {
		rc = io_pread_full(loc.fd, buf, len, loc.pos);
		return rc ? ovl_sys_err(v, d, rc, "read") : (long long)len;
	}
	if (n->ed->stage) {
		memcpy(buf, n->ed->stage->text + off, len);
		return len;
	}
	if (n->kind == CKPT_N_TENSOR)
		return ckpt_tensor_read(v->c, n->tensor, buf, len, off, d);
	/* a value: its text and a newline (bytes: none) */
	if (off + len <= n->textlen) {
		memcpy(buf, n->text + off, len);
	} else {
		memcpy(buf, n->text + off, n->textlen - off);
		((char *)buf)[n->textlen - off] = '\n';
	}
	return len;
}

void ovl_stage_free(struct ckpt_stage **pst)
{
	struct ckpt_stage *st = *pst;

	if (!st)
		return;
	if (st->scratch) {
		close(st->scratch->fd);
		free(st->scratch);
	}
	free(st->text);
	free(st);
	*pst = NULL;
}

/* Start rewriting @n: a scratch file (tensor) or a text buffer (value),
 * holding the first @keep bytes of what @n holds now. */
static int stage_start(struct ovl *v, struct ckpt_node *n, uint64_t keep,
		       struct diag *d)
{
	struct ckpt_stage *st = calloc(1, sizeof(*st));
	uint64_t size = ovl_size(v, n);
	int rc = 0;

	if (!st || !ckpt_node_ed(v->c, n)) {
		free(st);
		return diag_nomem(d);
	}
	keep = keep < size ? keep : size;
	n->ed->stage = st;
	if (n->kind == CKPT_N_VALUE) {
		st->cap = OVL_MAX_VALUE;
		st->text = malloc(st->cap);
		if (!st->text)
			rc = diag_nomem(d);
		else if (keep)
			rc = ovl_read(v, n, st->text, keep, 0, d) < 0 ? d->err
								      : 0;
		st->len = keep;
		n->ed->stage = rc ? NULL : st;
		if (rc) {
			free(st->text);
			free(st);
		}
		return rc;
	}
	rc = ovl_ensure_dir(v, d);
	st->scratch = calloc(1, sizeof(*st->scratch));
	if (!rc && !st->scratch)
		rc = diag_nomem(d);
	if (!rc) {
		st->scratch->fd = openat(v->dfd, ".", O_TMPFILE | O_RDWR |
					 O_CLOEXEC, 0600);
		if (st->scratch->fd < 0)
			rc = ovl_sys_err(v, d, -errno, "cannot make a scratch file");
	}
	n->ed->stage = NULL;	/* read the current contents, not it */
	for (uint64_t pos = 0; pos < keep && !rc; pos += CHUNK) {
		char *buf = malloc(CHUNK);
		uint64_t k = keep - pos < CHUNK ? keep - pos : CHUNK;
		long long got = buf ? ovl_read(v, n, buf, k, pos, d) : -ENOMEM;

		rc = got < 0 ? (int)got : io_pwrite_full(st->scratch->fd, buf, k,
						      pos);
		free(buf);
	}
	n->ed->stage = st;
	st->len = keep;
	if (rc)
		ovl_stage_free(&n->ed->stage);
	return rc;
}

static long long write_stage(struct ovl *v, struct ckpt_node *n,
			     const void *buf, uint64_t len, uint64_t off,
			     struct diag *d)
{
	struct ckpt_stage *st = n->ed->stage;
	uint64_t limit = n->kind == CKPT_N_VALUE ? OVL_MAX_VALUE :
			 ckpt_tensor_size(n->tensor);
	int rc;

	if (off > limit || len > limit - off)
		return diag_errno(d, -EFBIG, "%s: %s is %llu bytes; this write "
				  "goes past that", ovl_label(n),
				  n->kind == CKPT_N_VALUE ? "a value's text" :
				  "the tensor", (unsigned long long)limit);
	if (st->scratch) {
		rc = io_pwrite_full(st->scratch->fd, buf, len, off);
		if (rc)
			return ovl_sys_err(v, d, rc, "write");
	} else {
		if (off > st->len)
			memset(st->text + st->len, 0, off - st->len);
		memcpy(st->text + off, buf, len);
	}
	if (off + len > st->len)
		st->len = off + len;
	st->written = true;
	return len;
}

long long ovl_write(struct ovl *v, struct ckpt_node *n, const void *buf,
		    uint64_t len, uint64_t off, struct diag *d)
{
	struct ckpt_tensor *t = n->tensor;
	long long w;
	int rc = ovl_check_writable(v, d);

	if (rc)
		return rc;
	if (n->kind == CKPT_N_VALUE) {
		if ((rc = ckpt_rule_shape(v->c, ovl_label(n), d)))
			return rc;
		if (!ckpt_value_editable(n))
			return diag_errno(d, -EPERM, "%s: a %s cannot be "
					  "edited as text", ovl_label(n),
					  n->type);
		if (!n->ed->stage && (rc = stage_start(v, n, UINT64_MAX, d)))
			return rc;
		return write_stage(v, n, buf, len, off, d);
	}
	if (n->kind != CKPT_N_TENSOR)
		return diag_errno(d, -EPERM, "%s cannot be written",
				  ovl_label(n));
	if (n->ed->stage)
		return write_stage(v, n, buf, len, off, d);
	if (t->fresh && !t->fixed) {
		struct ckpt_storage *s = t->storage;

		rc = io_pwrite_full(s->fd, buf, len, off);
		if (rc)
			return ovl_sys_err(v, d, rc, "write");
		if (off + len > s->nbytes) {
			s->nbytes = off + len;
			ckpt_tensor_fresh_sync(t);
		}
		ovl_notify(v, s, n);	/* its views changed */
		return len;
	}
	if (!t->storage || t->kind == CKPT_T_META || t->kind == CKPT_T_INLINE)
		return diag_errno(d, -EPERM, "%s has no storage to write",
				  ovl_label(n));
	if (off >= ckpt_tensor_size(t) || len > ckpt_tensor_size(t) - off)
		return diag_errno(d, -EFBIG, "%s: the tensor is %llu bytes; "
				  "this write goes past that", ovl_label(n),
				  (unsigned long long)ckpt_tensor_size(t));
	rc = ovl_copy_up(v, t->storage, d);
	if (rc)
		return rc;
	w = ckpt_tensor_write(v->c, t, buf, len, off, d);
	if (w > 0)
		ovl_notify(v, t->storage, n);
	return w;
}

int ovl_truncate(struct ovl *v, struct ckpt_node *n, uint64_t size,
		 struct diag *d)
{
	struct ckpt_tensor *t = n->tensor;
	int rc = ovl_check_writable(v, d);

	if (rc)
		return rc;
	if (n->kind == CKPT_N_TENSOR && t->fresh && !t->fixed &&
	    !n->ed->stage) {
		struct ckpt_storage *s = t->storage;

		if (ftruncate(s->fd, size))
			return ovl_sys_err(v, d, -errno, "truncate");
		s->nbytes = size;
		ckpt_tensor_fresh_sync(t);
		return 0;
	}
	if (n->kind == CKPT_N_VALUE && (rc = ckpt_rule_shape(v->c, ovl_label(n),
							  d)))
		return rc;
	if (n->kind == CKPT_N_VALUE && !ckpt_value_editable(n))
		return diag_errno(d, -EPERM, "%s: a %s cannot be edited as "
				  "text", ovl_label(n), n->type);
	if (n->kind != CKPT_N_VALUE && n->kind != CKPT_N_TENSOR)
		return diag_errno(d, -EPERM, "%s cannot be written",
				  ovl_label(n));
	if (!n->ed->stage && size == ovl_size(v, n))
		return 0;
	if (n->kind == CKPT_N_TENSOR && (!t->storage ||
					 t->kind == CKPT_T_META ||
					 t->kind == CKPT_T_INLINE))
		return diag_errno(d, -EPERM, "%s has no storage to write",
				  ovl_label(n));
	if (size > (n->kind == CKPT_N_VALUE ? OVL_MAX_VALUE :
		    ckpt_tensor_size(t)))
		return diag_errno(d, -EFBIG, "%s: cannot grow past its size",
				  ovl_label(n));
	if (!n->ed->stage && (rc = stage_start(v, n, size, d)))
		return rc;
	if (n->ed->stage->scratch && ftruncate(n->ed->stage->scratch->fd, size))
		return ovl_sys_err(v, d, -errno, "truncate");
	if (!n->ed->stage->scratch && size > n->ed->stage->len)
		memset(n->ed->stage->text + n->ed->stage->len, 0,
		       size - n->ed->stage->len);
	n->ed->stage->len = size;
	return 0;
}

/* close(): check and apply a replacement being written. */
/*
 * A value keeps its python type: code that reads the checkpoint expects
 * it (an epoch counter that became 8.5 breaks range()).  An int written
 * into a float is widened; None can become anything and anything None.
 * 0, or -EINVAL with @d set.  A widened int's journal text goes to @buf.
 */
static int same_type(const struct ckpt_node *n, struct ckpt_literal *lit,
		     char *buf, size_t size, struct diag *d)
{
	const char *text = n->ed->stage->text;
	size_t len = n->ed->stage->len;

	if (!strcmp(n->type, lit->type) || !strcmp(n->type, "NoneType") ||
	    !strcmp(lit->type, "NoneType"))
		return 0;
	if (!strcmp(n->type, "float") && !strcmp(lit->type, "int")) {
		lit->type = "float";
		lit->f = (double)lit->i;
		snprintf(buf, size, "%lld.0", (long long)lit->i);
		return 0;
	}
	return diag_errno(d, -EINVAL, "%s: is %s %s, '%.*s' is %s %s: a change "
			  "of type is refused; the value stays %s",
			  ovl_label(n),
			  strchr("aeiou", n->type[0]) ? "an" : "a",
			  n->type, ovl_line_len(text, len), text,
			  strchr("aeiou", lit->type[0]) ? "an" : "a",
			  lit->type, n->text);
}

static int stage_apply(struct ovl *v, struct ckpt_node *n, struct diag *d)
{
	struct ckpt_stage *st = n->ed->stage;
	struct ckpt_literal lit;
	char *path, widened[32] = "";
	int rc;

	if (n->kind == CKPT_N_VALUE) {
		if (ckpt_value_parse(n, st->text, st->len, &lit)) {
			rc = diag_errno(d, -EINVAL, "%s: '%.*s' is not %s; the "
					"value stays %s", ovl_label(n),
					ovl_line_len(st->text, st->len),
					st->text, ckpt_value_wants(n), n->text);
			ovl_stage_free(&n->ed->stage);
			return rc;
		}
		if ((rc = same_type(n, &lit, widened, sizeof(widened), d))) {
			ovl_stage_free(&n->ed->stage);
			return rc;
		}
		path = ckpt_node_path(n);
		if (!path)
			return diag_nomem(d);
		{
			struct jrec r = { .op = JR_VALUE };

			rc = ovl_ensure_dir(v, d);
			jr_field(&r, path);
			r.f[r.nf] = widened[0] ? widened : st->text;
			r.len[r.nf++] = widened[0] ? strlen(widened) : st->len;
			if (!rc)
				rc = jr_append(v, &r, d);
		}
		free(path);
		if (!rc)
			rc = ckpt_value_set(v->c, n, &lit) ? diag_nomem(d) : 0;
		ovl_stage_free(&n->ed->stage);
		return rc;
	}
	if (st->len != ckpt_tensor_size(n->tensor)) {
		rc = diag_errno(d, -EINVAL, "%s: new contents are %llu bytes, "
				"the tensor is %llu; it keeps its old values",
				ovl_label(n), (unsigned long long)st->len,
				(unsigned long long)ckpt_tensor_size(n->tensor));
		ovl_stage_free(&n->ed->stage);
		return rc;
	}
	rc = ovl_replace_contents(v, n->tensor, st->scratch->fd, 0, d);
	ovl_stage_free(&n->ed->stage);
	if (!rc)
		ovl_notify(v, n->tensor->storage, NULL);
	return rc;
}

static int sync_storage(struct ovl *v, struct ckpt_storage *s,
			struct diag *d)
{
	if (s && ovl_copied(v, s) && fdatasync(s->fd))
		return ovl_sys_err(v, d, -errno, "fsync");
	return 0;
}

int ovl_value_of_text(struct ovl *v, struct ckpt_node *n, const char *text,
		      size_t len, struct diag *d)
{
	struct ckpt_literal lit;
	char *buf, *path;
	int rc;

	if (n->kind != CKPT_N_TENSOR || !n->tensor ||
	    !ckpt_tensor_untyped(n->tensor) || n->pending || n->dead ||
	    !n->parent || !ckpt_can(v->c, CKPT_CAP_VALUES) ||
	    !ckpt_dir_takes_values(n->parent))
		return 1;
	buf = malloc(len + 1);
	if (!buf)
		return diag_nomem(d);
	rc = ckpt_value_parse_new(text, len, buf, &lit);
	if (rc == -ERANGE) {
		free(buf);
		return diag_set(d, rc, DIAG_NO_OFFSET, "an int past 64 bits is "
				"no new value (ints of 64 bits are): the file "
				"stays its bytes, a uint8 tensor; rm it or "
				"write a smaller int");
	}
	if (rc) {
		free(buf);
		return 1;	/* not text: the bytes of a tensor */
	}
	if (!v->replaying) {
		struct jrec r = { .op = JR_VALUE };

		path = ckpt_node_path(n);
		rc = path ? 0 : diag_nomem(d);
		if (!rc) {
			jr_field(&r, path);
			r.f[r.nf] = text;
			r.len[r.nf++] = len;
			rc = jr_append(v, &r, d);
		}
		free(path);
	}
	if (!rc && ckpt_value_new(v->c, n, &lit))
		rc = diag_nomem(d);
	free(buf);
	return rc;
}

/* The close of new file @n: its text, if it is a value where values
 * live, becomes that value.  0, or -errno with @d set. */
static int new_value(struct ovl *v, struct ckpt_node *n, struct diag *d)
{
	struct ckpt_storage *s;
	char *text;
	int rc;

	if (n->kind != CKPT_N_TENSOR || !n->tensor ||
	    !ckpt_tensor_untyped(n->tensor) || n->ed->stage ||
	    n->ed->vstage || !n->tensor->storage)
		return 0;
	s = n->tensor->storage;
	if (!s->nbytes || s->nbytes > OVL_MAX_VALUE || s->fd < 0)
		return 0;	/* (empty: touch, or a shell's first close) */
	text = malloc(s->nbytes);
	if (!text)
		return diag_nomem(d);
	rc = io_pread_full(s->fd, text, s->nbytes, 0);
	rc = rc ? ovl_sys_err(v, d, rc, "cannot read the new file") :
	     ovl_value_of_text(v, n, text, s->nbytes, d);
	free(text);
	return rc < 0 ? rc : 0;
}

/*
 * A replacement is applied at the first close() after a write: not at a
 * close() before any (a shell's `> file` closes a dup of the new fd
 * first), and at the latest when the last fd goes (ovl_release()).
 */
int ovl_flush(struct ovl *v, struct ckpt_node *n, struct diag *d)
{
	int rc;

	if (n->ed->stage)
		return n->ed->stage->written ? stage_apply(v, n, d) : 0;
	rc = ovl_fsync(v, n, d);
	return rc ? rc : new_value(v, n, d);
}

int ovl_release(struct ovl *v, struct ckpt_node *n, struct diag *d)
{
	return n->ed->stage ? stage_apply(v, n, d) : new_value(v, n, d);
}

int ovl_fsync(struct ovl *v, struct ckpt_node *n, struct diag *d)
{
	if (n->kind != CKPT_N_TENSOR || !n->tensor->storage)
		return 0;
	return sync_storage(v, n->tensor->storage, d);
}

long long ovl_write_storage(struct ovl *v, struct ckpt_storage *s,
			    const void *buf, uint64_t len, uint64_t off,
			    struct diag *d)
{
	int rc = ovl_check_writable(v, d);

	if (rc)
		return rc;
	if (off >= s->nbytes || len > s->nbytes - off)
		return diag_errno(d, -EFBIG, "storage %s is %llu bytes; this "
				  "write goes past that", s->key,
				  (unsigned long long)s->nbytes);
	rc = ovl_copy_up(v, s, d);
	if (!rc)
		ckpt_dirty_mark(s, off, len);	/* before: never missed */
	if (!rc && (rc = io_pwrite_full(s->fd, buf, len, off)))
		rc = ovl_sys_err(v, d, rc, "write");
	if (rc)
		return rc;
	ovl_notify(v, s, NULL);
	return len;
}

int ovl_fsync_storage(struct ovl *v, struct ckpt_storage *s, struct diag *d)
{
	return sync_storage(v, s, d);
}
