/*
 * test_hfindex.c - the Hugging Face index reader (ckpt_hfindex.c): the
 * index transformers and huggingface_hub write parses into sorted entries
 * and shards; extra members are skipped; every hostile index (bad JSON,
 * wrong shapes, keys twice, shard names that leave the folder) is refused
 * with the byte offset where it goes wrong, before anything is opened.
 * Then folders of hand-made safetensors shards through ckpt_open(): each
 * tensor read from its own shard, disagreements kept as findings (the
 * index's copy of a key two shards hold shown), shards that are no file
 * or are named like an index refused.
 */
#include "fmt/hf/ckpt_hfindex.h"
#include "ckpt/ckpt_fsave.h"
#include "diag/diag.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

static struct arena a;
static struct hfix ix;
static struct diag d;

static int parse(const char *text)
{
	diag_init(&d, "index.json");
	return hfix_parse(text, strlen(text), &a, "", &ix, &d);
}

static void done(void)
{
	hfix_release(&ix);
	arena_release(&a);
}

TestSuite(hfix, .fini = done);

Test(hfix, parses_a_transformers_index)
{
	const char *t =
		"{\n  \"metadata\": {\n    \"total_size\": 1234\n  },\n"
		"  \"weight_map\": {\n"
		"    \"b.weight\": \"model-00002-of-00002.bin\",\n"
		"    \"a.weight\": \"model-00001-of-00002.bin\",\n"
		"    \"c\\u00e9\": \"model-00001-of-00002.bin\"\n  }\n}\n";
	struct hfix_entry *e;

	cr_assert_eq(parse(t), 0, "%s", d.msg);
	cr_assert_eq(ix.n, 3);
	cr_assert_eq(ix.nshards, 2);
	cr_assert_str_eq(ix.shards[0], "model-00001-of-00002.bin");
	cr_assert_str_eq(ix.shards[1], "model-00002-of-00002.bin");
	cr_assert(ix.has_total && !ix.bad_total);
	cr_assert_eq(ix.total, 1234);
	e = hfix_find(&ix, "b.weight", 8);
	cr_assert(e && e->shard == 1);
	e = hfix_find(&ix, "c\xc3\xa9", 3);
	cr_assert(e && e->shard == 0);
	cr_assert_null(hfix_find(&ix, "a.weigh", 7));
	/* the offset of each key, for findings */
	e = hfix_find(&ix, "a.weight", 8);
	cr_assert_eq(t[e->off], '"');
	cr_assert_eq(strncmp(t + e->off, "\"a.weight\"", 10), 0);
}

Test(hfix, skips_what_it_does_not_need)
{
	cr_assert_eq(parse("{\"weight_map\": {}, \"x\": [1, {\"y\": null}, "
			   "true, -2.5e3, \"s\"], \"metadata\": "
			   "{\"total_parameters\": 7, \"nested\": {\"a\": "
			   "[[[]]]}}}"), 0, "%s", d.msg);
	cr_assert_eq(ix.n, 0);
	cr_assert(!ix.has_total);
}

Test(hfix, a_total_size_that_is_no_count_is_marked)
{
	cr_assert_eq(parse("{\"metadata\": {\"total_size\": 1.5e9}, "
			   "\"weight_map\": {\"a\": \"s.bin\"}}"), 0);
	cr_assert(ix.has_total && ix.bad_total);
}

/* Refused with -EILSEQ at byte @at of the text, the message holding @why. */
static void refused(const char *text, uint64_t at, const char *why)
{
	cr_assert_eq(parse(text), -EILSEQ, "accepted: %s", text);
	cr_assert_eq(d.off, at, "offset %llu, not %llu: %s",
		     (unsigned long long)d.off, (unsigned long long)at, d.msg);
	cr_assert(strstr(d.msg, why), "message '%s' lacks '%s'", d.msg, why);
	hfix_release(&ix);
}

Test(hfix, refuses_bad_json_and_wrong_shapes)
{
	refused("[]", 0, "not a JSON object");
	refused("{\"weight_map\": {\"a\": ", 21,
		"ends where the shard of 'a'");
	refused("{\"weight_map\": {\"a\": 3}}", 21,
		"value of 'a' is not a string");
	refused("{\"weight_map\": []}", 15, "weight_map is not an object");
	refused("{\"metadata\": 1, \"weight_map\": {}}", 13,
		"metadata is not an object");
	refused("{\"metadata\": {}}", 0, "no weight_map");
	refused("{\"weight_map\": {}} x", 19, "text after");
	refused("{\"weight_map\": {}, \"weight_map\": {}}", 19, "given twice");
	refused("{\"weight_map\": {\"a\": \"x\", \"a\": \"y\"}}", 26,
		"lists key 'a' twice");
	refused("{\"weight_map\": {\"a\" \"x\"}}", 20, "':' expected");
	refused("{\"weight_map\": {\"\xff\": \"x\"}}", 16, "not UTF-8");
	refused("{\"weight_map\": {\"a\": \"x\\q\"}}", 23, "bad escape");
}

Test(hfix, refuses_nesting_beyond_the_bound)
{
	char t[400] = "{\"weight_map\": {}, \"deep\": ";
	size_t n = strlen(t);

	for (int i = 0; i < 100; i++)
		t[n++] = '[';
	t[n] = 0;
	cr_assert_eq(parse(t), -EILSEQ);
	cr_assert(strstr(d.msg, "nested too deeply"), "%s", d.msg);
}

Test(hfix, refuses_shards_outside_the_folder)
{
	refused("{\"weight_map\": {\"a\": \"/etc/passwd\"}}", 21,
		"absolute path");
	refused("{\"weight_map\": {\"a\": \"../x.bin\"}}", 21, "'..' part");
	refused("{\"weight_map\": {\"a\": \"s/../../x.bin\"}}", 21,
		"'..' part");
	refused("{\"weight_map\": {\"a\": \"./x.bin\"}}", 21, "'.' or");
	refused("{\"weight_map\": {\"a\": \"d//x.bin\"}}", 21, "empty");
	refused("{\"weight_map\": {\"a\": \"d/\"}}", 21, "empty");
	refused("{\"weight_map\": {\"a\": \"\"}}", 21, "empty");
	refused("{\"weight_map\": {\"a\": \"x\\u0000.bin\"}}", 21, "NUL");
	/* a subfolder inside is fine */
	cr_assert_eq(parse("{\"weight_map\": {\"a\": \"sub/x.bin\"}}"), 0);
}

/* ---- folders: ckpt_open() of a folder of hand-made safetensors shards */

#include "ckpt/ckpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static void put(const char *name, const void *p, size_t n)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	cr_assert(f && fwrite(p, 1, n, f) == n);
	fclose(f);
}

/* The names a shard written back gets, and back (ckpt_hfsave.c). */
Test(hfix, names_a_new_generation_and_back)
{
	static const struct {
		const char *name;
		unsigned g;
		const char *want;
	} t[] = {
		{ "model-00001-of-00002.safetensors", 0,
		  "model-00001-of-00002.safetensors" },
		{ "model-00001-of-00002.safetensors", 1,
		  "model-00001-of-00002.g1.safetensors" },
		{ "model-00001-of-00002.g1.safetensors", 0,
		  "model-00001-of-00002.safetensors" },
		{ "pytorch_model-00002-of-00004.g12.bin", 3,
		  "pytorch_model-00002-of-00004.g3.bin" },
		{ "a.g0.bin", 1, "a.g0.g1.bin" },	/* no generation 0 */
		{ "a.g01.bin", 1, "a.g01.g1.bin" },	/* no leading zero */
		{ "a.gx.bin", 0, "a.gx.bin" },
		{ "sub.d/shard", 1, "sub.d/shard.g1" },	/* no extension */
		{ "sub/.hidden", 2, "sub/.hidden.g2" },
		{ "x.g1", 0, "x.g1" },		/* ".g1" is the extension */
		{ "sub/g1.bin", 0, "sub/g1.bin" },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(*t); i++) {
		char *got = ckpt_gen_name(t[i].name, t[i].g);

		cr_assert_not_null(got);
		cr_expect_str_eq(got, t[i].want, "%s, %u", t[i].name, t[i].g);
		free(got);
	}
}

/* A safetensors file of one float32 tensor @key = {@v0, @v1}. */
static void shard(const char *name, const char *key, float v0, float v1)
{
	char hdr[128], buf[256];
	uint64_t n;

	n = (uint64_t)snprintf(hdr, sizeof(hdr), "{\"%s\":{\"dtype\":\"F32\","
			       "\"shape\":[2],\"data_offsets\":[0,8]}}", key);
	while (n % 8)
		hdr[n++] = ' ';
	for (int i = 0; i < 8; i++)
		buf[i] = (char)(n >> (8 * i));
	memcpy(buf + 8, hdr, n);
	memcpy(buf + 8 + n, &v0, 4);
	memcpy(buf + 12 + n, &v1, 4);
	put(name, buf, 16 + n);
}

static void folder_setup(void)
{
	strcpy(dir, "/tmp/pt_hf_test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void folder_done(void)
{
	char cmd[96];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(hf_open, .init = folder_setup, .fini = folder_done);

Test(hf_open, reads_each_tensor_from_its_shard)
{
	static const char idx[] = "{\"metadata\": {\"total_size\": 16}, "
		"\"weight_map\": {\"a\": \"s1.safetensors\", "
		"\"b\": \"s2.safetensors\"}}";
	struct ckpt *c;
	struct diag dg;
	float v[2];

	shard("s1.safetensors", "a", 1.5f, 2.5f);
	shard("s2.safetensors", "b", -3.0f, 4.0f);
	put("model.safetensors.index.json", idx, sizeof(idx) - 1);
	put("config.json", "{}", 2);
	diag_init(&dg, dir);
	cr_assert_eq(ckpt_open(dir, &c, &dg), 0, "%s", dg.msg);
	cr_assert_eq(c->format, CKPT_HF_SHARDED);
	cr_assert_eq(c->root->dir->nkids, 2);
	cr_assert_eq(c->hf->nissues, 0);
	cr_assert_eq(c->hf->nfiles, 2);	/* config.json and the index */
	for (int k = 0; k < 2; k++) {
		const struct ckpt_tensor *t = c->root->dir->kids[k]->tensor;

		cr_assert_str_eq(ckpt_tensor_shard(c, t)->name,
				 k ? "s2.safetensors" : "s1.safetensors");
		cr_assert_eq(ckpt_tensor_read(c, t, v, 8, 0, &dg), 8);
		cr_assert(k ? v[0] == -3.0f && v[1] == 4.0f :
			  v[0] == 1.5f && v[1] == 2.5f);
	}
	ckpt_close(c);
}

Test(hf_open, keeps_disagreements_as_findings)
{
	static const char idx[] = "{\"metadata\": {\"total_size\": 99}, "
		"\"weight_map\": {\"a\": \"s1.safetensors\", "
		"\"b\": \"s1.safetensors\", \"c\": \"s2.safetensors\"}}";
	struct ckpt *c;
	struct diag dg;
	char line[256];
	float v[2];

	shard("s1.safetensors", "a", 1, 2);	/* no b */
	shard("s2.safetensors", "a", 5, 6);	/* a twice, no c */
	put("model.safetensors.index.json", idx, sizeof(idx) - 1);
	diag_init(&dg, dir);
	cr_assert_eq(ckpt_open(dir, &c, &dg), 0, "%s", dg.msg);
	/* a twice; b and c not in their shards; total_size */
	cr_assert_eq(c->hf->nissues, 4);
	cr_assert_eq(c->hf->nabsent, 0);
	cr_assert_str_eq(ckpt_hf_issue_line(c, 0, line, sizeof(line)),
			 "key 'a' is in two shards, s1.safetensors and "
			 "s2.safetensors");
	/* the index says s1: its a is shown */
	cr_assert_eq(c->root->dir->nkids, 1);
	cr_assert_eq(ckpt_tensor_read(c, c->root->dir->kids[0]->tensor, v, 8, 0,
				      &dg), 8);
	cr_assert_eq(v[0], 1.0f);
	ckpt_close(c);
}

Test(hf_open, an_absent_shard_is_one_finding)
{
	static const char idx[] = "{\"metadata\": {\"total_size\": 99}, "
		"\"weight_map\": {\"a\": \"s1.safetensors\", "
		"\"b\": \"s2.safetensors\", \"c\": \"s2.safetensors\"}}";
	struct ckpt *c;
	struct diag dg;
	char line[256];

	shard("s1.safetensors", "a", 1, 2);
	put("model.safetensors.index.json", idx, sizeof(idx) - 1);
	diag_init(&dg, dir);
	cr_assert_eq(ckpt_open(dir, &c, &dg), 0, "%s", dg.msg);
	/* not b, c and total_size one by one */
	cr_assert_eq(c->hf->nissues, 1);
	cr_assert_eq(c->hf->nabsent, 1);
	cr_assert_str_eq(ckpt_hf_issue_line(c, 0, line, sizeof(line)),
			 "shard 's2.safetensors' the index names is absent");
	cr_assert_eq(c->root->dir->nkids, 1);
	cr_assert_null(c->hf->shards[1].c);
	ckpt_close(c);
}

Test(hf_open, refuses_a_shard_that_is_no_file_or_an_index)
{
	static const char i1[] = "{\"weight_map\": {\"a\": \"sub\"}}";
	static const char i2[] = "{\"weight_map\": {\"a\": \"x.index.json\"}}";
	char sub[96];
	struct ckpt *c;
	struct diag dg;

	snprintf(sub, sizeof(sub), "%s/sub", dir);
	cr_assert_eq(mkdir(sub, 0755), 0);
	put("pytorch_model.bin.index.json", i1, sizeof(i1) - 1);
	diag_init(&dg, dir);
	cr_assert_eq(ckpt_open(dir, &c, &dg), -EINVAL);
	cr_assert(strstr(dg.msg, "shard 'sub' is a directory, not a regular "
			 "file"), "%s", dg.msg);
	put("pytorch_model.bin.index.json", i2, sizeof(i2) - 1);
	diag_init(&dg, dir);
	cr_assert_eq(ckpt_open(dir, &c, &dg), -EILSEQ);
	cr_assert(strstr(dg.msg, "named like an index"), "%s", dg.msg);
}
