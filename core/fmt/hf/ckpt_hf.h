/*
 * ckpt_hf.h - Hugging Face sharded folders (ckpt_shards.c): the index, its
 * shards and the folder's other files, what ptverify reports about them,
 * and which shard holds what.  Part of ckpt.h.
 */
#ifndef PT_CKPT_CKPT_HF_H
#define PT_CKPT_CKPT_HF_H

#include "ckpt/ckpt_model.h"

struct src_ident;

/* ---- Hugging Face sharded folders (ckpt_shards.c) ---- */

/* One shard file the index names, opened as a checkpoint of its own. */
struct ckpt_shard {
	const char *name;	/* as the index names it, relative to the folder */
	const char *path;	/* folder/name: what messages name */
	struct ckpt *c;		/* the shard (owned by the folder's ckpt);
				   NULL: absent (a CKPT_HF_ABSENT finding) */
	uint32_t storage0, nstorages;	/* its storages in the folder's */
	uint32_t tensor0, ntensors;	/* its tensors in the folder's */
	uint32_t node0, nnodes;	/* its nodes in the folder's (its root's
				   children and all below them) */
	uint32_t nkeys;		/* keys of it the folder's tree shows */
	uint64_t name_off;	/* index byte of its first mention */
	uint32_t member;	/* its file in c->src (when c is not NULL) */
};

/* A regular file of the folder that no index entry names as a shard. */
struct ckpt_hf_file {
	const char *name;
	uint64_t size;
	uint32_t member;	/* in c->src, or UINT32_MAX: not shown (no
				   regular file beneath the folder) */
};

/* What ptverify reports about an index and its shards. */
enum ckpt_hf_issue_kind {
	CKPT_HF_NOT_IN_SHARD,	/* the index names a shard that lacks the key */
	CKPT_HF_NOT_IN_INDEX,	/* a shard holds a key the index lacks */
	CKPT_HF_TWICE,		/* two shards hold the key */
	CKPT_HF_TOTAL_SIZE,	/* metadata.total_size is not the shards' */
	CKPT_HF_ABSENT,		/* a shard the index names is not there */
};

struct ckpt_hf_issue {
	uint8_t kind;		/* enum ckpt_hf_issue_kind */
	const char *key;	/* the key (arena; NUL-terminated, may hold NULs) */
	uint32_t shard;		/* the shard concerned */
	uint32_t other;		/* NOT_IN_SHARD: a shard that holds it, TWICE:
				   the second; else UINT32_MAX */
	uint64_t off;		/* index byte it is about, or DIAG_NO_OFFSET */
	uint64_t want, got;	/* TOTAL_SIZE: the index's and the shards' */
	uint64_t alt;		/* TOTAL_SIZE: by whole storages, if other */
};

struct ckpt_hf {
	const char *dir;	/* the folder (as given, or the index's) */
	const char *index;	/* the index's file name in it */
	int dfd;		/* the folder, open (c->src's root) */
	struct ckpt_shard *shards;	/* by name, the order transformers
					   loads them in */
	uint32_t nshards;
	struct ckpt_hf_file *files;	/* by name */
	uint32_t nfiles;
	uint32_t nopened;	/* of them, opened through c->src so far
				   (ckpt_folder_files(): the mount's) */
	struct ckpt_hf_issue *issues;
	uint32_t nissues;
	uint32_t nabsent;	/* shards not there (c NULL) */
	uint32_t nentries;	/* weight_map entries */
	uint64_t total;		/* bytes by unique storage, the first tensor's
				   numel * itemsize (transformers' rule) */
	uint64_t total_alt;	/* ... by whole storages (huggingface_hub's) */
};

/* The descriptor of the file that holds @s's own bytes: c->fd, or in a
 * sharded folder its shard's (s->fd differs when the overlay has a copy). */
int ckpt_storage_home(const struct ckpt *c, const struct ckpt_storage *s);

/* Is @path's file name that of a Hugging Face index (*.index.json, or a
 * variant *.index.VARIANT.json)? */
bool ckpt_hf_index_name(const char *path);

/* The shard @t was read from, or NULL (not a sharded folder). */
const struct ckpt_shard *ckpt_tensor_shard(const struct ckpt *c,
					   const struct ckpt_tensor *t);

/* The shard storage @s was read from, or NULL (not a sharded folder). */
const struct ckpt_shard *ckpt_storage_shard(const struct ckpt *c,
					    const struct ckpt_storage *s);

/* Issue @i of a sharded folder as one line (no newline) into @buf. */
const char *ckpt_hf_issue_line(const struct ckpt *c, uint32_t i, char *buf,
			       size_t size);

#endif
