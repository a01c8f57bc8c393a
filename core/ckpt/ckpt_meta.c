/*
 * ckpt_meta.c - edits of a flat format's metadata (c->meta: a GGUF file's
 * key/values): an entry set, added or removed through the mount
 * (setfattr -n user.meta.KEY on its root, or .ptfs/meta/), checked by
 * the format's meta rule (ckpt_format.h) so that nothing is refused at
 * write-back.  The entries live in the arena: an edit makes a new text,
 * an added key a new table (edits are few; the arena frees at close); a
 * removed one stays in its place, marked, so entries keep their numbers
 * (the mount's inodes of .ptfs/<format>/).
 */
#include "ckpt_int.h"
#include "ckpt_format.h"

#include <errno.h>
#include <string.h>

static struct ckpt_meta *find(struct ckpt *c, const char *key, size_t klen)
{
	for (uint32_t i = 0; i < c->nmeta; i++)
		if (c->meta[i].klen == klen && !c->meta[i].removed &&
		    !memcmp(c->meta[i].key, key, klen))
			return &c->meta[i];
	return NULL;
}

int ckpt_meta_set(struct ckpt *c, const char *key, size_t klen,
		  const char *val, size_t vlen, struct diag *d)
{
	const struct ckpt_fmt *f = ckpt_fmt(c);
	struct ckpt_meta *m = find(c, key, klen), *v;
	const char *type = m ? m->type : NULL;
	char *k, *text;
	int rc;

	if (!f->rules || !f->rules->meta)
		return diag_errno(d, -EPERM, "%.*s: the metadata of %s cannot "
				  "be edited through the mount", (int)klen, key,
				  f->one);
	if (!(k = arena_strndup(&c->arena, key, klen)))
		return diag_nomem(d);
	rc = f->rules->meta(c, m, k, val, vlen, &type, d);
	if (rc)
		return rc;
	if (!(text = arena_strndup(&c->arena, val, vlen)))
		return diag_nomem(d);
	if (!m) {
		v = arena_alloc(&c->arena, (c->nmeta + 1) * sizeof(*v));
		if (!v)
			return diag_nomem(d);
		memcpy(v, c->meta, c->nmeta * sizeof(*v));
		c->meta = v;
		m = &v[c->nmeta++];
		*m = (struct ckpt_meta){ .key = k, .klen = klen, .type = type,
					 .added = true };
	}
	m->val = text;
	m->vlen = vlen;
	m->edited = true;
	return 0;
}

bool ckpt_meta_changed(const struct ckpt_meta *m)
{
	return m->removed ? !m->added : m->edited;
}

int ckpt_meta_remove(struct ckpt *c, const char *key, size_t klen,
		     struct diag *d)
{
	const struct ckpt_fmt *f = ckpt_fmt(c);
	struct ckpt_meta *m = find(c, key, klen);

	if (!f->rules || !f->rules->meta)
		return diag_errno(d, -EPERM, "%.*s: the metadata of %s cannot "
				  "be edited through the mount", (int)klen, key,
				  f->one);
	if (!m)
		return diag_errno(d, -ENODATA, "%.*s: no such key", (int)klen,
				  key);
	m->removed = true;	/* in its place: entries keep their numbers */
	return 0;
}
