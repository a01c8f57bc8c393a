/*
 * ovl_replay.c - one edit record of the journal applied again at a mount
 * (ovl_open.c reads the journal and calls it): the same operations of
 * ovl.c that made the record, so a replayed overlay is the one that was.
 */
#include "ovl_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static char *field_str(const struct jrec *r, int i)
{
	return i < r->nf ? strndup(r->f[i], r->len[i]) : NULL;
}

int ovl_replay_one(struct ovl *v, const struct jrec *r, struct diag *d)
{
	struct ckpt_node *dir, *out, *ndir;
	char *name, *nname = NULL;
	uint64_t idx;
	int rc;

	/* its paths need not be there: they are made what they were */
	if (r->op == JR_REVERT)
		return ovl_revert_replay(v, r, d);
	/* a retype names a storage, not a path */
	dir = r->op == JR_RETYPE ? v->c->root :
	      r->nf ? ovl_resolve(v, r->f[0], r->len[0]) : NULL;
	name = field_str(r, 1);
	if (!dir || (!name && r->op != JR_VALUE && r->op != JR_XATTR &&
		     r->op != JR_TENSOR && r->op != JR_RETYPE)) {
		free(name);
		return diag_corrupt(d, DIAG_NO_OFFSET, "%s: offset 0x%llx: a "
				    "record names '%.*s', which is not there",
				    v->jpath, (unsigned long long)r->off,
				    r->nf ? (int)(r->len[0] < 200 ?
						  r->len[0] : 200) : 0,
				    r->nf ? r->f[0] : "");
	}
	switch (r->op) {
	case JR_MKDIR:
		rc = ovl_mkdir(v, dir, name, &out, d);
		break;
	case JR_CREATE:
		nname = arena_strndup(&v->c->arena, name, strlen(name));
		rc = !jr_num(r, 2, &idx) || idx > UINT32_MAX ||
		     !ckpt_node_is_dir(dir) || ckpt_node_child(dir, name) ?
		     diag_corrupt(d, DIAG_NO_OFFSET, "%s: offset 0x%llx: bad "
				  "create record", v->jpath,
				  (unsigned long long)r->off) :
		     !nname ? diag_nomem(d) :
		     ovl_create_at(v, dir, nname, (uint32_t)idx, &out, d);
		nname = NULL;	/* the arena's */
		break;
	case JR_UNLINK:
		out = ckpt_node_child(dir, name);
		rc = out && ckpt_node_is_dir(out) ? ovl_rmdir(v, dir, name, d) :
		     ovl_unlink(v, dir, name, d);
		break;
	case JR_RENAME:
		ndir = r->nf == 4 ? ovl_resolve(v, r->f[2], r->len[2]) : NULL;
		nname = field_str(r, 3);
		rc = ndir && nname ? ovl_rename(v, dir, name, ndir, nname,
						false, d) :
		     diag_corrupt(d, DIAG_NO_OFFSET, "bad rename record");
		break;
	case JR_VALUE: {
		struct ckpt_literal lit;

		/* a new file that became a value at its close() */
		if (r->nf == 2 && dir->kind == CKPT_N_TENSOR) {
			rc = ovl_value_of_text(v, dir, r->f[1], r->len[1], d);
			if (rc > 0)
				rc = diag_corrupt(d, DIAG_NO_OFFSET, "bad value "
						  "record");
			break;
		}
		rc = r->nf != 2 || dir->kind != CKPT_N_VALUE ||
		     ckpt_value_parse(dir, r->f[1], r->len[1], &lit) ?
		     diag_corrupt(d, DIAG_NO_OFFSET, "bad value record") :
		     ckpt_value_set(v->c, dir, &lit);
		break;
	}
	case JR_TENSOR:
		rc = ovl_replay_tensor(v, r, d);
		break;
	case JR_RETYPE:
		rc = ovl_replay_retype(v, r, d);
		break;
	case JR_XATTR:
		nname = field_str(r, 1);
		/* two fields: a removal (of user.meta.KEY) */
		rc = (r->nf != 3 && r->nf != 2) || !nname ?
		     diag_corrupt(d, DIAG_NO_OFFSET, "bad xattr record") :
		     r->nf == 2 ? ovl_removexattr(v, dir, nname, d) :
		     ovl_setxattr(v, dir, nname, r->f[2], r->len[2], d);
		break;
	default:
		rc = diag_corrupt(d, DIAG_NO_OFFSET, "%s: offset 0x%llx: "
				  "unknown record '%c'", v->jpath,
				  (unsigned long long)r->off, r->op);
	}
	free(name);
	free(nname);
	return rc;
}
