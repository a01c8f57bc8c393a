/*
 * ckpt_model.h - the checkpoint model itself: what a torch.save file holds,
 * built from its zip index (or legacy stream) and its pickle without
 * running anything.  struct ckpt, the formats, open and close, reading
 * storages and tensors, file names for keys.  Every tensor is checked
 * against its storage and every storage against its record, so a consumer
 * may read any tensor byte without further checks.  Part of ckpt.h.
 */
#ifndef PT_CKPT_CKPT_MODEL_H
#define PT_CKPT_CKPT_MODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/arena.h"
#include "zip/ptz.h"
#include "ckpt_node.h"

struct diag;
struct src;
struct src_member;
struct ckpt_fmt;
struct pkl_doc;
struct pkl_value;

/* One metadata entry of a flat format (may hold NULs): a safetensors
 * file's __metadata__ (str -> str), a GGUF file's key/values (typed). */
struct ckpt_meta {
	const char *key, *val;	/* NUL-terminated too */
	size_t klen, vlen;
	const char *type;	/* GGUF: "u32", "array[string]" ... and @val
				   its text (gguf_kv.c); NULL: a string */
	bool edited;		/* set or added through the mount
				   (ckpt_meta_set()): the writer encodes
				   @val, it copies no bytes */
	bool removed;		/* removed through the mount: kept in its
				   place (the mount numbers entries by it),
				   shown and written by nobody */
	bool added;		/* not in the file: added through the mount */
};

/*
 * What torch.load would import or run beyond the weights-only allowlist,
 * found by reading every pickle it would unpickle (ckpt_scan.c): what
 * ptls --check and ptverify report.
 */
enum ckpt_unsafe_kind {
	CKPT_U_GLOBAL,		/* module.name outside the allowlist */
	CKPT_U_COMPUTED,	/* a global whose name is computed at load
				   time (module, name: "?" where not
				   literal) */
	CKPT_U_CALL,		/* a known callable used against its
				   purpose, or a call of a computed value */
	CKPT_U_PERSID,		/* a persistent id that is not torch's */
	CKPT_U_OPCODE,		/* an opcode whose effect the model does
				   not show (BUILD on a global) */
	CKPT_U_ARCHIVE,		/* the file is one torch reads otherwise
				   (a diag_unsafe() refusal: why) */
};

struct ckpt_global {
	const char *module, *name;	/* c->arena; "" for CALL, PERSID,
					   OPCODE and ARCHIVE */
	uint64_t off;		/* of the opcode, as pickle offsets go: in
				   the file for a stored record */
	const char *pickle;	/* which pickle ("data.pkl", "pickle 3 of
				   the legacy stream (sys_info)") */
	const char *why;	/* what is wrong; NULL for GLOBAL */
	uint8_t kind;		/* enum ckpt_unsafe_kind */
};

enum ckpt_format {
	CKPT_ZIP,		/* torch.save since 1.6 */
	CKPT_LEGACY,		/* pickle stream with raw storages (< 1.6) */
	CKPT_TORCHSCRIPT,	/* torch.jit.save: a zip, read-only */
	CKPT_TAR,		/* tar-era torch.save (< 0.4), read-only */
	CKPT_SAFETENSORS,	/* a .safetensors file */
	CKPT_HF_SHARDED,	/* a Hugging Face sharded folder (an index over
				   shard files), read-only for now */
	CKPT_DCP,		/* a torch.distributed.checkpoint directory,
				   read-only for now (ckpt_dcp.c) */
	CKPT_RANKS,		/* per-rank torch.save files of one job, as
				   one state dict (core/fmt/ranks) */
	CKPT_GGUF,		/* a GGUF file (core/fmt/gguf) */
};

/* What a format is called and can do: its descriptor (ckpt_format.h:
 * ckpt_fmt(c)->name, ckpt_can()). */
struct ckpt;

/* Do the first @n bytes of a file look like a safetensors file's? */
bool ckpt_safetensors_head(const unsigned char *h, size_t n);

/* Why @c mounts read-only whatever the options (one phrase, "... mount
 * read-only" follows), or NULL. */
const char *ckpt_readonly_why(const struct ckpt *c);

/*
 * A checkpoint of many files: its directory (returned: an fd the model
 * owns, or -1 for any other checkpoint), *@dir its path for messages,
 * *@commit the name in it of the file whose rename commits a write-back
 * (the index, .metadata).
 */
int ckpt_many_dir(const struct ckpt *c, const char **dir,
		  const char **commit);
/* Data file @i of a checkpoint of many files (a shard, a .distcp file):
 * its *@name in the directory and *@fd (-1: absent); false past the last. */
bool ckpt_many_file(const struct ckpt *c, uint32_t i, const char **name,
		    int *fd);


/*
 * Storages whose bytes are made when they are read, not kept anywhere
 * (ptrepack --dequant, core/cvt/cvt_dequant.c: a float8 weight comes out
 * widened as the writer reads it, never staged whole).  @tensor: the
 * tensor over all of storage @s when @s is one (identity: a copy of the
 * struct is not), else NULL; @read: bytes [@pos, @pos + @len) of its
 * row-major contents into @buf, as ckpt_tensor_read().  The writers ask
 * through ckpt_storage_pieced(), so each streams them.
 */
struct ckpt_made {
	const struct ckpt_tensor *(*tensor)(void *arg,
					    const struct ckpt_storage *s);
	long long (*read)(void *arg, const struct ckpt_tensor *t, void *buf,
			  uint64_t len, uint64_t pos, struct diag *d);
	void *arg;
};

struct ckpt {
	const char *path;	/* borrowed (a URL: as shown, in the arena) */
	int fd;			/* owned */
	bool remote;		/* opened from a URL: read-only */
	uint64_t file_size;
	uint8_t format;		/* enum ckpt_format */
	struct ptz_reader zip;	/* CKPT_ZIP and CKPT_TORCHSCRIPT */
	char *byteorder;	/* "little"/"big" record, or NULL */
	int version;		/* the version record (zip) */
	struct ptz_entry *pkl_rec;	/* data.pkl */
	uint64_t pkl_off;	/* file offset of the main pickle */
	unsigned char *pkl;	/* the main pickle's bytes while opening
				   (NULL after: re-read them by offset) */
	size_t pkl_len;
	struct pkl_doc *doc;
	const char *pkl_label;	/* doc's name in findings; NULL: data.pkl */
	struct pkl_doc *doc2;	/* TorchScript: constants.pkl, or NULL */
	struct ckpt_storage **storages;
	uint32_t nstorages;
	struct ckpt_tensor **tensors;	/* all, including inner tensors of
					   Parameters and quantizer params */
	uint32_t ntensors;
	uint32_t nshown;	/* distinct tensors the tree shows */
	uint32_t nrows;		/* of them, rows (ckpt_is_row()) */
	bool rows;		/* the build may make rows */
	bool lists;		/* CKPT_OPEN_LISTS */
	struct ckpt_node *root;
	struct ckpt_node **nodes;
	uint32_t nnodes;
	struct ckpt_global *globals;	/* outside the weights-only allowlist */
	uint32_t nglobals;
	/* safetensors: the header (bytes [8, 8 + hdr_len)) and its
	   __metadata__ str -> str map in header order (arena), or none */
	uint64_t hdr_len;
	uint64_t data_end;	/* file offset where the last tensor ends */
	struct ckpt_meta *meta;
	uint32_t nmeta;
	bool meta_given;	/* the header has a __metadata__, maybe {} */
	/* CKPT_HF_SHARDED: the index, the shards, the folder's other files
	   and what disagrees (ckpt_shards.c); else NULL */
	struct ckpt_hf *hf;
	/* its format's descriptor (ckpt_format.h), set with format */
	const struct ckpt_fmt *fmt;
	/* how a folder's open opens its parts (a shard): what ckpt_open()
	   gave it, the table's door (core/fmt) */
	int (*open_part)(const struct src_member *m, unsigned flags,
			 struct ckpt **out, struct diag *d);
	/* a checkpoint of many files: its root and every member file, each
	   opened beneath it (source/source.h); else NULL */
	struct src *src;
	/* CKPT_DCP: the data files and each tensor's chunks (ckpt_dcp.h) */
	struct ckpt_dcp *dcp;
	/* CKPT_RANKS: the rank files (ckpt_ranks.h); its pieces are read
	   with c->dcp's chunk table */
	struct ckpt_ranks *ranks;
	/* CKPT_GGUF: its key/values and tensor infos (core/fmt/gguf/gguf.h,
	   in the arena) */
	struct gguf *gguf;
	/* storages made when read (see above), or NULL; borrowed */
	const struct ckpt_made *made;
	/* a model of several pickles (a sharded folder's shards, a DCP
	   directory's values): where each one's nodes begin (ckpt_int.h) */
	struct ckpt_vdoc *vdocs;
	uint32_t nvdocs, vdocs_cap;
	/* internal */
	pthread_mutex_t locate_lock;	/* ckpt_storage_locate() */
	pthread_mutex_t inflate_lock;	/* ckpt_storage_data() */
	struct arena arena;	/* nodes, tensors, storages, names */
	struct ckpt_build *b;
};

/*
 * Open the checkpoint at @path and build its model: a torch.save zip or
 * legacy stream, a tar-era file or a TorchScript archive (the last two
 * read-only: ckpt_can(c, CKPT_CAP_WRITE)).  Names what it is given when
 * it is not a checkpoint (Git LFS pointer, HTML page, truncated zip, empty
 * file).  On success *@out is set; caller owns it (ckpt_close()).
 * Returns 0 or -errno with @d set.
 */
int ckpt_open(const char *path, struct ckpt **out, struct diag *d);

/* ckpt_open_with() flags. */
#define CKPT_OPEN_LENIENT	1u	/* a DCP directory whose chunks or data
					   files are wrong still opens; what is
					   wrong is kept for ckpt_dcp_verify() */
#define CKPT_OPEN_WHOLE		2u	/* keep data.pkl's graph whole: no
					   folded rebuild calls (ptdump) */
#define CKPT_OPEN_ROWS		4u	/* plain tensors of a torch.save zip
					   may be rows (ckpt_is_row()) */
#define CKPT_OPEN_LISTS		8u	/* a long list of python scalars is
					   one value (ckpt_scalar_list()) */
#define CKPT_OPEN_KEEP		16u	/* on failure *out is still set: the
					   checkpoint as far as it opened,
					   for c->path and what torch.load
					   would run (c->globals, with the
					   refusal itself when it is unsafe:
					   diag_unsafe()) and nothing else;
					   the caller closes it */

/* ckpt_open() with @flags (CKPT_OPEN_*). */
int ckpt_open_with(const char *path, unsigned flags, struct ckpt **out,
		   struct diag *d);
/* ckpt_open_with() of a member file a source opened (a shard): its own
 * descriptor of that open file, m->path in messages. */
int ckpt_open_member(const struct src_member *m, unsigned flags,
		     struct ckpt **out, struct diag *d);

/*
 * Make c->doc whole: the tensor rebuild calls folded at the open (PKL_FOLD)
 * get their arguments back from a second parse of data.pkl, which the
 * document keeps.  For whatever walks every value or writes data.pkl anew
 * (ckpt_repickle() calls it); a sharded folder's shards alike.  Returns
 * 0 or -errno with @d set.
 */
int ckpt_whole(struct ckpt *c, struct diag *d);

/* Close and free everything.  NULL is fine. */
void ckpt_close(struct ckpt *c);

/*
 * Make sure @s->data_off is known (reads the record's local header once).
 * Safe to call from many threads.  Returns 0 or -errno with @d set.
 */
int ckpt_storage_locate(struct ckpt *c, struct ckpt_storage *s,
			struct diag *d);

/* Make sure zip record @e's data offset is known; thread-safe. */
int ckpt_record_locate(struct ckpt *c, struct ptz_entry *e, struct diag *d);

/*
 * Where storage @s's bytes can be read with pread now: *@fd (borrowed)
 * and the offset *@off of byte 0 there.  That is its overlay file when it
 * has one, else its record in the checkpoint (located on first use).  A
 * deflated record is inflated on first use into an unlinked temporary
 * file in $TMPDIR (streaming: memory stays small), kept until the storage
 * is staged or the checkpoint closed.  Thread-safe; the first caller for
 * a deflated storage does the inflating while later ones wait.  Returns
 * 0 or -errno with @d set.
 */
int ckpt_storage_data(struct ckpt *c, struct ckpt_storage *s, int *fd,
		      uint64_t *off, struct diag *d);

/*
 * The CRC-32 of the bytes ckpt_storage_data() gives for an unstaged
 * storage, when it is known without reading them (a record's, or an
 * inflated copy's): true and *@crc set, else false.
 */
bool ckpt_storage_crc(const struct ckpt_storage *s, uint32_t *crc);

/*
 * Drop the inflated copy of @s, if any (the overlay took over its bytes).
 * Not thread-safe: no reader may be using @s.
 */
void ckpt_storage_uninflate(struct ckpt_storage *s);

/* Bytes a tensor's file holds: numel * itemsize, 0 for meta tensors. */
uint64_t ckpt_tensor_size(const struct ckpt_tensor *t);

/*
 * Copy bytes [@pos, @pos + @len) of @t's row-major contents (what
 * t.contiguous() holds) into @buf, gathering strided views; @len is
 * clipped at the end.  Only pread is used: any number of threads may read
 * at once.  Returns the byte count or -errno with @d set.
 */
long long ckpt_tensor_read(struct ckpt *c, const struct ckpt_tensor *t,
			   void *buf, uint64_t len, uint64_t pos,
			   struct diag *d);

/*
 * The mirror of ckpt_tensor_read(): write @len bytes at @pos of @t's
 * row-major contents into its storage, scattering through the view.  The
 * storage must be in the overlay (fd other than the checkpoint's).  Past
 * the end is -EFBIG.  Returns the byte count or -errno with @d set.
 */
long long ckpt_tensor_write(struct ckpt *c, const struct ckpt_tensor *t,
			    const void *buf, uint64_t len, uint64_t pos,
			    struct diag *d);

/* ---- names (ckpt_names.c) ---- */

/*
 * Escape one dict key / index into a file name (caller frees).  Rules
 * (reversible; see docs/names.md): str keys as themselves with '%', '/'
 * and NUL as %25 %2F %00 and a leading '.' as %2E; the empty string as
 * "%"; ints in decimal; True/False/None as such; floats as repr; other
 * keys as "%?" + a short description.  Returns NULL on ENOMEM.
 */
char *ckpt_name_escape(const struct pkl_value *key);
/* Is str key @key its own file name, its bytes needing no escape? */
bool ckpt_name_is_key(const struct pkl_value *key);

/* Undo ckpt_name_escape() for a str key into @out (size >= strlen+1).
 * Returns the key's length, or -EINVAL if @name is not a valid escape. */
long ckpt_name_unescape(const char *name, char *out);

/* Longest file name the kernel takes (NAME_MAX). */
#define CKPT_NAME_MAX	255

/*
 * The name a file system shows for a child named @name in slot @pos of
 * its container: @name itself when it has at most @max bytes
 * (CKPT_NAME_MAX, or less to leave room for a suffix), else its first
 * bytes (cut at a character, never inside a %XX escape) followed by
 * "%~<pos>", made in @buf (@max + 1 bytes).  Unique in its container and
 * never equal to an escaped key (docs/names.md).  @max >= 32.
 */
const char *ckpt_name_short(const char *name, uint32_t pos, size_t max,
			    char *buf);

/* Path of @n from the root, names joined by '/' (caller frees). */
char *ckpt_node_path(const struct ckpt_node *n);

/* Child of @dir called @name, or NULL. */
struct ckpt_node *ckpt_node_child(const struct ckpt_node *dir,
				  const char *name);

/* The node @path names from the root ("optimizer/state/0", the paths
 * ckpt_node_path() gives; "." parts skipped), links followed, or NULL
 * (none, or out of memory). */
struct ckpt_node *ckpt_node_by_path(const struct ckpt *c, const char *path);

/* Render a python scalar the way Python's repr() does (caller frees). */
char *ckpt_value_text(const struct pkl_value *v, size_t *len);

/* A short Python-like repr() of any value: "torch.device('cpu')",
 * "(1, 2)"; at most about @max bytes (caller frees). */
char *ckpt_repr(const struct pkl_value *v, size_t max, size_t *len);

/* Python's repr() of a float into @buf (>= 32 bytes). */
const char *ckpt_float_repr(double f, char *buf, size_t size);

/* ---- globals (ckpt_globals.c) ---- */

/* Add @from's findings (from->globals) to @c's, each pickle named
 * "@file: PICKLE" (a shard's, found as the folder opened it).  0 or
 * -ENOMEM. */
int ckpt_unsafe_take(struct ckpt *c, const struct ckpt *from,
		     const char *file);

/* True if torch's weights-only loader (2.x default) allows module.name. */
bool ckpt_global_allowed(const char *module, const char *name);

#endif
