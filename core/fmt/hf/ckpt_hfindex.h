/*
 * ckpt_hfindex.h - a Hugging Face index (pytorch_model.bin.index.json,
 * model.safetensors.index.json) as ckpt_shards.c needs it: the weight_map
 * entries with the byte where each is written, the shard names sorted and
 * checked, and metadata.total_size.  Internal to core/ckpt (and its tests).
 */
#ifndef PT_CKPT_CKPT_HFINDEX_H
#define PT_CKPT_CKPT_HFINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/arena.h"

struct diag;

#define HFIX_MAX_BYTES	(64u << 20)	/* 50,000 keys take about 4 MiB */
#define HFIX_MAX_SHARDS	16384		/* each one is an open file */
#define HFIX_MAX_NAME	4096		/* a shard's name (PATH_MAX) */

/* One weight_map member: "key": "shard". */
struct hfix_entry {
	const char *key;	/* decoded (arena), NUL-terminated, may hold NULs */
	size_t klen;
	uint32_t shard;		/* into hfix.shards */
	bool found;		/* the shard holds it (ckpt_shards.c sets it) */
	uint64_t off;		/* index byte of the key's token */
	uint64_t kend;		/* ... just after it */
	uint64_t voff;		/* index bytes of the value's string token, */
	uint64_t vlen;		/* its quotes included (an index rewrite) */
};

struct hfix {
	struct hfix_entry *e;	/* sorted by key (malloc'd) */
	uint32_t n;
	const char **shards;	/* distinct names, sorted (malloc'd array) */
	uint64_t *shard_off;	/* index byte of each one's first mention */
	uint32_t nshards;
	bool has_total;		/* metadata.total_size is there */
	bool bad_total;		/* ... but is no byte count */
	uint64_t total;
	uint64_t total_off, total_len;	/* its token's bytes */
	uint64_t wm_open, wm_close;	/* weight_map's '{' and '}' */
	bool sorted;		/* weight_map's keys are in byte order */
};

/*
 * Read @len bytes of index @text: a JSON object whose "weight_map" is an
 * object of str -> str (required; no key twice) and whose "metadata", if
 * there, an object (total_size a non-negative integer, other members
 * kept out); other top-level members are skipped.  Shard names must be
 * relative paths inside the folder: no leading '/', no empty, '.' or '..'
 * part, no NUL.  Strings land in @a.  Every refusal is -EILSEQ with the
 * byte offset in @d, the message starting with @where ("" or "NAME: ").
 * Release @ix either way.
 */
int hfix_parse(const char *text, size_t len, struct arena *a,
	       const char *where, struct hfix *ix, struct diag *d);

/* The entry for key @key (@klen bytes), or NULL. */
struct hfix_entry *hfix_find(const struct hfix *ix, const char *key,
			     size_t klen);

void hfix_release(struct hfix *ix);

struct ckpt;
struct ckpt_hf;

/*
 * ckpt_hfdir.c: find the folder and the index of c->path (a folder, @is_dir,
 * or the index file): c->hf->dir, ->index, ->dfd, ->files, and c->fd the
 * index's.  0 or -errno with @d set (no index, two of them ...).
 */
int ckpt_hf_locate(struct ckpt *c, bool is_dir, struct diag *d);
/* ckpt_hfdir.c: c->fd's index, whole, into *@text (malloc'd; *@len
 * bytes): a regular file of at most HFIX_MAX_BYTES. */
int ckpt_hf_index_bytes(struct ckpt *c, const char *where, char **text,
			size_t *len, struct diag *d);
/* ckpt_hfdir.c: read and parse c->fd's index into @ix (c->file_size set). */
int ckpt_hf_read_index(struct ckpt *c, struct hfix *ix, const char *where,
		       struct diag *d);
/* ckpt_hfdir.c: leave the shards @ix names out of hf->files. */
void ckpt_hf_files_not_shards(struct ckpt_hf *hf, const struct hfix *ix);

/* ---- ckpt_hfplan.c: a write-back that changes keys ---- */

enum { HF_DATA = 1, HF_KEYS = 2 };	/* how a shard is touched */

struct hfplan {
	uint32_t *slot;		/* by slot of the root: the child's shard */
	uint8_t *touched;	/* by shard: 0, HF_DATA (storages edited)
				   or HF_KEYS (its key set changed) */
	uint32_t *live;		/* by shard: children it keeps */
};

/* Plan where each of the root's children goes.  0 or -errno, @d set. */
int hfplan_make(struct ckpt *c, struct hfplan *p, struct diag *d);
void hfplan_release(struct hfplan *p);
/*
 * The new index: @text (@len bytes, the index as it is) with a weight_map
 * of the tree's children, each naming @names[its shard], and total_size
 * counted again, appended to @out.  0 or -errno with @d set.
 */
struct sbuf;
int hfplan_index(struct ckpt *c, const struct hfplan *p,
		 const char *const *names, const char *text, size_t len,
		 struct sbuf *out, struct diag *d);

#endif
