/*
 * ckpt_legacy.c - the pre-1.6 torch.save stream (torch-format.md 7): five
 * pickles, then the storages back to back.
 *
 *   pickle   magic number 0x1950a86a20f9469cfc6c
 *   pickle   protocol version 1001
 *   pickle   sys_info {'little_endian': True, ...}
 *   pickle   the object (storages as 6-tuple persistent ids)
 *   pickle   list of storage keys, in the order the data follows
 *   per key  int64 LE numel | numel * itemsize bytes of data
 *
 * Only the pickles are read into memory; storages are located by offset.
 */
#include "ckpt_int.h"
#include "util/io.h"
#include "util/le.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEGACY_FIRST_READ	(1u << 20)
#define LEGACY_MAX_PICKLES	(UINT64_C(1) << 30)

static const unsigned char magic[] = {
	0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19,
};

static bool is_magic(const struct pkl_value *v)
{
	size_t n;

	if (!v || v->kind != PKL_BIGINT)
		return false;
	n = v->u.s.n;
	while (n > sizeof(magic) && !v->u.s.p[n - 1])
		n--;
	return n == sizeof(magic) && !memcmp(v->u.s.p, magic, n);
}

/* The five pickles, as findings name them. */
static const char *const names[5] = {
	"pickle 1 of the legacy stream (magic number)",
	"pickle 2 of the legacy stream (protocol version)",
	"pickle 3 of the legacy stream (sys_info)",
	"pickle 4 of the legacy stream (the object)",
	"pickle 5 of the legacy stream (storage keys)",
};

/*
 * torch.load unpickles all five, one after another: what each would run
 * is a finding (ckpt_scan.c), the object's when the model is built.
 * After a failure, the pickles are read again for the scan alone, as
 * far as they go.
 */
static int scan_pickles(struct ckpt *c, struct pkl_doc **docs, int rc,
			struct diag *d)
{
	uint64_t pos = 0;

	for (int i = 0; !rc && i < 5; i++)
		if (i != 3 && ckpt_scan_doc(c, docs[i], names[i], NULL))
			return diag_nomem(d);
	for (int i = 0; rc && i < 5 && pos < c->pkl_len; i++) {
		struct pkl_doc *doc = NULL;
		struct diag tmp;
		bool failed;

		diag_init(&tmp, d->path);
		pkl_parse_with(c->pkl + pos, c->pkl_len - pos, pos, PKL_SCAN,
			       &doc, &tmp);
		if (doc && ckpt_scan_doc(c, doc, names[i], NULL))
			diag_nomem(d);
		failed = !doc || doc->failed;
		pos = doc ? doc->end : pos;
		pkl_doc_free(doc);
		if (failed)
			break;
	}
	return rc;
}

/* Parse the five pickles from c->pkl; 0, or -errno with @d set. */
static int parse_pickles(struct ckpt *c, struct pkl_doc **docs,
			 struct diag *d)
{
	uint64_t pos = 0;
	int rc;

	for (int i = 0; i < 5; i++) {
		if (i == 3)
			c->pkl_off = pos;
		rc = pkl_parse(c->pkl + pos, c->pkl_len - pos, pos, &docs[i], d);
		if (rc)
			return rc;
		pos = docs[i]->end;	/* absolute: base_off was pos */
		/* torch stops here too */
		if (!i && !is_magic(docs[0]->root))
			return diag_corrupt(d, 0, "not a torch.save file: the "
					    "first pickle is not torch's magic "
					    "number (torch.load unpickles it, "
					    "then stops)");
	}
	if (docs[1]->root->kind != PKL_INT || docs[1]->root->u.i != 1001)
		return diag_unsupported(d, docs[0]->end, "legacy protocol "
					"version is not 1001");
	return 0;
}

/* Read enough of the file to hold the five pickles. */
static int read_pickles(struct ckpt *c, struct pkl_doc **docs,
			struct diag *d)
{
	uint64_t want = LEGACY_FIRST_READ;
	int rc;

	for (;;) {
		struct diag tmp;

		if (want > c->file_size)
			want = c->file_size;
		if (want > LEGACY_MAX_PICKLES)
			return diag_unsupported(d, 0, "legacy pickles larger "
						"than 1 GiB");
		free(c->pkl);
		c->pkl = malloc(want + 1);
		if (!c->pkl)
			return diag_nomem(d);
		c->pkl_len = want;
		rc = io_pread_diag(c->fd, c->pkl, want, 0, NULL, d);
		if (rc)
			return rc;
		diag_init(&tmp, d->path);
		rc = parse_pickles(c, docs, want < c->file_size ? &tmp : d);
		if (!rc || want == c->file_size)
			return rc;
		for (int i = 0; i < 5; i++) {
			pkl_doc_free(docs[i]);
			docs[i] = NULL;
		}
		want *= 4;	/* cut short: try again with more */
	}
}

static bool sys_little_endian(const struct pkl_value *info)
{
	if (!info || info->kind != PKL_DICT)
		return true;
	for (size_t i = 0; i + 1 < info->u.items.n; i += 2) {
		const struct pkl_value *k = info->u.items.v[i];
		const struct pkl_value *v = info->u.items.v[i + 1];

		if ((k->kind == PKL_STR || k->kind == PKL_STRING) &&
		    !strcmp(k->u.s.p, "little_endian"))
			return v->kind != PKL_BOOL || v->u.i;
	}
	return true;
}

/* Walk the storage blocks after the pickles, in key-list order. */
static int locate_storages(struct ckpt *c, const struct pkl_value *keys,
			   uint64_t pos, struct diag *d)
{
	unsigned char hdr[8];
	uint32_t found = 0;
	int rc;

	if (!keys || keys->kind != PKL_LIST)
		return diag_corrupt(d, pos, "storage key list is not a list");
	for (size_t i = 0; i < pkl_len(keys); i++) {
		const struct pkl_value *k = pkl_item(keys, i);
		struct ckpt_storage *s;
		uint64_t numel, end;

		if (k->kind != PKL_STR && k->kind != PKL_STRING)
			return diag_corrupt(d, pos, "storage key is not a str");
		s = ckpt_storage_find(c->b, k->u.s.p);
		if (!s)
			return diag_corrupt(d, pos, "storage '%s' is listed but "
					    "never used", k->u.s.p);
		if (s->data_off)
			return diag_corrupt(d, pos, "storage '%s' listed twice",
					    k->u.s.p);
		rc = io_pread_diag(c->fd, hdr, 8, pos, NULL, d);
		if (rc)
			return rc;
		numel = le64(hdr);
		if (numel != s->numel)
			return diag_corrupt(d, pos, "storage '%s' has %llu "
					    "elements here but %llu in the "
					    "pickle", s->key, (unsigned long long)
					    numel, (unsigned long long)s->numel);
		if (__builtin_add_overflow(pos + 8, s->nbytes, &end) ||
		    end > c->file_size)
			return diag_corrupt(d, pos, "storage '%s' (%llu bytes) "
					    "runs past the end of the file",
					    s->key,
					    (unsigned long long)s->nbytes);
		s->data_off = pos + 8;
		pos = end;
		found++;
	}
	if (found != c->nstorages)
		for (uint32_t i = 0; i < c->nstorages; i++)
			if (!c->storages[i]->data_off)
				return diag_corrupt(d, pos, "storage '%s' is "
						    "missing from the file",
						    c->storages[i]->key);
	return 0;
}

int ckpt_legacy_open(struct ckpt *c, struct diag *d)
{
	struct pkl_doc *docs[5] = { NULL };
	uint64_t end;
	int rc;

	rc = scan_pickles(c, docs, read_pickles(c, docs, d), d);
	if (rc)
		goto out;
	c->pkl_label = names[3];
	if (!sys_little_endian(docs[2]->root)) {
		rc = diag_unsupported(d, docs[0]->end + docs[1]->end,
				      "big-endian legacy file");
		goto out;
	}
	c->doc = docs[3];
	docs[3] = NULL;
	rc = ckpt_build_model(c, d);
	if (rc)
		goto out;
	end = docs[4]->end;
	rc = locate_storages(c, docs[4]->root, end, d);
out:
	for (int i = 0; i < 5; i++)
		pkl_doc_free(docs[i]);
	return rc;
}
