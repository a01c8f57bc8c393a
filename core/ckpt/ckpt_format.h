/*
 * ckpt_format.h - the table of formats: one descriptor per format, the
 * only place that knows which format a checkpoint is.
 *
 * ckpt_open() (core/fmt/formats.c, the table) asks each descriptor in
 * turn whether it takes the file (its first bytes, its name, or a
 * folder), and the one that does opens it.
 * From then on the model, the overlay, fs/ and tools/ ask the descriptor
 * (ckpt_fmt(c)) through the functions below and never test the format:
 *
 *   family        formats (descriptor)          its folder, descriptors
 *   torch         zip, legacy, tar, TorchScript core/ckpt (the model is
 *                                               built from its pickle and
 *                                               zip), ckpt_fmt_torch.c
 *   safetensors   safetensors                   core/fmt/st/ckpt_fmt_st.c
 *   HF folder     hf-sharded                    core/fmt/hf/ckpt_fmt_hf.c
 *   DCP           dcp                           core/fmt/dcp/ckpt_fmt_dcp.c
 *   rank set      ranks                         core/fmt/ranks/ckpt_fmt_ranks.c
 *
 * The model (core/ckpt) calls no function of a format in core/fmt/: it
 * reaches one only through c->fmt, so no call cycle spans two folders.
 * The safetensors writers (ckpt_stflat.c, ckpt_stwrite.c) are the model's
 * outputs, like the zip writer, and stay with it.
 *
 * A hook left NULL means "nothing of that kind": no parts but the
 * checkpoint itself, no findings, no records, every edit allowed.
 * docs/design.md, "Adding a format", lists what a new one touches.
 */
#ifndef PT_CKPT_CKPT_FORMAT_H
#define PT_CKPT_CKPT_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ckpt;
struct ckpt_dtype;
struct ckpt_meta;
struct ckpt_node;
struct ckpt_storage;
struct ckpt_tensor;
struct ckpt_write_opts;
struct diag;
struct ptz_entry;
struct stat;

/* The open hook's flag: c->fd is a folder. */
#define CKPT_OPEN_IS_DIR	(1u << 31)

/* What a format can be given (caps). */
#define CKPT_CAP_WRITE	1u	/* written back (else mounted read-only) */
#define CKPT_CAP_MANY	2u	/* many files, written back into itself,
				   file by file, its commit file last */
#define CKPT_CAP_INPLACE 4u	/* -o inplace patches it where it lies */
#define CKPT_CAP_TORCH_ZIP 8u	/* a torch.save zip, what ptrepack writes:
				   written as one, it is not converted */
#define CKPT_CAP_OFFSETS 16u	/* a storage's data_off is a byte of a
				   file a reader can check, record or not
				   (legacy blocks, safetensors tensors,
				   shards); not a DCP chunk's, a tar's */
#define CKPT_CAP_VALUES 32u	/* holds python values beside tensors: a
				   new file of text among values becomes
				   one (ckpt_value_new()) */
#define CKPT_CAP_FLAT	64u	/* a header of key/value metadata (c->meta)
				   over a flat map of names to tensors,
				   storage k the root's child k, in file
				   order (safetensors, GGUF) */

/*
 * The edits a format's write-back can hold: each is checked when the edit
 * is made (0, or -EPERM / -EINVAL with @d set: one line), so nothing is
 * refused at write-back or lost in it.  NULL: anything goes.
 */
struct ckpt_rules {
	/* an attribute, a value or a view of node @what (its label) */
	int (*shape)(const struct ckpt *c, const char *what, struct diag *d);
	/* a key renamed, removed or added in directory @dir */
	int (*dir)(const struct ckpt *c, const struct ckpt_node *dir,
		   struct diag *d);
	/* a new key @name */
	int (*add)(const struct ckpt *c, const char *name, struct diag *d);
	/* the bytes of storage @s */
	int (*data)(const struct ckpt *c, const struct ckpt_storage *s,
		    struct diag *d);
	/* a new directory @name */
	int (*mkdir)(const struct ckpt *c, const char *name, struct diag *d);
	/* a key's bytes (@len of them: may hold anything) */
	int (*key)(const struct ckpt *c, const char *key, size_t len,
		   struct diag *d);
	/* a tensor retyped to @dt */
	int (*dtype)(const struct ckpt *c, const struct ckpt_dtype *dt,
		     struct diag *d);
	/* tensor @t given to key @name (new, copied or renamed) */
	int (*tensor)(const struct ckpt *c, const struct ckpt_tensor *t,
		      const char *name, struct diag *d);
	/* extended attribute @name set or removed */
	int (*xattr)(const struct ckpt *c, const char *name, struct diag *d);
	/* metadata entry @key set to @val (@old: its entry, NULL for a new
	   key, which gets type *@type): the text must be one the writer can
	   encode.  Without it metadata is not edited (EPERM) */
	int (*meta)(const struct ckpt *c, const struct ckpt_meta *old,
		    const char *key, const char *val, size_t len,
		    const char **type, struct diag *d);
	/* the .npy view of tensor @what written: its bytes into the tensor
	   (@reshape false), or a .npy of another shape that makes a new
	   tensor under that name (true).  Without it: the shape rule for
	   the first, nothing for the second */
	int (*npy)(const struct ckpt *c, const char *what, bool reshape,
		   struct diag *d);
};

/* One of the checkpoint's files with pickles: a shard of a folder, or the
 * checkpoint itself. */
struct ckpt_part {
	const char *name;	/* as the index names it, or NULL: itself */
	struct ckpt *c;		/* NULL: absent */
	uint32_t nkeys;		/* keys of it the tree shows */
};

/* A folder's index over its parts (ckpt_folder()).  Its other files
 * are the descriptor's open_folder_files (ckpt_folder_files()), which a
 * DCP directory has too, without an index over parts. */
struct ckpt_folder {
	const char *index;	/* the index's file name in the folder */
	uint32_t nentries;	/* its entries (weight_map) */
	uint32_t nfiles;	/* other files in the folder, as listed */
};

/* A record shown under .ptfs/records/ (ckpt_records()). */
typedef int (*ckpt_record_fn)(void *arg, const char *name, uint64_t off,
			      uint64_t len, struct ptz_entry *e);
/* A tensor whose bytes hold its values coded in blocks (a GGUF Q8_0
 * tensor, ckpt_coded()): what the values are. */
struct ckpt_coded {
	const char *name;	/* the coding ("Q8_0") */
	int ndim;
	int64_t shape[8];	/* the values' shape, torch order */
	uint64_t numel;		/* values */
	uint32_t block, bytes;	/* values and bytes per block */
	/* decode @n blocks at @src into @n * block float32 values */
	void (*decode)(const unsigned char *src, float *dst, uint64_t n);
};
/* Read @len bytes at @pos of a coded tensor's bytes into @buf: the bytes
 * read, or -errno with the reader's diag set. */
typedef long long (*ckpt_bytes_fn)(void *arg, void *buf, uint64_t len,
				   uint64_t pos);

/* An extended attribute of a tensor (ckpt_tensor_attrs()). */
typedef void (*ckpt_attr_fn)(void *arg, const char *name, const char *value);
/* A member file of a checkpoint's source (its index in c->src). */
typedef int (*ckpt_member_fn)(const struct ckpt *c, uint32_t member,
			      void *arg);
/* A problem ckpt_verify() found: @check names the kind, @off is in the
 * file @path (or DIAG_NO_OFFSET). */
typedef void (*ckpt_problem_fn)(void *arg, const char *check,
				const char *path, uint64_t off,
				const char *msg);

struct ckpt_fmt {
	uint8_t id;		/* enum ckpt_format */
	const char *name;	/* ptls's word: "zip", "safetensors", ... */
	const char *files;	/* in messages, plural: "safetensors files" */
	const char *one;	/* ... one of them: "a safetensors file" */
	unsigned caps;		/* CKPT_CAP_* */
	const char *commit;	/* CAP_MANY: what its commit file is called
				   in messages ("index", ".metadata") */
	const char *rewrite_as;	/* written back, not in place: as a new
				   what ("file", "zip archive") */
	const char *converted;	/* ptrepack's note on its output (", from
				   safetensors"), or "" */
	const char *findings_are;	/* what its findings mean, before "N
					   times" ("the index and its shards
					   disagree"), or NULL */
	uint8_t out;		/* what CKPT_OUT_SAME writes it as: 0 (a
				   torch zip), CKPT_OUT_ST, or CKPT_OUT_FMT
				   (its own writer, below) */
	const char *out_ext;	/* with a writer: OUT's name ending in it
				   is written by it (".gguf") */
	const char *out_opts;	/* its writer's options, space-separated
				   ("type kv": ptrepack --gguf-type) */

	/* --- opening: the first descriptor that bids opens the file --- */
	bool (*bid)(const unsigned char *h, size_t n);	/* its first bytes */
	bool (*bid_name)(const char *base);	/* its file name */
	bool (*bid_dir)(int dirfd);	/* a folder */
	/* c->fd is the file or (CKPT_OPEN_IS_DIR in @flags) the folder */
	int (*open)(struct ckpt *c, unsigned flags, struct diag *d);
	/* the edits it takes (NULL: anything goes) */
	const struct ckpt_rules *rules;

	/* --- what the layers above show --- */
	/* CAP_FLAT: its header in one phrase for ptdump ("safetensors file,
	   header 120 bytes at 0x8, ...") */
	void (*describe)(const struct ckpt *c, char *buf, size_t size);
	bool (*folder)(const struct ckpt *c, struct ckpt_folder *f);
	uint32_t (*nparts)(const struct ckpt *c);
	void (*part)(const struct ckpt *c, uint32_t k, struct ckpt_part *p);
	uint32_t (*nfindings)(const struct ckpt *c);
	const char *(*finding)(const struct ckpt *c, uint32_t i, uint64_t *off,
			       char *buf, size_t size);
	/* why it must not be mounted at all (a shard is absent), or NULL */
	const char *(*unmountable)(const struct ckpt *c, char *buf,
				   size_t size);
	int (*records)(const struct ckpt *c, ckpt_record_fn fn, void *arg);
	void (*tensor_attrs)(const struct ckpt *c, const struct ckpt_tensor *t,
			     ckpt_attr_fn fn, void *arg);
	/* are @t's values coded in its bytes (ckpt_coded())? */
	bool (*coded)(const struct ckpt *c, const struct ckpt_tensor *t,
		      struct ckpt_coded *k);
	/* its own checks beyond the records' (ptverify): problems found */
	uint32_t (*verify)(struct ckpt *c, bool no_crc, uint64_t *checked,
			   ckpt_problem_fn fn, void *arg);
	/* --- storage reads of its own (NULL: the model's records) --- */
	/* the checkpoint whose file holds @s (a folder: its shard) */
	struct ckpt *(*owner)(struct ckpt *c, const struct ckpt_storage *s);
	/* where the bytes of @s lie in c->fd (a DCP item in its .distcp) */
	int (*storage_data)(struct ckpt *c, struct ckpt_storage *s, int *fd,
			    uint64_t *off, struct diag *d);
	/* does @s gather its bytes from many places (a DCP tensor's
	   chunks)?  Then the tensor over all of it, where its byte @pos
	   lies (*@fd, *@off, *@len bytes in order from there), its bytes */
	bool (*pieced)(const struct ckpt *c, const struct ckpt_storage *s);
	const struct ckpt_tensor *(*pieced_tensor)(const struct ckpt *c,
						   const struct ckpt_storage *s);
	int (*pieced_where)(struct ckpt *c, const struct ckpt_tensor *t,
			    uint64_t pos, int *fd, uint64_t *off,
			    uint64_t *len, struct diag *d);
	long long (*pieced_read)(struct ckpt *c, const struct ckpt_tensor *t,
				 void *buf, uint64_t len, uint64_t pos,
				 struct diag *d);
	/* is every part there (a folder's shards)?  0 or -errno, @d set */
	int (*whole)(const struct ckpt *c, struct diag *d);
	/* free what the format holds (ckpt_close(), first) */
	void (*close)(struct ckpt *c);

	/* --- a checkpoint of many files (its source's members) --- */
	/* its folder: fd (the source's root), *@dir its path for messages,
	   *@commit the name of the file whose rename commits a write-back */
	int (*many_dir)(const struct ckpt *c, const char **dir,
			const char **commit);
	/* data file @i: *@name in the folder, *@fd (-1: absent); false past
	   the last */
	bool (*many_file)(const struct ckpt *c, uint32_t i, const char **name,
			  int *fd);
	/* call @fn for each member storage @s (node @n: NULL for a storage)
	   is read from, stopping at its first non-zero return */
	int (*members)(const struct ckpt *c, const struct ckpt_storage *s,
		       const struct ckpt_node *n, ckpt_member_fn fn,
		       void *arg);
	/* the regular files of its folder that are not the checkpoint
	   (config.json, tokenizer files: shown under .ptfs/files/, copied
	   beside ptrepack's folder output), an HF folder's or a DCP
	   directory's: opened through the source once, when asked (a tool
	   that lists needs their names only), how many (>= 0) or -ENOMEM;
	   then file @i's member (UINT32_MAX: not shown, no regular file
	   beneath the folder).  NULL: it has none */
	int (*open_folder_files)(struct ckpt *c);
	uint32_t (*folder_file)(const struct ckpt *c, uint32_t i);
	/* ... file @i's name and size, shown by the mount or not */
	void (*folder_entry)(const struct ckpt *c, uint32_t i,
			     const char **name, uint64_t *size);
	/* why this one mounts read-only though its format is written back
	   (one phrase, "... mount read-only" follows), or NULL */
	const char *(*readonly_why)(const struct ckpt *c);

	/* a writer of the format: any checkpoint @c (the model, edits and
	   conversions included) as one file of it into @fd, with
	   o->fmt_args (ptrepack OUT.ext, --format NAME; the format's own
	   write-back with .out CKPT_OUT_FMT) */
	int (*write)(struct ckpt *c, int fd, const struct ckpt_write_opts *o,
		     struct diag *d);

	/* write-back of the edited model to @target (NULL: where it lies) */
	int (*save)(struct ckpt *c, const char *target,
		    const struct ckpt_write_opts *o, const struct stat *like,
		    struct diag *d);
};

/* The format that writes files named @name (its out_ext), or that is
 * called @name (--format), with a writer; NULL if none. */
const struct ckpt_fmt *ckpt_fmt_writer(const char *name, bool by_ext);

/* The descriptor of @c (c->fmt). */
const struct ckpt_fmt *ckpt_fmt(const struct ckpt *c);
/* The table, in bidding order, NULL-terminated (core/fmt/formats.c,
 * where ckpt_open() bids through it). */
extern const struct ckpt_fmt *const ckpt_formats[];

/* --- the questions, answered through the descriptor --- */

static inline bool ckpt_can(const struct ckpt *c, unsigned cap)
{
	return (ckpt_fmt(c)->caps & cap) == cap;
}

/* A folder with an index over parts: true and *@f filled. */
bool ckpt_folder(const struct ckpt *c, struct ckpt_folder *f);
/* The files with pickles: a folder's shards in order, else 1 (itself). */
uint32_t ckpt_nparts(const struct ckpt *c);
void ckpt_part_at(const struct ckpt *c, uint32_t k, struct ckpt_part *p);
/* Findings kept at the open (ptverify lists them): how many, and each as
 * one line (no newline) in @buf, *@off the byte of the file it is about
 * (the index's) or DIAG_NO_OFFSET. */
uint32_t ckpt_nfindings(const struct ckpt *c);
const char *ckpt_finding(const struct ckpt *c, uint32_t i, uint64_t *off,
			 char *buf, size_t size);
/* A folder's other file @i (< ckpt_folder_files()'s count): its name and
 * size, whether the mount shows it or not (the source refused it). */
void ckpt_folder_entry(const struct ckpt *c, uint32_t i, const char **name,
		       uint64_t *size);
/* Why @c must not be mounted (one line in @buf), or NULL. */
const char *ckpt_unmountable(const struct ckpt *c, char *buf, size_t size);
/* Call @fn for each record the mount shows raw (header.json, data.pkl, a
 * zip's records that are no storage); stops at its first non-zero. */
int ckpt_records(const struct ckpt *c, ckpt_record_fn fn, void *arg);
/* The format's own attributes of tensor @t (user.st_dtype, user.shard,
 * user.dcp.chunks ...). */
void ckpt_tensor_attrs(const struct ckpt *c, const struct ckpt_tensor *t,
		       ckpt_attr_fn fn, void *arg);
/*
 * Are tensor @t's values coded in blocks of its bytes, with a decoding
 * ptfs knows (a GGUF Q8_0 or Q4_K tensor; BF16 of a big-endian GGUF)?
 * Then *@k says how, and its views (.npy, .txt), ptdiff and ptrepack
 * --dtype use its values, float32; its bytes stay its file.  A coded
 * tensor must not be retyped or reshaped: its bytes are not elements.
 */
bool ckpt_coded(const struct ckpt *c, const struct ckpt_tensor *t,
		struct ckpt_coded *k);
/*
 * Values [@first, @first + @n) of coded tensor @k as float32 into @dst,
 * its bytes read through @read(@arg, ...) (the overlay's reader, or the
 * model's), a bounded number of blocks at a time.  0 or -errno (from
 * @read, or -EIO with @d set on a short read).
 */
int ckpt_coded_values(const struct ckpt_coded *k, ckpt_bytes_fn read,
		      void *arg, float *dst, uint64_t first, uint64_t n,
		      struct diag *d);
/* The same, read from @t's bytes in the model (ckpt_tensor_read()). */
int ckpt_tensor_coded_values(struct ckpt *c, const struct ckpt_tensor *t,
			     const struct ckpt_coded *k, float *dst,
			     uint64_t first, uint64_t n, struct diag *d);

/* The format's checks (ptverify); problems found. */
uint32_t ckpt_verify(struct ckpt *c, bool no_crc, uint64_t *checked,
		     ckpt_problem_fn fn, void *arg);
/* Write the edited model back: to @output when not NULL (refused for
 * CAP_MANY, which is written into itself), else over @path, through a
 * temporary and a rename, like @like (ckpt_save()). */
int ckpt_write_back(struct ckpt *c, const char *output, const char *path,
		    const struct ckpt_write_opts *o, const struct stat *like,
		    struct diag *d);

/*
 * Does storage @s gather its bytes from more than one place (a DCP tensor
 * split into chunks, not staged in an overlay), or are they made when
 * read (c->made: ptrepack --dequant)?  Then ckpt_storage_data() has no
 * answer for it; ckpt_tensor_read() and ckpt_pieced_where() do (a made
 * storage has no where: -ENOTSUP), and ckpt_pieced_tensor() is the
 * tensor over all of it (else NULL).
 */
bool ckpt_storage_pieced(const struct ckpt *c, const struct ckpt_storage *s);
const struct ckpt_tensor *ckpt_pieced_tensor(const struct ckpt *c,
					     const struct ckpt_storage *s);
/*
 * Where byte @pos of pieced tensor @t's row-major contents lies: *@fd
 * (borrowed), *@off, and *@len bytes from there that follow in the same
 * file in order.  0 or -errno with @d set.
 */
int ckpt_pieced_where(struct ckpt *c, const struct ckpt_tensor *t,
		      uint64_t pos, int *fd, uint64_t *off, uint64_t *len,
		      struct diag *d);
/* Is every part of @c there?  0, or -errno with @d set (an absent shard
 * would leave a written file without its tensors). */
int ckpt_whole_parts(const struct ckpt *c, struct diag *d);

/* For a verify hook: the bytes of @c after @end (where its last @what
 * ends) belong to nothing: one "trailing" problem, @why after it.  The
 * number of problems (0 or 1). */
uint32_t ckpt_trailing(const struct ckpt *c, uint64_t end, const char *what,
		       const char *why, ckpt_problem_fn fn, void *arg);

/* The edit rules: 0 or -errno with @d set (struct ckpt_rules). */
int ckpt_rule_shape(const struct ckpt *c, const char *what, struct diag *d);
int ckpt_rule_dir(const struct ckpt *c, const struct ckpt_node *dir,
		  struct diag *d);
int ckpt_rule_add(const struct ckpt *c, const char *name, struct diag *d);
int ckpt_rule_data(const struct ckpt *c, const struct ckpt_storage *s,
		   struct diag *d);
int ckpt_rule_mkdir(const struct ckpt *c, const char *name, struct diag *d);
int ckpt_rule_key(const struct ckpt *c, const char *key, size_t len,
		  struct diag *d);
int ckpt_rule_dtype(const struct ckpt *c, const struct ckpt_dtype *dt,
		    struct diag *d);
int ckpt_rule_tensor(const struct ckpt *c, const struct ckpt_tensor *t,
		     const char *name, struct diag *d);
int ckpt_rule_xattr(const struct ckpt *c, const char *name, struct diag *d);
int ckpt_rule_npy(const struct ckpt *c, const char *what, bool reshape,
		  struct diag *d);

/* The descriptors (ckpt_fmt_*.c). */
extern const struct ckpt_fmt ckpt_fmt_zip, ckpt_fmt_legacy, ckpt_fmt_tar,
	ckpt_fmt_torchscript, ckpt_fmt_safetensors, ckpt_fmt_hf, ckpt_fmt_dcp,
	ckpt_fmt_ranks;

#endif
