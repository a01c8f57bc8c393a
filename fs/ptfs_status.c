/*
 * ptfs_status.c - what .ptfs/status and `ptfs status` say: the
 * checkpoint, the daemon, the overlay and what is in it, journal records
 * resumed from an earlier mount, what was written back or discarded, the
 * staged edits in key paths (core/ovl/ovl_summary.c), and the edits the
 * daemon refused.  Those are remembered here, the last PTFS_REFUSED_MAX
 * with their reason: a shell's `>` never shows close()'s EINVAL for a
 * value that does not parse, and status does.  The same in JSON
 * (.ptfs/status.json, `ptfs status -j`).  A key path that holds a control
 * character, '"' or '\\' is printed quoted and escaped as C (and git)
 * do, "a\nb", so that each edit stays one line and every name can be
 * told apart.
 */
#define _GNU_SOURCE 1	/* strerrorname_np, open_memstream */
#include "ptfs.h"

#include "diag/diag.h"
#include "util/json_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Paths listed per kind of change; the counts cover the rest. */
#define STATUS_MAX_PATHS	1000

/* Does @s need quoting: a control character, '"' or '\\' in it? */
static bool needs_quotes(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f || *s == '"' ||
		    *s == '\\')
			return true;
	return false;
}

void ptfs_put_path(FILE *f, const char *s)
{
	static const char esc[] = "\a\b\t\n\v\f\r";

	if (!needs_quotes(s)) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		const char *e = c ? memchr(esc, c, sizeof(esc) - 1) : NULL;

		if (e)
			fprintf(f, "\\%c", "abtnvfr"[e - esc]);
		else if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\%03o", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* ---- refused edits ---- */

static void refusal_add(struct ptfs *fs, char *path, int err,
			const char *msg)
{
	struct ptfs_refusal *r;
	char *m = strdup(msg);

	pthread_mutex_lock(&fs->ctl_lock);
	if (!fs->refused)
		fs->refused = calloc(PTFS_REFUSED_MAX, sizeof(*fs->refused));
	if (!fs->refused || !path || !m) {
		pthread_mutex_unlock(&fs->ctl_lock);
		free(path);
		free(m);
		return;
	}
	r = &fs->refused[fs->nrefused++ % PTFS_REFUSED_MAX];
	free(r->path);
	free(r->msg);
	r->path = path;
	r->err = err;
	r->msg = m;
	pthread_mutex_unlock(&fs->ctl_lock);
}

void ptfs_refused(struct ptfs *fs, const struct ckpt_node *dir,
		  const char *name, int rc, const struct diag *d)
{
	char *p, *path;

	if (rc >= 0 || !d || !d->err)
		return;
	p = dir ? ckpt_node_path(dir) : strdup("");
	if (!p)
		path = NULL;
	else if (!name)
		path = strdup(*p ? p : ".");
	else if (asprintf(&path, "%s%s%s", p, *p ? "/" : "", name) < 0)
		path = NULL;
	free(p);
	refusal_add(fs, path, -rc, d->msg);
}

void ptfs_refused_ino(struct ptfs *fs, const struct ptfs_ino *i, int rc,
		      const struct diag *d)
{
	char *p, *path = NULL;

	if (rc >= 0 || !d || !d->err)
		return;
	switch (i->kind) {
	case PTFS_ROOT:
	case PTFS_NODE:
		ptfs_refused(fs, i->node, NULL, rc, d);
		return;
	case PTFS_VIEW:
		p = ckpt_node_path(i->node);
		if (p && asprintf(&path, "%s.%s", *p ? p : fs->root_name,
				  i->view == CKPT_V_NPY ? "npy" : "txt") < 0)
			path = NULL;
		free(p);
		break;
	case PTFS_STORAGE:
		if (asprintf(&path, ".ptfs/storages/%s", i->storage->key) < 0)
			path = NULL;
		break;
	default:
		return;
	}
	refusal_add(fs, path, -rc, d->msg);
}

static const char *errname(int err)
{
	const char *s = strerrorname_np(err);

	return s ? s : "error";
}

/* "refused: N edits ..." and the ones kept, into @f. */
static void refusals_text(struct ptfs *fs, FILE *f)
{
	uint64_t n, first;

	pthread_mutex_lock(&fs->ctl_lock);
	n = fs->nrefused;
	if (n) {
		fprintf(f, "refused: %llu edit%s since the mount (not staged; "
			"the reasons are in the daemon's log too)%s\n",
			(unsigned long long)n, n == 1 ? "" : "s",
			n > PTFS_REFUSED_MAX ? ", the last ones:" : "");
		first = n > PTFS_REFUSED_MAX ? n - PTFS_REFUSED_MAX : 0;
		for (uint64_t k = first; k < n; k++) {
			const struct ptfs_refusal *r =
				&fs->refused[k % PTFS_REFUSED_MAX];

			fputs("  ", f);
			ptfs_put_path(f, r->path);
			fprintf(f, ": %s: %s\n", errname(r->err), r->msg);
		}
	}
	pthread_mutex_unlock(&fs->ctl_lock);
}

/* ---- what is staged ---- */

/* ", 2 keys renamed": @n, the noun (none when @one is ""), @what. */
static void plural(FILE *f, bool *first, uint64_t n, const char *one,
		   const char *many, const char *what)
{
	if (!n)
		return;
	fprintf(f, "%s%llu%s%s %s", *first ? "" : ", ", (unsigned long long)n,
		*one ? " " : "", n == 1 ? one : many, what);
	*first = false;
}

/* "2 tensors changed, 1 key renamed, ..." (nothing when nothing). */
void ptfs_counts_text(FILE *f, const struct ovl_summary *s)
{
	bool first = true;

	plural(f, &first, s->count[OVL_C_DATA], "tensor", "tensors",
	       "changed");
	if (!s->count[OVL_C_DATA])
		plural(f, &first, s->storages, "storage", "storages",
		       "changed");
	plural(f, &first, s->count[OVL_C_RENAME], "key", "keys", "renamed");
	plural(f, &first, s->count[OVL_C_REMOVE],
	       first ? "key" : "", first ? "keys" : "", "removed");
	plural(f, &first, s->count[OVL_C_NEW], first ? "key" : "",
	       first ? "keys" : "", "added");
	plural(f, &first, s->count[OVL_C_VALUE], "value", "values", "edited");
	plural(f, &first, s->count[OVL_C_META], "metadata entry",
	       "metadata entries", "changed");
	if (first && s->changed)
		fputs("changes", f);
}

bool ptfs_nothing_staged(const struct ovl_summary *s)
{
	for (int k = 0; k < OVL_C_NKINDS; k++)
		if (s->count[k])
			return false;
	return !s->changed && !s->storages;
}

void ptfs_discarded_text(FILE *f, const struct ovl *v,
			 const struct ovl_summary *s)
{
	fputs("discarded: ", f);
	if (ptfs_nothing_staged(s))
		fputs("nothing was staged", f);
	else
		ptfs_counts_text(f, s);
	fprintf(f, "; %s removed, %s untouched", ovl_dir(v), ovl_path(v));
}

static const char *const change_word[OVL_C_NKINDS] = {
	[OVL_C_DATA] = "changed", [OVL_C_RENAME] = "renamed",
	[OVL_C_REMOVE] = "removed", [OVL_C_NEW] = "added",
	[OVL_C_VALUE] = "value", [OVL_C_META] = "metadata",
};

/* The staged edits, one per line, and how many were not listed. */
static void changes_text(FILE *f, const struct ptfs *fs,
			 const struct ovl_summary *s)
{
	uint64_t listed[OVL_C_NKINDS] = { 0 };

	for (size_t i = 0; i < s->nitems; i++) {
		const struct ovl_change *c = &s->items[i];
		const char *p = *c->path ? c->path : fs->root_name;
		const char *slash = c->dir ? "/" : "";

		listed[c->kind]++;
		fprintf(f, "  %-8s ", change_word[c->kind]);
		ptfs_put_path(f, c->kind == OVL_C_RENAME ? c->from : p);
		if (c->kind == OVL_C_RENAME) {
			fprintf(f, "%s -> ", slash);
			ptfs_put_path(f, p);
			fputs(slash, f);
		} else if (c->kind == OVL_C_VALUE) {
			fprintf(f, ": %s -> %s", c->from, c->to);
		} else if (c->kind == OVL_C_META) {
			fprintf(f, c->to ? " = %.200s" : " removed",
				c->to ? c->to : "");
		} else {
			fputs(slash, f);
		}
		fputc('\n', f);
	}
	for (int k = 0; k < OVL_C_NKINDS; k++)
		if (s->count[k] > listed[k])
			fprintf(f, "  %-8s and %llu more\n", change_word[k],
				(unsigned long long)(s->count[k] - listed[k]));
}

/* The overlay's line: where it is and what is in it. */
static void overlay_text(FILE *f, const struct ovl *v,
			 const struct ovl_summary *s)
{
	fprintf(f, "overlay: %s", ovl_dir(v));
	if (!s->journal) {
		fputs(": nothing in it yet\n", f);
		return;
	}
	fprintf(f, ": journal %llu bytes, %u data file%s of %llu bytes\n",
		(unsigned long long)s->journal_bytes, s->files,
		s->files == 1 ? "" : "s", (unsigned long long)s->file_bytes);
}

/* ---- the same in JSON (.ptfs/status.json) ---- */

/* "refused": [{"path", "errno", "message"}, ...] and their count. */
static void refusals_json(struct ptfs *fs, FILE *f)
{
	uint64_t n, first;

	pthread_mutex_lock(&fs->ctl_lock);
	n = fs->nrefused;
	fprintf(f, ",\"refused_count\":%llu,\"refused\":[",
		(unsigned long long)n);
	first = n > PTFS_REFUSED_MAX ? n - PTFS_REFUSED_MAX : 0;
	for (uint64_t k = first; k < n; k++) {
		const struct ptfs_refusal *r =
			&fs->refused[k % PTFS_REFUSED_MAX];

		fputs(k > first ? ",{\"path\":" : "{\"path\":", f);
		json_cstr(f, r->path);
		fputs(",\"errno\":", f);
		json_cstr(f, errname(r->err));
		fputs(",\"message\":", f);
		json_cstr(f, r->msg);
		fputc('}', f);
	}
	fputc(']', f);
	pthread_mutex_unlock(&fs->ctl_lock);
}

/* "counts" and "staged": [{"kind", "path", "dir"[, "from"[, "to"]]}]. */
static void changes_json(FILE *f, const struct ptfs *fs,
			 const struct ovl_summary *s)
{
	uint64_t all = 0;

	fputs(",\"counts\":{", f);
	for (int k = 0; k < OVL_C_NKINDS; k++) {
		fprintf(f, "%s\"%s\":%llu", k ? "," : "", change_word[k],
			(unsigned long long)s->count[k]);
		all += s->count[k];
	}
	fprintf(f, "},\"storages\":%u,\"staged\":[", s->storages);
	for (size_t i = 0; i < s->nitems; i++) {
		const struct ovl_change *c = &s->items[i];

		fprintf(f, "%s{\"kind\":\"%s\",\"path\":", i ? "," : "",
			change_word[c->kind]);
		json_cstr(f, *c->path ? c->path : fs->root_name);
		fprintf(f, ",\"dir\":%s", c->dir ? "true" : "false");
		if (c->kind == OVL_C_RENAME || c->kind == OVL_C_VALUE) {
			fputs(",\"from\":", f);
			json_cstr(f, c->from);
		}
		if (c->kind == OVL_C_VALUE || c->kind == OVL_C_META) {
			fputs(",\"to\":", f);
			json_cstr(f, c->to);
		}
		fputc('}', f);
	}
	fprintf(f, "],\"unlisted\":%llu",
		(unsigned long long)(all - s->nitems));
}

/* The whole of .ptfs/status.json into @f, under the read lock. */
static void status_json(struct ptfs *fs, FILE *f)
{
	struct ovl *v = fs->ovl;
	struct ovl_summary s;
	struct diag d;
	int rc;

	diag_init(&d, fs->c->path);
	fputs("{\"checkpoint\":", f);
	json_cstr(f, ovl_path(v));
	fputs(",\"output\":", f);
	json_cstr(f, fs->output);
	fprintf(f, ",\"daemon_pid\":%ld,\"read_only\":false", (long)getpid());
	rc = ovl_summarize(v, STATUS_MAX_PATHS, &s, &d);
	fputs(",\"overlay\":{\"dir\":", f);
	json_cstr(f, ovl_dir(v));
	fprintf(f, ",\"journal_bytes\":%llu,\"data_files\":%u,"
		"\"data_bytes\":%llu},\"resumed\":%llu",
		(unsigned long long)s.journal_bytes, s.files,
		(unsigned long long)s.file_bytes,
		(unsigned long long)s.resumed);
	pthread_mutex_lock(&fs->ctl_lock);
	fputs(",\"done\":", f);
	if (fs->done_msg)
		json_str(f, fs->done_msg, strcspn(fs->done_msg, "\n"));
	else
		fputs("null", f);
	pthread_mutex_unlock(&fs->ctl_lock);
	fprintf(f, ",\"committed\":%s", ovl_committed(v) ? "true" : "false");
	if (rc) {
		fputs(",\"error\":", f);
		json_cstr(f, d.msg);
		fputs(",\"staged\":null", f);
	} else {
		changes_json(f, fs, &s);
	}
	ovl_summary_free(&s);
}

/* The text of .ptfs/status, under the read lock. */
static void status_text(struct ptfs *fs, FILE *f)
{
	struct ovl *v = fs->ovl;
	struct ovl_summary s;
	struct diag d;
	int rc;

	diag_init(&d, fs->c->path);
	fprintf(f, "checkpoint: %s\n", ovl_path(v));
	if (fs->output)
		fprintf(f, "output: %s\n", fs->output);
	fprintf(f, "daemon: pid %ld\n", (long)getpid());
	rc = ovl_summarize(v, STATUS_MAX_PATHS, &s, &d);
	overlay_text(f, v, &s);
	if (s.resumed)
		fputs("resumed: what is staged below comes from an earlier "
		      "mount\n", f);
	pthread_mutex_lock(&fs->ctl_lock);
	if (fs->done_msg)
		fputs(fs->done_msg, f);
	pthread_mutex_unlock(&fs->ctl_lock);
	if (ovl_committed(v)) {
		fputs("staged: nothing (the mount is read-only until it is "
		      "unmounted)\n", f);
	} else if (rc) {
		fprintf(f, "staged: unknown (%s)\n", d.msg);
	} else if (ptfs_nothing_staged(&s)) {
		fputs("staged: nothing (unmounting writes nothing)\n", f);
	} else {
		fputs("staged: ", f);
		ptfs_counts_text(f, &s);
		fputc('\n', f);
		changes_text(f, fs, &s);
	}
	ovl_summary_free(&s);
}

char *ptfs_status_text(struct ptfs *fs, bool json, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		return NULL;
	ptfs_rdlock(fs);
	if (json)
		status_json(fs, f);
	else
		status_text(fs, f);
	ptfs_unlock(fs);
	if (json) {
		refusals_json(fs, f);
		fputs("}\n", f);
	} else {
		refusals_text(fs, f);
	}
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}
