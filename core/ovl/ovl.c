/*
 * ovl.c - the overlay's structural operations: mkdir, create, rename,
 * unlink, rmdir and the xattrs of a new tensor.  Each is checked, then
 * journaled, then made in memory (ovl_store.c has the services, ovl_open.c
 * replays the journal through these same functions).
 */
#define _GNU_SOURCE 1
#include "ovl_int.h"
#include "util/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int ovl_mkdir(struct ovl *v, struct ckpt_node *dir, const char *name,
	      struct ckpt_node **out, struct diag *d)
{
	struct ckpt_node *n;
	char *nm;
	int rc = ovl_dir_editable(v, dir, d);

	if (!rc && ckpt_node_child(dir, name))
		rc = diag_errno(d, -EEXIST, "%s exists", name);
	if (!rc)
		rc = ckpt_rule_add(v->c, name, d);
	if (!rc)
		rc = ckpt_rule_mkdir(v->c, name, d);
	if (!rc)
		rc = ovl_key_name(v, dir, name, &nm, d);
	if (!rc)
		rc = ovl_journal(v, JR_MKDIR, dir, name, NULL, NULL, NULL, 0, d);
	if (rc)
		return rc;
	n = ckpt_node_fresh(v->c, CKPT_N_DIR, "dict");
	if (!n || ckpt_dir_insert(v->c, dir, n, nm))
		return diag_nomem(d);
	n->step = ckpt_dir_step(dir);
	*out = n;
	return 0;
}

/* A new file: a 1-d uint8 tensor over new storage @index's data file. */
int ovl_create_at(struct ovl *v, struct ckpt_node *dir, char *nm,
		     uint32_t index, struct ckpt_node **out, struct diag *d)
{
	struct ckpt_tensor *t;
	struct ckpt_node *n;
	int rc = ovl_fresh_tensor(v, index, !v->replaying, &t, d);

	if (rc)
		return rc;
	n = ckpt_node_fresh(v->c, CKPT_N_TENSOR, "Tensor");
	if (!n || ckpt_dir_insert(v->c, dir, n, nm))
		return diag_nomem(d);
	n->tensor = t;
	n->step = ckpt_dir_step(dir);
	*out = n;
	return 0;
}

int ovl_create(struct ovl *v, struct ckpt_node *dir, const char *name,
	       struct ckpt_node **out, struct diag *d)
{
	char *nm;
	char idx[16];
	uint32_t index = v->c->nstorages;
	int fd, rc = ovl_dir_editable(v, dir, d);

	if (!rc && ckpt_node_child(dir, name))
		rc = diag_errno(d, -EEXIST, "%s exists", name);
	if (!rc)
		rc = ckpt_rule_add(v->c, name, d);
	if (!rc)
		rc = ovl_key_name(v, dir, name, &nm, d);
	if (!rc)
		rc = ovl_ensure_dir(v, d);
	if (rc)
		return rc;
	/* named in the journal (JR_DATA), then made, then the record that
	   makes it a file: a crash in between leaves nothing unnamed */
	fd = ovl_data_open(v, index, "", O_RDWR | O_CREAT | O_TRUNC, d);
	if (fd < 0)
		return fd;
	if (fsync(v->dfd)) {
		rc = ovl_sys_err(v, d, -errno, "cannot create a new file");
		close(fd);
		return rc;
	}
	close(fd);
	snprintf(idx, sizeof(idx), "%u", index);
	rc = ovl_journal(v, JR_CREATE, dir, name, NULL, NULL, idx, strlen(idx), d);
	return rc ? rc : ovl_create_at(v, dir, nm, index, out, d);
}

/* The tensor holding new file @s's bytes: its own, or the file's a new
 * value was made from (ckpt_value_new()); NULL for anything else. */
static struct ckpt_tensor *new_bytes(const struct ckpt_node *s)
{
	return s->kind == CKPT_N_TENSOR ? s->tensor :
	       s->kind == CKPT_N_VALUE ? s->ed->file : NULL;
}

/* Could new file @s stand for @x, keeping @x's identity (cp, rsync)? */
static bool is_content(const struct ckpt_node *s, const struct ckpt_node *x)
{
	const struct ckpt_tensor *t = new_bytes(s), *xt = x->tensor;
	bool raw = t && t->dtype->size == 1 && !t->shape_set &&
		   !strcmp(t->dtype->name, "uint8");

	if (!t || !t->fresh || s->ed->stage || x->dead)
		return false;
	/* a temporary file of text became a value at its close(): renamed
	   over a value, its bytes are that value's text as for any file */
	if (x->kind == CKPT_N_VALUE)
		return raw && ckpt_value_editable(x);
	if (s->kind != CKPT_N_TENSOR)
		return false;
	if (x->kind != CKPT_N_TENSOR || (xt->fresh && !xt->fixed) ||
	    !xt->storage ||
	    (xt->kind != CKPT_T_STRIDED && xt->kind != CKPT_T_STORAGE &&
	     xt->kind != CKPT_T_QUANTIZED))
		return false;
	if (raw)
		return true;
	if (t->dtype != xt->dtype)
		return false;
	return !t->shape_set || (t->ndim == xt->ndim &&
				 !memcmp(t->shape, xt->shape,
					 t->ndim * sizeof(*t->shape)));
}


/*
 * New file @s replaces the contents of @x and then takes its place, name
 * and identity (dtype, views, tied names, key): the rename of a temporary
 * file over a tensor or value.  First the data half: the new bytes must
 * fit @x (a tensor's size; a value's literal, parsed into @lit from
 * *@text, which the caller frees); a tensor's storage gets them (not
 * when replaying: they are there).
 */
static int transfer_data(struct ovl *v, struct ckpt_node *s,
			 struct ckpt_node *x, struct ckpt_literal *lit,
			 char **text, struct diag *d)
{
	struct ckpt_storage *src = new_bytes(s)->storage;
	int rc;

	*text = NULL;
	if (x->kind == CKPT_N_VALUE) {
		if (src->nbytes > OVL_MAX_VALUE)
			return diag_errno(d, -EFBIG, "%s: a value's text is "
					  "at most %u bytes", ovl_label(x),
					  OVL_MAX_VALUE);
		*text = malloc(src->nbytes + 1);
		if (!*text)
			return diag_nomem(d);
		(*text)[src->nbytes] = 0;
		rc = io_pread_full(src->fd, *text, src->nbytes, 0);
		if (rc)
			return ovl_sys_err(v, d, rc, "cannot read new value");
		if (ckpt_value_parse(x, *text, src->nbytes, lit))
			return diag_errno(d, -EINVAL, "%s: '%.*s' is not %s",
					  ovl_label(x),
					  ovl_line_len(*text, src->nbytes), *text,
					  ckpt_value_wants(x));
		return 0;
	}
	/* replaying, the bytes are in @x's storage already, and the new
	   file's may be gone (dropped below, after this very record) */
	if (v->replaying)
		return 0;
	if (src->nbytes != ckpt_tensor_size(x->tensor))
		return diag_errno(d, -EINVAL, "%s: new contents are %llu bytes, "
				  "the tensor is %llu; it keeps its old values",
				  ovl_label(x),
				  (unsigned long long)src->nbytes,
				  (unsigned long long)ckpt_tensor_size(x->tensor));
	rc = ovl_replace_contents(v, x->tensor, src->fd, 0, d);
	if (!rc)
		ovl_notify(v, x->tensor->storage, NULL);
	return rc;
}

/* The identity half: @s takes @x's slot (named @name) and what it is. */
static int transfer_identity(struct ovl *v, struct ckpt_node *s,
			     struct ckpt_node *x, char *name,
			     const struct ckpt_literal *lit, struct diag *d)
{
	struct ckpt_node *home = ckpt_node_home(x);
	char *home_name = ckpt_node_home_name(x);

	if (x->kind == CKPT_N_VALUE && ckpt_value_set(v->c, x, lit))
		return diag_nomem(d);
	/* cannot fail: transfer() made @s's edit state */
	ckpt_dir_remove(s->parent, s);
	(void)ckpt_dir_swap(v->c, x->parent, x, s);
	if (strcmp(name, s->name))
		(void)ckpt_dir_rename(v->c, s->parent, s, name);
	s->kind = x->kind;
	s->type = x->type;
	s->val = x->val;
	s->key = x->key;
	s->step = x->step;
	s->tensor = x->tensor;
	free(s->text);		/* applied to @x already: @x's is the text now */
	s->text = x->text;
	s->textlen = x->textlen;
	s->edited = x->edited;
	s->ed->file = NULL;
	s->ed->home = home;
	s->ed->home_name = home_name;
	s->ed->moved = true;
	s->fresh = false;
	x->text = NULL;
	x->textlen = 0;
	x->dead = true;
	return 0;
}

/*
 * New file storage @s, whose bytes went to the key it was renamed over,
 * is read by nobody now (the file's open descriptors reach that key's
 * storage): its descriptor goes, and with @unlink its data file too, now
 * rather than at write-back (rsync and editors write every file as a
 * temporary renamed over it: each would keep a copy and a descriptor).
 * A value's text is read again when the journal is replayed, so its file
 * stays; a replay finds a tensor's gone (ovl_fresh_tensor()).
 */
static void drop_new_data(struct ovl *v, struct ckpt_storage *s, bool unlink)
{
	if (ovl_copied(v, s))
		close(s->fd);
	s->fd = -1;
	s->nbytes = s->numel = 0;
	if (unlink && !v->readonly)
		ovl_data_unlink(v, s->index, false);
}

/* Both halves, with journal record @op on (@dir, @name)[, @ndir, @nname]
 * in between: data, record, memory. */
static int transfer(struct ovl *v, struct ckpt_node *s, struct ckpt_node *x,
		    char *to, char op, struct ckpt_node *dir,
		    const char *name, struct ckpt_node *ndir,
		    const char *nname, struct diag *d)
{
	struct ckpt_storage *was = new_bytes(s)->storage;
	bool value = x->kind == CKPT_N_VALUE;
	struct ckpt_literal lit;
	char *text;
	int rc;

	/* what @s takes of @x is kept in its edit state: made first, so
	   nothing can fail once the record is written */
	if (!ckpt_node_ed(v->c, s))
		return diag_nomem(d);
	rc = transfer_data(v, s, x, &lit, &text, d);
	if (!rc)
		rc = ovl_journal(v, op, dir, name, ndir, nname, NULL, 0, d);
	if (!rc)
		rc = transfer_identity(v, s, x, to, &lit, d);
	free(text);
	if (!rc)
		drop_new_data(v, was, !value);
	return rc;
}

int ovl_rename(struct ovl *v, struct ckpt_node *dir, const char *name,
	       struct ckpt_node *ndir, const char *nname, bool noreplace,
	       struct diag *d)
{
	struct ckpt_node *s, *x;
	char *nm;
	int rc = ovl_dir_editable(v, dir, d);

	if (!rc)
		rc = ovl_dir_editable(v, ndir, d);
	if (rc)
		return rc;
	s = ckpt_node_child(dir, name);
	x = ckpt_node_child(ndir, nname);
	if (!s)
		return diag_errno(d, -ENOENT, "%s: no such entry", name);
	if (s == x)
		return 0;
	if (x && noreplace)
		return diag_errno(d, -EEXIST, "%s exists", nname);
	if (!x && ovl_view_target(s, ndir, nname))
		return ovl_view_rename(v, s, ndir, nname, d);
	for (const struct ckpt_node *p = ndir; p && ckpt_node_is_dir(s);
	     p = p->parent)
		if (p == s)
			return diag_errno(d, -EINVAL, "cannot move %s into "
					  "itself", name);
	if (x && ckpt_node_is_dir(x) && !ckpt_node_is_dir(s))
		return diag_errno(d, -EISDIR, "%s is a directory", nname);
	if (x && !ckpt_node_is_dir(x) && ckpt_node_is_dir(s))
		return diag_errno(d, -ENOTDIR, "%s is not a directory", nname);
	if (x && ckpt_node_is_dir(x) && x->dir->nlive)
		return diag_errno(d, -ENOTEMPTY, "%s is not empty", nname);
	rc = ovl_key_name(v, ndir, nname, &nm, d);
	if (rc)
		return rc;
	if (x && is_content(s, x))
		return transfer(v, s, x, nm, JR_RENAME, dir, name, ndir, nname,
				d);
	/* where @s was at open, kept first: nothing below fails for it */
	if (ckpt_node_keep_home(v->c, s))
		return diag_nomem(d);
	rc = ovl_journal(v, JR_RENAME, dir, name, ndir, nname, NULL, 0, d);
	if (rc)
		return rc;
	if (x) {
		ckpt_dir_remove(dir, s);
		(void)ckpt_dir_swap(v->c, ndir, x, s);
		s->step = x->step;
		x->dead = true;
	} else if (dir == ndir) {
		(void)ckpt_dir_rename(v->c, dir, s, nm);
	} else {
		ckpt_dir_remove(dir, s);
		if (ckpt_dir_insert(v->c, ndir, s, nm))
			return diag_nomem(d);
		s->step = ckpt_dir_step(ndir);
	}
	return 0;
}

/*
 * vim's way of saving (rename the file to a backup, write a new file
 * under the old name, delete the backup): when @x, renamed in its own
 * directory, is deleted while a new file sits under its original name,
 * the new file takes @x's place as if it had been renamed over it.
 */
static struct ckpt_node *saved_over(const struct ckpt_node *x)
{
	struct ckpt_node *s;

	if (x->fresh || !ckpt_node_home(x) ||
	    x->parent != ckpt_node_home(x) ||
	    !strcmp(x->name, ckpt_node_home_name(x)))
		return NULL;
	s = ckpt_node_child(ckpt_node_home(x), ckpt_node_home_name(x));
	return s && is_content(s, x) ? s : NULL;
}

static int remove_node(struct ovl *v, struct ckpt_node *dir,
		       const char *name, bool want_dir, struct diag *d)
{
	struct ckpt_node *n, *s;
	int rc = ovl_dir_editable(v, dir, d);

	if (rc)
		return rc;
	n = ckpt_node_child(dir, name);
	if (!n)
		return diag_errno(d, -ENOENT, "%s: no such entry", name);
	if (want_dir && !ckpt_node_is_dir(n))
		return diag_errno(d, -ENOTDIR, "%s is not a directory", name);
	if (!want_dir && ckpt_node_is_dir(n))
		return diag_errno(d, -EISDIR, "%s is a directory", name);
	if (want_dir && n->dir->nlive)
		return diag_errno(d, -ENOTEMPTY, "%s is not empty", name);
	s = want_dir ? NULL : saved_over(n);
	if (s)
		return transfer(v, s, n, ckpt_node_home_name(n), JR_UNLINK,
				dir, name, NULL, NULL, d);
	rc = ovl_journal(v, JR_UNLINK, dir, name, NULL, NULL, NULL, 0, d);
	if (rc)
		return rc;
	/* a shared container lives on under a name that links to it */
	ckpt_node_drop(v->c, dir, n);
	return 0;
}

int ovl_unlink(struct ovl *v, struct ckpt_node *dir, const char *name,
	       struct diag *d)
{
	return remove_node(v, dir, name, false, d);
}

int ovl_rmdir(struct ovl *v, struct ckpt_node *dir, const char *name,
	      struct diag *d)
{
	return remove_node(v, dir, name, true, d);
}

static bool parse_bool(const char *s, size_t n, bool *out)
{
	if ((n == 4 && !strncasecmp(s, "true", 4)) || (n == 1 && *s == '1'))
		return *out = true;
	if ((n == 5 && !strncasecmp(s, "false", 5)) || (n == 1 && *s == '0'))
		return !(*out = false);
	return false;
}


#define META	"user.meta."

/*
 * user.meta.KEY of the root: the checkpoint's metadata entry KEY set
 * (@value) or, @value NULL, removed (ckpt_meta_set()); journaled as a
 * JR_XATTR of the root, with no value for a removal.
 */
static int meta_edit(struct ovl *v, const char *name, const char *value,
		     size_t len, struct diag *d)
{
	const char *key = name + strlen(META);
	struct jrec r = { .op = JR_XATTR };
	int rc = value ? ckpt_meta_set(v->c, key, strlen(key), value, len, d) :
		 ckpt_meta_remove(v->c, key, strlen(key), d);

	if (rc || v->replaying)
		return rc;
	rc = ovl_ensure_dir(v, d);
	jr_field(&r, "");
	jr_field(&r, name);
	if (value) {
		r.f[r.nf] = value;
		r.len[r.nf++] = len;
	}
	return rc ? rc : jr_append(v, &r, d);
}

int ovl_removexattr(struct ovl *v, struct ckpt_node *n, const char *name,
		    struct diag *d)
{
	int rc = ovl_check_writable(v, d);

	if (rc)
		return rc;
	if (n != v->c->root || strncmp(name, META, strlen(META)))
		return diag_errno(d, -EPERM, "%s: %s cannot be removed",
				  ovl_label(n), name);
	return meta_edit(v, name, NULL, 0, d);
}

int ovl_setxattr(struct ovl *v, struct ckpt_node *n, const char *name,
		 const char *value, size_t len, struct diag *d)
{
	struct ckpt_tensor *t = n->tensor, save;
	int64_t shape[CKPT_MAX_DIMS], saved_shape[CKPT_MAX_DIMS];
	char *path;
	bool b;
	int rc = ovl_check_writable(v, d);

	if (!rc && n == v->c->root && !strncmp(name, META, strlen(META)))
		return meta_edit(v, name, value, len, d);
	if (!rc)
		rc = ckpt_rule_xattr(v->c, name, d);
	/* a folder's new tensor takes its dtype and shape, no other one */
	if (!rc && (n->kind != CKPT_N_TENSOR || !t->fresh || t->fixed))
		rc = ckpt_rule_shape(v->c, name, d);
	if (rc)
		return rc;
	/* a tensor with values: a cast (journaled as JR_RETYPE; a JR_XATTR
	   of an older journal relabeled a .npy's tensor, and still does) */
	if (n->kind == CKPT_N_TENSOR && !strcmp(name, "user.dtype") &&
	    (!t->fresh || t->fixed) && !v->replaying)
		return ovl_retype(v, n, value, len, d);
	if (n->kind == CKPT_N_VALUE && n->ed->file)
		return diag_errno(d, -EPERM, "%s: %s: its text made it a "
				  "python %s (a new file among values); for "
				  "a tensor, set the xattrs before writing the "
				  "bytes, or write %s.npy", ovl_label(n), name,
				  n->type, n->name);
	if (n->kind != CKPT_N_TENSOR || !t->fresh)
		return diag_errno(d, -EPERM, "%s: %s: only new files take it "
				  "(a checkpoint's tensors share storages; "
				  "user.dtype converts)", ovl_label(n), name);
	save = *t;
	memcpy(saved_shape, t->shape, sizeof(saved_shape));
	if (!strcmp(name, "user.dtype")) {
		char buf[32];
		const struct ckpt_dtype *dt;

		snprintf(buf, sizeof(buf), "%.*s", (int)(len < 31 ? len : 31),
			 value);
		buf[strcspn(buf, "\n ")] = 0;
		dt = ckpt_dtype_by_name(buf);
		if (!dt || dt->cls == CKPT_DT_QUANT || dt->cls == CKPT_DT_BITS)
			return diag_errno(d, -EINVAL, "%s: '%s' is not a dtype "
					  "a new tensor can have", n->name, buf);
		t->dtype = dt;
	} else if (!strcmp(name, "user.shape")) {
		int nd = ovl_parse_shape(value, len, shape);
		uint64_t numel = 1;

		for (int i = 0; i < nd; i++)
			if (__builtin_mul_overflow(numel, (uint64_t)shape[i],
						   &numel))
				nd = -1;
		if (nd < 0 || numel > (UINT64_C(1) << 62))
			return diag_errno(d, -EINVAL, "%s: '%.*s' is not a "
					  "shape like 2,3", n->name,
					  (int)(len < 40 ? len : 40), value);
		t->ndim = nd;
		memcpy(t->shape, shape, nd * sizeof(*shape));
		t->shape_set = true;
	} else if (!strcmp(name, "user.requires_grad") ||
		   !strcmp(name, "user.parameter")) {
		if (!parse_bool(value, len, &b))
			return diag_errno(d, -EINVAL, "%s: %s is true or false",
					  n->name, name);
		if (name[5] == 'r')
			t->requires_grad = b;
		else
			t->parameter = b;
		n->type = t->parameter ? "Parameter" : "Tensor";
	} else {
		return diag_errno(d, -ENOTSUP, "%s: %s cannot be set",
				  n->name, name);
	}
	ckpt_tensor_fresh_sync(t);
	rc = ckpt_rule_tensor(v->c, t, n->name, d);
	if (!rc && t->storage->nbytes && ckpt_tensor_fresh_fits(t))
		rc = diag_errno(d, -EINVAL, "%s: %llu bytes do not make a "
				"%s tensor of that shape", n->name,
				(unsigned long long)t->storage->nbytes,
				t->dtype->name);
	if (rc) {
		*t = save;
		memcpy(t->shape, saved_shape, sizeof(saved_shape));
		ckpt_tensor_fresh_sync(t);
		return rc;
	}
	if (v->replaying)
		return 0;
	path = ckpt_node_path(n);
	if (!path)
		return diag_nomem(d);
	{
		struct jrec r = { .op = JR_XATTR };

		rc = ovl_ensure_dir(v, d);
		jr_field(&r, path);
		jr_field(&r, name);
		r.f[r.nf] = value;
		r.len[r.nf++] = len;
		if (!rc)
			rc = jr_append(v, &r, d);
	}
	free(path);
	if (rc) {
		*t = save;
		memcpy(t->shape, saved_shape, sizeof(saved_shape));
		ckpt_tensor_fresh_sync(t);
	}
	return rc;
}

/* ---- what the layers above may ask (struct ovl is opaque to them) ---- */

void ovl_set_hooks(struct ovl *v, const struct ovl_hooks *h)
{
	static const struct ovl_hooks none;

	if (!h)
		h = &none;
	v->changed = h->changed;
	v->notice = h->notice;
	v->progress = h->progress;
	v->touched = h->touched;
	v->arg = h->arg;
}

const char *ovl_path(const struct ovl *v)
{
	return v->path;
}

const char *ovl_dir(const struct ovl *v)
{
	return v->dir;
}

const char *ovl_note(const struct ovl *v)
{
	return v->note;
}

bool ovl_committed(const struct ovl *v)
{
	return v->committed;
}

const struct ckpt_write_stats *ovl_wstats(const struct ovl *v)
{
	return &v->wstats;
}

bool ovl_finished(const struct ovl *v)
{
	return v->inplace_finished || v->swap_finished;
}

bool ovl_staged(const struct ckpt_node *n)
{
	return n->ed->stage != NULL;
}

bool ovl_view_staged(const struct ckpt_node *n, uint8_t *view,
		     uint64_t *len)
{
	const struct ckpt_stage *st = n->ed->vstage;

	if (!st)
		return false;
	if (view)
		*view = st->view;
	if (len)
		*len = st->len;
	return true;
}
