/*
 * test_dcp.c - a DCP directory's items and chunk lists against what they
 * claim (ckpt_dcp_check.c, ckpt_dcp_keys.c; issue 38).  The directories
 * are made here from the format's definition (multi-file-formats.md 2.2,
 * 2.3): a .metadata pickle of torch's dataclasses in protocol 2, and a
 * __0_0.distcp of torch.save archives of one float32 [2, 3] each, so no
 * torch is needed:
 *
 *   two keys over one item, or over items that overlap: refused at the
 *     open with one line naming the data file, the bytes and both keys;
 *     a lenient open (ptverify's) keeps it, and ckpt_dcp_verify() names
 *     both keys
 *   items apart: opens, and verifies clean (the control); storage_data
 *     out of file order: the overlap still found
 *   items alike but one (in the bytes of data.pkl only), and one whose
 *     data lost its CRC-32: ckpt_dcp_verify(), which reads items like
 *     one opened before as zips only, still refuses the one and finds
 *     the other
 *   one chunk listed again and again by memo reference, and a key listed
 *     twice: refused when met, with memory bounded by the file's bytes,
 *     not by the references (a million of them)
 */
#include "ckpt_open_util.h"
#include "pickle_asm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define META	"torch.distributed.checkpoint.metadata"

static char dir[64];

static void cleanup(void)
{
	DIR *dh;
	struct dirent *e;
	char p[384];

	if (!dir[0] || !(dh = opendir(dir)))
		return;
	while ((e = readdir(dh)))
		if (e->d_name[0] != '.' || e->d_name[1] == 'm') {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	closedir(dh);
	rmdir(dir);
	dir[0] = 0;
}

TestSuite(dcp_items, .fini = cleanup);
TestSuite(dcp_refs, .fini = cleanup);

static void put_file(const char *name, const void *p, size_t n)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, p, n), (ssize_t)n);
	close(fd);
}

/* torch.save of a float32 [2, 3] tensor ([3, 2] if @rows3) of 24 bytes
 * @fill each to a file object: one item's bytes; returns where in them
 * its data lies. */
static size_t item_of(struct buf *out, bool rows3, unsigned char fill)
{
	static const int32_t size[] = { 2, 3 }, stride[] = { 3, 1 };
	static const int32_t size3[] = { 3, 2 }, stride3[] = { 2, 1 };
	unsigned char data[24];
	struct buf pkl = { 0 };
	struct zopt o = { .torch = true };
	struct zinfo info;
	struct zent e[3];

	memset(data, fill, sizeof(data));
	pk_start(&pkl);
	pk_tensor(&pkl, "FloatStorage", "0", 6, 0, rows3 ? size3 : size,
		  rows3 ? stride3 : stride, 2, false);
	op(&pkl, '.');
	e[0] = (struct zent){ "archive/data.pkl", pkl.p, pkl.len, false };
	e[1] = (struct zent){ "archive/data/0", data, sizeof(data), false };
	e[2] = (struct zent){ "archive/version", "3\n", 2, false };
	zb_build(out, e, 3, &o, &info);
	free(pkl.p);
	return info.data[1];	/* where the data lies */
}

/* torch.save(torch.zeros(2, 3)) */
static void item(struct buf *out)
{
	item_of(out, false, 0);
}

/* cls.__new__(cls), MARK in its state dict; obj_end() BUILDs it. */
static void obj(struct buf *b, const char *mod, const char *cls)
{
	pk_global(b, mod, cls);
	op(b, ')');
	op(b, 0x81);	/* NEWOBJ */
	op(b, '}');
	op(b, '(');
}

static void obj_end(struct buf *b)
{
	op(b, 'u');
	op(b, 'b');
}

/* torch.Size((@a, @b)) */
static void size2(struct buf *b, int32_t x, int32_t y)
{
	pk_global(b, "torch", "Size");
	op(b, '(');
	pk_int(b, x);
	pk_int(b, y);
	op(b, 't');
	op(b, 0x85);	/* TUPLE1 */
	op(b, 'R');
}

/* ChunkStorageMetadata(offsets=(0, 0), sizes=(@r, 3)) */
static void chunk(struct buf *b, int32_t r)
{
	obj(b, META, "ChunkStorageMetadata");
	pk_str(b, "offsets");
	size2(b, 0, 0);
	pk_str(b, "sizes");
	size2(b, r, 3);
	obj_end(b);
}

/* One key of state_dict_metadata: float32 [@rows, 3] in one chunk,
 * listed 1 + @again times (BINPUT once, then BINGETs). */
static void tensor_meta(struct buf *b, const char *fqn, int32_t rows,
			uint32_t again)
{
	pk_str(b, fqn);
	obj(b, META, "TensorStorageMetadata");
	pk_str(b, "properties");
	pk_global(b, META, "TensorProperties");
	op(b, ')');
	op(b, 0x81);
	op(b, '(');
	pk_global(b, "torch", "float32");
	pk_global(b, "torch.serialization", "_get_layout");
	pk_str(b, "torch.strided");
	op(b, 0x85);
	op(b, 'R');
	op(b, 0x89);	/* requires_grad */
	pk_global(b, META, "_MEM_FORMAT_ENCODING");
	pk_int(b, 0);
	op(b, 0x85);
	op(b, 'R');
	op(b, 0x89);	/* pin_memory */
	op(b, 't');
	op(b, 'b');
	pk_str(b, "size");
	size2(b, rows, 3);
	pk_str(b, "chunks");
	op(b, ']');
	chunk(b, rows);
	op(b, 'q');	/* BINPUT 0 */
	op(b, 0);
	op(b, 'a');
	for (uint32_t i = 0; i < again; i += 1000) {
		op(b, '(');
		for (uint32_t j = i; j < again && j < i + 1000; j++) {
			op(b, 'h');	/* BINGET 0: the same chunk */
			op(b, 0);
		}
		op(b, 'e');
	}
	obj_end(b);
}

/* MetadataIndex(@fqn, (0, 0)) : _StorageInfo('__0_0.distcp', @at, @len) */
static void storage(struct buf *b, const char *fqn, int32_t at, int32_t len)
{
	obj(b, META, "MetadataIndex");
	pk_str(b, "fqn");
	pk_str(b, fqn);
	pk_str(b, "offset");
	size2(b, 0, 0);
	pk_str(b, "index");
	op(b, 'N');
	obj_end(b);
	obj(b, "torch.distributed.checkpoint.filesystem", "_StorageInfo");
	pk_str(b, "relative_path");
	pk_str(b, "__0_0.distcp");
	pk_str(b, "offset");
	pk_int(b, at);
	pk_str(b, "length");
	pk_int(b, len);
	obj_end(b);
}

/* A key: its name, rows, how often its chunk is listed again, where its
 * item lies (in items of the one template), and whether storage_data
 * names it. */
struct key {
	const char *fqn;
	int32_t rows;
	uint32_t again;
	int32_t at;
	bool listed_twice;
};

/* The directory: .metadata of @n keys, each of whose items is @len
 * bytes; returns its path.  The caller wrote __0_0.distcp. */
static const char *make_meta(const struct key *k, int n, size_t len)
{
	struct buf m = { 0 };

	pk_start(&m);
	obj(&m, META, "Metadata");
	pk_str(&m, "state_dict_metadata");
	op(&m, '}');
	op(&m, '(');
	for (int i = 0; i < n; i++) {
		tensor_meta(&m, k[i].fqn, k[i].rows, k[i].again);
		if (k[i].listed_twice)
			tensor_meta(&m, k[i].fqn, k[i].rows, 0);
	}
	op(&m, 'u');
	pk_str(&m, "planner_data");
	op(&m, 'N');		/* keys stay flat */
	pk_str(&m, "storage_data");
	op(&m, '}');
	op(&m, '(');
	for (int i = 0; i < n; i++)
		storage(&m, k[i].fqn, k[i].at, (int32_t)len);
	op(&m, 'u');
	pk_str(&m, "storage_meta");
	op(&m, 'N');
	pk_str(&m, "version");
	pk_str(&m, "1.0.0");
	obj_end(&m);
	op(&m, '.');
	put_file(".metadata", m.p, m.len);
	free(m.p);
	return dir;
}

static void new_dir(void)
{
	strcpy(dir, "/tmp/pt_dcp_test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

/* The directory: @nitems items alike, .metadata of @n keys. */
static const char *make_dir(const struct key *k, int n, int nitems)
{
	struct buf it = { 0 }, data = { 0 };

	new_dir();
	item(&it);
	for (int i = 0; i < nitems; i++)
		zb_put_bytes(&data, it.p, it.len);
	put_file("__0_0.distcp", data.p, data.len);
	make_meta(k, n, it.len);
	free(it.p);
	free(data.p);
	return dir;
}

/* One item's length. */
static int32_t item_len(void)
{
	struct buf it = { 0 };
	int32_t n;

	item(&it);
	n = (int32_t)it.len;
	free(it.p);
	return n;
}

/* ckpt_dcp_verify()'s problems, one line each. */
struct seen {
	char text[4096];
	uint32_t n;
};

static void note(void *arg, const char *check, const char *path,
		 uint64_t off, const char *msg)
{
	struct seen *s = arg;
	size_t k = strlen(s->text);

	(void)check;
	(void)path;
	(void)off;
	snprintf(s->text + k, sizeof(s->text) - k, "%s\n", msg);
	s->n++;
}

/* The lenient open of @p and its problems into *@s. */
static uint32_t verify(const char *p, struct seen *s)
{
	struct ckpt *c;
	struct diag d;
	char line[512];
	uint64_t checked;
	uint32_t n;

	diag_init(&d, p);
	cr_assert_eq(ckpt_open_with(p, CKPT_OPEN_LENIENT, &c, &d), 0, "%s",
		     diag_line(&d, line, sizeof(line)));
	memset(s, 0, sizeof(*s));
	n = ckpt_dcp_verify(c, false, &checked, note, s);
	cr_assert_eq(n, s->n);
	ckpt_close(c);
	return n;
}

Test(dcp_items, apart)
{
	int32_t len = item_len();
	struct key k[] = {
		{ "model.w", 2, 0, 0, false },
		{ "model.w2", 2, 0, len, false },
	};
	const char *p = make_dir(k, 2, 2);
	struct seen s;

	ckpt_close(open_ok(p));
	cr_assert_eq(verify(p, &s), 0, "%s", s.text);
}

Test(dcp_items, two_keys_one_item)
{
	int32_t len = item_len();
	struct key k[] = {
		{ "model.w", 2, 0, 0, false },
		{ "model.w2", 2, 0, 0, false },
	};
	const char *p = make_dir(k, 2, 2);
	char want[128];
	struct diag d;
	struct seen s;

	open_refused(p, -EILSEQ, "overlaps the item of 'model.w'", &d);
	snprintf(want, sizeof(want), "__0_0.distcp: item of 'model.w2' at "
		 "bytes [0, %d)", len);
	cr_assert(strstr(d.msg, want), "'%s' lacks '%s'", d.msg, want);
	cr_assert_eq(d.off, 0);		/* where in the data file */
	/* ptverify's open keeps it, and names both keys */
	cr_assert_eq(verify(p, &s), 1, "%s", s.text);
	cr_assert(strstr(s.text, "item of 'model.w2'") &&
		  strstr(s.text, "the item of 'model.w'"), "%s", s.text);
}

Test(dcp_items, overlapping_items)
{
	int32_t len = item_len();
	struct key k[] = {
		{ "model.w", 2, 0, 0, false },
		{ "model.w2", 2, 0, len / 2, false },
	};
	const char *p = make_dir(k, 2, 2);
	char want[160];
	struct diag d;
	struct seen s;

	open_refused(p, -EILSEQ, "overlaps", &d);
	snprintf(want, sizeof(want), "item of 'model.w2' at bytes [%d, %d) "
		 "overlaps the item of 'model.w' at [0, %d)", len / 2,
		 len / 2 + len, len);
	cr_assert(strstr(d.msg, want), "'%s' lacks '%s'", d.msg, want);
	cr_assert_eq(d.off, (uint64_t)(len / 2));
	cr_assert_geq(verify(p, &s), 1, "%s", s.text);
	cr_assert(strstr(s.text, want), "%s", s.text);
}

/* storage_data not in file order: sorted first */
Test(dcp_items, overlap_out_of_order)
{
	int32_t len = item_len();
	struct key k[] = {
		{ "a", 2, 0, 2 * len, false },
		{ "b", 2, 0, 0, false },
		{ "c", 2, 0, len / 2, false },
	};
	char want[160];
	struct diag d;

	make_dir(k, 3, 3);
	open_refused(dir, -EILSEQ, "overlaps", &d);
	snprintf(want, sizeof(want), "item of 'c' at bytes [%d, %d) overlaps "
		 "the item of 'b' at [0, %d)", len / 2, len / 2 + len, len);
	cr_assert(strstr(d.msg, want), "'%s' lacks '%s'", d.msg, want);
}

/*
 * Items alike but for their data, and one unlike them in the bytes of
 * data.pkl alone (a [3, 2] tensor: its records have the same names and
 * sizes): after the first item opened as a checkpoint the others are
 * read as zips and matched to it (ckpt_dcp_item.c), so the one unlike
 * must still be opened and refused, and each CRC-32 must still be its
 * own item's.
 */
Test(dcp_items, alike_and_unlike)
{
	static const char *const fqn[] = { "a", "b", "c", "d", "e" };
	struct buf data = { 0 };
	struct key k[5];
	size_t at = 0, len = 0, data0 = 0;
	struct seen s;

	new_dir();
	for (int i = 0; i < 5; i++) {
		struct buf it = { 0 };

		data0 = item_of(&it, i == 3, (unsigned char)i);
		cr_assert(!len || it.len == len, "items of one size");
		len = it.len;
		zb_put_bytes(&data, it.p, it.len);
		k[i] = (struct key){ fqn[i], 2, 0, (int32_t)at, false };
		at += it.len;
		free(it.p);
	}
	/* c's data changed after its CRC-32 was taken */
	data.p[2 * len + data0 + 5] ^= 0x40;
	put_file("__0_0.distcp", data.p, data.len);
	free(data.p);
	make_meta(k, 5, len);
	cr_assert_eq(verify(dir, &s), 2, "%s", s.text);
	cr_assert(strstr(s.text, "item of 'd' at (0, 0) is not one contiguous "
			 "float32 tensor"), "%s", s.text);
	cr_assert(strstr(s.text, "chunk of 'c': CRC-32"), "%s", s.text);
}

/* The peak RSS growth of a refused open of @p, in MB. */
static long refused_mb(const char *p, const char *what)
{
	struct rusage a, b;
	struct ckpt *c;
	struct diag d;

	getrusage(RUSAGE_SELF, &a);
	open_refused(p, -EILSEQ, what, &d);
	/* ptverify's open too: not a finding, a refusal */
	diag_init(&d, p);
	cr_assert_eq(ckpt_open_with(p, CKPT_OPEN_LENIENT, &c, &d), -EILSEQ);
	cr_assert(strstr(d.msg, what), "%s", d.msg);
	getrusage(RUSAGE_SELF, &b);
	return (b.ru_maxrss - a.ru_maxrss) / 1024;
}

/* A million references to one chunk: 2 MB of .metadata.  Each used to
 * become a chunk before the overlap check refused them (some 120 MB). */
Test(dcp_refs, one_chunk_a_million_times)
{
	struct key k[] = { { "w", 2, 1000000, 0, false } };
	long mb = refused_mb(make_dir(k, 1, 1), "tensor 'w': chunk 1 at "
			     "(0, 0) is listed twice");

#ifndef PT_SANITIZE
	/* the pickle's list itself is 8 bytes a reference */
	cr_assert_lt(mb, 40, "%ld MB for 2 MB of .metadata", mb);
#endif
	(void)mb;
}

/* An empty tensor's chunk listed again and again overlaps nothing: it
 * used to open, with a chunk made of every reference. */
Test(dcp_refs, empty_chunk_again)
{
	struct key k[] = { { "w", 0, 1000, 0, false } };

	refused_mb(make_dir(k, 1, 1), "chunk 1 at (0, 0) is listed twice");
}

/* pickle.load keeps one of a key given twice: torch never writes it. */
Test(dcp_refs, key_twice)
{
	struct key k[] = { { "w", 2, 0, 0, true } };

	refused_mb(make_dir(k, 1, 1), "lists key 'w' twice");
}
