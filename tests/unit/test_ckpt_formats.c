/*
 * test_ckpt_formats.c - the read-only formats: tar-era checkpoints
 * (ckpt_tar.c, ckpt_ustar.c) and TorchScript archives (ckpt_script.c).
 * Both are built here: a ustar writer and a small pickle assembler for
 * the tar members, the test zip builder for TorchScript.  Good files give
 * the tree torch.load / torch.jit.load would; truncated files, lying sizes
 * and missing records fail with one line naming the offset, never a crash.
 */
#include "ckpt_open_util.h"
#include "pickle_asm.h"
#include "test_util.h"
#include "zip_builder.h"

#include "ckpt/ckpt.h"
#include "diag/diag.h"
#include "pickle/pkl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- pickles (pickle_asm.h) ---- */

/* A contiguous tensor at offset 0 of its storage (pk_tensor()). */
static void pk_dense(struct buf *b, const char *cls, const char *key,
		     int32_t numel, const int32_t *size, int ndim, bool grad)
{
	int32_t stride[8], acc = 1;

	for (int i = ndim; i-- > 0;) {
		stride[i] = acc;
		acc *= size[i];
	}
	pk_tensor(b, cls, key, numel, 0, size, stride, ndim, grad);
}

/* ---- files ---- */

static const struct ckpt_node *at(const struct ckpt *c, const char *path)
{
	const struct ckpt_node *n = c->root;
	char buf[256], *save = NULL, *part;

	snprintf(buf, sizeof(buf), "%s", path);
	for (part = strtok_r(buf, "/", &save); part && n;
	     part = strtok_r(NULL, "/", &save))
		n = ckpt_node_child(n, part);
	cr_assert_not_null(n, "no node %s", path);
	return n;
}

/* ---- tar-era checkpoints ---- */

/* A ustar header for @name of @len bytes, type @type. */
static void tar_header(struct buf *b, const char *name, size_t len,
		       char type)
{
	unsigned char *h = zb_put(b, 512);
	unsigned sum = 0;

	snprintf((char *)h, 100, "%s", name);
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	snprintf((char *)h + 124, 12, "%011zo", len);
	memcpy(h + 136, "00000000000", 12);
	memset(h + 148, ' ', 8);
	h[156] = type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
}

static void tar_add(struct buf *b, const char *name, const struct buf *data)
{
	tar_header(b, name, data->len, '0');
	zb_put_bytes(b, data->p, data->len);
	zb_put(b, (512 - data->len % 512) % 512);
}

/* What the storages, tensors and pickle members hold (as in mktar.py). */
struct tar_parts {
	struct buf sys, storages, tensors, pickle;
};

/* pickle((key, 'cpu', torch.FloatStorage)), then int64 numel + floats */
static void tar_storage(struct buf *b, int32_t key, int64_t numel,
			int ndata)
{
	pk_start(b);
	pk_int(b, key);
	pk_str(b, "cpu");
	pk_global(b, "torch", "FloatStorage");
	op(b, 0x87);	/* TUPLE3 */
	op(b, '.');
	put_le64(zb_put(b, 8), (uint64_t)numel);
	for (int i = 0; i < ndata; i++) {
		float f = (float)i;

		zb_put_bytes(b, &f, 4);
	}
}

/* pickle((key, storage_key, torch.FloatTensor)), ndim, sizes, strides... */
static void tar_tensor(struct buf *b, int32_t key, int32_t skey, int ndim,
		       const int64_t *size, const int64_t *stride, int64_t off)
{
	pk_start(b);
	pk_int(b, key);
	pk_int(b, skey);
	pk_global(b, "torch", "FloatTensor");
	op(b, 0x87);
	op(b, '.');
	put_le32(zb_put(b, 4), (uint32_t)ndim);
	zb_put(b, 4);
	for (int i = 0; i < ndim; i++)
		put_le64(zb_put(b, 8), (uint64_t)size[i]);
	for (int i = 0; i < ndim; i++)
		put_le64(zb_put(b, 8), (uint64_t)stride[i]);
	put_le64(zb_put(b, 8), (uint64_t)off);
}

static void pk_count(struct buf *b, int32_t n)
{
	pk_start(b);
	pk_int(b, n);
	op(b, '.');
}

/*
 * mktar.py's checkpoint: storage 1 = 0..5 as float32, tensor 10 its 2x3
 * matrix, tensor 11 = storage[1::2]; pickle {'matrix': pid '10', 'odd':
 * pid '11', 'note': 'tar format', 'raw': pid '1'}.
 */
static void tar_parts(struct tar_parts *p)
{
	static const int64_t sz10[2] = { 2, 3 }, st10[2] = { 3, 1 };
	static const int64_t sz11[1] = { 3 }, st11[1] = { 2 };

	memset(p, 0, sizeof(*p));
	pk_start(&p->sys);
	op(&p->sys, '}');
	pk_str(&p->sys, "little_endian");
	op(&p->sys, 0x88);
	op(&p->sys, 's');
	op(&p->sys, '.');
	pk_count(&p->storages, 1);
	tar_storage(&p->storages, 1, 6, 6);
	pk_start(&p->storages);
	op(&p->storages, ']');
	op(&p->storages, '.');
	pk_count(&p->tensors, 2);
	tar_tensor(&p->tensors, 10, 1, 2, sz10, st10, 0);
	tar_tensor(&p->tensors, 11, 1, 1, sz11, st11, 1);
	pk_start(&p->pickle);
	op(&p->pickle, '}');
	op(&p->pickle, '(');
	pk_str(&p->pickle, "matrix");
	pk_str(&p->pickle, "10");
	op(&p->pickle, 'Q');
	pk_str(&p->pickle, "odd");
	pk_str(&p->pickle, "11");
	op(&p->pickle, 'Q');
	pk_str(&p->pickle, "note");
	pk_str(&p->pickle, "tar format");
	pk_str(&p->pickle, "raw");
	pk_str(&p->pickle, "1");
	op(&p->pickle, 'Q');
	op(&p->pickle, 'u');
	op(&p->pickle, '.');
}

static void tar_parts_free(struct tar_parts *p)
{
	free(p->sys.p);
	free(p->storages.p);
	free(p->tensors.p);
	free(p->pickle.p);
}

static void tar_build(struct buf *out, const struct tar_parts *p)
{
	memset(out, 0, sizeof(*out));
	tar_add(out, "sys_info", &p->sys);
	tar_add(out, "pickle", &p->pickle);
	tar_add(out, "storages", &p->storages);
	tar_add(out, "tensors", &p->tensors);
	zb_put(out, 1024);
}

static const char *write_tar(const struct tar_parts *p)
{
	struct buf t;
	const char *path;

	tar_build(&t, p);
	path = write_tmp(t.p, t.len);
	free(t.p);
	return path;
}

Test(ckpt_tar, reads_the_members_in_place)
{
	struct tar_parts p;
	struct ckpt *c;
	const struct ckpt_tensor *m, *odd, *raw;
	float f[6];

	tar_parts(&p);
	c = open_ok(write_tar(&p));
	cr_assert_eq(c->format, CKPT_TAR);
	cr_assert_str_eq(ckpt_fmt(c)->name, "tar");
	cr_assert_not(ckpt_can(c, CKPT_CAP_WRITE));
	cr_assert_eq(c->nstorages, 1);
	m = at(c, "matrix")->tensor;
	odd = at(c, "odd")->tensor;
	raw = at(c, "raw")->tensor;
	cr_assert_str_eq(at(c, "note")->text, "tar format");
	cr_assert_eq(m->storage, odd->storage);
	cr_assert_eq(raw->kind, CKPT_T_STORAGE);
	cr_assert_eq(raw->shape[0], 6);
	cr_assert_str_eq(m->storage->key, "1");
	/* in place: the storages member's data (at 5 * 512) ends with 6
	   floats and the 4-byte views pickle */
	cr_assert_eq(m->storage->data_off, 5 * 512 + p.storages.len - 4 -
		     6 * 4);
	cr_assert_eq(odd->offset, 1);
	cr_assert_eq(ckpt_tensor_stride(odd)[0], 2);
	cr_assert_eq(ckpt_tensor_read(c, odd, f, 12, 0, NULL), 12);
	cr_assert(f[0] == 1 && f[1] == 3 && f[2] == 5);
	cr_assert_eq(ckpt_tensor_read(c, m, f, 24, 0, NULL), 24);
	cr_assert(f[5] == 5);
	ckpt_close(c);
	unlink(tmp_last());
	tar_parts_free(&p);
	assert_no_leaks();
}

Test(ckpt_tar, every_truncation_fails_cleanly)
{
	struct tar_parts p;
	struct buf t;
	size_t need;

	tar_parts(&p);
	tar_build(&t, &p);
	/* the last member's data ends here; any cut before must fail */
	need = t.len - 1024 - (512 - p.tensors.len % 512) % 512;
	for (size_t cut = 0; cut < t.len; cut++) {
		struct ckpt *c = NULL;
		struct diag d;
		int rc;

		rc = open_try(write_tmp(t.p, cut), &c, &d);
		if (cut < need)
			cr_assert_neq(rc, 0, "cut at %zu opened", cut);
		ckpt_close(c);
	}
	unlink(tmp_last());
	free(t.p);
	tar_parts_free(&p);
	assert_no_leaks();
}

/* Build from @p with @buf's bytes at @off changed to @n bytes of @v. */
static const char *patched_tar(const struct tar_parts *p, size_t off,
			       const void *v, size_t n)
{
	struct buf t;
	const char *path;

	tar_build(&t, p);
	cr_assert_leq(off + n, t.len);
	memcpy(t.p + off, v, n);
	path = write_tmp(t.p, t.len);
	free(t.p);
	return path;
}

Test(ckpt_tar, refuses_lying_headers)
{
	struct tar_parts p;
	unsigned char big[12] = { 0x80, 0, 0, 0, 0x7f };
	size_t pickle_hdr = 512 + 512;

	tar_parts(&p);
	/* a size changed without the checksum, a checksum zeroed */
	open_fails(patched_tar(&p, pickle_hdr + 124, "77777777777", 11),
		   -EILSEQ, "checksum");
	open_fails(patched_tar(&p, 148, "0000000", 7), -EILSEQ, "checksum");
	{
		struct buf t;
		unsigned sum = 0;

		/* a base-256 size near 2^63, with a right checksum */
		tar_build(&t, &p);
		memcpy(t.p + pickle_hdr + 124, big, 12);
		memset(t.p + pickle_hdr + 148, ' ', 8);
		for (int i = 0; i < 512; i++)
			sum += t.p[pickle_hdr + i];
		snprintf((char *)t.p + pickle_hdr + 148, 8, "%06o", sum);
		open_fails(write_tmp(t.p, t.len), -EILSEQ, "past the end");
		free(t.p);
	}
	unlink(tmp_last());
	tar_parts_free(&p);
	assert_no_leaks();
}

Test(ckpt_tar, refuses_lying_members)
{
	static const int64_t sz[1] = { 4 }, st[1] = { 2 }, one[1] = { 1 };
	static const int64_t big[1] = { 65 };
	struct tar_parts p;

	/* a storage that claims more elements than its member holds */
	tar_parts(&p);
	free(p.storages.p);
	memset(&p.storages, 0, sizeof(p.storages));
	pk_count(&p.storages, 1);
	tar_storage(&p.storages, 1, 1000, 6);
	open_fails(write_tar(&p), -EILSEQ, "runs past the 'storages' member");
	tar_parts_free(&p);

	/* a count far beyond what the member could hold */
	tar_parts(&p);
	free(p.tensors.p);
	memset(&p.tensors, 0, sizeof(p.tensors));
	pk_count(&p.tensors, 1 << 30);
	open_fails(write_tar(&p), -EILSEQ, "bad count");
	tar_parts_free(&p);

	/* a view reaching past its storage: element 1 + 3 * 2 of 6 */
	tar_parts(&p);
	free(p.tensors.p);
	memset(&p.tensors, 0, sizeof(p.tensors));
	pk_count(&p.tensors, 2);
	tar_tensor(&p.tensors, 10, 1, 1, sz, st, 0);
	tar_tensor(&p.tensors, 11, 1, 1, sz, st, 1);
	open_fails(write_tar(&p), -EILSEQ, "reaches element");
	tar_parts_free(&p);

	/* 65 dimensions; a storage that is not there; a key twice */
	tar_parts(&p);
	free(p.tensors.p);
	memset(&p.tensors, 0, sizeof(p.tensors));
	pk_count(&p.tensors, 1);
	tar_tensor(&p.tensors, 10, 1, 1, big, big, 0);
	put_le32(p.tensors.p + p.tensors.len - 32, 65);
	zb_put(&p.tensors, 64 * 16);
	open_fails(write_tar(&p), -EILSEQ, "65 dimensions");
	free(p.tensors.p);
	memset(&p.tensors, 0, sizeof(p.tensors));
	pk_count(&p.tensors, 1);
	tar_tensor(&p.tensors, 10, 7, 1, sz, st, 0);
	open_fails(write_tar(&p), -EILSEQ, "not there");
	free(p.tensors.p);
	memset(&p.tensors, 0, sizeof(p.tensors));
	pk_count(&p.tensors, 2);
	tar_tensor(&p.tensors, 10, 1, 1, sz, one, 0);
	tar_tensor(&p.tensors, 10, 1, 1, sz, one, 0);
	open_fails(write_tar(&p), -EILSEQ, "defined twice");
	tar_parts_free(&p);

	/* a persistent id naming nothing, and one that is not a key */
	tar_parts(&p);
	free(p.pickle.p);
	memset(&p.pickle, 0, sizeof(p.pickle));
	pk_start(&p.pickle);
	pk_str(&p.pickle, "12");
	op(&p.pickle, 'Q');
	op(&p.pickle, '.');
	open_fails(write_tar(&p), -EILSEQ, "names no tensor or storage");
	p.pickle.p[7] = 'x';			/* "x2" */
	open_fails(write_tar(&p), -EILSEQ, "not a key");
	tar_parts_free(&p);

	/* a member missing, and big-endian storages */
	tar_parts(&p);
	free(p.tensors.p);
	memset(&p.tensors, 0, sizeof(p.tensors));
	{
		struct buf t = { 0 };

		tar_add(&t, "sys_info", &p.sys);
		tar_add(&t, "pickle", &p.pickle);
		tar_add(&t, "storages", &p.storages);
		zb_put(&t, 1024);
		open_fails(write_tmp(t.p, t.len), -EILSEQ,
			   "without a 'tensors' member");
		free(t.p);
	}
	p.sys.p[p.sys.len - 3] = 0x89;		/* little_endian False */
	pk_count(&p.tensors, 0);
	open_fails(write_tar(&p), -ENOTSUP, "big-endian");
	unlink(tmp_last());
	tar_parts_free(&p);
	assert_no_leaks();
}

Test(ckpt_tar, storage_views_and_extension_headers)
{
	static const int64_t sz[1] = { 2 }, st[1] = { 1 };
	struct tar_parts p;
	struct buf t = { 0 }, ext = { 0 };
	struct ckpt *c;
	const struct ckpt_tensor *v, *x;
	const char *pax = "26 path=./pickle_not_here\n";
	float f[2];

	/* storage 1, view 5 = its elements [2, 6); tensor 10 on the view */
	tar_parts(&p);
	free(p.storages.p);
	memset(&p.storages, 0, sizeof(p.storages));
	pk_count(&p.storages, 1);
	tar_storage(&p.storages, 1, 6, 6);
	pk_start(&p.storages);
	op(&p.storages, '(');
	pk_ints(&p.storages, (const int32_t[]){ 5, 1, 2, 4 }, 4);
	op(&p.storages, 'l');
	op(&p.storages, '.');
	free(p.tensors.p);
	memset(&p.tensors, 0, sizeof(p.tensors));
	pk_count(&p.tensors, 2);
	tar_tensor(&p.tensors, 10, 5, 1, sz, st, 1);
	tar_tensor(&p.tensors, 11, 1, 1, sz, st, 0);
	free(p.pickle.p);
	memset(&p.pickle, 0, sizeof(p.pickle));
	pk_start(&p.pickle);
	op(&p.pickle, '(');
	pk_str(&p.pickle, "10");
	op(&p.pickle, 'Q');
	pk_str(&p.pickle, "5");
	op(&p.pickle, 'Q');
	pk_str(&p.pickle, "5");
	op(&p.pickle, 'Q');
	op(&p.pickle, 'l');
	op(&p.pickle, '.');
	/* the pickle member named through a GNU long name, and a pax
	   header naming a member that is then shadowed */
	tar_add(&t, "sys_info", &p.sys);
	zb_put_bytes(&ext, "./pickle", 9);
	tar_header(&t, "././@LongLink", ext.len, 'L');
	zb_put_bytes(&t, ext.p, ext.len);
	zb_put(&t, 512 - ext.len);
	tar_add(&t, "whatever", &p.pickle);
	tar_header(&t, "PaxHeader", strlen(pax), 'x');
	zb_put_bytes(&t, pax, strlen(pax));
	zb_put(&t, 512 - strlen(pax));
	tar_add(&t, "tensors", &p.storages);
	tar_add(&t, "storages", &p.storages);
	tar_add(&t, "tensors", &p.tensors);
	zb_put(&t, 1024);
	c = open_ok(write_tmp(t.p, t.len));
	v = at(c, "0")->tensor;
	x = at(c, "1")->tensor;
	cr_assert_eq(v->offset, 3);		/* view 2 + tensor 1 */
	cr_assert_eq(x->kind, CKPT_T_STORAGE);
	cr_assert_eq(x->offset, 2);
	cr_assert_eq(x->shape[0], 4);
	cr_assert_eq(at(c, "2")->tensor, x);	/* one storage, one tensor */
	cr_assert_eq(ckpt_tensor_read(c, v, f, 8, 0, NULL), 8);
	cr_assert(f[0] == 3 && f[1] == 4);
	ckpt_close(c);
	free(t.p);
	free(ext.p);
	unlink(tmp_last());
	tar_parts_free(&p);
	assert_no_leaks();
}

/* ---- TorchScript archives ---- */

static const char net_py[] =
	"class Net(Module):\n"
	"  __parameters__ = [\"weight\", ]\n"
	"  __buffers__ = [\"steps\", ]\n"
	"  weight : Tensor\n"
	"  steps : Tensor\n"
	"  training : bool\n"
	"  def forward(self: __torch__.Net,\n"
	"    x: Tensor) -> Tensor:\n"
	"    return torch.add(torch.mul(x, self.weight), CONSTANTS.c0)\n";

static const float weight[4] = { 1, 2, 3, 4 };
static const int64_t steps[1] = { 7 };
static const float c0[2] = { 0.5f, -0.5f };

/* data.pkl: Net() with BUILD {'weight', 'steps', 'training', 'packed'} */
static void ts_data(struct buf *b)
{
	static const int32_t s22[2] = { 2, 2 }, s1[1] = { 1 };

	pk_start(b);
	pk_global(b, "__torch__", "Net");
	op(b, ')');
	op(b, 0x81);		/* NEWOBJ */
	op(b, '}');
	op(b, '(');
	pk_str(b, "weight");
	pk_dense(b, "FloatStorage", "0", 4, s22, 2, true);
	pk_str(b, "steps");
	pk_dense(b, "LongStorage", "1", 1, s1, 1, false);
	pk_str(b, "training");
	op(b, 0x88);
	pk_str(b, "sizes");
	pk_global(b, "torch.jit._pickle", "build_intlist");
	op(b, '(');
	op(b, ']');
	op(b, '(');
	pk_int(b, 3);
	pk_int(b, 4);
	op(b, 'e');		/* APPENDS */
	op(b, 't');
	op(b, 'R');
	pk_str(b, "packed");
	pk_global(b, "__torch__.torch.classes.quantized",
		  "LinearPackedParamsBase");
	op(b, ')');
	op(b, 0x81);
	op(b, '(');
	pk_int(b, 1);
	op(b, 'N');
	op(b, 't');
	op(b, 'b');		/* BUILD with a tuple */
	op(b, 'u');
	op(b, 'b');
	op(b, '.');
}

/* constants.pkl: (tensor over constants/0,) */
static void ts_constants(struct buf *b)
{
	static const int32_t s2[1] = { 2 };

	pk_start(b);
	op(b, '(');
	pk_dense(b, "FloatStorage", "0", 2, s2, 1, false);
	op(b, 't');
	op(b, '.');
}

enum { R_DATA, R_D0, R_D1, R_CODE, R_CODE_DBG, R_CPKL, R_C0, R_VERSION,
       R_N };

/* The archive without record @skip (R_N: all), written to a temp file. */
static const char *write_ts(int skip, const struct buf *data,
			    const struct buf *cst)
{
	struct zent all[R_N] = {
		{ "m/data.pkl", data->p, data->len, false },
		{ "m/data/0", weight, sizeof(weight), false },
		{ "m/data/1", steps, sizeof(steps), false },
		{ "m/code/__torch__.py", net_py, strlen(net_py), true },
		{ "m/code/__torch__.py.debug_pkl", "\x80\x02).", 4, false },
		{ "m/constants.pkl", cst->p, cst->len, false },
		{ "m/constants/0", c0, sizeof(c0), false },
		{ "m/version", "3\n", 2, false },
	}, ents[R_N];
	struct zopt o = { .torch = true };
	struct zinfo info;
	struct buf out;
	size_t n = 0;
	const char *path;

	for (int i = 0; i < R_N; i++)
		if (i != skip)
			ents[n++] = all[i];
	zb_build(&out, ents, n, &o, &info);
	path = write_tmp(out.p, out.len);
	free(out.p);
	return path;
}

Test(ckpt_script, shows_the_module_its_code_and_constants)
{
	struct buf data = { 0 }, cst = { 0 };
	const struct ckpt_node *w, *code, *packed, *sizes;
	struct ckpt *c;
	float f[2];

	ts_data(&data);
	ts_constants(&cst);
	c = open_ok(write_ts(R_N, &data, &cst));
	cr_assert_eq(c->format, CKPT_TORCHSCRIPT);
	cr_assert_str_eq(ckpt_fmt(c)->name, "torchscript");
	cr_assert_not(ckpt_can(c, CKPT_CAP_WRITE));
	cr_assert_str_eq(c->root->type, "Net");
	cr_assert_eq(c->nglobals, 0, "TorchScript imports nothing");
	w = at(c, "weight");
	cr_assert(w->tensor->parameter, "listed in __parameters__");
	cr_assert_str_eq(w->type, "Parameter");
	cr_assert_not(at(c, "steps")->tensor->parameter);
	cr_assert(at(c, "training")->kind == CKPT_N_VALUE);
	/* build_intlist([3, 4]) is the list itself */
	sizes = at(c, "sizes");
	cr_assert_eq(sizes->kind, CKPT_N_SEQ);
	cr_assert_eq(sizes->dir->nkids, 2);
	/* a custom class's tuple state, item by item */
	packed = at(c, "packed");
	cr_assert_eq(packed->kind, CKPT_N_DIR);
	cr_assert_str_eq(at(c, "packed/0")->text, "1");
	cr_assert_str_eq(at(c, "packed/1")->type, "NoneType");
	/* code/: inflated, byte for byte, no source maps */
	code = at(c, "code/__torch__.py");
	cr_assert_eq(code->textlen, strlen(net_py));
	cr_assert_eq(memcmp(code->text, net_py, code->textlen), 0);
	cr_assert_str_eq(code->type, "bytes");
	cr_assert_null(ckpt_node_child(at(c, "code"),
				       "__torch__.py.debug_pkl"));
	/* constants: c0 over constants/0, its own storage */
	cr_assert_str_eq(at(c, "constants/c0")->tensor->storage->key,
			 "constants/0");
	cr_assert_str_eq(at(c, "constants/c0")->tensor->storage->rec->name,
			 "m/constants/0");
	cr_assert_eq(ckpt_tensor_read(c, at(c, "constants/c0")->tensor, f, 8,
				      0, NULL), 8);
	cr_assert(f[0] == 0.5f && f[1] == -0.5f);
	cr_assert_eq(c->nstorages, 3);
	ckpt_close(c);
	unlink(tmp_last());
	free(data.p);
	free(cst.p);
	assert_no_leaks();
}

Test(ckpt_script, missing_records_fail_cleanly)
{
	struct buf data = { 0 }, cst = { 0 };
	struct ckpt *c;

	ts_data(&data);
	ts_constants(&cst);
	open_fails(write_ts(R_D0, &data, &cst), -EILSEQ,
		   "storage '0' has no record m/data/0");
	open_fails(write_ts(R_C0, &data, &cst), -EILSEQ,
		   "has no record m/constants/0");
	open_fails(write_ts(R_VERSION, &data, &cst), -EILSEQ,
		   "no version record");
	open_fails(write_ts(R_DATA, &data, &cst), -EILSEQ,
		   "without data.pkl or model.json");
	/* no code: still the module, an empty code/ */
	c = open_ok(write_ts(R_CODE, &data, &cst));
	cr_assert_not(at(c, "weight")->tensor->parameter);
	cr_assert_eq(at(c, "code")->dir->nkids, 0);
	ckpt_close(c);
	/* without constants.pkl it is no TorchScript: but constants/0 */
	c = open_ok(write_ts(R_CPKL, &data, &cst));
	cr_assert_eq(c->format, CKPT_ZIP);
	ckpt_close(c);
	/* a constants.pkl that is not a pickle */
	cst.p[cst.len - 1] = 'x';
	open_fails(write_ts(R_N, &data, &cst), -EILSEQ, "");
	unlink(tmp_last());
	free(data.p);
	free(cst.p);
	assert_no_leaks();
}

Test(ckpt_script, every_truncation_and_dropped_record_fails_cleanly)
{
	struct buf data = { 0 }, cst = { 0 }, t = { 0 };
	FILE *f;
	long len;

	ts_data(&data);
	ts_constants(&cst);
	f = fopen(write_ts(R_N, &data, &cst), "rb");
	cr_assert_not_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	cr_assert_eq(fread(zb_put(&t, len), 1, len, f), (size_t)len);
	fclose(f);
	for (long cut = 0; cut < len; cut++) {
		struct ckpt *c = NULL;
		struct diag d;

		/* a zip cut anywhere loses its end records */
		cr_assert_neq(open_try(write_tmp(t.p, cut), &c, &d), 0,
			      "cut at %ld opened", cut);
	}
	for (int skip = 0; skip < R_N; skip++) {
		struct ckpt *c = NULL;
		struct diag d;

		if (!open_try(write_ts(skip, &data, &cst), &c, &d))
			ckpt_close(c);
	}
	unlink(tmp_last());
	free(t.p);
	free(data.p);
	free(cst.p);
	assert_no_leaks();
}

Test(ckpt_script, storages_of_the_wrong_size_and_v1_quantized)
{
	struct buf data = { 0 }, cst = { 0 };
	struct zent ents[3];
	struct zopt o = { .torch = true };
	struct zinfo info;
	struct buf out;
	struct ckpt *c;
	static const int32_t s2[1] = { 2 };
	static const signed char q[2] = { 3, -3 };

	ts_data(&data);
	ts_constants(&cst);
	/* a constants storage of 12 bytes where the pickle says 8 */
	{
		struct zent all[R_N] = {
			{ "m/data.pkl", data.p, data.len, false },
			{ "m/data/0", weight, sizeof(weight), false },
			{ "m/data/1", steps, sizeof(steps), false },
			{ "m/code/__torch__.py", net_py, strlen(net_py), true },
			{ "m/code/x.py.debug_pkl", "", 0, false },
			{ "m/constants.pkl", cst.p, cst.len, false },
			{ "m/constants/0", weight, 12, false },
			{ "m/version", "3\n", 2, false },
		};

		zb_build(&out, all, R_N, &o, &info);
		open_fails(write_tmp(out.p, out.len), -EILSEQ,
			   "has 12 bytes, but storage 'constants/0'");
		free(out.p);
	}
	/* torch 1.3's _rebuild_qtensor(storage, 0, size, stride, scale,
	   zero_point, requires_grad, hooks) in a version-1 archive */
	free(data.p);
	memset(&data, 0, sizeof(data));
	pk_start(&data);
	op(&data, '}');
	pk_str(&data, "q");
	pk_global(&data, "torch._utils", "_rebuild_qtensor");
	op(&data, '(');
	op(&data, '(');
	pk_str(&data, "storage");
	pk_global(&data, "torch", "QInt8Storage");
	pk_str(&data, "0");
	pk_str(&data, "cpu");
	pk_int(&data, 2);
	op(&data, 'N');
	op(&data, 't');
	op(&data, 'Q');
	pk_int(&data, 0);
	pk_ints(&data, s2, 1);
	pk_ints(&data, (const int32_t[]){ 1 }, 1);
	op(&data, 'G');
	put_le64(zb_put(&data, 8), 0x3fc0000000000000ull);	/* 0.125, BE */
	{
		unsigned char *p = data.p + data.len - 8;

		for (int i = 0; i < 4; i++) {
			unsigned char x = p[i];

			p[i] = p[7 - i];
			p[7 - i] = x;
		}
	}
	pk_int(&data, 2);
	op(&data, 0x89);
	pk_global(&data, "collections", "OrderedDict");
	op(&data, ')');
	op(&data, 'R');
	op(&data, 't');
	op(&data, 'R');
	op(&data, 's');
	op(&data, '.');
	ents[0] = (struct zent){ "m/data.pkl", data.p, data.len, false };
	ents[1] = (struct zent){ "m/data/0", q, 2, false };
	ents[2] = (struct zent){ "m/constants.pkl", "\x80\x02).", 4, false };
	zb_build(&out, ents, 3, &o, &info);
	open_fails(write_tmp(out.p, out.len), -EILSEQ, "no version record");
	free(out.p);
	{
		struct zent all[4] = { ents[0], ents[1], ents[2],
				       { "m/version", "1\n", 2, false } };

		zb_build(&out, all, 4, &o, &info);
		c = open_ok(write_tmp(out.p, out.len));
		free(out.p);
	}
	cr_assert_eq(at(c, "q")->tensor->kind, CKPT_T_QUANTIZED);
	cr_assert_str_eq(at(c, "q")->tensor->x->qscheme, "per_tensor_affine");
	cr_assert(at(c, "q")->tensor->x->scale == 0.125);
	cr_assert_eq(at(c, "q")->tensor->x->zero_point, 2);
	ckpt_close(c);
	unlink(tmp_last());
	free(data.p);
	free(cst.p);
	assert_no_leaks();
}

/* Every byte of @t flipped in turn: each open succeeds or fails cleanly. */
static void flip_each(const struct buf *t)
{
	unsigned char *copy = malloc(t->len);

	cr_assert_not_null(copy);
	for (size_t i = 0; i < t->len; i++) {
		struct ckpt *c = NULL;
		struct diag d;

		memcpy(copy, t->p, t->len);
		copy[i] ^= 0xff;
		if (!open_try(write_tmp(copy, t->len), &c, &d)) {
			/* what opened reads every tensor in bounds */
			for (uint32_t k = 0; k < c->ntensors; k++) {
				static unsigned char out[4096];
				const struct ckpt_tensor *x = c->tensors[k];

				if (x->storage && ckpt_tensor_size(x) <=
				    sizeof(out))
					ckpt_tensor_read(c, x, out, sizeof(out),
							 0, &d);
			}
			ckpt_close(c);
		}
	}
	unlink(tmp_last());
	free(copy);
}

Test(ckpt_formats, flipped_bytes_never_crash)
{
	struct tar_parts p;
	struct buf t, data = { 0 }, cst = { 0 }, z = { 0 };
	FILE *f;
	long len;

	tar_parts(&p);
	tar_build(&t, &p);
	flip_each(&t);
	free(t.p);
	tar_parts_free(&p);
	ts_data(&data);
	ts_constants(&cst);
	f = fopen(write_ts(R_N, &data, &cst), "rb");
	cr_assert_not_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	cr_assert_eq(fread(zb_put(&z, len), 1, len, f), (size_t)len);
	fclose(f);
	flip_each(&z);
	free(z.p);
	free(data.p);
	free(cst.p);
	assert_no_leaks();
}

/* ---- torch 1.0's model.json ---- */

static const char model_json[] =
	"{\"protoVersion\":\"3\",\"mainModule\":{\"name\":\"foo\","
	"\"torchscriptArena\":{\"key\":\"code/foo.py\"},"
	"\"parameters\":[{\"isBuffer\":false,\"tensorId\":\"0\","
	"\"name\":\"weight\"},{\"isBuffer\":true,\"tensorId\":\"1\","
	"\"name\":\"b\\u00fcf\"}],"
	"\"attributes\":[{\"type\":\"Tensor\",\"name\":\"value\",\"id\":\"0\"},"
	"{\"type\":\"int\",\"name\":\"n\",\"id\":\"1\"}],"
	"\"submodules\":[{\"name\":\"sub\",\"parameters\":[{\"tensorId\":\"2\","
	"\"name\":\"w\"}]}]},"
	"\"tensors\":[{\"dims\":[\"2\",\"2\"],\"offset\":\"0\",\"strides\":"
	"[\"2\",\"1\"],\"requiresGrad\":true,\"dataType\":\"FLOAT\",\"data\":"
	"{\"key\":\"tensors/0\"},\"device\":\"cpu\"},"
	"{\"dims\":[\"2\"],\"offset\":\"2\",\"strides\":[\"1\"],\"dataType\":"
	"\"FLOAT\",\"data\":{\"key\":\"tensors/0\"}},"
	"{\"dims\":[],\"strides\":[],\"dataType\":\"INT64\",\"data\":{\"key\":"
	"\"tensors/1\"}}]}";

/* attributes.pkl: (build_tensor_from_id(1), 5) */
static void mj_attrs(struct buf *b)
{
	pk_start(b);
	op(b, '(');
	pk_global(b, "torch.jit._pickle", "build_tensor_from_id");
	op(b, '(');
	pk_int(b, 1);
	op(b, 't');
	op(b, 'R');
	pk_int(b, 5);
	op(b, 't');
	op(b, '.');
}

static const char *write_mj(const char *json, const struct buf *attrs)
{
	struct zent ents[6] = {
		{ "foo/version", "1\n", 2, false },
		{ "foo/code/foo.py", "def forward(self):\n", 19, false },
		{ "foo/attributes.pkl", attrs->p, attrs->len, false },
		{ "foo/tensors/0", weight, sizeof(weight), false },
		{ "foo/tensors/1", steps, sizeof(steps), false },
		{ "foo/model.json", json, strlen(json), true },
	};
	struct zopt o = { .torch = true };
	struct zinfo info;
	struct buf out;
	const char *path;

	zb_build(&out, ents, 6, &o, &info);
	path = write_tmp(out.p, out.len);
	free(out.p);
	return path;
}

Test(ckpt_script, reads_torch_1_0_model_json)
{
	struct buf attrs = { 0 };
	const struct ckpt_tensor *w, *v;
	struct ckpt *c;
	char *bad;

	mj_attrs(&attrs);
	c = open_ok(write_mj(model_json, &attrs));
	cr_assert_eq(c->format, CKPT_TORCHSCRIPT);
	cr_assert_str_eq(c->root->type, "foo");
	w = at(c, "weight")->tensor;
	v = at(c, "value")->tensor;
	cr_assert(w->parameter && w->requires_grad);
	cr_assert_not(at(c, "b\xc3\xbc" "f")->tensor->parameter);
	cr_assert_eq(at(c, "b\xc3\xbc" "f")->tensor->storage, w->storage);
	cr_assert_eq(at(c, "b\xc3\xbc" "f")->tensor->offset, 2);
	/* attribute 0 is build_tensor_from_id(1): the buffer's tensor */
	cr_assert_eq(v, at(c, "b\xc3\xbc" "f")->tensor);
	cr_assert_str_eq(v->storage->key, "tensors/0");
	cr_assert_str_eq(at(c, "n")->text, "5");
	cr_assert(at(c, "sub/w")->tensor->parameter);
	cr_assert_eq(at(c, "sub/w")->tensor->dtype,
		     ckpt_dtype_by_name("int64"));
	cr_assert_str_eq(at(c, "sub/w")->tensor->storage->key, "tensors/1");
	cr_assert_eq(c->nstorages, 2);
	cr_assert_not_null(at(c, "code/foo.py"));
	ckpt_close(c);

	/* what model.json gets wrong, and the JSON itself */
	bad = strdup(model_json);
	memcpy(strstr(bad, "tensors/1"), "tensors/9", 9);
	open_fails(write_mj(bad, &attrs), -EILSEQ, "'tensors/9', which is not");
	free(bad);
	bad = strdup(model_json);
	memcpy(strstr(bad, "INT64"), "INT65", 5);
	open_fails(write_mj(bad, &attrs), -ENOTSUP, "unknown dataType");
	free(bad);
	bad = strdup(model_json);
	strstr(bad, "\"tensorId\":\"2\"")[12] = '7';
	open_fails(write_mj(bad, &attrs), -EILSEQ, "names nothing");
	free(bad);
	bad = strdup(model_json);
	memcpy(strstr(bad, "[\"2\",\"2\"]"), "[\"9\",\"2\"]", 9);
	open_fails(write_mj(bad, &attrs), -EILSEQ, "reaches element");
	free(bad);
	open_fails(write_mj("{\"mainModule\":{\"name\":\"x\\q\"}}", &attrs),
		   -EILSEQ, "model.json, byte 24: bad escape");
	open_fails(write_mj("{\"tensors\":[1,2}", &attrs), -EILSEQ,
		   "',' or ']' expected");
	open_fails(write_mj("{} {}", &attrs), -EILSEQ, "text after");
	open_fails(write_mj("{}", &attrs), -EILSEQ, "no mainModule");
	{
		char deep[300];

		memset(deep, '[', sizeof(deep) - 1);
		deep[sizeof(deep) - 1] = 0;
		open_fails(write_mj(deep, &attrs), -EILSEQ, "nested too deeply");
	}
	unlink(tmp_last());
	free(attrs.p);
	assert_no_leaks();
}

Test(ckpt_script, every_truncation_of_model_json_fails_cleanly)
{
	struct buf attrs = { 0 };
	size_t n = strlen(model_json);
	char *cut = malloc(n + 1);

	mj_attrs(&attrs);
	for (size_t i = 0; i < n; i++) {
		struct ckpt *c = NULL;
		struct diag d;

		memcpy(cut, model_json, i);
		cut[i] = 0;
		cr_assert_neq(open_try(write_mj(cut, &attrs), &c, &d), 0,
			      "model.json cut at %zu opened", i);
	}
	unlink(tmp_last());
	free(cut);
	free(attrs.p);
	assert_no_leaks();
}

Test(ckpt_script, an_attribute_called_code_keeps_its_name)
{
	struct buf data = { 0 }, cst = { 0 };
	struct ckpt *c;
	const struct ckpt_node *ours;

	pk_start(&data);
	pk_global(&data, "__torch__", "Net");
	op(&data, ')');
	op(&data, 0x81);
	op(&data, '}');
	pk_str(&data, "code");
	pk_int(&data, 1);
	op(&data, 's');
	op(&data, 'b');
	op(&data, '.');
	ts_constants(&cst);
	c = open_ok(write_ts(R_D0, &data, &cst));
	cr_assert_eq(at(c, "code")->kind, CKPT_N_VALUE);
	ours = at(c, "code%#1");
	cr_assert_eq(ours->kind, CKPT_N_DIR);
	cr_assert_not_null(ckpt_node_child(ours, "__torch__.py"));
	cr_assert_not_null(at(c, "constants/c0"));
	ckpt_close(c);
	unlink(tmp_last());
	free(data.p);
	free(cst.p);
	assert_no_leaks();
}
