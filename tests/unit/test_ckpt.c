/*
 * test_ckpt.c - the checkpoint model: the bundled sample and the shared
 * fixtures open with the right tensors, names escape reversibly, floats
 * print like Python, and broken or hostile checkpoints (built here with a
 * small pickle assembler and the test zip builder) fail with one clean
 * error naming the offset, never a crash.
 */
#include "ckpt_open_util.h"
#include "test_util.h"
#include "zip_builder.h"
#include "fixtures.h"
#include "pickle_asm.h"

#include "ckpt/ckpt.h"
#include "ckpt/ckpt_int.h"	/* ckpt_repickle() */
#include "diag/diag.h"
#include "pickle/pkl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SAMPLE PT_TEST_DATA "/sample.pt"

static const struct ckpt_node *at(const struct ckpt *c, const char *path)
{
	const struct ckpt_node *n = c->root;
	char buf[256], *save = NULL, *part;

	snprintf(buf, sizeof(buf), "%s", path);
	for (part = strtok_r(buf, "/", &save); part && n;
	     part = strtok_r(NULL, "/", &save)) {
		if (n->kind == CKPT_N_LINK)
			n = n->target;
		n = ckpt_node_child(n, part);
	}
	cr_assert_not_null(n, "no node %s", path);
	return n;
}

/* One float32 tensor "w" of @size/@stride over storage "0" of @numel. */
static const char *one_tensor(int32_t numel, int32_t off, const int32_t *size,
			      const int32_t *stride, int ndim, size_t rec_len)
{
	static float data[64];
	struct buf b = { 0 };
	struct zent st = { "m/data/0", data, rec_len, false };
	const char *path;

	pk_start(&b);
	op(&b, '}');
	pk_str(&b, "w");
	pk_tensor(&b, "FloatStorage", "0", numel, off, size, stride, ndim,
		  false);
	op(&b, 's');
	op(&b, '.');
	path = write_ckpt(&b, "3\n", &st, 1);
	free(b.p);
	return path;
}

/* ---- the bundled sample ---- */

Test(ckpt_open, lists_the_sample_training_checkpoint)
{
	struct ckpt *c = open_ok(SAMPLE);
	const struct ckpt_node *w = at(c, "model/embed.weight");
	const struct ckpt_node *h = at(c, "model/head.weight");

	cr_assert_eq(c->format, CKPT_ZIP);
	cr_assert_str_eq(c->zip.prefix, "sample");
	cr_assert_eq(c->version, 3);
	cr_assert_str_eq(c->root->type, "dict");
	cr_assert_str_eq(at(c, "model")->type, "OrderedDict");
	cr_assert_eq(w->kind, CKPT_N_TENSOR);
	cr_assert_str_eq(w->tensor->dtype->name, "float32");
	cr_assert_eq(w->tensor->ndim, 2);
	cr_assert_eq(w->tensor->shape[0], 16);
	cr_assert_eq(w->tensor->shape[1], 8);
	cr_assert_eq(ckpt_tensor_nbytes(w->tensor), 16 * 8 * 4);
	cr_assert(w->tensor->contiguous);
	/* tied weights: two tensors, one storage */
	cr_assert_eq(h->tensor->storage, w->tensor->storage);
	cr_assert_str_eq(at(c, "epoch")->text, "12");
	cr_assert_str_eq(at(c, "loss")->text, "0.4375");
	cr_assert_str_eq(at(c, "config/dropout")->text, "None");
	cr_assert_str_eq(at(c, "config/dims/1")->text, "8");
	/* optimizer state has int keys */
	cr_assert_eq(at(c, "optimizer/state/0/exp_avg")->kind, CKPT_N_TENSOR);
	cr_assert_str_eq(at(c, "optimizer/param_groups/0/betas/1")->text,
			 "0.999");
	cr_assert_eq(at(c, "optimizer/param_groups/0/eps")->kind,
		     CKPT_N_VALUE);
	cr_assert_str_eq(at(c, "optimizer/param_groups/0/eps")->text, "1e-08");
	cr_assert_eq(c->nglobals, 0);
	for (uint32_t i = 0; i < c->nstorages; i++)
		cr_assert_not_null(c->storages[i]->rec);
	ckpt_close(c);
	assert_no_leaks();
}

Test(ckpt_open, every_truncation_of_the_sample_fails_cleanly)
{
	FILE *f = fopen(SAMPLE, "rb");
	unsigned char buf[16384];
	size_t n;

	cr_assert_not_null(f);
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	for (size_t len = 0; len < n; len += 3) {
		struct ckpt *c;
		struct diag d;

		diag_init(&d, "cut");
		write_tmp(buf, len);
		cr_assert_lt(ckpt_open(tmp_last(), &c, &d), 0, "len %zu", len);
		unlink(tmp_last());
	}
	assert_no_leaks();
}

Test(ckpt_open, flipped_pickle_bytes_never_crash)
{
	FILE *f = fopen(SAMPLE, "rb");
	unsigned char buf[16384];
	size_t n;
	int opened = 0;

	cr_assert_not_null(f);
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	/* data.pkl starts at 64 in torch's layout */
	for (size_t i = 64; i < n && i < 64 + 2200; i++) {
		static const unsigned char masks[] = { 0x01, 0x80, 0xff };

		for (size_t m = 0; m < sizeof(masks); m++) {
			struct ckpt *c;
			struct diag d;

			buf[i] ^= masks[m];
			write_tmp(buf, n);
			diag_init(&d, "flip");
			if (!ckpt_open(tmp_last(), &c, &d)) {
				opened++;
				ckpt_close(c);
			} else {
				cr_assert(d.err == -EILSEQ || d.err == -ENOTSUP,
					  "byte %zu: %d %s", i, d.err, d.msg);
			}
			unlink(tmp_last());
			buf[i] ^= masks[m];
		}
	}
	cr_assert_gt(opened, 0);
	assert_no_leaks();
}

/* ---- what people mistake for checkpoints ---- */

Test(ckpt_open, names_what_is_not_a_checkpoint)
{
	static const char lfs[] = "version https://git-lfs.github.com/spec/"
				  "v1\noid sha256:abc\nsize 1234\n";
	static const char html[] = "\n<!DOCTYPE html><html><body>Not found"
				   "</body></html>";
	static const char zeros[64];

	write_tmp("", 0);
	open_fails(tmp_last(), -EILSEQ, "empty file");
	write_tmp(lfs, sizeof(lfs) - 1);
	open_fails(tmp_last(), -EILSEQ, "Git LFS pointer");
	write_tmp(html, sizeof(html) - 1);
	open_fails(tmp_last(), -EILSEQ, "HTML page");
	write_tmp(zeros, sizeof(zeros));
	open_fails(tmp_last(), -EILSEQ, "not a PyTorch checkpoint");
	write_tmp("PK\3\4truncated", 13);
	open_fails(tmp_last(), -EILSEQ, "truncated");
	{
		/* a local header, then an end record listing no records
		   (found by fuzz_ckpt: entries[0] of an empty index) */
		unsigned char z[30 + 22] = "PK\3\4";

		memcpy(z + 30, "PK\5\6", 4);
		put_le32(z + 30 + 16, 30);
		write_tmp(z, sizeof(z));
		open_fails(tmp_last(), -EILSEQ, "without records");
	}
	unlink(tmp_last());
	open_fails("/nonexistent/x.pt", -ENOENT, "No such file");
	assert_no_leaks();
}

/* Other formats' files are named, with what to do, not by hex bytes. */
Test(ckpt_open, names_other_formats)
{
#define HEAD(s, what) { s, sizeof(s) - 1, what }
	static const struct {
		const char *head;
		size_t len;
		const char *what;
	} other[] = {
		HEAD("\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': "
		     "False, 'shape': (3,), }", "NumPy .npy array"),
		HEAD("\xef\xbb\xbf \n{\"architectures\": [\"Bert\"]}",
		     "JSON text"),
		HEAD("[1, 2, 3]", "JSON text"),
		HEAD("\x89HDF\r\n\x1a\n\0\0\0\0", "HDF5 file"),
		HEAD("\x1f\x8b\x08\0\0\0\0\0", "gzip-compressed"),
		HEAD("\x28\xb5\x2f\xfd\0\0", "zstd-compressed"),
		HEAD("\xfd" "7zXZ\0\0\0", "xz-compressed"),
	};
#undef HEAD

	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		write_tmp(other[i].head, other[i].len);
		open_fails(tmp_last(), -EILSEQ, other[i].what);
	}
	/* '{' without JSON after it stays unnamed */
	write_tmp("{garbage", 8);
	open_fails(tmp_last(), -EILSEQ, "not a PyTorch checkpoint (starts "
		   "with 7b 67 61 72)");
	unlink(tmp_last());
	assert_no_leaks();
}

Test(ckpt_open, knows_torchscript_and_names_missing_records)
{
	struct buf b = { 0 };
	struct zent cst = { "m/constants.pkl", "\x80\x02).", 4, false };
	struct ckpt *c;

	pk_start(&b);
	op(&b, '}');
	op(&b, '.');
	c = open_ok(write_ckpt(&b, "3\n", &cst, 1));
	cr_assert_eq(c->format, CKPT_TORCHSCRIPT);	/* test_ckpt_formats.c */
	ckpt_close(c);
	open_fails(write_ckpt(&b, NULL, NULL, 0), -EILSEQ, "no version record");
	open_fails(write_ckpt(&b, "0\n", NULL, 0), -EILSEQ, "version record");
	open_fails(write_ckpt(&b, "11", NULL, 0), -EILSEQ, "version record");
	open_fails(write_ckpt(&b, "abc", NULL, 0), -EILSEQ, "version record");
	{
		struct zent bo = { "m/byteorder", "middle", 6, false };

		open_fails(write_ckpt(&b, "3\n", &bo, 1), -EILSEQ, "byteorder");
	}
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}

Test(ckpt_open, refuses_records_outside_the_top_folder)
{
	struct buf b = { 0 };
	struct zent other = { "n/data/0", "abcd", 4, false };

	pk_start(&b);
	op(&b, ')');
	op(&b, '.');
	open_fails(write_ckpt(&b, "3\n", &other, 1), -EILSEQ,
		   "outside the top folder");
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}

/* ---- tensors against storages ---- */

Test(ckpt_tensor, accepts_views_inside_the_storage)
{
	static const int32_t size[] = { 3, 2 }, stride[] = { 1, 3 };
	struct ckpt *c = open_ok(one_tensor(6, 0, size, stride, 2, 24));
	const struct ckpt_tensor *t = at(c, "w")->tensor;

	cr_assert_not(t->contiguous);
	cr_assert_eq(t->numel, 6);
	cr_assert_eq(ckpt_tensor_nbytes(t), 24);
	ckpt_close(c);
	unlink(tmp_last());
	assert_no_leaks();
}

Test(ckpt_tensor, refuses_views_past_the_storage)
{
	static const int32_t size[] = { 3, 2 }, stride[] = { 2, 1 };
	static const int32_t neg[] = { -1 }, one[] = { 1 }, big[] = { 1 << 30 };

	open_fails(one_tensor(6, 1, size, stride, 2, 24), -EILSEQ,
		   "reaches element 6 of storage '0', which has 6");
	open_fails(one_tensor(6, 0, neg, one, 1, 24), -EILSEQ, "tensor size");
	open_fails(one_tensor(6, 0, one, neg, 1, 24), -ENOTSUP,
		   "negative stride");
	open_fails(one_tensor(6, 0, big, one, 1, 24), -EILSEQ, "reaches");
	unlink(tmp_last());
	assert_no_leaks();
}

Test(ckpt_tensor, refuses_overflowing_and_negative_views)
{
	/* (2^30)^3 elements; stride 0 keeps the extent at element 0 */
	static const int32_t huge[] = { 1 << 30, 1 << 30, 1 << 30 };
	static const int32_t zero[] = { 0, 0, 0 };
	static const int32_t one[] = { 1 };
	int32_t ones[CKPT_MAX_DIMS + 1];

	for (int i = 0; i < CKPT_MAX_DIMS + 1; i++)
		ones[i] = 1;
	open_fails(one_tensor(6, 0, huge, zero, 3, 24), -EILSEQ,
		   "element count overflows");
	open_fails(one_tensor(6, -1, one, one, 1, 24), -EILSEQ,
		   "storage offset");
	open_fails(one_tensor(6, 0, ones, ones, CKPT_MAX_DIMS + 1, 24),
		   -EILSEQ, "65 dimensions");
	unlink(tmp_last());
	assert_no_leaks();
}

Test(ckpt_tensor, refuses_records_of_the_wrong_size)
{
	static const int32_t size[] = { 6 }, stride[] = { 1 };

	open_fails(one_tensor(6, 0, size, stride, 1, 20), -EILSEQ,
		   "has 20 bytes, but storage '0' is 6 x float32 = 24 bytes");
	open_fails(one_tensor(6, 0, size, stride, 1, 28), -EILSEQ, "has 28");
	unlink(tmp_last());
	assert_no_leaks();
}

Test(ckpt_tensor, refuses_a_missing_storage_record)
{
	static const int32_t size[] = { 2 }, stride[] = { 1 };
	struct buf b = { 0 };

	pk_start(&b);
	pk_tensor(&b, "FloatStorage", "7", 2, 0, size, stride, 1, false);
	op(&b, '.');
	open_fails(write_ckpt(&b, "3\n", NULL, 0), -EILSEQ,
		   "storage '7' has no record m/data/7");
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}

Test(ckpt_tensor, refuses_one_storage_with_two_dtypes)
{
	static const int32_t size[] = { 2 }, stride[] = { 1 };
	static const char data[8];
	struct zent st = { "m/data/0", data, 8, false };
	struct buf b = { 0 };

	pk_start(&b);
	op(&b, '(');
	pk_tensor(&b, "FloatStorage", "0", 2, 0, size, stride, 1, false);
	pk_tensor(&b, "IntStorage", "0", 2, 0, size, stride, 1, false);
	op(&b, 'l');
	op(&b, '.');
	open_fails(write_ckpt(&b, "3\n", &st, 1), -EILSEQ,
		   "used as float32 and as int32");
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}

/*
 * Storages are found by position only when their key is their index
 * ("0" is storages[0]); keys out of order, "00" beside "0", and numbers
 * past the count go through the table, and each reference still finds
 * the storage its key names.
 */
Test(ckpt_tensor, finds_storages_whatever_their_keys)
{
	/* storages: "0" (home), "5", "1", "3" (home), "00" */
	static const char *keys[] = { "0", "5", "1", "3", "1", "0", "00",
				      "3", "5" };
	static const int32_t size[] = { 2 }, stride[] = { 1 };
	static const char data[8];
	struct zent st[] = {
		{ "m/data/0", data, 8, false }, { "m/data/1", data, 8, false },
		{ "m/data/00", data, 8, false }, { "m/data/3", data, 8, false },
		{ "m/data/5", data, 8, false },
	};
	struct buf b = { 0 };
	struct ckpt *c;

	pk_start(&b);
	op(&b, ']');
	op(&b, '(');
	for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++)
		pk_tensor(&b, "FloatStorage", keys[i], 2, 0, size, stride, 1,
			  false);
	op(&b, 'e');
	op(&b, '.');
	c = open_ok(write_ckpt(&b, "3\n", st, 5));
	cr_assert_eq(c->nstorages, 5);
	cr_assert_eq(c->ntensors, 9);
	for (uint32_t i = 0; i < c->ntensors; i++) {
		const struct ckpt_storage *s = c->tensors[i]->storage;

		cr_assert_str_eq(s->key, keys[i]);
		cr_assert_eq(s->rec->usize, 8);
		cr_assert_str_eq(s->rec->name + 7, keys[i]);
		cr_assert_eq(s, c->storages[s->index]);
	}
	cr_assert_eq(c->tensors[0]->storage, c->storages[0]);
	cr_assert_eq(c->tensors[3]->storage, c->storages[3]);
	cr_assert_eq(c->tensors[0]->storage, c->tensors[5]->storage);
	cr_assert_eq(c->tensors[1]->storage, c->tensors[8]->storage);
	cr_assert_eq(c->tensors[2]->storage, c->tensors[4]->storage);
	cr_assert_eq(c->tensors[3]->storage, c->tensors[7]->storage);
	cr_assert_neq(c->tensors[0]->storage, c->tensors[6]->storage);
	ckpt_close(c);
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}

Test(ckpt_tensor, refuses_malformed_persistent_ids)
{
	struct buf b = { 0 };

	pk_start(&b);
	op(&b, '(');
	pk_str(&b, "storage");
	pk_global(&b, "torch", "FloatStorage");
	op(&b, 't');
	op(&b, 'Q');
	op(&b, '.');
	open_fails(write_ckpt(&b, "3\n", NULL, 0), -EILSEQ, "persistent id");
	free(b.p);
	memset(&b, 0, sizeof(b));
	pk_start(&b);
	op(&b, '(');
	pk_str(&b, "storage");
	pk_global(&b, "torch", "EvilStorage");
	pk_str(&b, "0");
	pk_str(&b, "cpu");
	pk_int(&b, 1);
	op(&b, 't');
	op(&b, 'Q');
	op(&b, '.');
	open_fails(write_ckpt(&b, "3\n", NULL, 0), -ENOTSUP,
		   "unknown storage class torch.EvilStorage");
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}

/* The numpy pickle of a 2x3 float32 array holding 0..5, then the call. */
static void pk_numpy_tensor(struct buf *b, const char *descr, int fortran)
{
	static const float vals[6] = { 0, 1, 2, 3, 4, 5 };
	static const int32_t shape[] = { 2, 3 };

	pk_global(b, "torch._utils", "_rebuild_device_tensor_from_numpy");
	op(b, '(');
	pk_global(b, "numpy.core.multiarray", "_reconstruct");
	op(b, '(');
	pk_global(b, "numpy", "ndarray");
	op(b, '(');
	pk_int(b, 0);
	op(b, 't');
	op(b, 'C');
	op(b, 1);
	op(b, 'b');
	op(b, 't');
	op(b, 'R');
	op(b, '(');		/* BUILD state */
	pk_int(b, 1);
	pk_ints(b, shape, 2);
	pk_global(b, "numpy", "dtype");
	op(b, '(');
	pk_str(b, descr);
	op(b, 0x89);
	op(b, 0x88);
	op(b, 't');
	op(b, 'R');
	op(b, '(');
	pk_int(b, 3);
	pk_str(b, "<");
	op(b, 'N');
	op(b, 'N');
	op(b, 'N');
	pk_int(b, -1);
	pk_int(b, -1);
	pk_int(b, 0);
	op(b, 't');
	op(b, 'b');
	op(b, fortran ? 0x88 : 0x89);
	op(b, 'C');
	op(b, sizeof(vals));
	zb_put_bytes(b, vals, sizeof(vals));
	op(b, 't');
	op(b, 'b');
	pk_global(b, "torch", "float32");
	pk_str(b, "xla:0");
	op(b, 0x89);
	op(b, 't');
	op(b, 'R');
}

/* @t reads as pk_numpy_tensor()'s values 0..5 */
static void reads_0_to_5(struct ckpt *c, const struct ckpt_tensor *t)
{
	float got[6];
	struct diag d;

	diag_init(&d, "numpy");
	cr_assert_eq(ckpt_tensor_read(c, t, got, sizeof(got), 0, &d), 24);
	for (int i = 0; i < 6; i++)
		cr_assert_eq(got[i], (float)i);
}

Test(ckpt_tensor, reads_tensors_saved_through_numpy)
{
	struct buf b = { 0 };
	struct ckpt *c;
	const struct ckpt_tensor *t;

	pk_start(&b);
	pk_numpy_tensor(&b, "f4", 0);
	op(&b, '.');
	c = open_ok(write_ckpt(&b, "3\n", NULL, 0));
	t = c->root->tensor;
	cr_assert_eq(c->root->kind, CKPT_N_TENSOR);
	cr_assert_eq(t->kind, CKPT_T_INLINE);
	cr_assert_str_eq(ckpt_tensor_device(t), "xla:0");
	cr_assert_str_eq(t->dtype->name, "float32");
	cr_assert_eq(t->shape[0], 2);
	cr_assert_eq(t->shape[1], 3);
	reads_0_to_5(c, t);
	ckpt_close(c);
	free(b.p);
	memset(&b, 0, sizeof(b));
	pk_start(&b);
	pk_numpy_tensor(&b, "f8", 0);
	op(&b, '.');
	open_fails(write_ckpt(&b, "3\n", NULL, 0), -ENOTSUP,
		   "numpy array 'f8'");
	free(b.p);
	memset(&b, 0, sizeof(b));
	pk_start(&b);
	pk_numpy_tensor(&b, "f4", 1);
	op(&b, '.');
	open_fails(write_ckpt(&b, "3\n", NULL, 0), -ENOTSUP, "Fortran");
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}

/*
 * A Parameter of a tensor saved through numpy (an XLA parameter): the
 * parameter is a second ckpt_tensor with the inner one's view and data,
 * which both must read, and which the model must not free twice.
 */
Test(ckpt_tensor, a_parameter_of_a_numpy_tensor_shares_its_data)
{
	struct buf b = { 0 };
	struct ckpt *c;
	const struct ckpt_tensor *t;

	pk_start(&b);
	pk_global(&b, "torch._utils", "_rebuild_parameter");
	op(&b, '(');
	pk_numpy_tensor(&b, "f4", 0);
	op(&b, 0x88);
	pk_global(&b, "collections", "OrderedDict");
	op(&b, ')');
	op(&b, 'R');
	op(&b, 't');
	op(&b, 'R');
	op(&b, '.');
	c = open_ok(write_ckpt(&b, "3\n", NULL, 0));
	t = c->root->tensor;
	cr_assert_eq(c->ntensors, 2);
	cr_assert_eq(c->root->kind, CKPT_N_TENSOR);
	cr_assert_eq(t->kind, CKPT_T_INLINE);
	cr_assert(t->parameter);
	cr_assert(t->requires_grad);
	reads_0_to_5(c, t);
	reads_0_to_5(c, c->tensors[0]);
	ckpt_close(c);
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}

/* ---- the object tree ---- */

Test(ckpt_tree, int_and_str_keys_that_print_alike_both_stay_reachable)
{
	struct buf b = { 0 };
	struct ckpt *c;

	pk_start(&b);
	op(&b, '}');
	op(&b, '(');
	pk_int(&b, 0);
	pk_str(&b, "int");
	pk_str(&b, "0");
	pk_str(&b, "str");
	pk_str(&b, "a/b");
	op(&b, 'N');
	pk_str(&b, ".hidden");
	op(&b, 'N');
	pk_str(&b, "");
	op(&b, 'N');
	pk_str(&b, "50%");
	op(&b, 'N');
	op(&b, 'u');
	op(&b, '.');
	c = open_ok(write_ckpt(&b, "3\n", NULL, 0));
	cr_assert_str_eq(at(c, "0")->text, "int");
	cr_assert_str_eq(at(c, "0%#1")->text, "str");
	cr_assert_not_null(ckpt_node_child(c->root, "a%2Fb"));
	cr_assert_not_null(ckpt_node_child(c->root, "%2Ehidden"));
	cr_assert_not_null(ckpt_node_child(c->root, "%"));
	cr_assert_not_null(ckpt_node_child(c->root, "50%25"));
	ckpt_close(c);
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}

Test(ckpt_tree, shared_and_self_containing_lists_become_links)
{
	struct buf b = { 0 };
	struct ckpt *c;

	/* x = [1]; root = [x, x, root] */
	pk_start(&b);
	op(&b, ']');
	op(&b, 'q');
	op(&b, 0);
	op(&b, ']');
	op(&b, 'q');
	op(&b, 1);
	pk_int(&b, 1);
	op(&b, 'a');
	op(&b, 'a');
	op(&b, 'h');
	op(&b, 1);
	op(&b, 'a');
	op(&b, 'h');
	op(&b, 0);
	op(&b, 'a');
	op(&b, '.');
	c = open_ok(write_ckpt(&b, "3\n", NULL, 0));
	cr_assert_eq(at(c, "0")->kind, CKPT_N_SEQ);
	cr_assert_eq(at(c, "1")->kind, CKPT_N_LINK);
	cr_assert_eq(at(c, "1")->target, at(c, "0"));
	cr_assert_eq(at(c, "2")->kind, CKPT_N_LINK);
	cr_assert_eq(at(c, "2")->target, c->root);
	ckpt_close(c);
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}

Test(ckpt_tree, refuses_nesting_deeper_than_the_limit)
{
	struct buf b = { 0 };

	pk_start(&b);
	for (int i = 0; i < CKPT_MAX_DEPTH + 10; i++)
		op(&b, ']');
	for (int i = 0; i < CKPT_MAX_DEPTH + 9; i++)
		op(&b, 'a');
	op(&b, '.');
	open_fails(write_ckpt(&b, "3\n", NULL, 0), -EILSEQ, "nested deeper");
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}

Test(ckpt_tree, shows_a_million_chained_calls_without_recursing)
{
	struct buf b = { 0 };
	struct ckpt *c;

	/* {'x': foo.bar()()()...}: each REDUCE calls the last one's result */
	pk_start(&b);
	op(&b, '}');
	pk_str(&b, "x");
	pk_global(&b, "foo", "bar");
	for (int i = 0; i < 1000000; i++) {
		op(&b, ')');
		op(&b, 'R');
	}
	op(&b, 's');
	op(&b, '.');
	c = open_ok(write_ckpt(&b, "3\n", NULL, 0));
	cr_assert_eq(at(c, "x")->kind, CKPT_N_OPAQUE);
	cr_assert(strstr(at(c, "x")->text, "..."), "%s", at(c, "x")->text);
	ckpt_close(c);
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}

Test(ckpt_tree, reports_globals_outside_the_allowlist)
{
	struct buf b = { 0 };
	struct ckpt *c;

	pk_start(&b);
	pk_global(&b, "os", "system");
	op(&b, '(');
	pk_str(&b, "echo pwned");
	op(&b, 't');
	op(&b, 'R');
	op(&b, '.');
	c = open_ok(write_ckpt(&b, "3\n", NULL, 0));
	cr_assert_eq(c->nglobals, 1);
	cr_assert_str_eq(c->globals[0].module, "os");
	cr_assert_str_eq(c->globals[0].name, "system");
	cr_assert_eq(c->globals[0].off, 64 + 2);
	cr_assert_eq(c->root->kind, CKPT_N_OPAQUE);
	cr_assert_str_eq(c->root->text, "os.system('echo pwned')");
	ckpt_close(c);
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}

/* ---- names and values ---- */

Test(ckpt_names, float_repr_matches_python)
{
	static const struct {
		double v;
		const char *s;
	} cases[] = {
		{ 0.1, "0.1" }, { 1e-05, "1e-05" }, { 1e16, "1e+16" },
		{ 1e15, "1000000000000000.0" }, { 1.5, "1.5" },
		{ -0.0, "-0.0" }, { 100.0, "100.0" }, { 0.0001, "0.0001" },
		{ 123456789012345678.0, "1.2345678901234568e+17" },
		{ 0.999, "0.999" }, { 1e-08, "1e-08" }, { 2.5e-300, "2.5e-300" },
	};
	char buf[40];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_assert_str_eq(ckpt_float_repr(cases[i].v, buf, sizeof(buf)),
				 cases[i].s);
	assert_no_leaks();
}

Test(ckpt_names, unescape_reverses_escape)
{
	static const char *const keys[] = { "a/b", "%", "", ".x", "x.", "é" };
	char out[64];

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		struct pkl_value v = { .kind = PKL_STR };
		char key[16], *name;

		snprintf(key, sizeof(key), "%s", keys[i]);
		v.u.s.p = key;
		v.u.s.n = strlen(keys[i]);
		name = ckpt_name_escape(&v);
		cr_assert_not_null(name);
		cr_assert_null(strchr(name, '/'));
		cr_assert_neq(name[0], '.');
		cr_assert_eq(ckpt_name_unescape(name, out),
			     (long)strlen(keys[i]));
		cr_assert_str_eq(out, keys[i]);
		free(name);
	}
	cr_assert_eq(ckpt_name_unescape("%zz", out), -EINVAL);
	assert_no_leaks();
}

/* ---- the shared fixtures: everything opens or fails cleanly ---- */

struct open_counts {
	int opened, failed;
};

static void open_one(const char *path, void *arg)
{
	struct open_counts *k = arg;
	struct ckpt *c;
	struct diag d;

	diag_init(&d, path);
	if (!ckpt_open(path, &c, &d)) {
		k->opened++;
		ckpt_close(c);
	} else {
		cr_assert(d.err == -EILSEQ || d.err == -ENOTSUP, "%s: %d %s",
			  path, d.err, d.msg);
		k->failed++;
	}
}

Test(ckpt_open, every_shared_fixture_opens_or_fails_cleanly)
{
	struct open_counts k = { 0, 0 };

	for_each_fixture(open_one, &k);
	cr_log_info("%d opened, %d refused", k.opened, k.failed);
	assert_no_leaks();
}

Test(ckpt_legacy, reads_the_legacy_stream)
{
	const char *path = PT_TESTENV_DIR "/fixtures/torch-1.13/legacy.pt";
	struct ckpt *c;
	const struct ckpt_tensor *base, *evens;

	/* generated by the "fixtures" test (tests/fixtures/make.sh) */
	cr_assert_eq(access(path, R_OK), 0, "%s: %s", path, strerror(errno));
	c = open_ok(path);
	cr_assert_eq(c->format, CKPT_LEGACY);
	base = at(c, "base")->tensor;
	evens = at(c, "evens")->tensor;
	cr_assert_eq(base->storage, evens->storage);
	cr_assert_eq(evens->offset, 1);
	cr_assert_eq(ckpt_tensor_stride(evens)[0], 2);
	cr_assert_eq(evens->shape[0], 6);
	cr_assert_neq(base->storage->data_off, 0);
	ckpt_close(c);
	assert_no_leaks();
}

/* ---- deflated storage records (ckpt_inflate.c) ---- */

/* [t, t.view(n/4, 4).t()] over one FloatStorage "0" of @n floats. */
static void pk_two_views(struct buf *b, int32_t n)
{
	int32_t size[1] = { n }, stride[1] = { 1 };
	int32_t tsize[2] = { 4, n / 4 }, tstride[2] = { 1, 4 };

	pk_start(b);
	op(b, ']');
	op(b, '(');
	pk_tensor(b, "FloatStorage", "0", n, 0, size, stride, 1, false);
	pk_tensor(b, "FloatStorage", "0", n, 0, tsize, tstride, 2, false);
	op(b, 'e');
	op(b, '.');
}

Test(ckpt_inflate, reads_views_of_a_deflated_storage)
{
	int32_t n = 400000;	/* 1.6 MB: more than one inflate chunk */
	float *v = malloc(n * sizeof(*v)), *got = malloc(n * sizeof(*v));
	struct zent e = { "m/data/0", v, n * sizeof(*v), true };
	struct buf b = { 0 };
	struct ckpt *c;
	struct diag d;
	uint64_t off, off2;
	uint32_t crc;
	int fd, fd2;

	for (int32_t i = 0; i < n; i++)
		v[i] = (float)(i % 1000) / 8;
	pk_two_views(&b, n);
	c = open_ok(write_ckpt(&b, "3\n", &e, 1));
	cr_assert_eq(c->storages[0]->rec->method, PTZ_DEFLATED);
	cr_assert_not(ckpt_storage_crc(c->storages[0], &crc));
	diag_init(&d, "deflated");
	cr_assert_eq(ckpt_tensor_read(c, c->tensors[0], got, n * 4, 0, &d),
		     (long long)n * 4);
	cr_assert(!memcmp(got, v, n * sizeof(*v)));
	/* the transposed view: element (i, j) is v[i + 4 j] */
	cr_assert_eq(ckpt_tensor_read(c, c->tensors[1], got, n * 4, 0, &d),
		     (long long)n * 4);
	for (int32_t i = 0; i < 4; i++)
		for (int32_t j = 0; j < n / 4; j++)
			cr_assert_eq(got[i * (n / 4) + j], v[i + 4 * j]);
	cr_assert_eq(ckpt_storage_data(c, c->storages[0], &fd, &off, &d), 0);
	cr_assert_eq(ckpt_storage_data(c, c->storages[0], &fd2, &off2, &d), 0);
	cr_assert(fd != c->fd && fd == fd2 && off == 0 && off2 == 0);
	cr_assert(ckpt_storage_crc(c->storages[0], &crc));
	cr_assert_eq(crc, c->storages[0]->rec->crc32);
	ckpt_close(c);
	unlink(tmp_last());
	free(b.p);
	free(v);
	free(got);
	assert_no_leaks();
}

Test(ckpt_inflate, names_a_corrupt_deflated_storage_when_read)
{
	float v[64] = { 1, 2, 3 };
	struct zent e = { "m/data/0", v, sizeof(v), true };
	struct buf b = { 0 };
	struct ckpt *c;
	struct diag d;
	char line[512];
	float got[64];

	pk_two_views(&b, 64);
	c = open_ok(write_ckpt(&b, "3\n", &e, 1));
	/* a wrong CRC only shows once the record is inflated */
	c->storages[0]->rec->crc32 ^= 1;
	diag_init(&d, "deflated");
	cr_assert_eq(ckpt_tensor_read(c, c->tensors[0], got, sizeof(got), 0,
				      &d), -EILSEQ);
	diag_line(&d, line, sizeof(line));
	cr_assert(strstr(line, "record 'm/data/0': CRC-32 of the inflated "
			 "data"), "%s", line);
	/* nothing was kept: the next read tries again */
	cr_assert_not(c->storages[0]->zdone);
	c->storages[0]->rec->crc32 ^= 1;
	diag_init(&d, "deflated");
	cr_assert_eq(ckpt_tensor_read(c, c->tensors[0], got, sizeof(got), 0,
				      &d), (long long)sizeof(got));
	cr_assert(!memcmp(got, v, sizeof(v)));
	ckpt_close(c);
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}

/* A list of scalars' new text (ckpt_scalars.c): python's list and tuple
 * literals of ints, floats, bools and None, and nothing else. */
Test(ckpt_scalars, parses_python_lists_of_scalars_and_nothing_else)
{
	static const char *const good[] = {
		"[1, 2.5, True, None, -3e-05, -inf, 7]", "[]", "()", "(5,)",
		"(5,\n  6, 7,)\n", "[1,]", " [ 9223372036854775807 ,"
		"-9223372036854775808 ] \n",
	};
	static const size_t ngood[] = { 7, 0, 0, 1, 3, 1, 2 };
	static const char *const bad[] = {
		"[1, 'a']", "[1, [2]]", "[1 2]", "[1,,2]", "[,]", "(5)",
		"[99999999999999999999]", "7", "[1, 2", "1, 2]", "(1, 2]",
		"[1, {}]", "[1, \"b\"]", "[nan2]", "",
	};
	struct ckpt_scalars s;
	size_t len;
	char *text;

	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
		cr_assert_eq(ckpt_scalars_parse(good[i], strlen(good[i]), &s), 0,
			     "%s", good[i]);
		cr_assert_eq(s.n, ngood[i], "%s: %zu items", good[i], s.n);
		free(s.v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		cr_assert_lt(ckpt_scalars_parse(bad[i], strlen(bad[i]), &s), 0,
			     "'%s' parsed", bad[i]);
		cr_assert_null(s.v);
	}
	/* the text it writes back is python's repr() */
	cr_assert_eq(ckpt_scalars_parse("(5,\n 6,7,)", 10, &s), 0);
	text = ckpt_scalars_text(&s, &len);
	cr_assert_str_eq(text, "(5, 6, 7)");
	free(text);
	free(s.v);
	cr_assert_eq(ckpt_scalars_parse("( 5 , )", 7, &s), 0);
	text = ckpt_scalars_text(&s, &len);
	cr_assert_str_eq(text, "(5,)");
	free(text);
	free(s.v);
	cr_assert_eq(ckpt_scalars_parse("[1.0,False,None,1e22,-0.0]", 26, &s),
		     0);
	text = ckpt_scalars_text(&s, &len);
	cr_assert_str_eq(text, "[1.0, False, None, 1e+22, -0.0]");
	free(text);
	free(s.v);
	assert_no_leaks();
}

/*
 * root = [[0, 1, ..., 19], [1]]: opened with CKPT_OPEN_LISTS the long
 * list is one value file holding its repr(), the short one a directory;
 * a new text, repickled, is the list it says, items of their own types.
 */
Test(ckpt_scalars, a_long_list_is_one_value_written_back_as_a_list)
{
	static const char want[] = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, "
				   "13, 14, 15, 16, 17, 18, 19]";
	static const char text[] = "[5, None,\n True, 2.5, -7,]\n";
	struct ckpt_repickle r = { 0 };
	struct ckpt_literal lit;
	struct pkl_doc *doc;
	const struct pkl_value *l;
	struct ckpt_node *n;
	struct buf b = { 0 };
	struct ckpt *c;
	struct diag d;
	const char *path;

	pk_start(&b);
	op(&b, ']');
	op(&b, ']');
	op(&b, '(');
	for (int i = 0; i < 20; i++)
		pk_int(&b, i);
	op(&b, 'e');
	op(&b, 'a');
	op(&b, ']');
	pk_int(&b, 1);
	op(&b, 'a');
	op(&b, 'a');
	op(&b, '.');
	path = write_ckpt(&b, "3\n", NULL, 0);
	diag_init(&d, path);
	cr_assert_eq(ckpt_open_with(path, CKPT_OPEN_LISTS, &c, &d), 0, "%s",
		     d.msg);
	n = ckpt_node_child(c->root, "0");
	cr_assert_not_null(n);
	cr_assert_eq(n->kind, CKPT_N_VALUE);
	cr_assert_str_eq(n->type, "list");
	cr_assert_eq(n->textlen, strlen(want));
	cr_assert_str_eq(n->text, want);
	cr_assert_eq(at(c, "1")->kind, CKPT_N_SEQ);
	cr_assert(ckpt_value_editable(n));
	cr_assert_eq(ckpt_value_parse(n, "[1, 'a']", 8, &lit), -EINVAL);
	cr_assert_eq(ckpt_value_parse(n, text, strlen(text), &lit), 0);
	cr_assert_str_eq(lit.type, "list");
	cr_assert_eq(ckpt_value_set(c, n, &lit), 0);
	cr_assert_str_eq(n->text, "[5, None, True, 2.5, -7]");
	cr_assert_eq(ckpt_repickle(c, &r, &d), 0, "%s", d.msg);
	cr_assert_eq(pkl_parse(r.pkl, r.len, 0, &doc, &d), 0, "%s", d.msg);
	l = pkl_item(doc->root, 0);
	cr_assert_eq(l->kind, PKL_LIST);
	cr_assert_eq(pkl_len(l), 5);
	cr_assert_eq(pkl_item(l, 0)->kind, PKL_INT);
	cr_assert_eq(pkl_item(l, 0)->u.i, 5);
	cr_assert_eq(pkl_item(l, 1)->kind, PKL_NONE);
	cr_assert_eq(pkl_item(l, 2)->kind, PKL_BOOL);
	cr_assert_eq(pkl_item(l, 3)->kind, PKL_FLOAT);
	cr_assert_eq(pkl_item(l, 3)->u.f, 2.5);
	cr_assert_eq(pkl_item(l, 4)->u.i, -7);
	cr_assert_eq(pkl_len(pkl_item(doc->root, 1)), 1);
	pkl_doc_free(doc);
	ckpt_repickle_release(&r);
	ckpt_close(c);
	/* without the flag: a directory of 20 items, as ptls has it */
	c = open_ok(path);
	cr_assert_eq(at(c, "0")->kind, CKPT_N_SEQ);
	cr_assert_eq(at(c, "0")->dir->nkids, 20);
	ckpt_close(c);
	unlink(tmp_last());
	free(b.p);
	assert_no_leaks();
}
