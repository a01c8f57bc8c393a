/*
 * ckpt_ranks.h - a set of per-rank training files, read as one state
 * dict: what ckpt_ranks.c (the open), ckpt_ranks_dt.c (a sharded
 * tensor's pieces) and ckpt_fmt_ranks.c (the descriptor) share.
 * Internal to core/fmt.
 *
 * The layout (FSDP2's fully_shard, then torch.save(model.state_dict())
 * on every rank, as veRL, SkyRL and accelerate save it; or FSDP1 under
 * StateDictType.SHARDED_STATE_DICT, its ShardedTensors saved alike):
 *
 *   DIR/PREFIX_world_size_N_rank_R.pt   R = 0 .. N-1, one prefix
 *                                       ("model", "optim", "extra_state")
 *
 * Each file is a torch.save zip of the same structure.  Where a value is
 * a DTensor it holds that rank's piece:
 *
 *   DTensor                  _rebuild_from_type_v2(_rebuild_wrapper_
 *                            subclass, DTensor, (global size, stride,
 *                            dtype, ...), state)
 *     _local_tensor          the piece: contiguous, a plain tensor
 *     _spec/placements/i     Shard(dim) | Replicate() per mesh dimension
 *     _spec/mesh/_coordinate_on_dim/i   this rank's place in the mesh
 *     _spec/mesh/_layout/axes/i/shape   mesh dimension i's size (product)
 *
 * or a ShardedTensor, pickled the same way, whose local shards name their
 * boxes themselves (ckpt_ranks_dt.c has both layouts).
 *
 * The set's tree is rank 0's pickle with each sharded tensor made the plain
 * tensor full_tensor() would give: its global shape, one storage whose
 * bytes are pieced from the ranks' pieces in place, exactly as a DCP
 * tensor is from its chunks (ckpt_dcp.h: the same chunk table and reads,
 * c->dcp).  Everything else is rank 0's; where another rank disagrees the
 * open keeps a finding (ptverify, the mount's status).  A write-back
 * (ckpt_ranks_wb.c) puts a changed chunk's bytes into every rank that
 * holds them: its piece, its replicas (Replicate() placements), and for
 * a plain tensor every rank's own copy.
 */
#ifndef PT_FMT_RANKS_CKPT_RANKS_H
#define PT_FMT_RANKS_CKPT_RANKS_H

#include "ckpt/ckpt_int.h"

#define RANKS_MAX	4096u	/* ranks of a set */
#define RANKS_FINDINGS	64u	/* disagreements kept */

/* A piece of a sharded tensor on one rank: its box in the global one. */
struct rk_piece {
	int64_t off[CKPT_MAX_DIMS], size[CKPT_MAX_DIMS];
	bool replica;		/* some mesh dimension replicates it */
	const struct ckpt_tensor *local;	/* _local_tensor (its rank's) */
};

/* A place that holds chunk @chunk's bytes: its piece on @rank (the one
 * the chunk table reads), or a replica of it on another rank. */
struct rk_copy {
	uint32_t chunk;		/* in c->dcp->chunks */
	uint32_t rank;
	const struct ckpt_storage *s;	/* the rank's storage (its record) */
	uint64_t data;		/* file offset of the chunk's byte 0 there */
};

struct ckpt_ranks {
	const char *dir;	/* the folder, as given (arena) */
	char prefix[64];	/* "model", "optim" */
	uint32_t n;		/* world size: ranks 0 .. n - 1 */
	struct ckpt **parts;	/* by rank, opened through the door */
	const char **names;	/* by rank: the file's name (arena) */
	uint32_t *member;	/* by rank: its file in c->src */
	/* every place a chunk's bytes lie, pieces and replicas (a plain
	   tensor's other ranks' copies are found when needed: rk_twin()) */
	struct rk_copy *copies;
	uint32_t ncopies, copies_cap;
	/* rank 0's sharded tensor nodes by pickle value (open addressing) */
	const struct ckpt_node **dt;
	struct ckpt_tensor **made;	/* the tensor each became */
	uint32_t dtcap;
	struct ckpt_storage **sorted;	/* rank 0's storages by key */
	uint32_t plain;		/* storages given their chunk so far */
	/* what a rank holds otherwise than rank 0, one line each (arena) */
	const char *findings[RANKS_FINDINGS];
	uint32_t nfindings, nmore;	/* kept, and past those */
};

/* ckpt_ranks.c: open the set in folder c->fd (@flags the open's). */
int ckpt_ranks_open(struct ckpt *c, unsigned flags, struct diag *d);
/* ckpt_ranks.c: is @name "PREFIX_world_size_N_rank_R.pt"?  Then *@plen
 * the prefix's length, *@n and *@r. */
bool ckpt_ranks_name(const char *name, size_t *plen, uint32_t *n,
		     uint32_t *r);
void ckpt_ranks_close(struct ckpt *c);

/*
 * ckpt_ranks_dt.c: piece @i (of rk_npieces()) of sharded tensor node @dt
 * (a DTensor or a ShardedTensor of rank @r's file @name), checked against
 * the global tensor @g (its dtype and shape): 0 and *@p, or -errno with
 * @d set (one line naming @name and @key).
 */
int rk_piece_of(const struct ckpt_node *dt, const struct ckpt_tensor *g,
		uint32_t r, uint32_t i, const char *name, const char *key,
		struct rk_piece *p, struct diag *d);
/* ckpt_ranks_dt.c: the pieces node @dt holds: a DTensor 1, a
 * ShardedTensor its local shards (0 or more) */
uint32_t rk_npieces(const struct ckpt_node *dt);
/* ckpt_ranks.c: the key path of node @n of a rank's tree into @buf. */
char *rk_path_of(const struct ckpt_node *n, char *buf, size_t size);

/* ckpt_ranks_dt.c: is @n a sharded tensor's node (a wrapper of class
 * DTensor or ShardedTensor)? */
bool rk_is_sharded(const struct ckpt_node *n);

/*
 * ckpt_ranks_agree.c: compare rank @r's tree with rank 0's, everything
 * but the DTensors' pieces: a value, a key or a plain tensor's dtype and
 * shape that differs is a finding.
 */
int rk_agree(struct ckpt *c, uint32_t r, struct diag *d);
/* ckpt_ranks_agree.c: note a finding (printf-like); 0 or -ENOMEM. */
int rk_note(struct ckpt *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ckpt_ranks_wb.c: chunk @k's bytes lie in rank @r's storage @s from
 * element @el on (its piece, or a replica): 0 or -errno with @d set. */
int rk_copy_add(struct ckpt *c, uint32_t k, uint32_t r,
		struct ckpt_storage *s, uint64_t el, struct diag *d);
/* ckpt_ranks_wb.c: is some rank's tensor record compressed?  (Its bytes
 * cannot be patched where they lie: the set mounts read-only.) */
bool rk_packed(const struct ckpt *c);

/*
 * ckpt_ranks_wb.c: rank @r's copy of plain storage @s (a tensor of the
 * set that is no DTensor: read from rank 0, but every rank holds its
 * own), the storage of the tensor at the same key in rank @r's file,
 * alike in dtype and size: 0 and *@out, or -EPERM with @d set.
 */
int rk_twin(const struct ckpt *c, const struct ckpt_storage *s, uint32_t r,
	    struct rk_copy *out, struct diag *d);

#endif
