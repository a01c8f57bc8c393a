/*
 * ckpt_hfout.c - write any checkpoint as a new Hugging Face sharded
 * folder (ptrepack --max-shard-size SIZE IN OUT/), the files transformers'
 * save_pretrained writes for a model's state dict (transformers 5.12,
 * huggingface_hub 1.23: split_state_dict_into_shards_factory()):
 *
 *   OUT/model-00001-of-00003.safetensors   the shards, K of N, 5 digits;
 *   OUT/model-00002-of-00003.safetensors   each __metadata__ {"format":
 *   OUT/model-00003-of-00003.safetensors   "pt"}, laid out as safetensors
 *                                          lays a file out (ckpt_stwrite.c)
 *   OUT/model.safetensors.index.json       json.dumps(index, indent=2,
 *                                          sort_keys=True) + "\n"
 *
 *   {
 *     "metadata": {
 *       "total_parameters": P,     elements of every tensor written
 *       "total_size": S            bytes, as the cut counts them
 *     },
 *     "weight_map": {              every name written, sorted
 *       "NAME": "model-0000K-of-0000N.safetensors",
 *       ...
 *     }
 *   }
 *
 * One shard is model.safetensors and no index.  A sharded folder's other
 * files (config.json, generation_config.json, the tokenizer's) are copied
 * beside them, read through the source as the mount shows them, so that
 * from_pretrained(OUT) loads the model; a name the output has already is
 * not copied (o->note says so).  The cut, in state-dict
 * order: a tensor goes into the current shard unless that would take it
 * past SIZE, when a new shard starts; a tensor larger than SIZE gets a
 * shard of its own, and the current one stays open after it.  A tensor
 * counts the bytes of its storage (untyped_storage().nbytes()) when it is
 * the only tensor written from that storage, else its own (transformers
 * clones disjoint views of one storage first).
 *
 * Tied weights, as transformers removes them before the cut
 * (remove_tied_weights_from_state_dict()): names of one storage through
 * the same view are one tensor, written under the first name in the
 * state dict (the tie's source, model.embed_tokens.weight, comes before
 * lm_head.weight in every model's state dict); the others are left out
 * and reported.  transformers decides by the model class's
 * _tied_weights_keys, which a checkpoint does not name.  total_parameters
 * is the model's num_parameters(); a checkpoint cannot tell parameters
 * from buffers, so buffers count too.
 *
 * Memory: the flat map of names and one shard's header; bytes stream
 * through ckpt_stwrite.c.  The folder is built under a temporary name
 * beside OUT and renamed (ckpt_newdir.h).
 */
#include "ckpt/ckpt_member.h"
#include "ckpt/ckpt_newdir.h"
#include "ckpt_hfcut.h"
#include "source/source.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/io.h"
#include "util/sbuf.h"


static int by_seq(const void *a, const void *b)
{
	const struct st_ent *x = *(const struct st_ent *const *)a;
	const struct st_ent *y = *(const struct st_ent *const *)b;

	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The bytes the cut counts for @e: its storage's when no other tensor
 * written shares it (@users by storage index), else its own. */
static uint64_t cut_size(const uint32_t *users, const struct st_ent *e)
{
	const struct ckpt_storage *s = e->t->storage;

	return users[s->index] > 1 ? ckpt_tensor_nbytes(e->t) : s->nbytes;
}

/* Each kept entry's shard, as split_state_dict_into_shards_factory()
 * cuts them; aliases are told of. */
static int plan(struct hf_cut *h)
{
	uint64_t max = h->o->max_shard, cur = 0;
	uint32_t open = UINT32_MAX;	/* the shard being filled */
	uint32_t *users = calloc(h->c->nstorages + 1, sizeof(*users));
	/* the kept entries in state-dict order */
	struct st_ent **seen = malloc((h->f.n + 1) * sizeof(*seen));
	uint32_t n = 0;
	char what[600];

	h->shard = calloc(h->f.n + 1, sizeof(*h->shard));
	if (!seen || !h->shard || !users) {
		free(users);
		free(seen);
		return diag_nomem(h->d);
	}
	for (uint32_t i = 0; i < h->f.n; i++)
		if (h->f.e[i].kept == i) {
			seen[n++] = &h->f.e[i];
			users[h->f.e[i].t->storage->index]++;
		}
	qsort(seen, n, sizeof(*seen), by_seq);
	for (uint32_t i = 0; i < n; i++) {
		struct st_ent *e = seen[i];
		uint64_t sz = cut_size(users, e);

		h->total += sz;
		h->params += e->t->numel;
		if (sz > max) {
			h->shard[e - h->f.e] = h->nshards++;
			continue;
		}
		if (open != UINT32_MAX && cur + sz > max)
			open = UINT32_MAX;
		if (open == UINT32_MAX) {
			open = h->nshards++;
			cur = 0;
		}
		h->shard[e - h->f.e] = open;
		cur += sz;
	}
	for (uint32_t i = 0; i < h->f.n; i++) {
		const struct st_ent *e = &h->f.e[i], *k = &h->f.e[e->kept];

		if (e->kept == i)
			continue;
		h->shard[i] = UINT32_MAX;	/* not written */
		if (h->o->note) {
			snprintf(what, sizeof(what), "tied to %.500s: left out "
				 "(transformers ties it again at load)",
				 k->name);
			h->o->note(h->o->note_arg, e->name, what);
		}
	}
	free(users);
	free(seen);
	return 0;
}

/* Shard @k's file name into @buf. */
const char *hf_shard_name(const struct hf_cut *h, uint32_t k, char *buf,
			      size_t size)
{
	if (h->nshards == 1)
		return HF_ONE;
	snprintf(buf, size, "model-%05u-of-%05u.safetensors", k + 1,
		 h->nshards);
	return buf;
}

/* The index, as json.dumps(index, indent=2, sort_keys=True) writes it:
 * the flat map is sorted by name (bytes), as sort_keys sorts str keys of
 * UTF-8 names (by code point). */
int hf_index_text(const struct hf_cut *h, struct sbuf *b)
{
	char buf[64];
	bool first = true;

	sb_printf(b, "{\n  \"metadata\": {\n    \"total_parameters\": %" PRIu64
		  ",\n    \"total_size\": %" PRIu64 "\n  },\n  \"weight_map\": {",
		  h->params, h->total);
	for (uint32_t i = 0; i < h->f.n; i++) {
		if (h->shard[i] == UINT32_MAX)
			continue;
		sb_puts(b, first ? "\n    " : ",\n    ");
		first = false;
		sb_json_ascii(b, h->f.e[i].name, h->f.e[i].len);
		sb_puts(b, ": \"");
		sb_puts(b, hf_shard_name(h, h->shard[i], buf, sizeof(buf)));
		sb_puts(b, "\"");
	}
	sb_puts(b, first ? "}\n}\n" : "\n  }\n}\n");
	return b->oom ? diag_nomem(h->d) : 0;
}

/* Is @name one of the files written (a shard, the index)? */
bool hf_cut_ours(const struct hf_cut *h, const char *name)
{
	char buf[64];

	/* an index is the output's own or none: the input's would name
	   shards that are not there */
	if (ckpt_hf_index_name(name))
		return true;
	for (uint32_t k = 0; k < h->nshards; k++)
		if (!strcmp(name, hf_shard_name(h, k, buf, sizeof(buf))))
			return true;
	return false;
}

/* @m's bytes, or o->rewrite's for it, into a new file of @nd. */
static int copy_other(struct hf_cut *h, struct newdir *nd,
		      const struct src_member *m, uint64_t *size)
{
	struct sbuf b = { 0 };
	int fd, rc = 0;

	if (h->o->rewrite)
		rc = h->o->rewrite(h->o->rewrite_arg, m->name, m->fd, m->size,
				   &b, h->d);
	if (rc == 1) {
		rc = newdir_put(nd, m->leaf, b.p, b.n, 0666, h->d);
		*size = b.n;
		free(b.p);
		return rc;
	}
	free(b.p);
	if (rc)
		return rc;
	fd = openat(nd->dfd, m->leaf, O_WRONLY | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_CLOEXEC, 0666);
	rc = fd < 0 ? -errno : io_copy_range(m->fd, 0, fd, 0, m->size);
	if (!rc && fsync(fd))
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc)
		return diag_errno(h->d, rc, "%s: cannot copy it: %s", m->path,
				  strerror(-rc));
	*size = m->size;
	return 0;
}

/* A folder's other files, copied byte for byte (mode as the umask has
 * it for a new file, as save_pretrained's config.json is made). */
static int copy_others(struct hf_cut *h, struct newdir *nd,
		       struct ckpt_hf_stats *st)
{
	uint32_t n = 0;
	uint64_t size = 0;
	int rc = ckpt_folder_files(h->c, &n);

	if (rc < 0)
		return diag_errno(h->d, rc, "cannot open the folder's files: %s",
				  strerror(-rc));
	for (uint32_t i = 0; i < n; i++) {
		const struct src_member *m = ckpt_folder_file(h->c, i);

		if (!m)
			continue;	/* not a regular file beneath the root */
		if (hf_cut_ours(h, m->leaf) || strchr(m->name, '/')) {
			if (h->o->note)
				h->o->note(h->o->note_arg, m->name, "a file of "
					   "the folder the output writes "
					   "itself: not copied");
			continue;
		}
		rc = copy_other(h, nd, m, &size);
		if (rc)
			return rc;
		st->copied++;
		st->size += size;
	}
	return 0;
}

static int write_shards(struct hf_cut *h, int dfd, struct ckpt_hf_stats *st)
{
	struct ckpt_write_opts o = *h->o;
	struct ckpt_write_stats ws = { 0 };
	uint8_t *pick = malloc(h->f.n + 1);
	uint64_t done = 0;
	char buf[64];
	int rc = pick ? 0 : diag_nomem(h->d);

	o.progress = NULL;	/* told per shard, below */
	for (uint32_t k = 0; k < h->nshards && !rc; k++) {
		const char *name = hf_shard_name(h, k, buf, sizeof(buf));
		int fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL |
				O_NOFOLLOW | O_CLOEXEC, 0666);

		if (fd < 0) {
			rc = diag_errno(h->d, -errno, "%s: %s", name,
					strerror(errno));
			break;
		}
		for (uint32_t i = 0; i < h->f.n; i++)
			pick[i] = h->shard[i] == k;
		rc = ckpt_st_write_part(h->c, fd, &h->f, pick,
					"\"format\":\"pt\"", &o, &ws, h->d);
		if (!rc && fsync(fd))
			rc = diag_errno(h->d, -errno, "%s: %s", name,
					strerror(errno));
		close(fd);
		st->size += ws.size;
		done += ws.size;
		if (!rc && h->o->progress)
			h->o->progress(h->o->progress_arg, done, h->total);
	}
	st->views = ws.views;
	st->tensors = ws.tensors;
	free(pick);
	return rc;
}

int hf_cut_make(struct hf_cut *h)
{
	int rc;

	h->f.tie_first_seen = true;
	rc = ckpt_st_flatten(h->c, h->o, &h->f, h->d);
	if (!rc && !h->f.n)
		rc = diag_unsupported(h->d, DIAG_NO_OFFSET, "no tensors to "
				      "write: a Hugging Face folder holds "
				      "at least one");
	if (!rc)
		rc = plan(h);
	if (rc)
		hf_cut_release(h);
	return rc;
}

void hf_cut_release(struct hf_cut *h)
{
	free(h->shard);
	h->shard = NULL;
	h->nshards = 0;
	ckpt_st_flat_release(&h->f);
}

int ckpt_hf_write(struct ckpt *c, const char *out,
		  const struct ckpt_write_opts *o, struct ckpt_hf_stats *st,
		  struct diag *d)
{
	struct hf_cut h = { .c = c, .o = o, .d = d };
	struct newdir nd = { .dfd = -1 };
	struct sbuf idx = { 0 };
	int rc;

	*st = (struct ckpt_hf_stats){ 0 };
	rc = hf_cut_make(&h);
	if (!rc)
		rc = newdir_begin(&nd, out, "a Hugging Face folder output", d);
	if (!rc)
		rc = write_shards(&h, nd.dfd, st);
	if (!rc && h.nshards > 1 && !(rc = hf_index_text(&h, &idx))) {
		rc = newdir_put(&nd, HF_INDEX, idx.p, idx.n, 0666, d);
		st->size += idx.n;
	}
	if (!rc)
		rc = copy_others(&h, &nd, st);
	if (!rc)
		rc = newdir_commit(&nd, d);
	newdir_end(&nd);
	if (!rc) {
		st->shards = h.nshards;
		st->ties = h.f.aliases;
		st->dropped_values = h.f.dropped;
		st->total_size = h.total;
	}
	free(idx.p);
	hf_cut_release(&h);
	return rc;
}
