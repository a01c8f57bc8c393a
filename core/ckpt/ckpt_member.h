/*
 * ckpt_member.h - a checkpoint's member files as the layers above see
 * them (ckpt_member.c): whether the files a storage is read from are
 * still the ones opened, who may read a file of the mount, and the files
 * of a folder that hold no part of the model.  Works for every format:
 * a checkpoint of one file has no members, and the caller uses its own.
 */
#ifndef PT_CKPT_CKPT_MEMBER_H
#define PT_CKPT_CKPT_MEMBER_H

#include <stdbool.h>
#include <stdint.h>

struct ckpt;
struct ckpt_node;
struct ckpt_storage;
struct diag;
struct src_access;
struct src_member;

/*
 * Is every member file storage @s (NULL: none) is read from still the
 * file opened, unchanged (one fstat each)?  0, or -ESTALE with @d set.
 * The checkpoint's own file (c->fd) is the caller's to check.
 */
int ckpt_storage_unchanged(const struct ckpt *c, const struct ckpt_storage *s,
			   struct diag *d);

/*
 * Who may read the bytes of storage @s, or of node @n (a tensor's are its
 * storage's): the owner, group and mode of the member files they come
 * from, narrowed over all of them (src_access_narrow()).  false: a
 * checkpoint of one file, whose own stat is the answer.
 */
bool ckpt_storage_access(const struct ckpt *c, const struct ckpt_storage *s,
			 struct src_access *a);
bool ckpt_node_access(const struct ckpt *c, const struct ckpt_node *n,
		      struct src_access *a);
/* ... of every storage's bytes at once (a file read from them all, as
 * .ptfs/as/ is): the narrowest.  Rows must be nodes (ckpt_materialize()). */
bool ckpt_all_access(const struct ckpt *c, struct src_access *a);

/* Does the checkpoint have a folder's other files (.ptfs/files/: an HF
 * folder's, a DCP directory's)?  Opens them through the source, once
 * (only the mount and the writers need them open), and *@n gets how many
 * there are: 1, 0 (a checkpoint of one file), or -ENOMEM. */
int ckpt_folder_files(struct ckpt *c, uint32_t *n);
/* Other file @i, or NULL: not shown (no regular file beneath the
 * folder).  Its name is ->leaf, its bytes ->fd's. */
const struct src_member *ckpt_folder_file(const struct ckpt *c, uint32_t i);

/* The folder file @name (beneath the root of a checkpoint of many
 * files: a member's, or one its write-back made) lies in, opened beneath
 * the root through no symlink (the source keeps it), and *@leaf its last
 * component; -errno when there is none such. */
int ckpt_member_dir(const struct ckpt *c, const char *name, const char **leaf);

#endif
