/*
 * ckpt_int_write.h - what the writers share: a new data.pkl (ckpt_repickle.c,
 * ckpt_retype.c), reading tensors for a zip writer, names of flattened keys,
 * and writing against the original (ckpt_patch.c, ckpt_inplace.c).
 * Internal to core/ckpt: part of ckpt_int.h.
 */
#ifndef PT_CKPT_CKPT_INT_WRITE_H
#define PT_CKPT_CKPT_INT_WRITE_H

#include "ckpt_int_build.h"

/* ckpt_repickle.c: a new data.pkl, and the storages it names in order. */
struct ckpt_repickle {
	uint8_t clone_pct;	/* in: see ckpt_write_opts */
	const uint8_t *part;	/* in: see ckpt_write_opts */
	struct ckpt_node *const *roots;	/* in: see ckpt_write_opts */
	const char *const *root_keys;
	uint32_t nroots;
	unsigned char *pkl;	/* the pickle (malloc'd) */
	size_t len;
	struct ckpt_storage **order;	/* new key k is order[k] */
	uint32_t nout;
	/* by storage index, NULL unless clone_pct: storage k is cut to
	   bytes [cut[k], cut[k] + keep[k]) when trim[k] */
	bool *trim;
	uint64_t *cut, *keep;
	uint32_t ntrimmed;
};

/*
 * Emit data.pkl from the tree into @r (set r->clone_pct first; release
 * @r either way).  Legacy 6-tuple persistent ids become 5-tuples.
 */
int ckpt_repickle(struct ckpt *c, struct ckpt_repickle *r, struct diag *d);
void ckpt_repickle_release(struct ckpt_repickle *r);

/*
 * ckpt_repickle.c: @t as torch.save writes a tensor,
 * _rebuild_tensor_v2(('storage', XStorage, '@key', 'cpu', numel), offset,
 * size, stride, requires_grad, OrderedDict()) (v3 with the dtype where
 * torch has no storage class; wrapped in _rebuild_parameter for a
 * Parameter), the key's str memoized under @key_memo (>= 1 << 32).
 */
struct pkl_emit;
int ckpt_emit_tensor(struct pkl_emit *e, const struct ckpt_tensor *t,
		     uint32_t key, uint64_t key_memo);

/*
 * ckpt_retype.c: while data.pkl is written anew, the rebuild call @v of a
 * tensor whose storage was re-typed (ckpt_storage.retyped) when the call
 * itself must change (_rebuild_tensor_v2 <-> _v3, or v3's dtype): writes
 * it and returns 1; 0 when @v is no such call; -errno with @d set.
 */
int ckpt_retype_call(struct ckpt *c, struct pkl_emit *e,
		     const struct pkl_value *v, struct diag *d);

/*
 * ckpt_write.c: a ptz_source's read() of tensor @t's row-major bytes
 * (ckpt_tensor_read(): views, DCP chunks and shards gathered), for
 * struct ckpt_tread as read_arg; a tensor that ends early is corrupt.
 */
struct ckpt_tread {
	struct ckpt *c;
	const struct ckpt_tensor *t;
};
int ckpt_tread(void *arg, void *buf, size_t n, uint64_t off, struct diag *d);

/*
 * ckpt_stflat.c: append @k's key to @path as DCP and safetensors name
 * it: a str key as it is, an int key in decimal, a sequence item by
 * @index; any other key is refused ("cannot be part of a @what name").
 */
struct sbuf;
int ckpt_key_text(const struct ckpt_node *k, uint32_t index,
		  struct sbuf *path, const char *what, struct diag *d);

/* ---- ckpt_patch.c: writing against the original ---- */

/*
 * ckpt_write(); with @clone (@fd is a new empty file of ckpt_save()'s),
 * the checkpoint is cloned into it first when every record keeps its
 * place, and patched (ckpt_write.c).
 */
int ckpt_write_into(struct ckpt *c, int fd, const struct ckpt_write_opts *o,
		    bool clone, struct diag *d);

struct ptz_source;
struct ptz_writer;
/*
 * ckpt_inplace.c's pass: the records as they are (data.pkl kept) written
 * into the checkpoint itself, @fd (open for writing; with @dry nothing is
 * written), patched as ckpt_write_into() patches a clone; a record that
 * would move, or an archive of another size, fails with -EAGAIN and
 * zw->moved before anything is written.  Record i's CRC-32 is @crc[i]
 * where @has[i] (both NULL: computed).  *@zw is the writer afterwards,
 * whatever the result (its entries hold the CRCs): the caller releases it.
 */
int ckpt_write_in_place(struct ckpt *c, int fd, bool dry, const uint32_t *crc,
			const uint8_t *has, struct ptz_writer *zw,
			struct diag *d);
/*
 * Clone all of the file @from into the empty file @out (FICLONE): 0, 1
 * when the file system cannot (no reflinks, another file system, an fd
 * that does not allow it), or another -errno.
 */
int ckpt_clone_file(int out, int from);
/*
 * Say in @src that its bytes are record @e's in the checkpoint (the
 * record itself, @s NULL) or those of storage @s's record but where the
 * overlay changed them (its dirty map), when that is so: a stored record
 * of the same size, its place known.
 */
void ckpt_patch_source(struct ckpt *c, struct ptz_entry *e,
		       const struct ckpt_storage *s, struct ptz_source *src);

#endif
