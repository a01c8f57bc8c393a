/*
 * ckpt_ranks.c - the open of a per-rank set (ckpt_ranks.h has the
 * layout): find the set's files in the folder, open each through the
 * door (a torch.save zip), build rank 0's pickle as the tree with each
 * sharded tensor (DTensor, ShardedTensor) made its global tensor (the
 * builder's subclass hook), and give every storage its chunks: a sharded
 * tensor's one per piece a rank holds, a plain tensor's (an optimizer's
 * step) rank 0's record.
 *
 * Refused, each with one line: a rank missing, files of two world sizes
 * or of two sets side by side (a folder with model_ and optim_ files:
 * give one, DIR/optim_world_size_N_rank_*.pt), a rank whose sharded
 * tensor differs in kind, dtype or global shape, pieces that overlap or
 * leave elements uncovered.
 */
#include "ckpt_ranks.h"
#include "fmt/dcp/ckpt_dcp.h"
#include "source/source.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool ckpt_ranks_name(const char *name, size_t *plen, uint32_t *n,
		     uint32_t *r)
{
	const char *w = strstr(name, "_world_size_"), *p;
	char *end;
	unsigned long v;

	if (!w || w == name || (size_t)(w - name) >= 64)
		return false;
	p = w + 12;
	if (*p < '0' || *p > '9')
		return false;
	v = strtoul(p, &end, 10);
	if (!v || v > RANKS_MAX || strncmp(end, "_rank_", 6))
		return false;
	*n = (uint32_t)v;
	p = end + 6;
	if (*p == '*' && !strcmp(p, "*.pt")) {
		*r = UINT32_MAX;	/* the pattern a user gives */
	} else {
		if (*p < '0' || *p > '9')
			return false;
		v = strtoul(p, &end, 10);
		if (v >= *n || strcmp(end, ".pt"))
			return false;
		*r = (uint32_t)v;
	}
	*plen = (size_t)(w - name);
	return true;
}

/* The set in the folder: its prefix (given, or the only one), world size,
 * and every rank's file there. */
static int scan(struct ckpt *c, const char *want, struct diag *d)
{
	struct ckpt_ranks *rk = c->ranks;
	int fd = openat(src_root_fd(c->src), ".", O_RDONLY | O_DIRECTORY |
			O_CLOEXEC);	/* its own offset (not a dup's) */
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	uint32_t n, r, seen = 0, *have = NULL;
	size_t pl;
	int rc = 0;

	if (!dir) {
		if (fd >= 0)
			close(fd);
		return diag_errno(d, -errno, "cannot list: %s", strerror(errno));
	}
	if (want)
		snprintf(rk->prefix, sizeof(rk->prefix), "%s", want);
	while (!rc && (de = readdir(dir))) {
		if (!ckpt_ranks_name(de->d_name, &pl, &n, &r) ||
		    r == UINT32_MAX)
			continue;
		if (!rk->prefix[0])
			snprintf(rk->prefix, sizeof(rk->prefix), "%.*s",
				 (int)pl, de->d_name);
		if (strlen(rk->prefix) != pl ||
		    strncmp(rk->prefix, de->d_name, pl)) {
			if (!want)
				rc = diag_set(d, -EINVAL, DIAG_NO_OFFSET,
					      "holds the rank files of two "
					      "sets (%s_ and %.*s_): give "
					      "one, DIR/%s_world_size_N_rank_"
					      "*.pt", rk->prefix, (int)pl,
					      de->d_name, rk->prefix);
			continue;
		}
		if (rk->n && n != rk->n) {
			rc = diag_corrupt(d, DIAG_NO_OFFSET, "%s: world size "
					  "%u, where the other rank files say "
					  "%u: files of two runs", de->d_name,
					  n, rk->n);
			break;
		}
		if (!rk->n) {
			rk->n = n;
			have = calloc(n, sizeof(*have));
			rk->names = arena_alloc(&c->arena,
						n * sizeof(*rk->names));
			if (!have || !rk->names) {
				rc = diag_nomem(d);
				break;
			}
			memset(rk->names, 0, n * sizeof(*rk->names));
		}
		if (!have[r]) {
			have[r] = 1;
			seen++;
			rk->names[r] = arena_strndup(&c->arena, de->d_name,
						     strlen(de->d_name));
			if (!rk->names[r])
				rc = diag_nomem(d);
		}
	}
	closedir(dir);
	if (!rc && !rk->n)
		rc = diag_set(d, -ENOENT, DIAG_NO_OFFSET, "no %s%s"
			      "_world_size_N_rank_R.pt files", want ? want :
			      "PREFIX", "");
	for (r = 0; !rc && r < rk->n; r++)
		if (!have[r])
			rc = diag_set(d, -ENOENT, DIAG_NO_OFFSET, "rank %u of %u "
				      "is missing: no %s_world_size_%u_rank_"
				      "%u.pt (%u of the set's files are "
				      "there)", r, rk->n, rk->prefix, rk->n,
				      r, seen);
	free(have);
	return rc;
}

/* A global of a sharded tensor's own (its class, placements, mesh, shard
 * metadata): the tree holds none of those, so they are not the file's to
 * answer for.  (ShardedTensor's getattr(ShardedTensor, "ProcessGroupState")
 * is a builtin's, and stays listed: torch.load runs it.) */
static bool sharded_global(const char *m)
{
	return !strncmp(m, "torch.distributed.tensor", 24) ||
	       !strcmp(m, "torch.distributed.device_mesh") ||
	       !strcmp(m, "torch.distributed._mesh_layout") ||
	       !strncmp(m, "torch.distributed._shard.", 25) ||
	       !strcmp(m, "torch.distributed.remote_device");
}

/* A rank file's unsafe globals (ptls --check, ptverify name it with its
 * offsets): all but the sharded tensors' own. */
static void keep_own_globals(struct ckpt *p)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->nglobals; i++)
		if (p->globals[i].kind != CKPT_U_GLOBAL ||
		    !sharded_global(p->globals[i].module))
			p->globals[n++] = p->globals[i];
	p->nglobals = n;
}

/* Rank @r's file, opened through the door as a torch.save zip. */
static int open_rank(struct ckpt *c, uint32_t r, unsigned flags,
		     struct diag *d)
{
	struct ckpt_ranks *rk = c->ranks;
	const char *name = rk->names[r];
	struct diag dr;
	char line[512];
	int k = src_add(c->src, name, strlen(name), DIAG_NO_OFFSET, 0, d);

	if (k < 0)
		return k;
	diag_init(&dr, src_at(c->src, (uint32_t)k)->path);
	rk->member[r] = (uint32_t)k;
	k = c->open_part(src_at(c->src, (uint32_t)k), flags | CKPT_OPEN_KEEP,
			 &rk->parts[r], &dr);
	if (k) {	/* what torch.load would run is the folder's, too */
		if (ckpt_unsafe_take(c, rk->parts[r], name))
			k = diag_nomem(&dr);
		ckpt_close(rk->parts[r]);
		rk->parts[r] = NULL;
		diag_set(d, k, DIAG_NO_OFFSET, "rank %u: %s", r,
			 diag_line(&dr, line, sizeof(line)));
		d->unsafe |= dr.unsafe;
		return k;
	}
	if (rk->parts[r]->format != CKPT_ZIP || !rk->parts[r]->root ||
	    rk->parts[r]->root->kind != CKPT_N_DIR)
		return diag_unsupported(d, DIAG_NO_OFFSET, "%s is not a "
					"torch.save zip of a state dict", name);
	keep_own_globals(rk->parts[r]);
	return 0;
}

/* ---- rank 0's sharded tensors, by pickle value ---- */

static uint32_t slot_of(const struct ckpt_ranks *rk, const void *v)
{
	uint32_t h = (uint32_t)(((uintptr_t)v >> 4) * 2654435761u);

	for (uint32_t i = 0;; i++) {
		uint32_t s = (h + i) & (rk->dtcap - 1);

		if (!rk->dt[s] || rk->dt[s]->val == v)
			return s;
	}
}

/* Every sharded tensor node under @n (LINKs are shown twice: once). */
static void index_dt(struct ckpt *c, const struct ckpt_node *n,
		     uint32_t *cnt, bool put)
{
	struct ckpt_ranks *rk = c->ranks;

	if (rk_is_sharded(n)) {
		if (put && n->val)
			rk->dt[slot_of(rk, n->val)] = n;
		++*cnt;
		return;
	}
	for (uint32_t i = 0; i < n->dir->nkids; i++)
		if (n->dir->kids[i])
			index_dt(c, n->dir->kids[i], cnt, put);
}

/* The key path of node @n of a rank's tree, "a/b/c". */
char *rk_path_of(const struct ckpt_node *n, char *buf, size_t size)
{
	const struct ckpt_node *v[CKPT_MAX_DEPTH + 1];
	size_t k = 0, m = 0;

	for (; n && n->parent && m <= CKPT_MAX_DEPTH; n = n->parent)
		v[m++] = n;
	buf[0] = 0;
	while (m-- && k < size)
		k += snprintf(buf + k, size - k, "%s%s", k ? "/" : "",
			      v[m]->name);
	return buf;
}

/* ---- chunks: DCP's table (ckpt_dcp.h) ---- */

/* The file entry of rank @r's bytes at @fd (its zip, or the inflated copy
 * of a deflated record). */
static int file_of(struct ckpt *c, uint32_t r, int fd, struct diag *d)
{
	struct ckpt_dcp *p = c->dcp;
	struct dcp_file *f;

	for (uint32_t i = 0; i < p->nfiles; i++)
		if (p->files[i].fd == fd)
			return (int)i;
	if (p->nfiles == p->files_cap) {
		uint32_t cap = p->files_cap ? 2 * p->files_cap : 8;

		f = realloc(p->files, cap * sizeof(*f));
		if (!f)
			return diag_nomem(d);
		p->files = f;
		p->files_cap = cap;
	}
	f = &p->files[p->nfiles];
	*f = (struct dcp_file){ .name = c->ranks->names[r],
				.path = c->ranks->parts[r]->path, .fd = fd,
				.member = c->ranks->member[r],
				.size = c->ranks->parts[r]->file_size };
	return (int)p->nfiles++;
}

/* A chunk of the storage being made: box (@off, @size), its bytes those
 * of rank @r's storage @s from element @el on. */
static int chunk(struct ckpt *c, uint32_t r, struct ckpt_storage *s,
		 uint64_t el, int nd, const int64_t *off, const int64_t *size,
		 const char *fqn, uint64_t at, struct diag *d)
{
	struct ckpt_dcp *p = c->dcp;
	struct ckpt *part = c->ranks->parts[r];
	uint64_t data, n = 1;
	int fd, f, rc = ckpt_storage_data(part, s, &fd, &data, d);

	if (rc)
		return rc;
	f = file_of(c, r, fd, d);
	if (f < 0)
		return f;
	for (int i = 0; i < nd; i++)
		n *= (uint64_t)size[i];
	if (p->nitems == p->items_cap) {
		uint32_t cap = p->items_cap ? 2 * p->items_cap : 64;
		struct dcp_item *it = realloc(p->items, cap * sizeof(*it));

		if (!it)
			return diag_nomem(d);
		p->items = it;
		p->items_cap = cap;
	}
	data += el * s->dtype->size;
	p->items[p->nitems] = (struct dcp_item){ .file = (uint32_t)f,
		.used = true, .fqn = fqn, .off = data,
		.len = n * s->dtype->size, .meta_off = at };
	rc = ckpt_dcp_chunk_add(c, nd, off, size, p->nitems++, at, d);
	if (rc)
		return rc;
	p->chunks[p->nchunks - 1].data = data;
	p->chunks[p->nchunks - 1].done = true;
	return rk_copy_add(c, p->nchunks - 1, r, s, el, d);
}

static int by_key(const void *a, const void *b)
{
	return strcmp((*(struct ckpt_storage *const *)a)->key,
		      (*(struct ckpt_storage *const *)b)->key);
}

/* The storages the build registered since the last call (plain tensors
 * of rank 0's pickle): one chunk each, rank 0's record. */
static int close_plain(struct ckpt *c, struct diag *d)
{
	struct ckpt_ranks *rk = c->ranks;
	struct ckpt *p0 = rk->parts[0];
	int rc = 0;

	for (; rk->plain < c->nstorages && !rc; rk->plain++) {
		struct ckpt_storage *s = c->storages[rk->plain], **hit, key;
		int64_t zero = 0, n = (int64_t)s->numel;

		key.key = s->key;
		hit = bsearch(&(struct ckpt_storage *){ &key }, rk->sorted,
			      p0->nstorages, sizeof(*rk->sorted), by_key);
		if (!hit || (*hit)->nbytes != s->nbytes)
			return diag_corrupt(d, s->pkl_off, "%s: storage '%s' "
					    "is not rank 0's", rk->names[0],
					    s->key);
		rc = chunk(c, 0, *hit, 0, 1, &zero, &n, s->key, s->pkl_off, d);
		if (!rc)
			rc = ckpt_dcp_storage_done(c, NULL, NULL, d);
	}
	return rc;
}

static bool overlap(const int64_t *ao, const int64_t *as, const int64_t *bo,
		    const int64_t *bs, int nd)
{
	for (int i = 0; i < nd; i++)
		if (ao[i] >= bo[i] + bs[i] || bo[i] >= ao[i] + as[i])
			return false;
	return true;
}

/* Piece @pc of global tensor @t (@key) on rank @r: a chunk, unless it is
 * empty or a replica of one already there (*@covered grows by its
 * elements).  Chunks from @c0 on are @t's. */
static int piece(struct ckpt *c, struct ckpt_tensor *t, const char *key,
		 uint32_t r, uint32_t c0, const struct rk_piece *pc,
		 uint64_t *covered, struct diag *d)
{
	struct ckpt_ranks *rk = c->ranks;
	struct ckpt_dcp *p = c->dcp;
	int nd = t->ndim;
	uint64_t vol = 1;

	for (int i = 0; i < nd; i++)
		vol *= (uint64_t)pc->size[i];
	if (!vol)
		return 0;
	for (uint32_t k = c0; k < p->nchunks; k++) {
		const struct dcp_chunk *ch = &p->chunks[k];

		if (!overlap(ch->offsets, ch->sizes, pc->off, pc->size, nd))
			continue;
		/* a replica: the first is read, every one written */
		if (pc->replica && !memcmp(ch->offsets, pc->off, nd * 8) &&
		    !memcmp(ch->sizes, pc->size, nd * 8))
			return rk_copy_add(c, k, r, pc->local->storage,
					   pc->local->offset, d);
		return diag_corrupt(d, pc->local->pkl_off, "%s: '%s': its "
				    "piece overlaps %s's", rk->names[r], key,
				    p->files[p->items[ch->item].file].name);
	}
	*covered += vol;
	return chunk(c, r, pc->local->storage, pc->local->offset, nd, pc->off,
		     pc->size, key, pc->local->pkl_off, d);
}

/* The chunks of global tensor @t (sharded tensor @key), one per piece. */
static int pieces(struct ckpt *c, struct ckpt_tensor *t,
		  const struct ckpt_node *dt0, const char *key, struct diag *d)
{
	struct ckpt_ranks *rk = c->ranks;
	uint32_t c0 = c->dcp->nchunks;
	uint64_t covered = 0;
	int rc = 0;

	for (uint32_t r = 0; r < rk->n && !rc; r++) {
		const struct ckpt_node *dt = ckpt_node_by_path(rk->parts[r],
							       key);
		struct rk_piece pc;

		if (!rk_is_sharded(dt) || strcmp(dt->type, dt0->type))
			return diag_corrupt(d, DIAG_NO_OFFSET, "%s holds no "
					    "%s '%s', which rank 0 has: files "
					    "of two runs?", rk->names[r],
					    dt0->type, key);
		for (uint32_t i = 0; i < rk_npieces(dt) && !rc; i++) {
			rc = rk_piece_of(dt, t, r, i, rk->names[r], key, &pc,
					 d);
			if (!rc)
				rc = piece(c, t, key, r, c0, &pc, &covered, d);
		}
	}
	if (!rc && covered != t->numel)
		rc = diag_corrupt(d, t->pkl_off, "'%s': the ranks' pieces cover "
				  "%llu of its %llu elements", key,
				  (unsigned long long)covered,
				  (unsigned long long)t->numel);
	return rc ? rc : ckpt_dcp_storage_done(c, key, t, d);
}

/* The builder's hook: rank 0's sharded tensor @v as its global tensor. */
static int dtensor(struct ckpt_build *b, const struct pkl_value *v,
		   struct ckpt_tensor **out)
{
	struct ckpt *c = b->subclass_arg;
	struct ckpt_ranks *rk = c->ranks;
	uint32_t s = slot_of(rk, v);
	const struct ckpt_tensor *g;
	struct ckpt_tensor *t;
	struct ckpt_storage *st;
	char key[4096], skey[24], *fqn;
	int rc;

	if (!rk->dt[s])
		return 0;
	if (rk->made[s]) {
		*out = rk->made[s];
		return 1;
	}
	rc = close_plain(c, b->d);
	if (rc)
		return rc;
	g = rk->dt[s]->tensor;
	rk_path_of(rk->dt[s], key, sizeof(key));
	fqn = arena_strndup(&c->arena, key, strlen(key));
	t = fqn ? ckpt_tensor_new(b, g->ndim) : NULL;
	if (!t)
		return diag_nomem(b->d);
	memcpy(t->shape, g->shape, g->ndim * sizeof(*g->shape));
	t->kind = CKPT_T_STRIDED;
	t->dtype = g->dtype;
	t->requires_grad = g->requires_grad;
	t->pkl_off = v->off;
	if (!ckpt_tensor_c_strides(t))
		return diag_corrupt(b->d, v->off, "'%s': strides "
				    "overflow", key);
	rc = ckpt_tensor_check(c, t, b->d);
	snprintf(skey, sizeof(skey), "g%u", c->nstorages);
	if (!rc)
		rc = ckpt_storage_add(b, skey, t->dtype, "cpu", t->numel,
				      v->off, &st);
	if (rc)
		return rc;
	t->storage = st;
	st->ntensors++;
	rc = pieces(c, t, rk->dt[s], fqn, b->d);
	rk->plain = c->nstorages;
	rk->made[s] = t;
	*out = t;
	return rc ? rc : 1;
}

/* The tree: rank 0's pickle, its sharded tensors the global tensors. */
static int build(struct ckpt *c, struct diag *d)
{
	struct ckpt_ranks *rk = c->ranks;
	struct ckpt *p0 = rk->parts[0];
	uint32_t n = 0;
	int rc;

	index_dt(c, p0->root, &n, false);
	for (rk->dtcap = 16; rk->dtcap < 2 * n + 2; rk->dtcap *= 2)
		;
	rk->dt = calloc(rk->dtcap, sizeof(*rk->dt));
	rk->made = calloc(rk->dtcap, sizeof(*rk->made));
	rk->sorted = malloc((p0->nstorages + 1) * sizeof(*rk->sorted));
	if (!rk->dt || !rk->made || !rk->sorted)
		return diag_nomem(d);
	index_dt(c, p0->root, &n, true);
	memcpy(rk->sorted, p0->storages, p0->nstorages * sizeof(*rk->sorted));
	qsort(rk->sorted, p0->nstorages, sizeof(*rk->sorted), by_key);
	/* the document is the set's now (its nodes still point into it);
	   rank 0's part still reads it (its globals' holders), borrowed.
	   The set's unsafe globals are its parts' (each rank file's own,
	   kept at its open): c->globals stays empty */
	c->doc = p0->doc;
	rc = ckpt_build_begin(c, d);
	if (rc)
		return rc;
	c->b->subclass = dtensor;
	c->b->subclass_arg = c;
	rc = ckpt_build_doc(c, c->doc, &c->root, d);
	c->b->subclass = NULL;
	if (!rc)
		rc = close_plain(c, d);
	if (!rc && !(c->root->name = arena_strndup(&c->arena, "", 0)))
		rc = diag_nomem(d);
	if (!rc && c->root->kind != CKPT_N_DIR)
		rc = diag_unsupported(d, DIAG_NO_OFFSET, "%s holds a %s, not a "
				      "state dict", rk->names[0],
				      c->root->type);
	return rc;
}

int ckpt_ranks_open(struct ckpt *c, unsigned flags, struct diag *d)
{
	struct ckpt_ranks *rk = arena_alloc(&c->arena, sizeof(*rk));
	struct ckpt_dcp *p = arena_alloc(&c->arena, sizeof(*p));
	const char *base = strrchr(c->path, '/');
	char want[64] = "", *dir;
	size_t n = strlen(c->path), pl;
	uint32_t ws, r;
	int rc;

	if (!rk || !p)
		return diag_nomem(d);
	memset(rk, 0, sizeof(*rk));
	memset(p, 0, sizeof(*p));
	c->ranks = rk;
	c->dcp = p;
	p->dirfd = -1;
	pthread_mutex_init(&p->lock, NULL);
	/* DIR, or DIR/PREFIX_world_size_N_rank_*.pt (ckpt_open_with()) */
	base = base ? base + 1 : c->path;
	if (ckpt_ranks_name(base, &pl, &ws, &r) && r == UINT32_MAX) {
		snprintf(want, sizeof(want), "%.*s", (int)pl, base);
		n = base > c->path ? (size_t)(base - 1 - c->path) : 0;
	}
	while (n > 1 && c->path[n - 1] == '/')
		n--;
	dir = n ? arena_strndup(&c->arena, c->path, n) :
	      arena_strndup(&c->arena, ".", 1);
	if (!dir)
		return diag_nomem(d);
	rk->dir = p->dir = dir;
	rc = src_new(dir, c->fd, &c->src, d);	/* takes the folder's fd */
	c->fd = -1;
	if (rc)
		return rc;
	p->dirfd = src_root_fd(c->src);
	rc = scan(c, want[0] ? want : NULL, d);
	if (!rc && want[0] && ws != rk->n)
		rc = diag_set(d, -ENOENT, DIAG_NO_OFFSET, "no %s_world_size_%u"
			      "_rank_R.pt files (the set there has %u ranks)",
			      want, ws, rk->n);
	if (rc)
		return rc;
	rk->parts = calloc(rk->n, sizeof(*rk->parts));
	rk->member = arena_alloc(&c->arena, rk->n * sizeof(*rk->member));
	if (!rk->parts || !rk->member)
		return diag_nomem(d);
	/* whole: the set's tree is built from rank 0's document anew */
	for (r = 0; r < rk->n && !rc; r++)
		rc = open_rank(c, r, (flags & CKPT_OPEN_LISTS) |
			       (r ? 0 : CKPT_OPEN_WHOLE), d);
	if (rc)
		return rc;
	p->meta_path = rk->parts[0]->path;
	c->fd = fcntl(src_at(c->src, 0)->fd, F_DUPFD_CLOEXEC, 0);
	if (c->fd < 0)
		return diag_errno(d, -errno, "%s: %s", rk->names[0],
				  strerror(errno));
	c->file_size = rk->parts[0]->file_size;
	rc = build(c, d);
	for (r = 1; r < rk->n && !rc; r++)
		rc = rk_agree(c, r, d);
	return rc;
}

void ckpt_ranks_close(struct ckpt *c)
{
	struct ckpt_ranks *rk = c->ranks;

	if (!rk)
		return;
	ckpt_dcp_release(c);
	if (rk->parts && rk->parts[0] && rk->parts[0]->doc == c->doc)
		rk->parts[0]->doc = NULL;	/* the set's: freed with it */
	for (uint32_t r = 0; rk->parts && r < rk->n; r++)
		ckpt_close(rk->parts[r]);
	free(rk->parts);
	free(rk->dt);
	free(rk->made);
	free(rk->sorted);
	free(rk->copies);
	c->ranks = NULL;
}
