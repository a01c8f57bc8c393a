/*
 * ptfs_names.c - the names the kernel is shown, when they are not simply
 * the model's.  A key's escaped name (core/ckpt/ckpt_names.c) can be any
 * length, but the kernel takes at most NAME_MAX (255) bytes per name and
 * fails a whole readdir with EIO on an entry over 1024: a name longer than
 * 255 bytes is shown cut, with "%~<slot>" (ckpt_name_short(); its views
 * leave room for ".npy"), and found again from that slot.  The same holds
 * for storage keys and records under .ptfs/, and for the components of a
 * link's target.  docs/names.md has the rules.
 */
#include "ptfs.h"

#include "pickle/pkl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ptfs_shown_name(const struct ckpt_node *k, uint32_t slot,
			    size_t max, char *buf)
{
	return ckpt_name_short(ckpt_slot_name(k), slot, max, buf);
}

struct ckpt_node *ptfs_child(const struct ckpt_node *dir, const char *name,
			     size_t max)
{
	struct ckpt_node *k = ckpt_node_child(dir, name);
	char buf[CKPT_NAME_MAX + 1];
	const char *t;
	unsigned long pos;
	char *end;

	if (k || strlen(name) > max)
		return k;
	/* "...%~<slot>": the slot is the child's position in @dir */
	t = strstr(name, "%~");
	while (t && strstr(t + 2, "%~"))
		t = strstr(t + 2, "%~");
	if (!t || t[2] < '0' || t[2] > '9')
		return NULL;
	pos = strtoul(t + 2, &end, 10);
	if (*end || pos >= dir->dir->nkids || !(k = dir->dir->kids[pos]))
		return NULL;
	return !strcmp(ptfs_shown_name(k, pos, max, buf), name) ? k : NULL;
}

char *ptfs_escape_record(const char *s)
{
	struct pkl_value v = { .kind = PKL_STR };
	char *copy = strdup(s), *name;

	if (!copy)
		return NULL;
	v.u.s.p = copy;
	v.u.s.n = strlen(s);
	name = ckpt_name_escape(&v);
	free(copy);
	return name;
}

const char *ptfs_storage_name(const char *key, uint32_t index, char *buf)
{
	char *esc;
	const char *s;

	if (key[0] && key[0] != '.' && !strpbrk(key, "/%") &&
	    strlen(key) <= CKPT_NAME_MAX)
		return key;
	esc = ptfs_escape_record(key);
	if (!esc)
		return NULL;
	s = ckpt_name_short(esc, index, CKPT_NAME_MAX, buf);
	if (s == esc)
		strcpy(buf, esc);	/* at most CKPT_NAME_MAX bytes */
	free(esc);
	return buf;
}

/* @n's slot in its parent (shown names of long keys depend on it). */
static uint32_t slot_of(const struct ckpt_node *n)
{
	const struct ckpt_node *p = n->parent;

	for (uint32_t i = 0; p && i < p->dir->nkids; i++)
		if (p->dir->kids[i] == n)
			return i;
	return 0;
}

static int depth(const struct ckpt_node *n)
{
	int d = 0;

	for (; n && n->parent; n = n->parent)
		d++;
	return d;
}

/* Path of @n from the root in shown names, '/' between (caller frees). */
static char *shown_path(const struct ckpt_node *n)
{
	char buf[CKPT_NAME_MAX + 1];
	const struct ckpt_node *p;
	size_t len = 0, pos;
	char *s;

	for (p = n; p && p->parent; p = p->parent)
		len += strlen(ptfs_shown_name(p, slot_of(p), CKPT_NAME_MAX,
					      buf)) + 1;
	s = malloc(len + 1);
	if (!s)
		return NULL;
	pos = len ? len - 1 : 0;
	s[pos] = 0;
	for (p = n; p && p->parent; p = p->parent) {
		const char *nm = ptfs_shown_name(p, slot_of(p), CKPT_NAME_MAX,
						 buf);
		size_t k = strlen(nm);

		pos -= k;
		memcpy(s + pos, nm, k);
		if (pos)
			s[--pos] = '/';
	}
	if (!len)
		s[0] = 0;
	return s;
}

char *ptfs_link_target(const struct ckpt_node *n)
{
	int up = depth(n->parent);
	char *to = shown_path(n->target), *s;
	size_t len;

	if (!to)
		return NULL;
	len = 3 * (size_t)up + strlen(to) + 2;
	s = malloc(len);
	if (s) {
		s[0] = 0;
		for (int i = 0; i < up; i++)
			strcat(s, i ? "/.." : "..");
		if (to[0])
			strcat(strcat(s, up ? "/" : ""), to);
		else if (!up)
			strcpy(s, ".");
	}
	free(to);
	return s;
}
