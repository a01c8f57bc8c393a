/*
 * cvt_quant.c - weights to block-scaled float8_e4m3fn (ptrepack --quant
 * fp8-block[:N]), the layout DeepSeek-V3 ships: X.weight float8_e4m3fn
 * and X.weight_scale_inv float32 of (ceil(rows/N), ceil(cols/N)), one
 * value per N x N block, edge blocks partial.  Per block, in float32 (the
 * weight widened as .float() widens it), as weight_quant() in DeepSeek-V3's
 * inference/kernel.py computes it:
 *
 *   amax = max(|x|) over the block     (NaN if any element is NaN)
 *   s    = max(amax, 1e-4) / 448       (stored as the scale)
 *   y    = (x / s).to(float8_e4m3fn)   (a true division, saturating)
 *
 * The clamp is not in kernel.py, where a block of zeros gives 0 / 0 = NaN
 * for every element (and a scale of 0, so NaN back): it is DeepSeek's
 * own DeepGEMM's (per_block_cast_to_fp8(): amax.clamp(1e-4)), so zeros
 * stay zeros.  It changes nothing else but blocks whose largest magnitude
 * is below 1e-4.  DeepGEMM multiplies by 1 / s where kernel.py divides:
 * we divide, as the reference named first does (the two differ in the
 * last bit of some quotients, so in some float8 codes).  A NaN amax keeps
 * the bits of the block's first NaN, sign cleared, as abs() then amax()
 * give them.  Which tensors: cvt_scale.h, cvt_quant().
 */
#include "cvt/cvt_scale.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cvt/cvt.h"
#include "diag/diag.h"
#include "util/io.h"
#include "util/le.h"

#define E4M3_MAX	448.0f
#define AMAX_MIN	1e-4f

/* Is segment @s (@n bytes) of a key path one the reference leaves
 * alone: lm_head, wte, wpe, or one holding "embed" or "norm"? */
static bool kept_segment(const char *s, size_t n)
{
	static const char *const whole[] = { "lm_head", "wte", "wpe" };

	for (size_t i = 0; i < sizeof(whole) / sizeof(*whole); i++)
		if (n == strlen(whole[i]) && !memcmp(s, whole[i], n))
			return true;
	for (size_t i = 0; i + 4 <= n; i++)
		if (!memcmp(s + i, "norm", 4) ||
		    (i + 5 <= n && !memcmp(s + i, "embed", 5)))
			return true;
	return false;
}

/*
 * By default: a tensor named "weight" or "X.weight" whose path has no
 * such part (split at '/' and '.'), and whose
 * module is not a MoE router's "gate" (DeepSeek-V3 ships all of those in
 * bfloat16).
 */
static bool default_pick(const char *path)
{
	size_t n = strlen(path), i = 0, prev = 0, last = 0;

	if (n < 6 || strcmp(path + n - 6, "weight") ||
	    (n > 6 && path[n - 7] != '.' && path[n - 7] != '/'))
		return false;
	while (i <= n) {
		size_t j = i;

		while (j < n && path[j] != '/' && path[j] != '.')
			j++;
		if (kept_segment(path + i, j - i))
			return false;
		prev = last;
		last = i;
		i = j + 1;
	}
	return !(last > prev && last - prev == 5 &&
		 !memcmp(path + prev, "gate", 4));
}

/* A weight to quantize. */
struct qw {
	struct ckpt_node *w;	/* first: cvt_scale_collect() */
	uint64_t rows, cols, br, bc;	/* br x bc blocks */
};

/* Node @n as a weight to quantize (0), or not (1), or why not (-EINVAL):
 * a cvt_scale_pick_fn over a struct qw. */
static int pick(const struct ckpt *c, struct ckpt_node *n, const void *arg,
		void *item, struct diag *d)
{
	const struct cvt_scale_opt *o = arg;
	struct qw *q = item;
	const struct ckpt_tensor *t = n->tensor;
	const struct ckpt_dtype *e4 = ckpt_dtype_by_name("float8_e4m3fn");
	char *path = ckpt_node_path(n), name[CKPT_NAME_MAX + 16];
	const char *why;
	bool m;

	if (!path)
		return diag_nomem(d);
	m = o->glob ? !fnmatch(o->glob, path, 0) : default_pick(path);
	free(path);
	if (!m || (!o->glob && (t->kind != CKPT_T_STRIDED || t->ndim != 2 ||
				t->dtype->cls != CKPT_DT_FLOAT ||
				t->dtype->size == 1)))
		return 1;
	if (t->kind != CKPT_T_STRIDED || t->ndim != 2 ||
	    t->dtype->cls != CKPT_DT_FLOAT || !cvt_supported(t->dtype) ||
	    t->dtype->size == 1)
		return cvt_scale_refuse(d, n, "cannot quantize it: %s",
					t->kind != CKPT_T_STRIDED ? "not a "
					"plain tensor" : t->ndim != 2 ?
					"not 2-d" : t->dtype->size == 1 ?
					"float8 already" : "not floating");
	snprintf(name, sizeof(name), "%s_scale_inv", n->name);
	if (strlen(n->name) > CKPT_NAME_MAX - 10 ||
	    ckpt_node_child(n->parent, name))
		return cvt_scale_refuse(d, n, "cannot quantize it: %s is "
					"there already", name);
	why = cvt_scale_whole(c, t, e4);
	if (why)
		return cvt_scale_refuse(d, n, "cannot quantize it: %s", why);
	q->w = n;
	q->rows = (uint64_t)t->shape[0];
	q->cols = (uint64_t)t->shape[1];
	q->br = (q->rows + o->block - 1) / o->block;
	q->bc = (q->cols + o->block - 1) / o->block;
	return 0;
}

/* Rows [0, @h) x cols [@c0, @c1) of the @cols-wide @x: the scale. */
static float block_scale(const float *x, uint64_t cols, uint64_t h,
			 uint64_t c0, uint64_t c1)
{
	uint32_t nan = 0;
	float m = 0.0f;

	for (uint64_t r = 0; r < h; r++)
		for (uint64_t j = c0; j < c1; j++) {
			float a = __builtin_fabsf(x[r * cols + j]);

			if (a != a && !nan)
				nan = f32_bits(a);
			else if (a > m)
				m = a;
		}
	if (nan)
		m = f32_of(nan);
	else if (m < AMAX_MIN)
		m = AMAX_MIN;
	return m / E4M3_MAX;
}

/* Weight @q's float8 codes into @fd at @off, its scales after them. */
static int quant_one(struct ckpt *c, const struct qw *q, uint32_t nb,
		     int fd, uint64_t off, struct diag *d)
{
	const struct ckpt_dtype *f32 = ckpt_dtype_by_name("float32");
	const struct ckpt_dtype *e4 = ckpt_dtype_by_name("float8_e4m3fn");
	const struct ckpt_tensor *t = q->w->tensor;
	uint64_t isz = t->dtype->size, span = nb * q->cols;
	unsigned char *in = malloc(span * isz + 1), *out = malloc(span + 1);
	float *x = malloc(span * sizeof(float) + 1);
	float *sc = malloc(q->br * q->bc * sizeof(float) + 1);
	int rc = in && out && x && sc ? 0 : diag_nomem(d);

	for (uint64_t i = 0; i < q->br && !rc; i++) {
		uint64_t r0 = i * nb, h = q->rows - r0 < nb ? q->rows - r0 : nb;
		long long got = ckpt_tensor_read(c, t, in, h * q->cols * isz,
						 r0 * q->cols * isz, d);

		if (got >= 0 && (uint64_t)got != h * q->cols * isz)
			got = diag_corrupt(d, DIAG_NO_OFFSET, "%s ends early",
					   q->w->name);
		if (got < 0) {
			rc = (int)got;
			break;
		}
		cvt_elems(t->dtype, f32, false, CVT_TORCH2, in, x, h * q->cols);
		for (uint64_t j = 0; j < q->bc; j++) {
			uint64_t c0 = j * nb, c1 = c0 + nb < q->cols ? c0 + nb :
				      q->cols;
			float s = block_scale(x, q->cols, h, c0, c1);

			sc[i * q->bc + j] = s;
			for (uint64_t r = 0; r < h; r++)
				for (uint64_t k = c0; k < c1; k++)
					x[r * q->cols + k] /= s;
		}
		cvt_elems(f32, e4, false, CVT_TORCH2, x, out, h * q->cols);
		rc = io_pwrite_full(fd, out, h * q->cols, off + r0 * q->cols);
	}
	if (!rc)
		rc = io_pwrite_full(fd, sc, q->br * q->bc * sizeof(float),
				    off + q->rows * q->cols);
	if (rc && !diag_failed(d))
		diag_errno(d, rc, "%s quantized: %s", q->w->name,
			   strerror(-rc));
	free(in);
	free(out);
	free(x);
	free(sc);
	return rc;
}

/* X.weight_scale_inv beside @q's weight: its bytes at @off of @fd. */
static int add_scale(struct ckpt *c, const struct qw *q, int fd,
		     uint64_t off, struct diag *d)
{
	struct ckpt_node *w = q->w, *n;
	struct ckpt_storage *s = ckpt_storage_fresh(c);
	struct ckpt_tensor *t;
	size_t len = strlen(w->name);
	char *name = s ? arena_alloc(&c->arena, len + 11) : NULL;

	if (!name || !(t = ckpt_tensor_fresh(c, s)) ||
	    !(n = ckpt_node_fresh(c, CKPT_N_TENSOR, "Tensor")))
		return diag_nomem(d);
	memcpy(name, w->name, len);
	memcpy(name + len, "_scale_inv", 11);
	s->fd = fd;
	s->data_off = off;
	s->nbytes = q->br * q->bc * sizeof(float);
	s->location = w->tensor->storage->location;
	t->dtype = ckpt_dtype_by_name("float32");
	t->shape_set = true;
	t->ndim = 2;
	t->shape[0] = (int64_t)q->br;
	t->shape[1] = (int64_t)q->bc;
	ckpt_tensor_fresh_sync(t);
	n->tensor = t;
	n->step = (uint8_t)ckpt_dir_step(w->parent);
	return ckpt_dir_insert(c, w->parent, n, name) ? diag_nomem(d) : 0;
}

int cvt_quant(struct ckpt *c, const struct cvt_scale_opt *o, int *tmpfd,
	      struct cvt_scale_stats *st, struct diag *d)
{
	const struct ckpt_dtype *e4 = ckpt_dtype_by_name("float8_e4m3fn");
	struct qw *v = NULL;
	uint64_t off = 0;
	uint32_t n = 0;
	int fd = -1, rc;
	char what[200];

	*tmpfd = -1;
	memset(st, 0, sizeof(*st));
	rc = cvt_scale_collect(c, pick, o, sizeof(*v), (void **)&v, &n,
			       d);
	if (!rc && n && (fd = cvt_tmpfile(o->near, d)) < 0)
		rc = fd;
	for (uint32_t i = 0; i < n && !rc; i++) {
		struct ckpt_tensor *t = v[i].w->tensor;
		struct ckpt_storage *s = t->storage;
		const struct ckpt_dtype *from = t->dtype;
		uint64_t was = s->nbytes;
		char *path;

		rc = quant_one(c, &v[i], o->block, fd, off, d);
		if (!rc)
			rc = add_scale(c, &v[i], fd,
				       off + v[i].rows * v[i].cols, d);
		if (rc)
			break;
		cvt_storage_retype(c, s, from, e4, fd, off);
		st->weights++;
		st->scales++;
		st->bytes_in += was;
		st->bytes_out += s->nbytes;
		off += s->nbytes + v[i].br * v[i].bc * sizeof(float);
		if (o->say && (path = ckpt_node_path(v[i].w))) {
			snprintf(what, sizeof(what), "%s (%llu, %llu) -> "
				 "float8_e4m3fn, %s_scale_inv (%llu, %llu) "
				 "added", from->name,
				 (unsigned long long)v[i].rows,
				 (unsigned long long)v[i].cols, v[i].w->name,
				 (unsigned long long)v[i].br,
				 (unsigned long long)v[i].bc);
			o->say(o->say_arg, path, what);
			free(path);
		}
	}
	free(v);
	if (rc) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	*tmpfd = fd;
	return 0;
}
