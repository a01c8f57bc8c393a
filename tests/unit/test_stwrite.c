/*
 * test_stwrite.c - the safetensors writer (ckpt_stflat.c, ckpt_stwrite.c).
 * Files are made from the format's definition, as in test_safetensors.c;
 * what the writer gives is read back with our reader and compared byte
 * for byte: a file in save_file's form comes back identical, any other
 * in that form (widest dtype first, then by name; offsets tiling the
 * data; the header padded to 8 with blanks; names escaped as serde_json
 * escapes them).  The sample checkpoint (a torch.save training
 * checkpoint: tied embedding, optimizer state, python values) is refused
 * for its values, and with them left out gives its tensors, the tie as
 * __metadata__ and {"format": "pt"}.  A safetensors file written as a
 * torch zip opens with the same tensors in header order.
 */
#include "ckpt_open_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char in_path[64], out_path[64];

static void cleanup(void)
{
	if (in_path[0])
		unlink(in_path);
	if (out_path[0])
		unlink(out_path);
	in_path[0] = out_path[0] = 0;
}

TestSuite(st_write, .fini = cleanup);

static int scratch(char *path)
{
	int fd;

	strcpy(path, "/tmp/pt_stw_test.XXXXXX");
	fd = mkstemp(path);
	cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
	return fd;
}

/* A safetensors file of header @hdr (padded to 8 here when @pad) and
 * @dlen data bytes 0, 1, 2, ...; its bytes in *@all if not NULL. */
static const char *st_file(const char *hdr, bool pad, size_t dlen,
			   unsigned char **all, size_t *len)
{
	size_t hl = strlen(hdr), n = pad ? (hl + 7) / 8 * 8 : hl;
	unsigned char *p = malloc(8 + n + dlen + 1);
	int fd = scratch(in_path);

	cr_assert_not_null(p);
	put_le64(p, n);
	memcpy(p + 8, hdr, hl);
	memset(p + 8 + hl, ' ', n - hl);
	for (size_t i = 0; i < dlen; i++)
		p[8 + n + i] = (unsigned char)(i * 7 + 1);
	cr_assert_eq(write(fd, p, 8 + n + dlen), (ssize_t)(8 + n + dlen));
	close(fd);
	if (all) {
		*all = p;
		*len = 8 + n + dlen;
	} else {
		free(p);
	}
	return in_path;
}

/* ckpt_write() of @c as @to into out_path: 0 or the -errno; @d kept. */
static int write_out(struct ckpt *c, int to, bool drop,
		     struct ckpt_write_stats *st, struct diag *d)
{
	struct ckpt_write_opts o = { .to = (uint8_t)to, .st_drop = drop,
				     .stats = st };
	int fd = scratch(out_path), rc;

	diag_init(d, c->path);
	rc = ckpt_write(c, fd, &o, d);
	close(fd);
	return rc;
}

static unsigned char *out_bytes(size_t *len)
{
	int fd = open(out_path, O_RDONLY);
	unsigned char *p;

	cr_assert(fd >= 0);
	p = slurp(fd, len);
	close(fd);
	return p;
}

/* Every tensor of @a has the bytes of @b's tensor of the same name. */
static void same_tensors(struct ckpt *a, struct ckpt *b)
{
	struct diag d;

	for (uint32_t i = 0; i < a->root->dir->nkids; i++) {
		const struct ckpt_node *n = a->root->dir->kids[i];
		const struct ckpt_node *m = ckpt_node_child(b->root, n->name);
		unsigned char x[64], y[64];
		long long gx, gy;

		cr_assert_not_null(m, "%s missing", n->name);
		cr_assert_eq(n->tensor->dtype, m->tensor->dtype, "%s", n->name);
		cr_assert_eq(n->tensor->ndim, m->tensor->ndim, "%s", n->name);
		diag_init(&d, a->path);
		gx = ckpt_tensor_read(a, n->tensor, x, sizeof(x), 0, &d);
		gy = ckpt_tensor_read(b, m->tensor, y, sizeof(y), 0, &d);
		cr_assert_eq(gx, gy, "%s", n->name);
		cr_assert_eq(memcmp(x, y, (size_t)gx), 0, "%s: bytes differ",
			     n->name);
	}
}

Test(st_write, canonical_file_comes_back_identical)
{
	static const char hdr[] =
		"{\"__metadata__\":{\"format\":\"pt\"},"
		"\"w\":{\"dtype\":\"F32\",\"shape\":[2,1],\"data_offsets\":"
		"[0,8]},\"b\":{\"dtype\":\"F16\",\"shape\":[3],"
		"\"data_offsets\":[8,14]},\"m\":{\"dtype\":\"BOOL\","
		"\"shape\":[],\"data_offsets\":[14,15]}}";
	struct ckpt_write_stats st = { 0 };
	unsigned char *in, *out;
	size_t inlen, outlen;
	struct ckpt *c;
	struct diag d;

	c = open_ok(st_file(hdr, true, 15, &in, &inlen));
	cr_assert(ckpt_can(c, CKPT_CAP_WRITE));
	cr_assert_eq(write_out(c, CKPT_OUT_SAME, false, &st, &d), 0, "%s",
		     d.msg);
	out = out_bytes(&outlen);
	cr_assert_eq(outlen, inlen);
	cr_assert_eq(memcmp(in, out, inlen), 0, "not byte for byte the same");
	cr_assert_eq(st.tensors, 3);
	cr_assert_eq(st.size, inlen);
	free(in);
	free(out);
	ckpt_close(c);
	assert_no_leaks();
}

Test(st_write, any_order_comes_out_canonical)
{
	/* narrow dtypes first, names backwards, data in a third order,
	   blanks inside the JSON, no padding */
	static const char hdr[] =
		"{ \"z\": {\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":"
		"[0,2]}, \"b\": {\"dtype\":\"I64\",\"shape\":[1],"
		"\"data_offsets\":[2,10]}, \"a\": {\"dtype\":\"I64\","
		"\"shape\":[1],\"data_offsets\":[10,18]}, \"__metadata__\": "
		"{\"k\": \"v\"}, \"h\": {\"dtype\":\"BF16\",\"shape\":[1,1],"
		"\"data_offsets\":[18,20]} }";
	static const char want[] =
		"{\"__metadata__\":{\"k\":\"v\"},"
		"\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
		"\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[8,16]},"
		"\"h\":{\"dtype\":\"BF16\",\"shape\":[1,1],\"data_offsets\":"
		"[16,18]},\"z\":{\"dtype\":\"U8\",\"shape\":[2],"
		"\"data_offsets\":[18,20]}}";
	struct ckpt *c, *w;
	unsigned char *out;
	size_t len, n = (strlen(want) + 7) / 8 * 8;
	struct diag d;

	c = open_ok(st_file(hdr, false, 20, NULL, NULL));
	cr_assert_eq(write_out(c, CKPT_OUT_SAME, false, NULL, &d), 0, "%s",
		     d.msg);
	out = out_bytes(&len);
	cr_assert_eq(out[0] | out[1] << 8, n, "header length");
	cr_assert_eq(memcmp(out + 8, want, strlen(want)), 0, "header: %.*s",
		     (int)n, out + 8);
	for (size_t i = strlen(want); i < n; i++)
		cr_assert_eq(out[8 + i], ' ', "padding");
	cr_assert_eq(len, 8 + n + 20);
	w = open_ok(out_path);
	same_tensors(c, w);
	ckpt_close(w);
	ckpt_close(c);
	free(out);
	assert_no_leaks();
}

Test(st_write, names_escaped_as_serde_json_does)
{
	/* "q\"\\\n\u0001\u00e9\u007f": quote, backslash, newline, a
	   control character, a non-ASCII one and DEL */
	static const char hdr[] =
		"{\"q\\\"\\\\\\n\\u0001\\u00e9\\u007f\":{\"dtype\":\"U8\","
		"\"shape\":[1],\"data_offsets\":[0,1]}}";
	static const char want[] =
		"{\"q\\\"\\\\\\n\\u0001\xc3\xa9\x7f\":{\"dtype\":\"U8\","
		"\"shape\":[1],\"data_offsets\":[0,1]}}";
	struct ckpt *c;
	unsigned char *out;
	size_t len;
	struct diag d;

	c = open_ok(st_file(hdr, true, 1, NULL, NULL));
	cr_assert_eq(write_out(c, CKPT_OUT_SAME, false, NULL, &d), 0);
	out = out_bytes(&len);
	cr_assert_eq(memcmp(out + 8, want, strlen(want)), 0, "header: %s",
		     (char *)out + 8);
	free(out);
	ckpt_close(c);
	assert_no_leaks();
}

Test(st_write, empty_metadata_kept_absent_metadata_not_made)
{
	struct ckpt *c;
	unsigned char *out;
	size_t len;
	struct diag d;

	c = open_ok(st_file("{\"__metadata__\":{}}", true, 0, NULL, NULL));
	cr_assert_eq(write_out(c, CKPT_OUT_SAME, false, NULL, &d), 0);
	out = out_bytes(&len);
	cr_assert_eq(len, 8 + 24);
	cr_assert_eq(memcmp(out + 8, "{\"__metadata__\":{}}     ", 24), 0);
	free(out);
	ckpt_close(c);
	c = open_ok(st_file("{}", true, 0, NULL, NULL));
	cr_assert_eq(write_out(c, CKPT_OUT_SAME, false, NULL, &d), 0);
	out = out_bytes(&len);
	/* tensor.rs's own test: an empty file is "{}" and six blanks */
	cr_assert_eq(len, 16);
	cr_assert_eq(memcmp(out, "\x08\0\0\0\0\0\0\0{}      ", 16), 0);
	free(out);
	ckpt_close(c);
	assert_no_leaks();
}

/* "__metadata__": null is written as safetensors' serializer writes a
 * None: no __metadata__ at all. */
Test(st_write, null_metadata_written_as_none)
{
	struct ckpt *c;
	unsigned char *out;
	size_t len;
	struct diag d;

	c = open_ok(st_file("{\"__metadata__\":null,\"a\":{\"dtype\":\"U8\","
			    "\"shape\":[1],\"data_offsets\":[0,1]}}", true, 1,
			    NULL, NULL));
	cr_assert_eq(write_out(c, CKPT_OUT_SAME, false, NULL, &d), 0);
	out = out_bytes(&len);
	cr_assert_eq(memcmp(out + 8, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
			    "\"data_offsets\":[0,1]}}", 47), 0, "header: %.*s",
		     (int)(len - 8), (char *)out + 8);
	free(out);
	ckpt_close(c);
	assert_no_leaks();
}

/* Sub-byte tensors are written back with the header's dtype and shape
 * (a file in save_file's order comes back byte for byte); one torch has
 * no dtype for is refused in a torch zip, an F4 one is float4_e2m1fn_x2. */
Test(st_write, sub_byte_dtypes_written_back)
{
	static const char hdr[] =
		"{\"u\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
		"\"f6b\":{\"dtype\":\"F6_E3M2\",\"shape\":[2,2],"
		"\"data_offsets\":[1,4]},\"f6\":{\"dtype\":\"F6_E2M3\","
		"\"shape\":[4],\"data_offsets\":[4,7]},\"f4\":{\"dtype\":"
		"\"F4\",\"shape\":[2,4],\"data_offsets\":[7,11]},\"f4odd\":"
		"{\"dtype\":\"F4\",\"shape\":[2,3],\"data_offsets\":[11,14]}}";
	unsigned char *in, *out;
	size_t ilen, olen;
	struct ckpt *c, *back;
	struct diag d;

	c = open_ok(st_file(hdr, true, 14, &in, &ilen));
	cr_assert_eq(write_out(c, CKPT_OUT_SAME, false, NULL, &d), 0, "%s",
		     d.msg);
	out = out_bytes(&olen);
	cr_assert_eq(olen, ilen);
	cr_assert_eq(memcmp(in, out, ilen), 0, "header: %.*s", (int)olen - 8,
		     (char *)out + 8);
	free(out);
	cr_assert_eq(write_out(c, CKPT_OUT_ZIP, false, NULL, &d), -ENOTSUP);
	cr_assert(strstr(d.msg, "f6b: torch has no dtype for safetensors' "
			 "F6_E3M2"), "%s", d.msg);
	ckpt_close(c);
	free(in);
	/* F4 alone: a torch zip of float4_e2m1fn_x2, the size halved */
	c = open_ok(st_file("{\"f4\":{\"dtype\":\"F4\",\"shape\":[2,4],"
			    "\"data_offsets\":[0,4]}}", true, 4, NULL, NULL));
	cr_assert_eq(write_out(c, CKPT_OUT_ZIP, false, NULL, &d), 0, "%s",
		     d.msg);
	back = open_ok(out_path);
	cr_assert_eq(back->format, CKPT_ZIP);
	same_tensors(c, back);
	cr_assert_eq(back->root->dir->kids[0]->tensor->shape[1], 2);
	ckpt_close(back);
	ckpt_close(c);
	assert_no_leaks();
}

Test(st_write, python_values_refused_by_name)
{
	struct ckpt *c = open_ok(PT_TEST_DATA "/sample.pt");
	struct diag d;

	cr_assert_eq(write_out(c, CKPT_OUT_ST, false, NULL, &d), -ENOTSUP);
	cr_assert(strstr(d.msg, "not a tensor"), "%s", d.msg);
	cr_assert(strstr(d.msg, "optimizer.param_groups.0.lr"), "%s", d.msg);
	ckpt_close(c);
	assert_no_leaks();
}

Test(st_write, torch_file_flattened_ties_in_metadata)
{
	struct ckpt *c = open_ok(PT_TEST_DATA "/sample.pt"), *w;
	struct ckpt_write_stats st = { 0 };
	const struct ckpt_node *e, *o;
	bool fmt = false, tie = false;
	unsigned char x[512], y[512];
	struct diag d;

	cr_assert_eq(write_out(c, CKPT_OUT_ST, true, &st, &d), 0, "%s", d.msg);
	cr_assert_eq(st.aliases, 1);
	cr_assert_gt(st.dropped_values, 0);
	cr_assert_eq(st.views, 0);
	w = open_ok(out_path);
	cr_assert_eq(w->format, CKPT_SAFETENSORS);
	/* 21 tensors, model/head.weight written once */
	cr_assert_eq(w->root->dir->nkids, 20);
	for (uint32_t i = 0; i < w->nmeta; i++) {
		fmt |= !strcmp(w->meta[i].key, "format") &&
		       !strcmp(w->meta[i].val, "pt");
		tie |= !strcmp(w->meta[i].key, "model.head.weight") &&
		       !strcmp(w->meta[i].val, "model.embed.weight");
	}
	cr_assert(fmt && tie, "__metadata__ lacks format or the tie");
	cr_assert_null(ckpt_node_child(w->root, "model.head.weight"));
	e = ckpt_node_child(w->root, "model.embed.weight");
	o = ckpt_node_child(ckpt_node_child(c->root, "model"), "head.weight");
	cr_assert(e && o);
	diag_init(&d, NULL);
	cr_assert_eq(ckpt_tensor_read(w, e->tensor, x, 512, 0, &d), 512);
	cr_assert_eq(ckpt_tensor_read(c, o->tensor, y, 512, 0, &d), 512);
	cr_assert_eq(memcmp(x, y, 512), 0);
	e = ckpt_node_child(w->root, "optimizer.state.3.exp_avg_sq");
	cr_assert_not_null(e, "ints of a dict flattened in decimal");
	ckpt_close(w);
	ckpt_close(c);
	assert_no_leaks();
}

Test(st_write, safetensors_to_torch_zip)
{
	static const char hdr[] =
		"{\"__metadata__\":{\"format\":\"pt\"},"
		"\"z\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":"
		"[0,16]},\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[3],"
		"\"data_offsets\":[16,19]},\"e\":{\"dtype\":\"I32\","
		"\"shape\":[0,4],\"data_offsets\":[19,19]}}";
	struct ckpt *c, *z;
	struct diag d;

	c = open_ok(st_file(hdr, true, 19, NULL, NULL));
	cr_assert_eq(write_out(c, CKPT_OUT_ZIP, false, NULL, &d), 0, "%s",
		     d.msg);
	z = open_ok(out_path);
	cr_assert_eq(z->format, CKPT_ZIP);
	cr_assert_str_eq(z->root->type, "dict");
	/* keys in header order */
	cr_assert_eq(z->root->dir->nkids, 3);
	cr_assert_str_eq(z->root->dir->kids[0]->name, "z");
	cr_assert_str_eq(z->root->dir->kids[1]->name, "a");
	cr_assert_str_eq(z->root->dir->kids[2]->name, "e");
	cr_assert_str_eq(z->root->dir->kids[1]->tensor->dtype->name,
			 "float8_e4m3fn");
	same_tensors(c, z);
	ckpt_close(z);
	ckpt_close(c);
	assert_no_leaks();
}
