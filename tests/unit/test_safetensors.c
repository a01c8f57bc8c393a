/*
 * test_safetensors.c - the safetensors reader (ckpt_safetensors.c).  Files
 * are made here from the format's definition (8-byte little-endian header
 * length, JSON header, data), so that no safetensors package is needed:
 * good files of every dtype, empty and 0-d tensors and metadata give the
 * model torch would; every hostile header (truncations, bad JSON, lying
 * offsets and sizes, duplicates) is refused with one line naming the
 * offset of the header byte where it went wrong.
 */
#include "ckpt_open_util.h"

#include "pickle/pkl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[64];

static void cleanup(void)
{
	if (path[0])
		unlink(path);
	path[0] = 0;
}

TestSuite(st_read, .fini = cleanup);
TestSuite(st_malformed, .fini = cleanup);

/* Write @len bytes of @p as the scratch file; its name is path. */
static const char *put_file(const void *p, size_t len)
{
	int fd;

	if (!path[0]) {
		strcpy(path, "/tmp/pt_st_test.XXXXXX");
		fd = mkstemp(path);
	} else {
		fd = open(path, O_WRONLY | O_TRUNC);
	}
	cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, p, len), (ssize_t)len);
	close(fd);
	return path;
}

/* A whole file in memory: header length @n (as given), @hdr, @dlen bytes
 * of data 0, 1, 2 ...; *@len is its size (caller frees). */
static unsigned char *st_bytes(uint64_t n, const char *hdr, size_t dlen,
			       size_t *len)
{
	size_t hl = strlen(hdr);
	unsigned char *p = malloc(8 + hl + dlen + 1);

	cr_assert_not_null(p);
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(n >> (8 * i));
	memcpy(p + 8, hdr, hl);
	for (size_t i = 0; i < dlen; i++)
		p[8 + hl + i] = (unsigned char)i;
	*len = 8 + hl + dlen;
	return p;
}

static const char *st_file(const char *hdr, size_t dlen)
{
	size_t len;
	unsigned char *p = st_bytes(strlen(hdr), hdr, dlen, &len);

	put_file(p, len);
	free(p);
	return path;
}

/* Opened as a safetensors file. */
static struct ckpt *st_open(const char *file)
{
	struct ckpt *c = open_ok(file);

	cr_assert_eq(c->format, CKPT_SAFETENSORS);
	cr_assert_str_eq(ckpt_fmt(c)->name, "safetensors");
	cr_assert(ckpt_can(c, CKPT_CAP_WRITE));
	return c;
}

/* Refused with @err at file offset @off, the message holding @what. */
static void open_fails_at(const char *file, int err, uint64_t off,
			  const char *what)
{
	struct diag d;
	char line[512];

	open_refused(file, err, what, &d);
	cr_assert_eq(d.off, off, "offset %llu, expected %llu: %s",
		     (unsigned long long)d.off, (unsigned long long)off,
		     diag_line(&d, line, sizeof(line)));
	diag_line(&d, line, sizeof(line));
	cr_assert(strstr(line, "offset 0x"), "line '%s' names no offset",
		  line);
}

static const struct ckpt_node *kid(const struct ckpt *c, const char *name)
{
	const struct ckpt_node *n = ckpt_node_child(c->root, name);

	cr_assert_not_null(n, "no entry '%s'", name);
	return n;
}

/* ---- good files ---- */

Test(st_read, every_dtype)
{
	static const struct {
		const char *st, *torch;
		unsigned size;
	} dt[] = {
		{ "F64", "float64", 8 }, { "F32", "float32", 4 },
		{ "F16", "float16", 2 }, { "BF16", "bfloat16", 2 },
		{ "I64", "int64", 8 }, { "I32", "int32", 4 },
		{ "I16", "int16", 2 }, { "I8", "int8", 1 },
		{ "U8", "uint8", 1 }, { "U16", "uint16", 2 },
		{ "U32", "uint32", 4 }, { "U64", "uint64", 8 },
		{ "BOOL", "bool", 1 }, { "C64", "complex64", 8 },
		{ "F8_E4M3", "float8_e4m3fn", 1 },
		{ "F8_E5M2", "float8_e5m2", 1 },
		{ "F8_E4M3FNUZ", "float8_e4m3fnuz", 1 },
		{ "F8_E5M2FNUZ", "float8_e5m2fnuz", 1 },
		{ "F8_E8M0", "float8_e8m0fnu", 1 },
	};
	size_t n = sizeof(dt) / sizeof(dt[0]), pos = 0;
	char hdr[4096];
	size_t k = 0;
	struct ckpt *c;

	k += sprintf(hdr, "{");
	for (size_t i = 0; i < n; i++) {
		k += sprintf(hdr + k, "%s\"t%zu\":{\"dtype\":\"%s\",\"shape\":"
			     "[2,3],\"data_offsets\":[%zu,%zu]}", i ? "," : "",
			     i, dt[i].st, pos, pos + 6 * dt[i].size);
		pos += 6 * dt[i].size;
	}
	sprintf(hdr + k, "}");
	c = st_open(st_file(hdr, pos));
	cr_assert_eq(c->nstorages, n);
	cr_assert_eq(c->root->dir->nkids, n);
	cr_assert_str_eq(c->root->type, "dict");
	cr_assert_eq(c->data_end, c->file_size);
	pos = 0;
	for (size_t i = 0; i < n; i++) {
		const struct ckpt_node *node = c->root->dir->kids[i];
		const struct ckpt_tensor *t = node->tensor;
		unsigned char buf[64], want[64];
		char name[8];
		struct diag d;

		snprintf(name, sizeof(name), "t%zu", i);
		cr_assert_str_eq(node->name, name);
		cr_assert_eq(node->kind, CKPT_N_TENSOR);
		cr_assert_str_eq(t->dtype->name, dt[i].torch);
		cr_assert_str_eq(t->dtype->st, dt[i].st);
		cr_assert_eq(t->ndim, 2);
		cr_assert(t->shape[0] == 2 && t->shape[1] == 3);
		cr_assert(ckpt_tensor_stride(t)[0] == 3 &&
			  ckpt_tensor_stride(t)[1] == 1);
		cr_assert(t->contiguous);
		cr_assert_eq(t->offset, 0);
		cr_assert_str_eq(ckpt_tensor_device(t), "cpu");
		cr_assert_eq(ckpt_tensor_nbytes(t), 6 * dt[i].size);
		cr_assert_null(t->storage->rec);
		cr_assert_eq(t->storage->data_off, 8 + strlen(hdr) + pos);
		diag_init(&d, path);
		cr_assert_eq(ckpt_tensor_read(c, t, buf, sizeof(buf), 0, &d),
			     (long long)ckpt_tensor_nbytes(t));
		for (size_t b = 0; b < ckpt_tensor_nbytes(t); b++)
			want[b] = (unsigned char)(pos + b);
		cr_assert_arr_eq(buf, want, ckpt_tensor_nbytes(t));
		pos += ckpt_tensor_nbytes(t);
	}
	ckpt_close(c);
	assert_no_leaks();
}

/*
 * Sub-byte dtypes (tensor.rs: F4 4 bits, F6_E2M3 and F6_E3M2 6 bits;
 * numel x bits a whole number of bytes): F4 of an even last size is
 * torch's float4_e2m1fn_x2 with that size halved, as safetensors' torch
 * binding loads it; the rest are their bytes, 1-d, the dtype named, the
 * header's shape kept.  The other tensors are read as ever.
 */
Test(st_read, sub_byte_dtypes)
{
	struct ckpt *c = st_open(st_file(
		"{\"f4\":{\"dtype\":\"F4\",\"shape\":[2,4],\"data_offsets\":"
		"[0,4]},\"f4odd\":{\"dtype\":\"F4\",\"shape\":[2,3],"
		"\"data_offsets\":[4,7]},\"f6\":{\"dtype\":\"F6_E2M3\","
		"\"shape\":[4],\"data_offsets\":[7,10]},\"f6b\":{\"dtype\":"
		"\"F6_E3M2\",\"shape\":[2,2],\"data_offsets\":[10,13]},"
		"\"u\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":"
		"[13,14]}}", 14));
	static const struct {
		const char *name, *dtype, *st;
		int ndim;
		int64_t d0, d1;
		int st_ndim;
		uint64_t at;
	} want[] = {
		{ "f4", "float4_e2m1fn_x2", "F4", 2, 2, 2, 0, 0 },
		{ "f4odd", "F4", "F4", 1, 3, 0, 2, 4 },
		{ "f6", "F6_E2M3", "F6_E2M3", 1, 3, 0, 1, 7 },
		{ "f6b", "F6_E3M2", "F6_E3M2", 1, 3, 0, 2, 10 },
		{ "u", "uint8", "U8", 1, 1, 0, 0, 13 },
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct ckpt_tensor *t = kid(c, want[i].name)->tensor;
		unsigned char buf[8];
		struct diag d;

		cr_assert_str_eq(t->dtype->name, want[i].dtype, "%s",
				 want[i].name);
		cr_assert_str_eq(t->dtype->st, want[i].st);
		cr_assert_eq(t->ndim, want[i].ndim, "%s", want[i].name);
		cr_assert_eq(t->shape[0], want[i].d0, "%s", want[i].name);
		if (t->ndim > 1)
			cr_assert_eq(t->shape[1], want[i].d1);
		cr_assert_eq(t->x->st_ndim, want[i].st_ndim, "%s",
			     want[i].name);
		diag_init(&d, path);
		cr_assert_eq(ckpt_tensor_read(c, t, buf, sizeof(buf), 0, &d),
			     (long long)ckpt_tensor_nbytes(t));
		if (i)	/* its bytes where the header says */
			cr_assert_eq(buf[0], want[i].at, "%s", want[i].name);
	}
	cr_assert_eq(kid(c, "f4odd")->tensor->x->st_shape[1], 3);
	cr_assert_eq(kid(c, "f6")->tensor->x->st_shape[0], 4);
	/* the bytes-only dtypes are not torch's: no name finds them */
	cr_assert_null(ckpt_dtype_by_name("F6_E2M3"));
	cr_assert_null(ckpt_dtype_by_name("F4"));
	ckpt_close(c);
	assert_no_leaks();
}

Test(st_read, empty_and_0d_tensors)
{
	struct ckpt *c = st_open(st_file(
		"{\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":"
		"[0,0]},\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":"
		"[0,8]},\"z\":{\"dtype\":\"I8\",\"shape\":[4,0,1000000],"
		"\"data_offsets\":[8,8]}}", 8));
	const struct ckpt_tensor *e = kid(c, "e")->tensor;
	const struct ckpt_tensor *s = kid(c, "s")->tensor;
	const struct ckpt_tensor *z = kid(c, "z")->tensor;

	cr_assert_eq(e->numel, 0);
	cr_assert_eq(ckpt_tensor_nbytes(e), 0);
	cr_assert(ckpt_tensor_stride(e)[0] == 3 &&
		  ckpt_tensor_stride(e)[1] == 1);
	cr_assert_eq(s->ndim, 0);
	cr_assert_eq(s->numel, 1);
	cr_assert_eq(ckpt_tensor_nbytes(s), 8);
	/* torch's contiguous strides count a 0 size as 1 */
	cr_assert(ckpt_tensor_stride(z)[0] == 1000000 &&
		  ckpt_tensor_stride(z)[1] == 1000000 &&
		  ckpt_tensor_stride(z)[2] == 1);
	ckpt_close(c);
	assert_no_leaks();
}

Test(st_read, metadata_and_escapes)
{
	struct ckpt *c = st_open(st_file(
		"{\"__metadata__\":{\"format\":\"pt\",\"q\\\"k\":\"a\\n\\u00e9"
		"\\ud83d\\ude00\\/\",\"nul\":\"x\\u0000y\"},"
		"\"a/b\":{\"data_offsets\":[0,1],\"shape\":[1],\"dtype\":\"U8\"},"
		"\".h\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
		"\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}"
		"    ", 3));

	cr_assert_eq(c->nmeta, 3);
	cr_assert_str_eq(c->meta[0].key, "format");
	cr_assert_str_eq(c->meta[0].val, "pt");
	cr_assert_str_eq(c->meta[1].key, "q\"k");
	cr_assert_str_eq(c->meta[1].val, "a\n\xc3\xa9\xf0\x9f\x98\x80/");
	cr_assert_eq(c->meta[2].vlen, 3);
	cr_assert_arr_eq(c->meta[2].val, "x\0y", 3);
	/* names escaped as docs/names.md says, in header order */
	cr_assert_eq(c->root->dir->nkids, 3);
	cr_assert_str_eq(c->root->dir->kids[0]->name, "a%2Fb");
	cr_assert_str_eq(c->root->dir->kids[1]->name, "%2Eh");
	cr_assert_str_eq(c->root->dir->kids[2]->name, "%");
	cr_assert_str_eq(c->root->dir->kids[0]->key->u.s.p, "a/b");
	ckpt_close(c);
	assert_no_leaks();
}

/* MLX writes "__metadata__": null; safetensors reads it as no metadata
 * (an Option in tensor.rs's HashMetadata), and so do we. */
Test(st_read, null_metadata_is_none)
{
	struct ckpt *c = st_open(st_file(
		"{\"__metadata__\": null ,\"a\":{\"dtype\":\"U8\",\"shape\":[2],"
		"\"data_offsets\":[0,2]}}", 2));

	cr_assert_eq(c->nmeta, 0);
	cr_assert_not(c->meta_given);
	cr_assert_eq(c->root->dir->nkids, 1);
	cr_assert_str_eq(c->root->dir->kids[0]->name, "a");
	ckpt_close(c);
	assert_no_leaks();
}

Test(st_read, header_order_is_not_offset_order)
{
	struct ckpt *c = st_open(st_file(
		"{\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[4,8]},"
		"\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
		8));

	cr_assert_str_eq(c->root->dir->kids[0]->name, "b");
	cr_assert_eq(c->root->dir->kids[0]->tensor->storage->data_off,
		     c->file_size - 4);
	ckpt_close(c);
	assert_no_leaks();
}

Test(st_read, no_tensors_and_trailing_bytes)
{
	struct ckpt *c = st_open(st_file("{}", 0));

	cr_assert_eq(c->nstorages, 0);
	cr_assert_eq(c->root->dir->nkids, 0);
	cr_assert_eq(c->data_end, 10);
	ckpt_close(c);
	/* bytes after the last tensor: opened; ptverify reports them */
	c = st_open(st_file("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],"
			    "\"data_offsets\":[0,2]}}", 5));
	cr_assert_eq(c->data_end + 3, c->file_size);
	ckpt_close(c);
	assert_no_leaks();
}

/* Tensor bytes that spell "<html" near the start are data, not a web
 * page (fuzz_write wrote such a file from a legacy checkpoint, and it was
 * refused as "HTML page" on reopening). */
Test(st_read, html_in_the_data_is_data)
{
	static const char hdr[] = "{\"a\":{\"dtype\":\"U8\",\"shape\":[5],"
				  "\"data_offsets\":[0,5]}}";
	size_t len;
	unsigned char *p = st_bytes(strlen(hdr), hdr, 5, &len);
	struct ckpt *c;

	memcpy(p + len - 5, "<html", 5);
	put_file(p, len);
	free(p);
	c = st_open(path);
	cr_assert_eq(c->nstorages, 1);
	ckpt_close(c);
	assert_no_leaks();
}

/* ---- hostile files ---- */

#define GOOD "{\"__metadata__\":{\"k\":\"v\"},\"a\":{\"dtype\":\"F16\"," \
	     "\"shape\":[2],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"U8\"," \
	     "\"shape\":[],\"data_offsets\":[4,5]}}"

Test(st_malformed, truncated_at_every_byte)
{
	size_t len;
	unsigned char *p = st_bytes(strlen(GOOD), GOOD, 5, &len);

	for (size_t k = 0; k < len; k++) {
		struct ckpt *c = NULL;
		struct diag d;
		char line[512];

		diag_init(&d, "cut");
		put_file(p, k);
		cr_assert_eq(ckpt_open(path, &c, &d), -EILSEQ, "cut at %zu: %s",
			     k, diag_line(&d, line, sizeof(line)));
		cr_assert_null(c);
		cr_assert_neq(d.off, DIAG_NO_OFFSET, "cut at %zu: no offset",
			      k);
	}
	put_file(p, len);
	ckpt_close(st_open(path));
	free(p);
	assert_no_leaks();
}

Test(st_malformed, header_length_past_the_file)
{
	size_t len;
	unsigned char *p = st_bytes(1000, GOOD, 5, &len);

	put_file(p, len);
	open_fails_at(path, -EILSEQ, 0, "runs past the end of the file");
	free(p);
	p = st_bytes(200000000, GOOD, 5, &len);
	put_file(p, len);
	open_fails_at(path, -EILSEQ, 0, "over the format's limit");
	free(p);
	assert_no_leaks();
}

/*
 * Each header is refused with @err, the message holding @what, at the
 * first occurrence of @at in it (NULL: its end).
 */
static const struct bad {
	const char *hdr, *at, *what;
	int err;
} bad[] = {
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}",
	  NULL, "header ends", -EILSEQ },
	{ "{\"a\" {}}", "{}", "':' expected", -EILSEQ },
	{ "{\"abc", "abc", "closing quote", -EILSEQ },
	{ "{\"a\\qb\":{}}", "\\q", "bad escape", -EILSEQ },
	{ "{\"\\u12G4\":{}}", "G", "bad \\u escape", -EILSEQ },
	{ "{\"\\udc00\":{}}", "\\udc", "lone low surrogate", -EILSEQ },
	{ "{\"\\ud800x\":{}}", "x", "without its low half", -EILSEQ },
	{ "{\"\\ud800\\u0041\":{}}", "\":", "bad surrogate pair", -EILSEQ },
	{ "{\"\xff\":{}}", "\"", "not UTF-8", -EILSEQ },
	{ "{\"a\tb\":{}}", "\t", "control character", -EILSEQ },
	{ "{\"a\":null}", "null", "tensor object expected", -EILSEQ },
	{ "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
	  "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
	  "[", "tensor object expected", -EILSEQ },
	{ "{\"a\":{\"shape\":[ [[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]"
	  "]]]]]]]]]}}", "[[", "integer expected", -EILSEQ },
	{ "{\"a\":{\"shape\":[01]}}", "01", "leading zero", -EILSEQ },
	{ "{\"a\":{\"shape\":[1.5]}}", "1.5", "not an integer", -EILSEQ },
	{ "{\"a\":{\"shape\":[1e3]}}", "1e3", "not an integer", -EILSEQ },
	{ "{\"a\":{\"shape\":[-1]}}", "-1", "negative number", -EILSEQ },
	{ "{\"a\":{\"shape\":[2,true]}}", "true", "integer expected", -EILSEQ },
	{ "{\"a\":{\"shape\":[18446744073709551616]}}", "18446",
	  "does not fit", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[9223372036854775808],"
	  "\"data_offsets\":[0,0]}}", "[9223", "too large", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,"
	  "4294967296],\"data_offsets\":[0,0]}}", "[4294",
	  "element count overflows", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,536870912],"
	  "\"data_offsets\":[0,0]}}", "[4294", "byte size overflows", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[0,4294967296,4294967296,"
	  "4294967296],\"data_offsets\":[0,0]}}", "[0,", "strides overflow",
	  -EILSEQ },
	{ "{\"a\":{\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
	  "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
	  "1,1,1,1,1,1,1,1]}}", "1]}}", "more than 64", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}",
	  "2]", "more than 2", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1]}}",
	  "[1]}", "not [begin, end]", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}",
	  "[4,0]", "run backwards", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}",
	  "[0,8]", "data_offsets give 8", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[100],\"data_offsets\":"
	  "[0,100]}}", "[0,100]", "past the end of the file", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
	  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
	  "[2,6]", "overlaps tensor 'a'", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
	  "[4,8]", "[0, 4) before tensor 'a' belong to no tensor", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
	  "\"e\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[2,2]}}",
	  "[2,2]", "overlaps", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
	  "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
	  "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4",
	  "tensor 'a' given twice", -EILSEQ },
	{ "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", "\"k\":\"2",
	  "key 'k' given twice", -EILSEQ },
	{ "{\"__metadata__\":{},\"__metadata__\":{}}", "\"__metadata__\":{}}",
	  "__metadata__ given twice", -EILSEQ },
	{ "{\"__metadata__\":{\"k\":1}}", "1}", "value of 'k' is not a string",
	  -EILSEQ },
	{ "{\"__metadata__\":{\"dtype\":\"U8\",\"shape\":[1],"
	  "\"data_offsets\":[0,1]}}", "[1]", "value of 'shape' is not a "
	  "string", -EILSEQ },
	{ "{\"__metadata__\":nul}", "nul}", "__metadata__ object or null "
	  "expected", -EILSEQ },
	{ "{\"__metadata__\":7}", "7", "__metadata__ object or null "
	  "expected", -EILSEQ },
	{ "{\"__metadata__\":null,\"__metadata__\":{}}",
	  "\"__metadata__\":{}}", "__metadata__ given twice", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
	  "\"x\":1}}", "\"x\"", "unknown field 'x'", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\"}}", "\"dtype\":\"U8\"}",
	  "field 'dtype' given twice", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", "{\"dtype",
	  "has no 'data_offsets'", -EILSEQ },
	{ "{\"a\":{\"dtype\":7}}", "7", "string expected", -EILSEQ },
	{ "{\"a\":{\"dtype\\u0000\":\"U8\"}}", "\"dtype", "unknown field",
	  -EILSEQ },
	{ "{\"a\":{\"dtype\":\"U8\\u0000\"}}", "\"U8", "holds a NUL",
	  -ENOTSUP },
	{ "{\"a\":{\"dtype\":\"F5\",\"shape\":[1],\"data_offsets\":[0,1]}}",
	  "\"F5", "unknown safetensors dtype 'F5'", -ENOTSUP },
	{ "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}",
	  "[3]", "3 x F4 is not a whole number of bytes", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"F6_E2M3\",\"shape\":[2],\"data_offsets\":"
	  "[0,2]}}", "[2]", "2 x F6_E2M3 is not a whole number", -EILSEQ },
	{ "{\"a\":{\"dtype\":\"F4\",\"shape\":[2,2],\"data_offsets\":"
	  "[0,4]}}", "[0,4]", "4 x F4 = 2 bytes, but data_offsets give 4",
	  -EILSEQ },
	{ "{} x", "x", "text after the header object", -EILSEQ },
	{ "{,}", ",", "string expected", -EILSEQ },
};

Test(st_malformed, bad_headers)
{
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *h = bad[i].hdr;
		const char *at = bad[i].at ? strstr(h, bad[i].at) : h + strlen(h);

		cr_assert_not_null(at, "case %zu: marker not in header", i);
		/* 8 data bytes: enough for the cases that need some */
		st_file(h, 8);
		cr_log_info("case %zu: %s", i, h);
		open_fails_at(path, bad[i].err, 8 + (uint64_t)(at - h),
			   bad[i].what);
	}
	assert_no_leaks();
}

Test(st_malformed, trailing_comma)
{
	const char *h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
			"\"data_offsets\":[0,1]},}";

	open_fails_at(st_file(h, 1), -EILSEQ, 8 + strlen(h) - 1,
		   "string expected");
	assert_no_leaks();
}

Test(st_malformed, not_a_safetensors_start)
{
	/* a header must start with '{': anything else is not this format */
	open_fails_at(st_file(" {}", 0), -EILSEQ, 0,
		      "not a PyTorch checkpoint");
	assert_no_leaks();
}
