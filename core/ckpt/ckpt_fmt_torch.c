/*
 * ckpt_fmt_torch.c - the descriptors of the torch family: what torch.save
 * and torch.jit.save write.
 *
 *   format       first bytes                 written back    read by
 *   zip          "PK\3\4" (a local header)   in place, or    ckpt_open.c,
 *                                            as a new zip    ckpt_zipdir.c
 *   TorchScript  a zip with constants.pkl    no              ckpt_script.c
 *                (found by the zip's open)
 *   legacy       a pickle: 0x80 (protocol    as a new zip    ckpt_legacy.c
 *                2+), 0x8a, or 'L' (text)
 *   tar          "ustar" at byte 257         no              ckpt_tar.c
 *
 * Their records shown raw: a zip's records that hold no storage, or a
 * legacy or tar file's pickle (data.pkl).
 */
#include "ckpt_int.h"
#include "ckpt_format.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool bid_zip(const unsigned char *h, size_t n)
{
	return n >= 4 && !memcmp(h, "PK\3\4", 4);
}

static bool bid_tar(const unsigned char *h, size_t n)
{
	return n >= 262 && !memcmp(h + 257, "ustar", 5);
}

/* A pickle of the magic number: protocol 2 (0x80), a bare LONG1 (0x8a),
 * or protocol 0/1 text, whose 'L' a page of text may start with too. */
static bool bid_legacy(const unsigned char *h, size_t n)
{
	return n && (h[0] == 0x80 || h[0] == 0x8a ||
		     (h[0] == 'L' && !ckpt_head_is_html(h, n)));
}

static int open_zip(struct ckpt *c, unsigned flags, struct diag *d)
{
	c->rows = flags & CKPT_OPEN_ROWS && !(flags & CKPT_OPEN_WHOLE);
	return ckpt_zip_open(c, !(flags & CKPT_OPEN_WHOLE), d);
}

static int open_legacy(struct ckpt *c, unsigned flags, struct diag *d)
{
	(void)flags;
	return ckpt_legacy_open(c, d);
}

static int open_tar(struct ckpt *c, unsigned flags, struct diag *d)
{
	(void)flags;
	return ckpt_tar_open(c, d);
}

/* A zip's records that hold no storage (data.pkl, version, ...). */
static int zip_records(const struct ckpt *c, ckpt_record_fn fn, void *arg)
{
	const struct ptz_reader *z = &c->zip;
	unsigned char *is_storage = calloc(z->nentries + 1u, 1);
	int rc = 0;

	if (!is_storage)
		return -ENOMEM;
	for (uint32_t k = 0; k < c->nstorages; k++) {
		struct ckpt_rowview v;
		const struct ckpt_storage *s = ckpt_storage_at(c, k, &v);

		if (s->rec)
			is_storage[s->rec - z->entries] = 1;
	}
	for (uint32_t i = 0; i < z->nentries && !rc; i++)
		if (!is_storage[i])
			rc = fn(arg, z->entries[i].name + z->prefix_len + 1, 0,
				z->entries[i].usize, &z->entries[i]);
	free(is_storage);
	return rc;
}

/* A legacy or tar file's pickle. */
static int pickle_record(const struct ckpt *c, ckpt_record_fn fn, void *arg)
{
	return fn(arg, "data.pkl", c->pkl_off, c->doc->end - c->pkl_off,
		  NULL);
}

/* A legacy stream ends with its last storage block. */
static uint32_t verify_legacy(struct ckpt *c, bool no_crc, uint64_t *checked,
			      ckpt_problem_fn fn, void *arg)
{
	uint64_t end = 0;

	(void)no_crc;
	(void)checked;
	for (uint32_t i = 0; i < c->nstorages; i++) {
		uint64_t e = c->storages[i]->data_off + c->storages[i]->nbytes;

		end = e > end ? e : end;
	}
	if (!c->nstorages)
		return 0;	/* where the pickles end is not kept */
	return ckpt_trailing(c, end, "storage", "", fn, arg);
}

static int save_file(struct ckpt *c, const char *target,
		     const struct ckpt_write_opts *o, const struct stat *like,
		     struct diag *d)
{
	return ckpt_save(c, target, o, like, NULL, NULL, d);
}

const struct ckpt_fmt ckpt_fmt_zip = {
	.id = CKPT_ZIP, .name = "zip", .files = "checkpoints",
	.one = "a checkpoint",
	.caps = CKPT_CAP_WRITE | CKPT_CAP_INPLACE | CKPT_CAP_TORCH_ZIP |
		CKPT_CAP_VALUES,
	.converted = "",
	.bid = bid_zip, .open = open_zip,
	.records = zip_records, .save = save_file,
};

const struct ckpt_fmt ckpt_fmt_torchscript = {
	.id = CKPT_TORCHSCRIPT, .name = "torchscript",
	.files = "TorchScript archives", .one = "a TorchScript archive",
	.converted = "", .records = zip_records,
};

const struct ckpt_fmt ckpt_fmt_legacy = {
	.id = CKPT_LEGACY, .name = "legacy",
	.files = "legacy checkpoints (torch < 1.6)",
	.one = "a legacy (torch < 1.6) checkpoint",
	.caps = CKPT_CAP_WRITE | CKPT_CAP_OFFSETS | CKPT_CAP_VALUES,
	.rewrite_as = "zip archive",
	.converted = ", converted from the legacy format",
	.bid = bid_legacy, .open = open_legacy,
	.records = pickle_record, .verify = verify_legacy, .save = save_file,
};

const struct ckpt_fmt ckpt_fmt_tar = {
	.id = CKPT_TAR, .name = "tar",
	.files = "tar-era checkpoints (torch < 0.4)",
	.one = "a tar-era checkpoint (torch < 0.4)", .converted = "",
	.bid = bid_tar, .open = open_tar, .records = pickle_record,
};
