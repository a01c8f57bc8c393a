/*
 * gguf_write.c - any checkpoint as one GGUF file, laid out byte for byte
 * as gguf-py's GGUFWriter lays one out (gguf_writer.py: write_header_to_
 * file, write_kv_data_to_file, write_ti_data_to_file, write_tensors_to_
 * file):
 *
 *   OFFSET  SIZE  FIELD
 *   0       4     magic "GGUF"
 *   4       4     u32 version 3 (a version 2 source too: the same layout)
 *   8       8     u64 tensor count
 *   16      8     u64 key/value count
 *   24      ...   key/values in order (gguf_wopt.c): string key, u32 type,
 *                 value
 *   ...     ...   tensor infos in the model's order: string name, u32
 *                 n_dims, u64 ne[n_dims] (torch's shape reversed), u32
 *                 ggml type, u64 offset: the sizes of the tensors before
 *                 it, each rounded up to the alignment
 *   ...     ...   zeros up to a multiple of general.alignment (else 32)
 *   data    ...   each tensor's bytes and zeros up to a multiple of the
 *                 alignment, the last one's too (write_padding)
 *
 * Numbers are little-endian, or as a big-endian GGUF source has them: its
 * key/values copied, the infos and the plain types' elements big-endian;
 * BF16 and block data stay little-endian, as gguf-py writes them.
 *
 * The tensors are the model flattened as for safetensors (ckpt_stflat.c:
 * keys joined with '.'), each name written (a tie under every name), in
 * the model's order.  One over its GGUF tensor info keeps that info's type
 * and ne[]; any other takes its dtype's type (float32 F32, float16 F16,
 * bfloat16 BF16, float64 F64, int8..int64 I8..I64).
 *
 * type=T converts floating tensors as convert_hf_to_gguf.py's
 * prepare_tensors() does (llama.cpp, 2025), from float32 values (a
 * float64 rounded once; float16 and bfloat16 exact) by the codecs of
 * gguf_types.h, which are gguf.quants' bit for bit:
 *   - 0-d and 1-d tensors, and names ending "_norm.weight": F32
 *   - names not ending ".weight", ".lora_a" or ".lora_b", and the kinds
 *     it keeps in F32 (always_f32 below, by name whatever the
 *     architecture): F32
 *   - else T; Q8_0 of rows (ne[0]) that are not whole blocks of 32 falls
 *     back to F16, as quantize()'s QuantError does there
 * Unlike the script: integer tensors and block-quantized ones of a GGUF
 * stay as they are (it makes floats of every tensor), no shape is
 * squeezed or name mapped, and a tensor whose type stays is copied (a
 * bfloat16 signalling NaN keeps its bits).
 *
 * One pass: the header is planned whole, then written through seqout
 * (util/seqout.h: a GGUF's key/values copied from its file), then the data,
 * copied in the kernel, or read through the model (overlay edits, views,
 * DCP chunks) and converted 1 Mi elements at a time, on up to 4 threads
 * (convert()): memory does not
 * grow with the tensors.
 */
#include "ckpt/ckpt_stint.h"
#include "ckpt/ckpt_format.h"
#include "gguf_write.h"
#include "pickle/pkl_int.h"
#include "util/io.h"
#include "util/seqout.h"
#include "util/le.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GGUF_VERSION	3u
#define CHUNK		(1u << 20)	/* elements read, converted at once */
#define CONVERTERS	4		/* threads converting a chunk, at most */
#define NAME_MAX_LEN	65535u		/* what gguf_parse.c reads back */

struct gw_tensor {
	const struct st_ent *e;
	const struct gguf_type *from;	/* of the bytes the model gives */
	const struct gguf_type *to;	/* written */
	bool swap_in;		/* the model's elements are big-endian */
	bool swap_out;		/* the file's elements are big-endian */
	uint32_t ndim;
	uint64_t ne[GGUF_MAX_DIMS];
	uint64_t nbytes;	/* written */
	uint64_t off;		/* in the data section */
};

struct gw {
	struct ckpt *c;
	const struct ckpt_write_opts *o;
	struct diag *d;
	struct gw_head h;
	struct st_flat f;
	struct gw_tensor *t;	/* in the model's order */
	uint32_t n;
	int fd;
	struct seqout *out;
	uint64_t total;		/* bytes of the data section, padding
				   included */
	struct ckpt_write_stats st;
};

/* ---- output: sequential, through w->out ---- */

static int put(struct gw *w, const void *p, size_t n)
{
	int rc = seqout_put(w->out, p, n);

	if (rc)
		return diag_errno(w->d, rc, "cannot write: %s", strerror(-rc));
	w->st.written += n;
	return 0;
}

static int put_num(struct gw *w, uint64_t v, unsigned size)
{
	unsigned char b[8];

	ord_store(b, size, w->h.big, v);
	return put(w, b, size);
}

static int put_str(struct gw *w, const char *s, size_t n)
{
	int rc = put_num(w, n, 8);

	return rc ? rc : put(w, s, n);
}

/* Zeros up to the next multiple of the alignment (from offset @n). */
static int pad(struct gw *w, uint64_t n)
{
	static const unsigned char zero[256];
	uint64_t k = (w->h.align - n % w->h.align) % w->h.align;
	int rc = 0;

	for (; k && !rc; k -= k < sizeof(zero) ? k : sizeof(zero))
		rc = put(w, zero, k < sizeof(zero) ? k : sizeof(zero));
	return rc;
}

/* @n bytes at @off of @fd, copied in the kernel. */
static int copy_in(struct gw *w, int fd, uint64_t off, uint64_t n,
		   const char *what)
{
	int rc = seqout_copy(w->out, fd, off, n);

	if (rc)
		return diag_errno(w->d, rc, "%s: cannot copy its %" PRIu64
				  " bytes: %s", what, n, strerror(-rc));
	w->st.copied += n;
	return 0;
}

/* ---- the plan: each tensor's type, dims and place ---- */

static bool ends(const char *s, size_t n, const char *tail)
{
	size_t k = strlen(tail);

	return n >= k && !memcmp(s + n - k, tail, k);
}

/* Does @name match @pat, where "{bid}" stands for a decimal number? */
static bool match_bid(const char *name, const char *pat)
{
	while (*pat) {
		if (!strncmp(pat, "{bid}", 5)) {
			if (*name < '0' || *name > '9')
				return false;
			while (*name >= '0' && *name <= '9')
				name++;
			pat += 5;
		} else if (*name++ != *pat++) {
			return false;
		}
	}
	return !*name;
}

/* The kinds prepare_tensors() keeps in F32 (gguf-py constants.py's
 * TENSOR_NAMES of FFN_GATE_INP ... SSM_CONV1D_V, with ".weight"). */
static bool always_f32(const char *name)
{
	static const char *const pat[] = {
		"blk.{bid}.ffn_gate_inp.weight",
		"blk.{bid}.ffn_gate_inp_shexp.weight", "position_embd.weight",
		"token_types.weight", "blk.{bid}.ssm_conv1d.weight",
		"blk.{bid}.shortconv.conv.weight",
		"blk.{bid}.time_mix_first.weight",
		"blk.{bid}.time_mix_w1.weight", "blk.{bid}.time_mix_w2.weight",
		"blk.{bid}.time_mix_decay_w1.weight",
		"blk.{bid}.time_mix_decay_w2.weight",
		"blk.{bid}.time_mix_lerp_fused.weight",
		"posnet.{bid}.norm1.weight", "posnet.{bid}.norm2.weight",
		"v.position_embd.weight", "a.position_embd.weight",
		"blk.{bid}.altup_correct_coef.weight",
		"blk.{bid}.altup_predict_coef.weight",
		"blk.{bid}.ssm_conv1d_q.weight",
		"blk.{bid}.ssm_conv1d_k.weight",
		"blk.{bid}.ssm_conv1d_v.weight",
	};

	for (size_t i = 0; i < sizeof(pat) / sizeof(*pat); i++)
		if (match_bid(name, pat[i]))
			return true;
	return false;
}

/* What type=T makes of tensor @t (the rule above). */
static const struct gguf_type *target(const struct gw *w,
				      const struct gw_tensor *t)
{
	const char *name = t->e->name;
	size_t n = t->e->len;
	const struct gguf_type *to = w->h.to;

	if (!to || !t->from->torch || !strstr(t->from->torch, "float"))
		return t->from;
	if (t->ndim <= 1 || ends(name, n, "_norm.weight") || always_f32(name) ||
	    !(ends(name, n, ".weight") || ends(name, n, ".lora_a") ||
	      ends(name, n, ".lora_b")))
		return gguf_type_by_name("F32");
	if (to->block > 1 && t->ne[0] % to->block)
		return gguf_type_by_name("F16");
	return to;
}

/* The GGUF tensor info tensor @t still is (the source's own storage,
 * whole, as it was), or NULL. */
static const struct gguf_tensor *info_of(const struct ckpt *c,
					 const struct ckpt_tensor *t)
{
	const struct ckpt_storage *s = t->storage;
	const struct gguf_tensor *gt;

	if (c->format != CKPT_GGUF || !c->gguf || !s ||
	    s->index >= c->gguf->nt || s->fresh || s->retyped || t->fresh ||
	    t->offset || !t->contiguous || t->dtype != s->dtype)
		return NULL;
	gt = &c->gguf->t[s->index];
	if (ckpt_tensor_nbytes(t) != gt->nbytes)
		return NULL;
	if (!gguf_plain(c->gguf, gt))
		return gt;	/* its bytes, however shaped */
	if (t->ndim != gt->ndim)
		return NULL;
	for (uint32_t k = 0; k < gt->ndim; k++)
		if ((uint64_t)t->shape[k] != gt->ne[gt->ndim - 1 - k])
			return NULL;
	return gt;
}

static int plan_tensor(struct gw *w, struct gw_tensor *t)
{
	const struct ckpt_tensor *ct = t->e->t;
	const struct gguf_tensor *gt = info_of(w->c, ct);
	const char *name = t->e->name;
	bool big = w->c->byteorder && !strcmp(w->c->byteorder, "big");
	uint64_t numel;

	if (t->e->len > NAME_MAX_LEN ||
	    !pkl_utf8_valid((const unsigned char *)name, t->e->len))
		return diag_errno(w->d, -EINVAL, "'%.64s': a GGUF tensor name "
				  "is UTF-8 of at most %u bytes", name,
				  NAME_MAX_LEN);
	if (gt) {
		t->from = gt->type;
		t->ndim = gt->ndim;
		memcpy(t->ne, gt->ne, sizeof(t->ne));
	} else {
		if (!(t->from = gguf_type_by_torch(ct->dtype->name)))
			return diag_unsupported(w->d, ct->pkl_off, "%s: GGUF "
						"has no type for %s", name,
						ct->dtype->name);
		if (ct->ndim > GGUF_MAX_DIMS)
			return diag_unsupported(w->d, ct->pkl_off, "%s: %u "
						"dimensions, over GGUF's %d",
						name, ct->ndim, GGUF_MAX_DIMS);
		t->ndim = ct->ndim;
		for (uint32_t k = 0; k < t->ndim; k++)
			t->ne[k] = (uint64_t)ct->shape[t->ndim - 1 - k];
	}
	/* a big-endian model's elements, but a GGUF's BF16 and blocks,
	   which it holds as bytes */
	t->swap_in = big && ct->dtype != ckpt_dtype_bytes() &&
		     t->from->block == 1;
	t->to = target(w, t);
	t->swap_out = w->h.big && t->to->torch && strcmp(t->to->name, "BF16");
	numel = gt ? gt->nbytes / gt->type->bytes * gt->type->block :
		ct->numel;
	t->nbytes = numel / t->to->block * t->to->bytes;
	return 0;
}

static int by_seq(const void *a, const void *b)
{
	const struct st_ent *x = *(const struct st_ent *const *)a;
	const struct st_ent *y = *(const struct st_ent *const *)b;

	return (x->seq > y->seq) - (x->seq < y->seq);
}

static int plan(struct gw *w)
{
	const struct st_ent **order = malloc((w->f.n + 1) * sizeof(*order));
	bool quantized = false;
	int rc = 0;

	w->t = calloc(w->f.n + 1, sizeof(*w->t));
	if (!order || !w->t) {
		free(order);
		return diag_nomem(w->d);
	}
	for (uint32_t i = 0; i < w->f.n; i++)
		order[i] = &w->f.e[i];
	qsort(order, w->f.n, sizeof(*order), by_seq);
	for (uint32_t i = 0; i < w->f.n && !rc; i++) {
		struct gw_tensor *t = &w->t[w->n++];

		t->e = order[i];
		rc = plan_tensor(w, t);
		quantized |= t->to != t->from && t->to->block > 1;
		t->off = w->total;
		w->total += (t->nbytes + w->h.align - 1) / w->h.align *
			    w->h.align;
	}
	free(order);
	/* as convert_hf_to_gguf.py writes it */
	if (!rc && quantized)
		rc = gguf_whead_u32(&w->h, "general.quantization_version", 2,
				    w->d);
	return rc;
}

/* ---- writing ---- */

static int put_header(struct gw *w)
{
	int rc = put(w, GGUF_MAGIC, 4);

	if (!rc)
		rc = put_num(w, GGUF_VERSION, 4);
	if (!rc)
		rc = put_num(w, w->n, 8);
	if (!rc)
		rc = put_num(w, w->h.n, 8);
	for (uint32_t i = 0; i < w->h.n && !rc; i++) {
		const struct gw_kv *kv = &w->h.kv[i];

		rc = put_str(w, kv->key, kv->klen);
		if (!rc)
			rc = put_num(w, kv->type, 4);
		if (!rc && kv->type == GGUF_ARRAY &&
		    !(rc = put_num(w, kv->atype, 4)))
			rc = put_num(w, kv->count, 8);
		if (!rc)
			rc = kv->src ? copy_in(w, w->c->fd, kv->src->val,
					       kv->len, kv->key) :
			     put(w, kv->val, kv->len);
	}
	for (uint32_t i = 0; i < w->n && !rc; i++) {
		const struct gw_tensor *t = &w->t[i];

		rc = put_str(w, t->e->name, t->e->len);
		if (!rc)
			rc = put_num(w, t->ndim, 4);
		for (uint32_t k = 0; k < t->ndim && !rc; k++)
			rc = put_num(w, t->ne[k], 8);
		if (!rc)
			rc = put_num(w, t->to->id, 4);
		if (!rc)
			rc = put_num(w, t->off, 8);
	}
	return rc ? rc : pad(w, seqout_pos(w->out));
}

/* @len bytes at @pos of tensor @e's contents, all of them. */
static int read_full(struct gw *w, const struct st_ent *e, void *buf,
		     uint64_t len, uint64_t pos)
{
	for (uint64_t k = 0; k < len; ) {
		long long got = ckpt_tensor_read(w->c, e->t, (char *)buf + k,
						 len - k, pos + k, w->d);

		if (got <= 0)
			return got < 0 ? (int)got : diag_corrupt(w->d,
					DIAG_NO_OFFSET, "%s ends early",
					e->name);
		k += (uint64_t)got;
	}
	return 0;
}

/* One converter's share of a chunk: @nel values from @in, through @f,
 * into @out (whole blocks of both types). */
struct part {
	const struct gguf_type *from, *to;
	const unsigned char *in;
	float *f;
	unsigned char *out;
	uint64_t nel;
};

static void *convert_part(void *arg)
{
	const struct part *p = arg;
	const float *f = p->f;

	/* float32 in this host's order is its own float32 values */
	if (p->from->id == 0 && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)
		f = (const float *)(const void *)p->in;
	else
		p->from->dequant(p->in, p->f, p->nel / p->from->block);
	p->to->quant(f, p->out, p->nel / p->to->block);
	return NULL;
}

/*
 * @nel values of @from at @in into @to at @out (through @f), the chunk
 * cut into up to CONVERTERS shares of whole blocks on as many threads as
 * there are CPUs (the codecs are pure: each share is the same bits as
 * the whole).  A share whose thread cannot start is done here.
 */
static void convert(const struct gguf_type *from, const struct gguf_type *to,
		    const unsigned char *in, float *f, unsigned char *out,
		    uint64_t nel)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int n = cpus < 1 ? 1 : cpus > CONVERTERS ? CONVERTERS : (int)cpus;
	uint64_t unit = (uint64_t)from->block * to->block, done = 0;
	struct part p[CONVERTERS];
	pthread_t tid[CONVERTERS];
	bool started[CONVERTERS] = { false };

	/* a share of whole blocks of both types: 256 values at least */
	while (unit < 256)
		unit *= 2;
	if (nel / unit < (uint64_t)n)
		n = 1;
	for (int i = 0; i < n; i++) {
		uint64_t k = i == n - 1 ? nel - done :
			     nel / unit / (uint64_t)n * unit;

		p[i] = (struct part){ from, to,
			in + done / from->block * from->bytes, f + done,
			out + done / to->block * to->bytes, k };
		done += k;
	}
	for (int i = 1; i < n; i++)
		started[i] = !pthread_create(&tid[i], NULL, convert_part, &p[i]);
	convert_part(&p[0]);
	for (int i = 1; i < n; i++) {
		if (started[i])
			pthread_join(tid[i], NULL);
		else
			convert_part(&p[i]);
	}
}

/* Tensor @t's bytes read through the model into @in, swapped or
 * converted (through @f into @out) as its plan says. */
static int gather(struct gw *w, const struct gw_tensor *t,
		   unsigned char *in, float *f, unsigned char *out)
{
	const struct gguf_type *from = t->from, *to = t->to;
	uint64_t size = ckpt_tensor_nbytes(t->e->t);
	/* raw bytes: whole elements of any size at a time */
	uint64_t step = from == to ? (uint64_t)CHUNK * 8 :
			(uint64_t)CHUNK * from->bytes;
	int rc = 0;

	for (uint64_t pos = 0; pos < size && !rc; pos += step) {
		uint64_t n = size - pos < step ? size - pos : step;
		uint64_t nel = n / from->bytes * from->block;

		if ((rc = read_full(w, t->e, in, n, pos)))
			break;
		if (from == to ? t->swap_in != t->swap_out : t->swap_in)
			gguf_swap(from, in, nel);
		if (from == to) {
			rc = put(w, in, n);
			continue;
		}
		convert(from, to, in, f, out, nel);
		if (t->swap_out)
			gguf_swap(to, out, nel);
		rc = put(w, out, nel / to->block * to->bytes);
	}
	return rc;
}

/* A tensor that is not all of its storage: counted and said. */
static void note_view(struct gw *w, const struct st_ent *e)
{
	const struct ckpt_tensor *t = e->t;

	if (t->contiguous && !t->offset &&
	    ckpt_tensor_nbytes(t) == t->storage->nbytes)
		return;
	w->st.views++;
	if (w->o->note)
		w->o->note(w->o->note_arg, e->name, "a view of part of a "
			   "storage, or strided: written as a contiguous copy");
}

static int put_tensor(struct gw *w, const struct gw_tensor *t,
		      unsigned char *in, float *f, unsigned char *out)
{
	const struct ckpt_tensor *ct = t->e->t;
	int fd = -1, rc;
	uint64_t off = 0;

	note_view(w, t->e);
	if (t->from != t->to || t->swap_in != t->swap_out ||
	    !ct->contiguous || ckpt_storage_pieced(w->c, ct->storage))
		rc = gather(w, t, in, f, out);
	else if (!(rc = ckpt_storage_data(w->c, ct->storage, &fd, &off, w->d)))
		rc = copy_in(w, fd, off + ct->offset * ct->dtype->size,
			     t->nbytes, t->e->name);
	return rc ? rc : pad(w, t->nbytes);
}

static int write_all(struct gw *w)
{
	unsigned char *in = malloc((size_t)CHUNK * 8);
	unsigned char *out = malloc((size_t)CHUNK * 4);
	float *f = malloc((size_t)CHUNK * sizeof(float));
	uint64_t done = 0;
	int rc2, rc = in && out && f ? put_header(w) : diag_nomem(w->d);

	for (uint32_t i = 0; i < w->n && !rc; i++) {
		rc = put_tensor(w, &w->t[i], in, f, out);
		done += w->t[i].nbytes;
		if (!rc && w->o->progress)
			w->o->progress(w->o->progress_arg, done, w->total);
	}
	w->st.size = seqout_pos(w->out);
	rc2 = seqout_close(w->out);
	w->out = NULL;
	if (!rc && rc2)
		rc = diag_errno(w->d, rc2, "cannot write: %s", strerror(-rc2));
	if (!rc && ftruncate(w->fd, (off_t)w->st.size))
		rc = diag_errno(w->d, -errno, "cannot set the file's size: %s",
				strerror(errno));
	free(in);
	free(out);
	free(f);
	return rc;
}

int gguf_write(struct ckpt *c, int fd, const struct ckpt_write_opts *o,
	       struct diag *d)
{
	struct gw w = { .c = c, .o = o, .d = d, .fd = fd,
			.f = { .out = "GGUF" } };
	int rc = gguf_whead(c, o, &w.h, d);

	if (!rc)
		rc = ckpt_st_flatten(c, o, &w.f, d);
	if (!rc)
		rc = plan(&w);
	if (!rc && (rc = seqout_open(&w.out, fd, 0)))
		rc = diag_nomem(d);
	if (!rc)
		rc = write_all(&w);
	if (!rc && o->stats) {
		w.st.tensors = w.st.records = w.st.storages = w.n;
		w.st.dropped_values = w.f.dropped;
		*o->stats = w.st;
	}
	free(w.t);
	ckpt_st_flat_release(&w.f);
	gguf_whead_release(&w.h);
	return rc;
}
