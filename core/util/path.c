/*
 * path.c - a path made absolute without resolving its last name: for a
 * file that does not exist yet (ptfs -o output=), or a pattern of names
 * that stands for a set of files (DIR/model_world_size_4_rank_*.pt).
 */
#define _XOPEN_SOURCE 700	/* realpath */
#include "path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * @path made absolute against the caller's directory (the daemon changes
 * to / when it detaches): the directory part resolved, the last name kept
 * as given, so a file that does not exist yet is fine.  malloc'd; NULL
 * with errno set.
 */
char *util_abs_path(const char *path)
{
	char *copy = strdup(path), *slash, *dir, *out = NULL;
	const char *base;

	if (!copy)
		return NULL;
	slash = strrchr(copy, '/');
	while (slash && slash > copy && !slash[1]) {	/* "dir/" */
		*slash = 0;
		slash = strrchr(copy, '/');
	}
	if (slash) {
		*slash = 0;
		base = slash + 1;
		dir = realpath(slash == copy ? "/" : copy, NULL);
	} else {
		base = copy;
		dir = realpath(".", NULL);
	}
	if (dir && (out = malloc(strlen(dir) + strlen(base) + 2)))
		sprintf(out, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", base);
	free(dir);
	free(copy);
	return out;
}
