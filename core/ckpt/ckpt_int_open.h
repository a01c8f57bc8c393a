/*
 * ckpt_int_open.h - the steps of the torch family's opens (zip, legacy,
 * TorchScript, tar-era, embedded archives), what every open starts and
 * ends with, and the pickles of a model of several files (struct
 * ckpt_vdoc).  The other families declare theirs in their folders
 * (core/fmt/).  Internal to the model: part of ckpt_int.h.
 */
#ifndef PT_CKPT_CKPT_INT_OPEN_H
#define PT_CKPT_CKPT_INT_OPEN_H

#include "ckpt_int_build.h"
#include "ckpt_format.h"

/* ckpt_legacy.c: read the legacy (< 1.6) stream into c. */
int ckpt_legacy_open(struct ckpt *c, struct diag *d);
/* ckpt_open.c: c->fd as a torch.save zip (@fold: PKL_FOLD); does the
 * first bytes look like an HTML page? */
int ckpt_zip_open(struct ckpt *c, bool fold, struct diag *d);
/* ckpt_open.c: a new, empty checkpoint of @path (borrowed), and what
 * every successful open ends with (the open's scratch freed). */
struct ckpt *ckpt_alloc(const char *path);
void ckpt_open_done(struct ckpt *c);
/* ckpt_format.c: ckpt_tensor_read() of a pieced tensor. */
long long ckpt_pieced_read(struct ckpt *c, const struct ckpt_tensor *t,
			   void *buf, uint64_t len, uint64_t pos,
			   struct diag *d);
bool ckpt_head_is_html(const unsigned char *h, size_t n);

/* ckpt_script.c: build a TorchScript archive's model; c->zip is open and
   its version and byteorder records read. */
int ckpt_script_open(struct ckpt *c, struct diag *d);

/* ckpt_script.c: parse pickle record @e into *@doc (offsets are file
   offsets when it is stored).  0 or -errno with @d set. */
int ckpt_script_pickle(struct ckpt *c, struct ptz_entry *e,
		       struct pkl_doc **doc, struct diag *d);

/* ckpt_script.c: @len bytes of @s as a file name (docs/names.md escapes),
   in the arena; NULL on ENOMEM. */
char *ckpt_synth_name(struct ckpt *c, const char *s, size_t len);

/* ckpt_script.c: a str key @s[0..@len) that no pickle made (arena), and
   the escaped file name of any key (arena); NULL on ENOMEM. */
const struct pkl_value *ckpt_str_key(struct ckpt *c, const char *s,
				     size_t len);
char *ckpt_key_name(struct ckpt *c, const struct pkl_value *key);

/* ckpt_open.c: a torch.save archive embedded in @fd at [@base, @base +
 * @len), opened as a checkpoint; its offsets count from @base (the model
 * is for checking, not for reading data through).  Caller owns *@out. */
int ckpt_open_embedded(int fd, const char *path, uint64_t base, uint64_t len,
		       struct ckpt **out, struct diag *d);

/* ckpt_globals.c: add what torch.load would run to c->globals (once
 * each: kind, pickle, module, name and why alike are one): 0 or -ENOMEM.
 * The strings are copied. */
int ckpt_unsafe_add(struct ckpt *c, int kind, const char *pickle,
		    uint64_t off, const char *module, const char *name,
		    const char *why);

/*
 * ckpt_scan.c: what the pickle @doc (called @pickle in messages) makes
 * torch.load run, into c->globals: every global @allowed refuses (NULL:
 * ckpt_global_allowed()), every global whose name is computed, every
 * known callable given what it is not meant for, every persistent id
 * that is not torch's, and what a PKL_SCAN parse noted.  0 or -ENOMEM.
 */
typedef bool (*ckpt_allow_fn)(const char *module, const char *name);
/* TorchScript's pickles are read by torch.jit.load's C++ unpickler,
 * which knows its own few globals and imports no Python: any is. */
bool ckpt_global_any(const char *module, const char *name);
int ckpt_scan_doc(struct ckpt *c, const struct pkl_doc *doc,
		  const char *pickle, ckpt_allow_fn allowed);

/*
 * After a parse of @pickle (@buf[0..@len) at @base) failed with @d set:
 * parse it again for the scan (PKL_SCAN) and report what came before
 * the failure (ckpt_scan_doc()).  Returns @d's error, unchanged.
 */
int ckpt_scan_failed(struct ckpt *c, const unsigned char *buf, size_t len,
		     uint64_t base, const char *pickle, ckpt_allow_fn allowed,
		     struct diag *d);

/* The pickle of the @len bytes at @base of @src, parsed for the scan
 * alone (as ckpt_scan_failed() does): a stored record that failed, or
 * one the model does not read.  Returns @d's error (0 when none). */
int ckpt_scan_src(struct ckpt *c, const struct pkl_src *src, uint64_t base,
		  uint64_t len, const char *pickle, ckpt_allow_fn allowed,
		  struct diag *d);

/* The checkpoint whose file and locks serve @s: @c, or its shard's. */
static inline struct ckpt *ckpt_storage_owner(struct ckpt *c,
					      const struct ckpt_storage *s)
{
	const struct ckpt_fmt *m = ckpt_fmt(c);

	return m->owner ? m->owner(c, s) : c;
}

/*
 * ckpt_storage.c: a model made of several pickles (a sharded folder's
 * shards, a DCP directory's value items), each numbering its values from
 * 0 and its storage keys as it likes.  Each is recorded with the first
 * node its values built (nodes are numbered as they are made, so its
 * nodes with values are [node0, next one's node0)) and the prefix its
 * storage keys got in the model's key table ("SHARD:", "v7/").  A new
 * data.pkl keeps their memo ids and keys apart with it (ckpt_repickle.c).
 */
struct ckpt_vdoc {
	uint32_t node0;
	const char *key_prefix;	/* arena */
	uint8_t format;		/* its file's: CKPT_LEGACY's persistent
				   ids may name views, so its tensors
				   are written anew from the model */
};

/* Record a pickle of a file of @format whose values build nodes from
   @node0 on (in order). */
int ckpt_vdoc_add(struct ckpt *c, uint32_t node0, const char *prefix,
		  int format, struct diag *d);
/* The pickle @n's value came from, NULL for c->doc's (or none). */
const struct ckpt_vdoc *ckpt_node_vdoc(const struct ckpt *c,
				       const struct ckpt_node *n);
/* File @s under its key in @b's table (a shard's storage, renamed);
   0 or -ENOMEM. */
int ckpt_storage_file(struct ckpt_build *b, struct ckpt_storage *s);

/* ckpt_modeljson.c: torch 1.0's model.json record @e as c->root (c->b
   made; attributes.pkl, if any, becomes c->doc2). */
int ckpt_modeljson(struct ckpt *c, struct ptz_entry *e, struct diag *d);

/* ckpt_tar.c: read a tar-era (torch < 0.4) checkpoint into c. */
int ckpt_tar_open(struct ckpt *c, struct diag *d);

/* ckpt_ustar.c: the members of a tar-era checkpoint, by name. */
enum {
	CKPT_TAR_SYS, CKPT_TAR_PICKLE, CKPT_TAR_STORAGES, CKPT_TAR_TENSORS,
	CKPT_TAR_N,
};
extern const char *const ckpt_tar_names[CKPT_TAR_N];

struct ckpt_tar_member {
	uint64_t off, size;	/* its data, in the file */
	bool found;
};

/*
 * ckpt_ustar.c: walk the tar headers of c's file and fill @m (indexed as
 * above; the last member of a name counts, as with tarfile).  Every member
 * but sys_info must be there.  0 or -errno with @d set.
 */
int ckpt_tar_members(struct ckpt *c, struct ckpt_tar_member *m,
		     struct diag *d);

/*
 * ckpt_zipdir.c: when the zip's members include checkpoints (a zip of
 * them, not one), -ENOTSUP with @d naming the file and those members;
 * else 0 (the caller reports what is wrong).
 */
int ckpt_zip_of_checkpoints(struct ckpt *c, struct diag *d);

#endif
