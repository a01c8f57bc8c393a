/*
 * ckpt_write.h - writing the checkpoint out: write-back and ckpt_save(),
 * a sharded folder's and a DCP directory's write-back, DCP output,
 * safetensors output, the in-place plan and patch, and the dirty maps
 * that let write-back compare only what changed.  Part of ckpt.h.
 */
#ifndef PT_CKPT_CKPT_WRITE_H
#define PT_CKPT_CKPT_WRITE_H

#include "ckpt_model.h"

/* ---- write-back (ckpt_write.c) ---- */

/* What a write did (ckpt_write_opts.stats). */
struct ckpt_write_stats {
	bool repickled;		/* data.pkl was written anew */
	int proto_was;		/* then the pickle protocol of the one it
				   replaced (0: none, or no PROTO) */
	uint32_t records;	/* records written */
	uint32_t storages;	/* storage records written */
	uint32_t dropped;	/* storage records left out: nothing uses them */
	uint32_t trimmed;	/* storages cut to what their tensors use */
	uint64_t saved;		/* storage bytes not written for those two */
	uint64_t size;		/* bytes of the archive */
	/* how (ckpt_save() clones the checkpoint into its temporary when
	   every record keeps its place, then writes what differs only) */
	bool cloned;		/* patched a clone of the checkpoint */
	bool in_place;		/* patched the checkpoint itself */
	uint64_t written;	/* bytes written with pwrite */
	uint64_t copied;	/* bytes copied by copy_file_range */
	uint32_t copy_calls;	/* copy_file_range calls */
	/* a safetensors file written (ckpt_stwrite.c) */
	uint32_t tensors;	/* tensors in its header */
	uint32_t aliases;	/* names of a tensor written once, recorded
				   in __metadata__ (tied weights) */
	uint32_t views;		/* tensors written as a contiguous copy of
				   a view (strided, or part of a storage) */
	uint32_t dropped_values;	/* non-tensors left out (st_drop) */
};

/* What ckpt_write() writes (ckpt_write_opts.to). */
enum ckpt_out {
	CKPT_OUT_SAME,		/* the checkpoint's own kind: safetensors for
				   a safetensors file, else a torch zip */
	CKPT_OUT_ZIP,		/* a torch zip archive */
	CKPT_OUT_ST,		/* a safetensors file (ckpt_stwrite.c) */
	CKPT_OUT_DCP,		/* a DCP directory (ckpt_dcp_save()) */
	CKPT_OUT_HF,		/* a Hugging Face sharded folder
				   (ckpt_hf_write()) */
	CKPT_OUT_FMT,		/* one file of format @fmt, by its
				   descriptor's writer (ckpt_format.h) */
};

struct sbuf;
struct stat;
struct ckpt_write_opts {
	uint8_t to;		/* enum ckpt_out */
	/* CKPT_OUT_FMT: the format, and its writer's options ("type=q8_0",
	   "kv=KEY=VALUE": ptrepack's --NAME-OPTION VALUE), checked by the
	   writer before it writes a byte */
	const struct ckpt_fmt *fmt;
	const char *const *fmt_args;
	uint32_t nfmt_args;
	/* safetensors output: leave out python values and objects instead
	   of refusing them; @note, if set, hears of each tensor written as
	   a contiguous copy of a view and of each value left out (@key the
	   flattened name, @what one line without the name) */
	bool st_drop;
	void (*note)(void *arg, const char *key, const char *what);
	void *note_arg;
	bool repickle;		/* write a new data.pkl even if unchanged */
	uint32_t align;		/* 0: the .storage_alignment record, or 64 */
	bool drop_unused;	/* leave out data/ records no persistent id
				   names (data.pkl kept as it is) */
	uint8_t clone_pct;	/* 1..100: a storage whose tensors use a
				   span of at most this % of it is cut to
				   that span (implies repickle); 0: never */
	/* called after each record with the bytes written so far */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
	struct ckpt_write_stats *stats;	/* filled in when not NULL */
	/* one shard of a sharded folder (ckpt_hfsave.c): of the root's
	   children, only those at slots i with part[i] non-zero */
	const uint8_t *part;
	/* the new root (ptrepack IN OUT KEYPATH...): with one node, that
	   node, as torch.save(ck[KEY]) writes it; with several, a dict of
	   them under @root_keys; NULL: the checkpoint's root.  Only the
	   storages they use are written.  Borrowed. */
	struct ckpt_node *const *roots;
	const char *const *root_keys;
	uint32_t nroots;
	/* safetensors output: the checkpoint whose __metadata__ is kept (a
	   folder's shard); NULL: the one written */
	const struct ckpt *meta;
	/* DCP output: as this many ranks would save it, every tensor of
	   at least one dimension cut as Shard(0) cuts it (0, 1: one rank) */
	uint32_t dcp_ranks;
	/* Hugging Face folder output: a shard's bytes at most (a tensor
	   larger gets a shard of its own); 0: one file */
	uint64_t max_shard;
	/* Hugging Face folder output: a sharded folder's other file @name
	   (@size bytes at @fd), about to be copied: 1 with its new bytes in
	   @out (the caller frees out->p), 0 to copy it as it is, or -errno
	   with @d set (ptrepack --dequant's config.json); NULL: copy all */
	int (*rewrite)(void *arg, const char *name, int fd, uint64_t size,
		       struct sbuf *out, struct diag *d);
	void *rewrite_arg;
	/* ckpt_save(): the temporary is ".NAME.ptfs-new.<tmp_tag>" made with
	   O_EXCL (NULL: a mkstemp() name); @check runs before anything is
	   read (CKPT_SAVE_START, @st NULL) and just before the rename
	   (CKPT_SAVE_RENAME, @st the finished file's); non-zero stops the
	   write-back with nothing changed.  A sharded folder's write-back
	   (ckpt_hf_save()) also calls it for each new shard file, made
	   and empty (CKPT_SAVE_NEW, @tmp its name in the folder), and for
	   each old one to remove after the commit (CKPT_SAVE_RETIRE).  A
	   rank set's (ckpt_fsave.h, fsave_init_swap()) starts with @tmp
	   NULL and commits with CKPT_SAVE_SWAP: @tmp is then the plan of
	   renames to journal (fsave_swap()), @st NULL */
	const char *tmp_tag;
	int (*check)(void *arg, int stage, const char *tmp,
		     const struct stat *st, struct diag *d);
	void *check_arg;
};
enum {
	CKPT_SAVE_START, CKPT_SAVE_RENAME, CKPT_SAVE_NEW, CKPT_SAVE_RETIRE,
	CKPT_SAVE_SWAP,
};

/*
 * ckpt_dcp_save.c: write @c as a new DCP directory @out (absent, or an
 * empty directory), what torch_save_to_dcp() makes of it: one
 * __0_0.distcp of torch.save items and a .metadata, flattened as DCP
 * flattens a state dict; with o->dcp_ranks M > 1, what M ranks' dcp.save
 * of it as Shard(0) DTensors writes, __R_0.distcp each (ckpt_dcp_split.c).
 * Uses o->progress and o->note (an empty dict or
 * a dict's attributes, which DCP cannot keep, are left out and said
 * there); the other options are a torch zip's.  Built under a temporary
 * name beside @out and renamed: on failure @out is as it was.  0 or
 * -errno with @d set (one line naming the key).
 */
struct ckpt_dcp_stats {
	uint32_t keys;		/* flattened keys written */
	uint32_t tensors;	/* of which tensors */
	uint64_t size;		/* bytes of the .distcp files */
};
int ckpt_dcp_save(struct ckpt *c, const char *out,
		  const struct ckpt_write_opts *o, struct ckpt_dcp_stats *st,
		  struct diag *d);

/*
 * ckpt_hfout.c: write @c as a new Hugging Face sharded folder @out
 * (absent, or an empty directory), as transformers' save_pretrained
 * writes a model's state dict (ckpt_hfout.c has the rules): safetensors
 * shards of at most o->max_shard bytes cut in state-dict order,
 * model-0000K-of-0000N.safetensors (one: model.safetensors, no index),
 * and model.safetensors.index.json.  A tensor seen under several names
 * through the same view is written once, under its first name (o->note
 * hears of each other).  Python values are refused, or with o->st_drop
 * left out.  A sharded folder's other files (config.json...) are copied.
 * Built under a temporary name and renamed (ckpt_newdir.h).
 * 0 or -errno with @d set.
 */
struct ckpt_hf_stats {
	uint32_t shards;	/* safetensors files written */
	uint32_t tensors;	/* tensors in them */
	uint32_t ties;		/* names left out: ties of a tensor written */
	uint32_t views;		/* tensors written as contiguous copies */
	uint32_t dropped_values;	/* values left out (st_drop) */
	uint32_t copied;	/* a sharded folder's other files copied */
	uint64_t total_size;	/* the index's metadata.total_size */
	uint64_t size;		/* bytes of every file written */
};
int ckpt_hf_write(struct ckpt *c, const char *out,
		  const struct ckpt_write_opts *o, struct ckpt_hf_stats *st,
		  struct diag *d);

/*
 * Write the checkpoint as it is now (with its edits) into @fd, from
 * offset 0: as a safetensors file when it is one or o->to asks
 * (ckpt_stwrite.c says how), else as a torch zip archive in torch's own
 * layout: data.pkl copied byte for byte when the structure is unchanged,
 * else a new protocol-2 pickle with storage keys 0..N-1 in first-use
 * order and unused storages dropped; unchanged storages copied with their
 * CRC, edited ones from the overlay with a fresh one.  A legacy (< 1.6)
 * checkpoint is converted: its pickle re-emitted with 5-tuple persistent
 * ids, under the prefix "archive"; a safetensors file the same way, as a
 * dict of its tensors in header order.  Neither fsyncs nor renames.  0 or
 * -errno.
 */
int ckpt_write(struct ckpt *c, int fd, const struct ckpt_write_opts *o,
	       struct diag *d);

/*
 * ckpt_hfsave.c: write the staged edits of sharded folder @c back into
 * it, with the index rename as the one commit point (ckpt_fsave.h): each
 * shard touched is written anew under a new name (the first free of
 * BASE.EXT, BASE.g1.EXT, BASE.g2.EXT ..., never its own), then the index
 * naming them (with the keys' changes) renamed over the old one, then
 * the old shards removed.  @o as for ckpt_save() (tmp_tag, check, stats,
 * progress).  On failure before the commit nothing of the folder has
 * changed and every new file is removed.  0 or -errno with @d set.
 */
int ckpt_hf_save(struct ckpt *c, const struct ckpt_write_opts *o,
		 struct diag *d);

/*
 * ckpt_dcp_wb.c: the same for DCP directory @c, .metadata the commit
 * point: each .distcp file holding a chunk whose bytes changed is written
 * anew (a clone, the chunks and their items' CRC-32 patched), then
 * .metadata with the keys as the tree names them now.  Same-size tensor
 * edits, renames and removals of keys; -EROFS for a directory saved
 * without collectives.  0 or -errno with @d set.
 */
int ckpt_dcp_wb(struct ckpt *c, const struct ckpt_write_opts *o,
		struct diag *d);

/*
 * ckpt_ranks_wb.c: the same for per-rank shard set @c, whose files keep
 * their names: each rank file holding a changed piece, a replica of one
 * or a copy of a changed plain tensor is written whole under a temporary
 * beside it (a clone, the runs and each record's CRC-32 patched), the
 * plan of renames journaled (the commit point), then each renamed over
 * its rank file (ckpt_fsave.h).  Same-size tensor edits only; -EROFS for
 * a set with a compressed record.  0 or -errno with @d set.
 */
int ckpt_ranks_wb(struct ckpt *c, const struct ckpt_write_opts *o,
		  struct diag *d);

/*
 * Write the checkpoint to @target safely: a symbolic link's target is
 * what gets replaced, anything but a regular file (or no file) is refused.
 * Into a temporary file beside it, fsync'd, with the mode (and, as root, the owner) of @like (or 0644),
 * then renamed over @target, then the directory fsync'd.  @before, if
 * given, runs just before the rename with the finished file's stat (the
 * overlay journals it there).  On failure @target is untouched and the
 * temporary file removed.  0 or -errno with @d set.
 */
#define CKPT_TMP_SUFFIX	".ptfs-new."	/* its temporary: .NAME.ptfs-new.XXXXXX */
int ckpt_save(struct ckpt *c, const char *target,
	      const struct ckpt_write_opts *o, const struct stat *like,
	      int (*before)(void *arg, const struct stat *st, struct diag *d),
	      void *arg, struct diag *d);

/* ---- safetensors output (ckpt_stflat.c, ckpt_stwrite.c) ---- */

/*
 * 0 if @key (@len bytes) can name a tensor of a safetensors file (UTF-8,
 * not "__metadata__"), else -EINVAL with @d saying why.
 */
int ckpt_st_name_ok(const char *key, size_t len, struct diag *d);

/* ---- in-place write-back (ckpt_inplace.c) ---- */

#define CKPT_NO_STORAGE	UINT32_MAX

/* One record an in-place write-back changes. */
struct ckpt_patch_rec {
	uint32_t entry;		/* its index in the central directory */
	uint32_t storage;	/* the staged storage its bytes come from,
				   or CKPT_NO_STORAGE (only its CRC) */
	uint32_t crc32;		/* its CRC-32 afterwards */
};

/*
 * What an in-place write-back writes, known before its first byte: enough
 * to do it again after a crash without the checkpoint's old bytes.
 */
struct ckpt_plan {
	uint64_t size;		/* of the checkpoint, which keeps it */
	uint64_t bytes;		/* bytes the patch writes (0: nothing) */
	uint32_t n;
	struct ckpt_patch_rec *rec;	/* by entry, ascending; malloc'd */
};

/*
 * Can @c's edits be patched into the checkpoint itself?  A zip archive
 * (not legacy, TorchScript or tar), the structure unchanged (data.pkl
 * byte for byte), every record stored and every one in its place at its
 * size: then a dry run of the write-back fills @p with the records that
 * change and their new CRCs (from the staged data and the checkpoint's
 * bytes as they are now, which must be the mounted ones).  0, -ENOTSUP
 * with @d saying why not, or another -errno.  Release @p either way.
 */
int ckpt_plan_inplace(struct ckpt *c, struct ckpt_plan *p, struct diag *d);

/*
 * Patch the checkpoint, open for writing as @fd (the file of c->fd), as
 * @p says, and fdatasync it.  Idempotent: the bytes come from the staged
 * data and @p, never from what the checkpoint held (a crash may have left
 * it half patched); only the spans that differ are written.  @p must name
 * exactly the staged storages of @c, with their records; else -ESTALE.
 * 0 or -errno with @d set.
 */
int ckpt_apply_inplace(struct ckpt *c, int fd, const struct ckpt_plan *p,
		       struct diag *d);

/* Free @p's records; a zeroed plan is safe. */
void ckpt_plan_release(struct ckpt_plan *p);

/* ---- write-back against the original (ckpt_patch.c) ---- */

#define CKPT_DIRTY_SHIFT	16	/* a dirty map's chunk: 64 KiB */

/*
 * Storage @s was just copied into the overlay file s->fd: start its dirty
 * map, all clean, bound to that file (device and inode).  0 or -ENOMEM
 * (then there is no map, and write-back compares the whole storage).
 */
int ckpt_dirty_track(struct ckpt_storage *s);
/* Bytes [@off, @off + @len) of @s are about to be written in place. */
void ckpt_dirty_mark(struct ckpt_storage *s, uint64_t off, uint64_t len);
/* Forget @s's map (a whole new file replaces its bytes; ckpt_close()). */
void ckpt_dirty_drop(struct ckpt_storage *s);
/*
 * @s's map as bits (bit i%64 of word i/64 set: chunk i was written) if it
 * describes the file s->fd is now, else NULL.
 */
const uint64_t *ckpt_dirty_bits(const struct ckpt_storage *s);

#endif
