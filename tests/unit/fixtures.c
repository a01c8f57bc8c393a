/*
 * fixtures.c - the walk over the shared fixture checkpoints that the zip,
 * writer and model tests share (see fixtures.h).
 */
#include "fixtures.h"
#include "test_util.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdlib.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static int has_suffix(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);

	return n >= m && !strcmp(s + n - m, suf);
}

/* PT_NO_TORCH2=1: the user went without torch 2.x (README) */
static bool opt_out_torch2(void)
{
	const char *e = getenv("PT_NO_TORCH2");

	return e && !strcmp(e, "1");
}

unsigned for_each_fixture(void (*fn)(const char *path, void *arg), void *arg)
{
	static const char *const dirs[] = { "torch-1.13", "torch-2",
					     "real" };
	char path[4096];
	unsigned files = 0;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		struct dirent *de;
		DIR *dir;

		snprintf(path, sizeof(path), "%s/fixtures/%s", PT_TESTENV_DIR,
			 dirs[i]);
		dir = opendir(path);
		/* the generated ones are always there ("fixtures" test);
		   the real-world corpus only beside ../shared */
		if (!dir && (!strcmp(dirs[i], "real") ||
			     (!strcmp(dirs[i], "torch-2") && opt_out_torch2()))) {
			cr_log_info("skipping %s: %s", path, strerror(errno));
			continue;
		}
		cr_assert(dir, "%s: %s", path, strerror(errno));
		while ((de = readdir(dir))) {
			const char *name = de->d_name;

			if (!has_suffix(name, ".pt") && !has_suffix(name, ".pth") &&
			    !has_suffix(name, ".bin") && !has_suffix(name, ".ptl"))
				continue;
			snprintf(path, sizeof(path), "%s/fixtures/%s/%s",
				 PT_TESTENV_DIR, dirs[i], name);
			fn(path, arg);
			files++;
		}
		closedir(dir);
	}
	return files;
}
