/*
 * gguf_wopt.c - what a GGUF file written by gguf_write.c says before its
 * tensors, from the writer's options (ptrepack --gguf-OPTION VALUE, as
 * "OPTION=VALUE" in ckpt_write_opts.fmt_args) and the checkpoint:
 *
 *   type=f32|f16|bf16|q8_0   floating tensors converted (gguf_write.c has
 *                            the rule of which)
 *   kv=KEY=VALUE             KEY set to the string VALUE
 *   kv=KEY:TYPE=VALUE        ... to a value of TYPE: u8 i8 u16 i16 u32 i32
 *                            u64 i64 f32 f64 bool string
 *
 * The key/values in order, as GGUFWriter's dict keeps them (a key set
 * again keeps its place and takes the new type and value):
 *
 *   from a GGUF file   its own, each type and value copied from the file,
 *                      in its byte order, but those edited through the
 *                      mount (c->meta, ckpt_meta.c: removed, set or
 *                      added, encoded from their text); then the
 *                      options' new keys
 *   from anything else general.architecture (from kv=, else config.json
 *                      beside the input: "model_type", else
 *                      "architectures"[0]), then the options' keys
 *
 * Values packed as GGUFWriter._pack_val packs them, by gguf_kv_encode()
 * (gguf_kvset.c, which the mount's edits are checked with): integers in
 * their width, f32 a double rounded once to float (struct.pack('f'),
 * which refuses one past float's range), bool one byte 0 or 1, a string
 * its u64 length and its UTF-8 bytes.  general.alignment must be a u32 power of
 * two, general.architecture a string.  Anything wrong is one line and
 * -EINVAL before a byte of the file is written.
 */
#include "ckpt/ckpt_int.h"
#include "ckpt/ckpt_format.h"
#include "ckpt/ckpt_member.h"
#include "gguf_write.h"
#include "pickle/pkl_int.h"
#include "source/source.h"
#include "util/io.h"
#include "util/jread.h"
#include "util/le.h"
#include "util/sbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_MAX	(16u << 20)	/* a config.json read, at most */
#define ARCH_KEY	"general.architecture"
#define ALIGN_KEY	"general.alignment"

static struct gw_kv *find(struct gw_head *h, const char *key, size_t n)
{
	for (uint32_t i = 0; i < h->n; i++)
		if (h->kv[i].klen == n && !memcmp(h->kv[i].key, key, n))
			return &h->kv[i];
	return NULL;
}

static void kv_clear(struct gw_kv *kv)
{
	free(kv->own_key);
	free(kv->val);
	memset(kv, 0, sizeof(*kv));
}

/* A new last key/value, zeroed. */
static struct gw_kv *append(struct gw_head *h, struct diag *d)
{
	if (h->n == h->cap) {
		uint32_t cap = h->cap ? 2 * h->cap : 16;
		struct gw_kv *v = realloc(h->kv, cap * sizeof(*v));

		if (!v)
			return diag_nomem(d), NULL;
		h->kv = v;
		h->cap = cap;
	}
	memset(&h->kv[h->n], 0, sizeof(*h->kv));
	return &h->kv[h->n++];
}

/*
 * @kv's value from @text as a value of type @type ("u32", "array[i32]"):
 * gguf_kv_encode()'s bytes, an array's element type and count taken out
 * of them into its fields.  0, or -EINVAL with @d set.
 */
static int encode(struct gw_kv *kv, const char *key, const char *type,
		  const char *text, size_t len, bool big, struct diag *d)
{
	struct sbuf b = { 0 };
	unsigned char *p;
	size_t n;
	int rc = gguf_kv_encode(key, type, text, len, big, &b, d);

	p = (unsigned char *)sb_detach(&b, &n);
	if (!rc && !p)
		rc = diag_nomem(d);
	if (rc) {
		free(p);
		return rc;
	}
	if (!strncmp(type, "array[", 6)) {
		kv->type = GGUF_ARRAY;
		kv->atype = (uint8_t)ord_load(p, 4, big);
		kv->count = ord_load(p + 4, 8, big);
		memmove(p, p + 12, n - 12);
		n -= 12;
	} else {
		kv->type = (uint8_t)gguf_vtype_by_name(type, strlen(type));
	}
	kv->val = p;
	kv->len = n;
	return 0;
}

/* @key (@klen bytes) = @text as a value of @type, set in @h (replacing
 * a key it has); @arg names the option in messages. */
static int set_kv(struct gw_head *h, const char *key, size_t klen,
		  unsigned type, const char *text, const char *arg,
		  struct diag *d)
{
	struct gw_kv nk = { 0 }, *kv;
	struct diag quiet;
	uint64_t a;

	if (!klen || !pkl_utf8_valid((const unsigned char *)key, klen))
		return diag_errno(d, -EINVAL, "--gguf-kv %s: the key must be "
				  "UTF-8 text, not empty", arg);
	diag_init(&quiet, d->path);
	if (encode(&nk, arg, gguf_type_name(type), text, strlen(text),
		   h->big, &quiet))
		return diag_errno(d, -EINVAL, "--gguf-kv %s: '%s' is not of "
				  "type %s (%s)", arg, text,
				  gguf_type_name(type),
				  type == GGUF_STRING ? "UTF-8 text" :
				  type == GGUF_BOOL ? "true, false, 1 or 0" :
				  "a number in its range");
	nk.key = nk.own_key = strndup(key, klen);
	nk.klen = (uint32_t)klen;
	if (!nk.val || !nk.key) {
		kv_clear(&nk);
		return diag_nomem(d);
	}
	if (!strcmp(nk.key, ALIGN_KEY) && (type != GGUF_U32 ||
	    !(a = ord_load(nk.val, 4, h->big)) || (a & (a - 1)))) {
		kv_clear(&nk);
		return diag_errno(d, -EINVAL, "--gguf-kv %s: " ALIGN_KEY
				  " is a u32 power of two (" ALIGN_KEY
				  ":u32=64)", arg);
	}
	if (!strcmp(nk.key, ARCH_KEY) && type != GGUF_STRING) {
		kv_clear(&nk);
		return diag_errno(d, -EINVAL, "--gguf-kv %s: " ARCH_KEY
				  " is a string", arg);
	}
	kv = find(h, nk.key, klen);
	if (!kv && !(kv = append(h, d))) {
		kv_clear(&nk);
		return -ENOMEM;
	}
	kv_clear(kv);
	*kv = nk;
	return 0;
}

/* kv=KEY[:TYPE]=VALUE (@arg after "kv="). */
static int opt_kv(struct gw_head *h, const char *arg, struct diag *d)
{
	const char *eq = strchr(arg, '='), *colon;
	size_t klen = eq ? (size_t)(eq - arg) : 0;
	int type = GGUF_STRING;

	if (!eq || !klen)
		return diag_errno(d, -EINVAL, "--gguf-kv %s: not KEY=VALUE or "
				  "KEY:TYPE=VALUE", arg);
	for (colon = eq; colon > arg && colon[-1] != ':'; colon--)
		;
	if (colon-- > arg) {
		type = gguf_vtype_by_name(colon + 1, (size_t)(eq - colon - 1));
		if (type < 0)
			return diag_errno(d, -EINVAL, "--gguf-kv %s: '%.*s' is "
					  "not a type (u8 i8 u16 i16 u32 i32 "
					  "u64 i64 f32 f64 bool string)", arg,
					  (int)(eq - colon - 1), colon + 1);
		klen = (size_t)(colon - arg);
	}
	return set_kv(h, arg, klen, (unsigned)type, eq + 1, arg, d);
}

/* The options, in order, into @h. */
static int options(struct gw_head *h, const struct ckpt_write_opts *o,
		   struct diag *d)
{
	static const char *const types[] = { "F32", "F16", "BF16", "Q8_0" };
	int rc = 0;

	for (uint32_t i = 0; i < o->nfmt_args && !rc; i++) {
		const char *a = o->fmt_args[i];

		if (!strncmp(a, "kv=", 3)) {
			rc = opt_kv(h, a + 3, d);
			continue;
		}
		if (strncmp(a, "type=", 5))
			return diag_errno(d, -EINVAL, "--gguf-%.*s: no such "
					  "option of the GGUF writer (--gguf-"
					  "type, --gguf-kv)",
					  (int)strcspn(a, "="), a);
		h->to = NULL;
		for (size_t k = 0; k < sizeof(types) / sizeof(*types); k++)
			if (!strcasecmp(a + 5, types[k]))
				h->to = gguf_type_by_name(types[k]);
		if (!h->to)
			return diag_errno(d, -EINVAL, "--gguf-type %s: not one "
					  "of f32, f16, bf16, q8_0", a + 5);
	}
	return rc;
}

/* config.json's bytes: a folder's own (an HF folder's, a DCP
 * directory's), else the one beside c->path.  *@fd -1: there is none;
 * *@close_it: ours. */
static int config_fd(struct ckpt *c, int *fd, uint64_t *size, bool *close_it)
{
	const char *slash = c->path ? strrchr(c->path, '/') : NULL;
	struct diag quiet;
	struct stat st;
	uint32_t n = 0;
	char *path;
	bool dir;
	size_t k;
	int rc;

	*fd = -1;
	*close_it = false;
	rc = ckpt_folder_files(c, &n);
	if (rc) {
		for (uint32_t i = 0; rc >= 0 && i < n; i++) {
			const struct src_member *m = ckpt_folder_file(c, i);

			if (m && !strcmp(m->name, "config.json")) {
				*fd = m->fd;
				*size = m->size;
			}
		}
		return rc < 0 ? rc : 0;
	}
	if (c->remote || !c->path)
		return 0;
	dir = !stat(c->path, &st) && S_ISDIR(st.st_mode);
	k = dir ? strlen(c->path) : slash ? (size_t)(slash - c->path) : 0;
	path = malloc(k + sizeof("/config.json"));
	if (!path)
		return -ENOMEM;
	memcpy(path, c->path, k);
	strcpy(path + k, dir || slash ? "/config.json" : "config.json");
	diag_init(&quiet, path);
	*fd = src_open_path(path, &st, &quiet);
	free(path);
	if (*fd >= 0 && !S_ISREG(st.st_mode)) {
		close(*fd);
		*fd = -1;
	}
	*fd = *fd < 0 ? -1 : *fd;
	*close_it = *fd >= 0;
	*size = *fd >= 0 ? (uint64_t)st.st_size : 0;
	return 0;
}

/* config.json's "model_type", else "architectures"[0], into @arch (NULL
 * when there is none). */
static int config_arch(struct ckpt *c, char **arch, struct diag *d)
{
	struct arena a = { 0 };
	struct jread *j = NULL;
	const struct jread *v;
	const char *why, *s = NULL;
	uint64_t size = 0;
	size_t at;
	bool own;
	char *text = NULL;
	int fd, rc = config_fd(c, &fd, &size, &own);

	*arch = NULL;
	if (rc)
		return diag_errno(d, rc, "cannot open the folder's files: %s",
				  strerror(-rc));
	if (fd < 0 || size > CONFIG_MAX)
		goto out;
	text = malloc(size + 1);
	if (!text) {
		rc = diag_nomem(d);
		goto out;
	}
	if (io_pread_full(fd, text, size, 0) ||
	    jread_parse(text, size, &a, &j, &at, &why) || j->kind != JREAD_OBJ)
		goto out;	/* not a config to read: as if none */
	v = jread_get(j, "model_type");
	s = jread_str(v);
	if (!s || !*s) {
		v = jread_get(j, "architectures");
		s = v && v->kind == JREAD_ARR && v->n ? jread_str(v->v[0]) :
		    NULL;
	}
	if (s && *s && !(*arch = strdup(s)))
		rc = diag_nomem(d);
out:
	if (own)
		close(fd);
	free(text);
	arena_release(&a);
	return rc;
}

/* general.architecture first: the option's, else config.json's. */
static int architecture(struct ckpt *c, struct gw_head *h, struct diag *d)
{
	struct gw_kv *kv = find(h, ARCH_KEY, strlen(ARCH_KEY)), first;
	char *arch;
	int rc;

	if (!kv) {
		if ((rc = config_arch(c, &arch, d)))
			return rc;
		if (!arch)
			return diag_unsupported(d, DIAG_NO_OFFSET, "no GGUF "
						"architecture: no config.json "
						"with a model_type beside the "
						"input; pass --gguf-kv "
						ARCH_KEY "=NAME");
		rc = set_kv(h, ARCH_KEY, strlen(ARCH_KEY), GGUF_STRING, arch,
			    "(config.json's model_type)", d);
		free(arch);
		if (rc)
			return rc;
		kv = &h->kv[h->n - 1];
	}
	first = *kv;
	memmove(h->kv + 1, h->kv, (size_t)(kv - h->kv) * sizeof(*kv));
	h->kv[0] = first;
	return 0;
}

int gguf_whead(struct ckpt *c, const struct ckpt_write_opts *o,
	       struct gw_head *h, struct diag *d)
{
	const struct gguf *g = c->format == CKPT_GGUF ? c->gguf : NULL;
	const struct gw_kv *a;
	int rc;

	h->big = g && g->big;
	/* its key/values as the mount left them (c->meta: entry i is the
	   file's key/value i, then keys added; ckpt_meta.c) */
	for (uint32_t i = 0; g && i < c->nmeta; i++) {
		const struct ckpt_meta *m = &c->meta[i];
		struct gw_kv *kv;

		if (m->removed)
			continue;
		if (!(kv = append(h, d)))
			return -ENOMEM;
		if (m->edited) {
			kv->key = kv->own_key = strndup(m->key, m->klen);
			kv->klen = (uint32_t)m->klen;
			if (!kv->key)
				return diag_nomem(d);
			rc = encode(kv, m->key, m->type, m->val, m->vlen,
				    h->big, d);
			if (rc)
				return rc;
			continue;
		}
		*kv = (struct gw_kv){ .key = g->kv[i].key,
				      .klen = g->kv[i].klen,
				      .type = g->kv[i].type,
				      .atype = g->kv[i].atype,
				      .count = g->kv[i].count,
				      .src = &g->kv[i], .len = g->kv[i].len };
	}
	rc = options(h, o, d);
	if (!rc && !g)
		rc = architecture(c, h, d);
	if (rc)
		return rc;
	a = find(h, ALIGN_KEY, strlen(ALIGN_KEY));
	h->align = GGUF_ALIGN_DEFAULT;
	if (a && a->src)
		h->align = g->align;	/* the parser checked it */
	else if (a && a->type == GGUF_U32)	/* the meta rule checked it */
		h->align = (uint32_t)ord_load(a->val, 4, h->big);
	return 0;
}

int gguf_whead_u32(struct gw_head *h, const char *key, uint32_t v,
		   struct diag *d)
{
	struct gw_kv *kv;

	if (find(h, key, strlen(key)))
		return 0;
	if (!(kv = append(h, d)))
		return -ENOMEM;
	kv->key = kv->own_key = strdup(key);
	kv->klen = (uint32_t)strlen(key);
	kv->type = GGUF_U32;
	kv->len = 4;
	kv->val = malloc(4);
	if (!kv->key || !kv->val)
		return diag_nomem(d);
	ord_store(kv->val, 4, h->big, v);
	return 0;
}

void gguf_whead_release(struct gw_head *h)
{
	for (uint32_t i = 0; i < h->n; i++)
		kv_clear(&h->kv[i]);
	free(h->kv);
	memset(h, 0, sizeof(*h));
}
