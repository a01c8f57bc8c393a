/*
 * test_image.c - the computed safetensors files of .ptfs/as/ (ckpt_image.h,
 * core/fmt/hf/ckpt_hfimage.c).  An image must be byte for byte what the
 * writers write of the same model: one file against ckpt_write() to
 * safetensors with values left out, shards against ckpt_hf_write(); every
 * read, at any offset and length, must give those bytes; a strided view
 * is made (its contiguous bytes), a tensor safetensors cannot hold is
 * left out and named in README, and a model that is no dict of tensors
 * gives README alone, saying why.
 */
#define _GNU_SOURCE 1	/* memmem */
#include "ckpt_open_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char out_path[64];

static void cleanup(void)
{
	char cmd[128];

	if (out_path[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", out_path);
		cr_assert_eq(system(cmd), 0);
	}
	out_path[0] = 0;
}

TestSuite(image, .fini = cleanup);

static const char *fixture(const char *name)
{
	static char path[512];

	snprintf(path, sizeof(path), PT_TESTENV_DIR "/fixtures/torch-1.13/%s",
		 name);
	return path;
}

static struct ckpt_image *make(struct ckpt *c, uint64_t max_shard)
{
	struct ckpt_image *im;
	struct diag d;

	diag_init(&d, c->path);
	cr_assert_eq(ckpt_image_make(c, max_shard, &im, &d), 0, "%s", d.msg);
	return im;
}

/* File @k of @im whole, read in pieces of @step bytes. */
static unsigned char *read_all(struct ckpt *c, struct ckpt_image *im,
			       uint32_t k, uint64_t step)
{
	uint64_t n = ckpt_image_size(im, k);
	unsigned char *p = malloc(n + 1);
	struct diag d;

	cr_assert_not_null(p);
	for (uint64_t at = 0; at < n; at += step) {
		uint64_t len = n - at < step ? n - at : step;

		diag_init(&d, c->path);
		cr_assert_eq(ckpt_image_read(c, im, k, p + at, len, at, &d),
			     (long long)len, "%s at %llu: %s",
			     ckpt_image_name(im, k), (unsigned long long)at,
			     d.msg);
	}
	return p;
}

static int file_named(const struct ckpt_image *im, const char *name)
{
	for (uint32_t k = 0; k < ckpt_image_nfiles(im); k++)
		if (!strcmp(ckpt_image_name(im, k), name))
			return (int)k;
	return -1;
}

static char *readme(struct ckpt *c, struct ckpt_image *im)
{
	int k = file_named(im, "README");
	char *p;

	cr_assert_geq(k, 0, "no README");
	p = (char *)read_all(c, im, (uint32_t)k, 1 << 20);
	p[ckpt_image_size(im, (uint32_t)k)] = 0;
	return p;
}

/* The same file as ckpt_write() to safetensors, values left out. */
Test(image, one_file_is_what_the_writer_writes)
{
	struct ckpt *c = open_ok(PT_TEST_DATA "/sample.pt");
	struct ckpt_write_opts o = { .to = CKPT_OUT_ST,
				     .st_drop = true };
	struct ckpt_image *im = make(c, 0);
	unsigned char *want, *got;
	size_t wlen;
	struct diag d;
	char *text;
	int fd, k = file_named(im, "model.safetensors");

	strcpy(out_path, "/tmp/pt_image_test.XXXXXX");
	fd = mkstemp(out_path);
	cr_assert(fd >= 0);
	diag_init(&d, c->path);
	cr_assert_eq(ckpt_write(c, fd, &o, &d), 0, "%s", d.msg);
	cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
	want = slurp(fd, &wlen);
	close(fd);
	cr_assert_geq(k, 0);
	cr_assert_eq(ckpt_image_nfiles(im), 2, "model.safetensors, README");
	cr_assert_eq(ckpt_image_size(im, (uint32_t)k), wlen);
	/* whole, then in odd pieces that cut the header and tensors */
	got = read_all(c, im, (uint32_t)k, wlen);
	cr_assert_eq(memcmp(got, want, wlen), 0, "not the writer's bytes");
	free(got);
	for (uint64_t step = 1; step < 40; step += 7) {
		got = read_all(c, im, (uint32_t)k, step);
		cr_assert_eq(memcmp(got, want, wlen), 0, "in pieces of %llu",
			     (unsigned long long)step);
		free(got);
	}
	text = readme(c, im);
	cr_assert(strstr(text, "Left out (20):"), "%s", text);
	cr_assert(strstr(text, "  epoch: an int, not a tensor"), "%s", text);
	free(text);
	free(want);
	ckpt_image_free(im);
	ckpt_close(c);
	assert_no_leaks();
}

/* Shards and their index, as ckpt_hf_write() writes them. */
Test(image, shards_are_what_the_folder_writer_writes)
{
	struct ckpt *c = open_ok(PT_TEST_DATA "/sample.pt");
	struct ckpt_write_opts o = { .st_drop = true, .max_shard = 1000 };
	struct ckpt_hf_stats st;
	struct ckpt_image *im = make(c, 1000);
	struct diag d;
	char dir[80];
	uint32_t shards = 0;

	strcpy(out_path, "/tmp/pt_image_dir.XXXXXX");
	cr_assert_not_null(mkdtemp(out_path));
	snprintf(dir, sizeof(dir), "%s/out", out_path);
	diag_init(&d, c->path);
	cr_assert_eq(ckpt_hf_write(c, dir, &o, &st, &d), 0, "%s", d.msg);
	for (uint32_t k = 0; k < ckpt_image_nfiles(im); k++) {
		const char *name = ckpt_image_name(im, k);
		char path[160];
		unsigned char *want, *got;
		size_t wlen;
		int fd;

		if (!strcmp(name, "README"))
			continue;
		shards += strstr(name, "-of-") != NULL;
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		fd = open(path, O_RDONLY);
		cr_assert(fd >= 0, "%s: not written by the folder writer",
			  name);
		want = slurp(fd, &wlen);
		close(fd);
		cr_assert_eq(ckpt_image_size(im, k), wlen, "%s", name);
		got = read_all(c, im, k, 13);
		cr_assert_eq(memcmp(got, want, wlen), 0, "%s differs", name);
		free(got);
		free(want);
	}
	cr_assert_eq(shards, st.shards);
	cr_assert_gt(shards, 1);
	cr_assert_geq(file_named(im, "model.safetensors.index.json"), 0);
	ckpt_image_free(im);
	ckpt_close(c);
	assert_no_leaks();
}

/* A strided view is its contiguous bytes; a sparse tensor is left out. */
Test(image, views_made_and_unholdable_left_out)
{
	struct ckpt *c = open_ok(fixture("misc.pt"));
	struct ckpt_image *im = make(c, 0);
	const struct ckpt_node *n = ckpt_node_child(c->root, "noncontig");
	int k = file_named(im, "model.safetensors");
	unsigned char want[64], *got;
	uint64_t hlen;
	struct diag d;
	char *text, *at, key[64];
	long long wn;

	cr_assert_not_null(n);
	cr_assert(!n->tensor->contiguous);
	cr_assert_geq(k, 0);
	got = read_all(c, im, (uint32_t)k, 5);
	hlen = got[0] | (uint64_t)got[1] << 8;
	diag_init(&d, c->path);
	wn = ckpt_tensor_read(c, n->tensor, want, sizeof(want), 0, &d);
	cr_assert_eq(wn, 24, "2x3 int32: %s", d.msg);
	/* "noncontig":{...,"data_offsets":[B,E]} */
	snprintf(key, sizeof(key), "\"noncontig\":{");
	at = memmem(got + 8, hlen, key, strlen(key));
	cr_assert_not_null(at);
	at = strstr(at, "\"data_offsets\":[");
	cr_assert_not_null(at);
	cr_assert_eq(memcmp(got + 8 + hlen + strtoull(at + 16, NULL, 10),
			    want, 24), 0, "the view's bytes, contiguous");
	free(got);
	text = readme(c, im);
	cr_assert(strstr(text, "  sparse: "), "%s", text);
	free(text);
	ckpt_image_free(im);
	ckpt_close(c);
	assert_no_leaks();
}

/* A model that is no dict of tensors (a TorchScript module): README
 * alone, saying why. */
Test(image, no_dict_gives_readme_alone)
{
	struct ckpt *c = open_ok(fixture("script.pt"));
	struct ckpt_image *im = make(c, 0);
	char *text;

	cr_assert_eq(ckpt_image_nfiles(im), 1);
	text = readme(c, im);
	cr_assert(strstr(text, "No safetensors file could be made of it: "),
		  "%s", text);
	free(text);
	ckpt_image_free(im);
	ckpt_close(c);
	assert_no_leaks();
}

/* The same model twice is the same image. */
Test(image, made_twice_is_the_same)
{
	struct ckpt *c = open_ok(PT_TEST_DATA "/sample.pt");
	struct ckpt_image *a = make(c, 0), *b = make(c, 0);
	struct ckpt_image *s = make(c, 1000);

	cr_assert(ckpt_image_same(a, b));
	cr_assert(!ckpt_image_same(a, s));
	ckpt_image_free(a);
	ckpt_image_free(b);
	ckpt_image_free(s);
	ckpt_close(c);
	assert_no_leaks();
}
