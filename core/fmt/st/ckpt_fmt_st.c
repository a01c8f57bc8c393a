/*
 * ckpt_fmt_st.c - the descriptor of a safetensors file (read by
 * ckpt_safetensors.c, written by ckpt_stflat.c and ckpt_stwrite.c), and
 * the edits it takes.
 *
 *   bytes 0..7    u64 LE: N, the header's length
 *   bytes 8..8+N  the JSON header (shown raw as header.json)
 *   then          the tensors' bytes, in the header's offsets
 *
 * Write-back gives a safetensors file back, and the format holds a flat
 * map of UTF-8 names to plain tensors of its own dtypes, nothing else: an
 * edit it could not hold is refused when it is made, with one line: a
 * directory (EPERM; a '.' in a name is how safetensors nests), a name that
 * is not UTF-8 or is "__metadata__" (EINVAL), a new tensor of a dtype
 * safetensors has no name for (EINVAL), and requires_grad or Parameter set
 * on one (EPERM: the format keeps neither).  __metadata__ is shown
 * (user.meta.* of the root) but not edited through the mount (EPERM).  A
 * folder of safetensors shards is held to the same rules (ckpt_fmt_hf.c).
 */
#include "ckpt/ckpt_int.h"
#include "ckpt_st.h"
#include "ckpt/ckpt_format.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static bool bid(const unsigned char *h, size_t n)
{
	return ckpt_safetensors_head(h, n);
}

static int open_st(struct ckpt *c, unsigned flags, struct diag *d)
{
	(void)flags;
	return ckpt_safetensors_open(c, d);
}

static int mkdir_rule(const struct ckpt *c, const char *name, struct diag *d)
{
	(void)c;
	return diag_errno(d, -EPERM, "%s: safetensors files hold no "
			  "directories, only tensors (a '.' in a name is "
			  "how they nest)", name);
}

static int key(const struct ckpt *c, const char *k, size_t len,
	       struct diag *d)
{
	(void)c;
	return ckpt_st_name_ok(k, len, d);
}

static int dtype(const struct ckpt *c, const struct ckpt_dtype *dt,
		 struct diag *d)
{
	(void)c;
	if (dt->st)
		return 0;
	return diag_errno(d, -EINVAL, "safetensors has no dtype for %s",
			  dt->name);
}

static int tensor(const struct ckpt *c, const struct ckpt_tensor *t,
		  const char *name, struct diag *d)
{
	(void)c;
	if (!t->dtype->st)
		return diag_errno(d, -EINVAL, "%s: safetensors has no dtype "
				  "for %s", name, t->dtype->name);
	if (t->dtype->pack && !t->ndim)
		return diag_errno(d, -EINVAL, "%s: a 0-d %s tensor holds %u "
				  "values, which safetensors cannot shape", name,
				  t->dtype->name, t->dtype->pack);
	if (t->requires_grad || t->parameter)
		return diag_errno(d, -EPERM, "%s: safetensors files keep no "
				  "%s flag", name, t->parameter ? "Parameter" :
				  "requires_grad");
	return 0;
}

static int xattr(const struct ckpt *c, const char *name, struct diag *d)
{
	(void)c;
	if (strncmp(name, "user.meta.", 10))
		return 0;
	return diag_errno(d, -EPERM, "%s: the __metadata__ of a safetensors "
			  "file cannot be edited through the mount (ptrepack "
			  "and write-back keep it as it is)", name);
}

const struct ckpt_rules ckpt_st_rules = {
	.mkdir = mkdir_rule, .key = key, .dtype = dtype, .tensor = tensor,
	.xattr = xattr,
};

static int records(const struct ckpt *c, ckpt_record_fn fn, void *arg)
{
	return fn(arg, "header.json", 8, c->hdr_len, NULL);
}

/* user.st_dtype: the header's name of the dtype; user.st_shape: the
 * header's shape, where it is not the tensor's (a sub-byte dtype) */
static void tensor_attrs(const struct ckpt *c, const struct ckpt_tensor *t,
			 ckpt_attr_fn fn, void *arg)
{
	const struct ckpt_dtype *dt = t->dtype;
	const int64_t *v = dt->bits ? t->x->st_shape : t->shape;
	int n = dt->bits ? t->x->st_ndim : t->ndim;
	char buf[CKPT_MAX_DIMS * 21 + 1];
	size_t o = 0;

	(void)c;
	if (dt->st)
		fn(arg, "user.st_dtype", dt->st);
	if (!dt->bits && !dt->pack)
		return;
	buf[0] = 0;
	for (int k = 0; k < n && o < sizeof(buf); k++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%lld",
				      k ? "," : "", (long long)v[k] *
				      (k == n - 1 && dt->pack ? dt->pack : 1));
	fn(arg, "user.st_shape", buf);
}

/* The file ends with its last tensor (which its own reader insists on). */
static uint32_t verify(struct ckpt *c, bool no_crc, uint64_t *checked,
		       ckpt_problem_fn fn, void *arg)
{
	(void)no_crc;
	(void)checked;
	return ckpt_trailing(c, c->data_end, "tensor's data",
			     " (safetensors refuses the file)", fn, arg);
}

static int save(struct ckpt *c, const char *target,
		const struct ckpt_write_opts *o, const struct stat *like,
		struct diag *d)
{
	return ckpt_save(c, target, o, like, NULL, NULL, d);
}

static void describe(const struct ckpt *c, char *buf, size_t size)
{
	snprintf(buf, size, "safetensors file, header %" PRIu64 " bytes at "
		 "0x8, data at 0x%" PRIx64 ", %u metadata entr%s", c->hdr_len,
		 8 + c->hdr_len, c->nmeta, c->nmeta == 1 ? "y" : "ies");
}

const struct ckpt_fmt ckpt_fmt_safetensors = {
	.id = CKPT_SAFETENSORS, .name = "safetensors",
	.files = "safetensors files", .one = "a safetensors file",
	.caps = CKPT_CAP_WRITE | CKPT_CAP_OFFSETS | CKPT_CAP_FLAT,
	.rewrite_as = "file",
	.out = CKPT_OUT_ST,
	.converted = ", converted from safetensors",
	.bid = bid, .open = open_st, .rules = &ckpt_st_rules,
	.describe = describe, .records = records, .tensor_attrs = tensor_attrs, .verify = verify,
	.save = save,
};
