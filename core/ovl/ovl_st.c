/*
 * ovl_st.c - the edits a mounted safetensors file refuses.  Write-back
 * gives a safetensors file back (core/ckpt/ckpt_stwrite.c), and that
 * format holds a flat map of UTF-8 names to plain tensors of its own
 * dtypes, nothing else; an edit it could not hold is refused when it is
 * made, with one line, instead of failing the write-back or being lost
 * in it: a directory (EPERM; a '.' in a name is how safetensors nests),
 * a name that is not UTF-8 or is "__metadata__" (EINVAL), a new tensor
 * of a dtype safetensors has no name for (EINVAL), and requires_grad or
 * Parameter set on one (EPERM: the format keeps neither).  __metadata__
 * is shown (user.meta.* of the root) but not edited through the mount
 * yet (EPERM; NEEDSWORK: a journal record for it).  Each check passes
 * anything for the other formats.  A folder of safetensors shards is
 * held to the same rules, and a folder of .bin shards takes no directory
 * either (ovl_hf.c).
 */
#include "ovl_int.h"

#include <errno.h>
#include <string.h>

static bool st(const struct ovl *v)
{
	return v->c->format == CKPT_SAFETENSORS || ovl_hf_st(v);
}

int ovl_st_mkdir(struct ovl *v, const char *name, struct diag *d)
{
	if (v->c->hf && !st(v))
		return diag_errno(d, -EPERM, "%s: a sharded folder holds no "
				  "directories, only tensors (a '.' in a name "
				  "is how its keys nest)", name);
	if (!st(v))
		return 0;
	return diag_errno(d, -EPERM, "%s: safetensors files hold no "
			  "directories, only tensors (a '.' in a name is "
			  "how they nest)", name);
}

int ovl_st_key(struct ovl *v, const char *key, size_t len, struct diag *d)
{
	return st(v) ? ckpt_st_name_ok(key, len, d) : 0;
}

int ovl_st_dtype(struct ovl *v, const struct ckpt_dtype *dt,
		 struct diag *d)
{
	if (!st(v) || dt->st)
		return 0;
	return diag_errno(d, -EINVAL, "safetensors has no dtype for %s",
			  dt->name);
}

int ovl_st_tensor(struct ovl *v, const struct ckpt_tensor *t,
		  const char *name, struct diag *d)
{
	if (!st(v))
		return 0;
	if (!t->dtype->st)
		return diag_errno(d, -EINVAL, "%s: safetensors has no dtype "
				  "for %s", name, t->dtype->name);
	if (t->requires_grad || t->parameter)
		return diag_errno(d, -EPERM, "%s: safetensors files keep no "
				  "%s flag", name, t->parameter ? "Parameter" :
				  "requires_grad");
	return 0;
}

int ovl_st_xattr(struct ovl *v, const char *name, struct diag *d)
{
	if (!st(v) || strncmp(name, "user.meta.", 10))
		return 0;
	return diag_errno(d, -EPERM, "%s: the __metadata__ of a safetensors "
			  "file cannot be edited through the mount (ptrepack "
			  "and write-back keep it as it is)", name);
}
