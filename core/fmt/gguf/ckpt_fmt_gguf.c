/*
 * ckpt_fmt_gguf.c - the descriptor of a GGUF file (gguf_parse.c reads its
 * header, ckpt_gguf.c makes it the model), and what ptverify checks
 * beyond what the reader already refuses.
 *
 *   bytes 0..23       magic, version, tensor and key/value counts
 *   24..info_end      key/values, tensor infos (shown raw as "header")
 *   data..data_end    the tensors' bytes, each at an aligned offset
 *
 * A tensor's attributes: user.ggml_type (its ggml type, "Q8_0") and
 * user.ggml_shape (its ne[] in ggml order, as gguf-dump prints it:
 * "4096,11008" for a torch (11008, 4096) weight).  user.shape stays the
 * shape of the file's elements, which for a block type are its bytes
 * (gguf-py's byte shape); its views are its values, dequantized
 * (coded()), in torch order.
 */
#include "ckpt/ckpt_int.h"
#include "ckpt/ckpt_format.h"
#include "ckpt_fmt_gguf.h"
#include "gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle/pkl_int.h"	/* pkl_utf8_valid() */
#include "util/le.h"
#include "util/sbuf.h"

static bool bid(const unsigned char *h, size_t n)
{
	return gguf_head(h, n);
}

static int open_gguf(struct ckpt *c, unsigned flags, struct diag *d)
{
	(void)flags;
	return ckpt_gguf_open(c, d);
}

static void describe(const struct ckpt *c, char *buf, size_t size)
{
	const struct gguf *g = c->gguf;

	snprintf(buf, size, "GGUF v%u file, %s-endian, %" PRIu64 " key/value%s"
		 ", %" PRIu64 " tensor%s, alignment %u, data at 0x%" PRIx64,
		 g->version, g->big ? "big" : "little", g->nkv,
		 g->nkv == 1 ? "" : "s", g->nt, g->nt == 1 ? "" : "s",
		 g->align, g->data);
}

static int records(const struct ckpt *c, ckpt_record_fn fn, void *arg)
{
	return fn(arg, "header", 0, c->gguf->info_end, NULL);
}

/* Tensor k of the model is tensor info k (ckpt_gguf.c). */
static const struct gguf_tensor *info(const struct ckpt *c,
				      const struct ckpt_tensor *t)
{
	const struct ckpt_storage *s = t->storage;

	return s && s->index < c->gguf->nt ? &c->gguf->t[s->index] : NULL;
}

static void tensor_attrs(const struct ckpt *c, const struct ckpt_tensor *t,
			 ckpt_attr_fn fn, void *arg)
{
	const struct gguf_tensor *gt = info(c, t);
	char buf[GGUF_MAX_DIMS * 21 + 1];
	size_t o = 0;

	if (!gt)
		return;
	fn(arg, "user.ggml_type", gt->type->name);
	buf[0] = 0;
	for (uint32_t k = 0; k < gt->ndim; k++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%" PRIu64,
				      k ? "," : "", gt->ne[k]);
	fn(arg, "user.ggml_shape", buf);
}

/* A tensor that is bytes in the model (a block type; BF16 of a big-endian
 * file) is coded: its values are its type's dequantization. */
static bool coded(const struct ckpt *c, const struct ckpt_tensor *t,
		  struct ckpt_coded *k)
{
	const struct gguf_tensor *gt = info(c, t);

	if (!gt || gguf_plain(c->gguf, gt) || !gt->type->dequant ||
	    t->dtype != ckpt_dtype_bytes() || t->storage->nbytes != gt->nbytes)
		return false;
	/* BF16 of a big-endian file: bfloat16s, only their order is odd */
	k->name = gt->type->torch ? gt->type->torch : gt->type->name;
	k->ndim = (int)gt->ndim;
	k->numel = 1;
	for (uint32_t i = 0; i < gt->ndim; i++) {
		k->shape[i] = (int64_t)gt->ne[gt->ndim - 1 - i];
		k->numel *= gt->ne[gt->ndim - 1 - i];
	}
	k->block = gt->type->block;
	k->bytes = gt->type->bytes;
	k->decode = gt->type->dequant;
	return true;
}

/*
 * A key/value set through the mount: its text must encode as its type
 * (a new key is a string); general.alignment stays a power of two.
 */
static int meta_rule(const struct ckpt *c, const struct ckpt_meta *old,
		     const char *key, const char *val, size_t len,
		     const char **type, struct diag *d)
{
	struct sbuf b = { 0 };
	char *bytes;
	size_t n;
	int rc;

	if (!old)
		*type = "string";
	rc = gguf_kv_encode(key, *type, val, len, c->gguf->big, &b, d);
	bytes = sb_detach(&b, &n);
	if (!rc && !bytes)
		rc = diag_nomem(d);
	if (!rc && !strcmp(key, "general.alignment")) {
		uint32_t a = strcmp(*type, "u32") ? 0 :
			     (uint32_t)ord_load((unsigned char *)bytes, 4,
						c->gguf->big);

		if (!a || (a & (a - 1)))
			rc = diag_errno(d, -EINVAL, "general.alignment: a u32 "
					"power of two, as gguf-py insists");
	}
	free(bytes);
	return rc;
}

static int mkdir_rule(const struct ckpt *c, const char *name,
		      struct diag *d)
{
	(void)c;
	return diag_errno(d, -EPERM, "%s: GGUF files hold no directories, "
			  "only tensors (a '.' in a name is how they nest)",
			  name);
}

static int dtype_rule(const struct ckpt *c, const struct ckpt_dtype *dt,
		      struct diag *d)
{
	(void)c;
	if (gguf_type_by_torch(dt->name))
		return 0;
	return diag_errno(d, -EINVAL, "GGUF has no type for %s", dt->name);
}

/*
 * A tensor a key takes: of a GGUF type (a coded one keeps its own; a new
 * file is bytes until its user.dtype is set, and the writer refuses one
 * left so), at most 4 dimensions, no flags.
 */
static int tensor_rule(const struct ckpt *c, const struct ckpt_tensor *t,
		       const char *name, struct diag *d)
{
	struct ckpt_coded k;

	if (!t->fresh && !ckpt_coded(c, t, &k) && !gguf_type_by_torch(t->dtype->name))
		return diag_errno(d, -EINVAL, "%s: GGUF has no type for %s",
				  name, t->dtype->name);
	if (t->ndim > GGUF_MAX_DIMS)
		return diag_errno(d, -EINVAL, "%s: %u dimensions, over "
				  "GGUF's %d", name, t->ndim, GGUF_MAX_DIMS);
	if (t->requires_grad || t->parameter)
		return diag_errno(d, -EPERM, "%s: GGUF files keep no %s flag",
				  name, t->parameter ? "Parameter" :
				  "requires_grad");
	return 0;
}

static int key_rule(const struct ckpt *c, const char *k, size_t len,
		    struct diag *d)
{
	(void)c;
	if (len > 65535 || !pkl_utf8_valid((const unsigned char *)k, len))
		return diag_errno(d, -EINVAL, "%.80s: a GGUF name is UTF-8 "
				  "text of at most 65535 bytes", k);
	return 0;
}

static const struct ckpt_rules rules = {
	.meta = meta_rule, .mkdir = mkdir_rule, .dtype = dtype_rule,
	.tensor = tensor_rule, .key = key_rule,
};

/* What llama.cpp's reader refuses or warns of that gguf-py reads. */
static uint32_t verify(struct ckpt *c, bool no_crc, uint64_t *checked,
		       ckpt_problem_fn fn, void *arg)
{
	const struct gguf *g = c->gguf;
	uint64_t expect = 0;
	uint32_t n = 0;
	bool quantized = false;
	char msg[200];

	(void)no_crc;
	(void)checked;
	if (!gguf_find(g, "general.architecture") && ++n)
		fn(arg, "gguf", c->path, 24, "no general.architecture key "
		   "(the one key GGUF requires)");
	for (uint64_t i = 0; i < g->nt; i++) {
		const struct gguf_tensor *t = &g->t[i];

		quantized |= !t->type->torch;
		if (t->nlen >= GGUF_MAX_NAME && ++n) {
			snprintf(msg, sizeof(msg), "tensor '%.80s': name of %u "
				 "bytes, over ggml's %d (llama.cpp refuses it)",
				 t->name, t->nlen, GGUF_MAX_NAME - 1);
			fn(arg, "gguf", c->path, t->at, msg);
		}
		/* llama.cpp wants each tensor where the last one's padded
		   end puts it */
		if (t->off != expect && ++n) {
			snprintf(msg, sizeof(msg), "tensor '%.80s' at data "
				 "offset %" PRIu64 ", not %" PRIu64 " where "
				 "the packed layout puts it (llama.cpp refuses "
				 "it)", t->name, t->off, expect);
			fn(arg, "gguf", c->path, t->at, msg);
		}
		expect = t->off + (t->nbytes + g->align - 1) / g->align *
			 g->align;
	}
	if (quantized && !gguf_find(g, "general.quantization_version") && ++n)
		fn(arg, "gguf", c->path, 24, "quantized tensors but no "
		   "general.quantization_version key");
	/* gguf-py pads the last tensor's data to the alignment too */
	return n + ckpt_trailing(c, (c->data_end + g->align - 1) / g->align *
				 g->align, "tensor's padded data", "", fn, arg);
}

static int save(struct ckpt *c, const char *target,
		const struct ckpt_write_opts *o, const struct stat *like,
		struct diag *d)
{
	return ckpt_save(c, target, o, like, NULL, NULL, d);
}

const struct ckpt_fmt ckpt_fmt_gguf = {
	.id = CKPT_GGUF, .name = "gguf", .files = "GGUF files",
	.one = "a GGUF file",
	.caps = CKPT_CAP_WRITE | CKPT_CAP_OFFSETS | CKPT_CAP_FLAT,
	.rewrite_as = "file", .out = CKPT_OUT_FMT, .out_ext = ".gguf",
	.out_opts = "type kv",
	.converted = ", converted from GGUF", .write = gguf_write,
	.save = save,
	.bid = bid, .open = open_gguf, .rules = &rules, .describe = describe,
	.records = records, .tensor_attrs = tensor_attrs, .coded = coded,
	.verify = verify,
};
