/*
 * cli_remote.c - the remote options every tool takes (cli.h): --insecure,
 * --endpoint, --cache and --connections, taken out of argv before the
 * tool's own getopt_long() sees it, and the URLs among the arguments
 * hidden (their passwords) before anything can print them.
 */
#include "cli.h"

#include "diag/diag.h"
#include "remote/remote.h"
#include "source/source.h"
#include "util/units.h"

#include <stdlib.h>
#include <string.h>

/* Is @arg option @name ("--endpoint"), with its value in *@val (the
 * next argument when not given with '=')? */
static bool takes(char **argv, int *i, int argc, const char *name,
		  const char **val, bool *missing)
{
	size_t n = strlen(name);

	if (strncmp(argv[*i], name, n))
		return false;
	if (argv[*i][n] == '=') {
		*val = argv[*i] + n + 1;
		return true;
	}
	if (argv[*i][n])
		return false;
	if (*i + 1 >= argc) {
		*missing = true;
		return true;
	}
	*val = argv[++*i];
	return true;
}

int cli_remote_args(int *argc, char **argv)
{
	struct rmt_conf conf = { 0 };
	struct diag d;
	int out = 1;

	src_hide_urls(*argc, argv);
	for (int i = 1; i < *argc; i++) {
		const char *v = NULL;
		bool missing = false;

		if (!strcmp(argv[i], "--")) {
			while (i < *argc)
				argv[out++] = argv[i++];
			break;
		}
		if (!strcmp(argv[i], "--insecure")) {
			conf.insecure = true;
		} else if (takes(argv, &i, *argc, "--endpoint", &v, &missing)) {
			conf.endpoint = v;
		} else if (takes(argv, &i, *argc, "--cache", &v, &missing)) {
			if (v && (!util_parse_size(v, &conf.cache) || !conf.cache))
				return cli_usage("--cache %s: not a size "
						 "(256M, 1G)", v);
		} else if (takes(argv, &i, *argc, "--connections", &v,
				 &missing)) {
			char *end;
			unsigned long n = v ? strtoul(v, &end, 10) : 0;

			if (v && (*end || !n || n > RMT_CONNS_MAX ||
				  *v == '-'))
				return cli_usage("--connections %s: not a "
						 "number from 1 to %d", v,
						 RMT_CONNS_MAX);
			conf.conns = (unsigned)n;
		} else {
			argv[out++] = argv[i];
			continue;
		}
		if (missing)
			return cli_usage("%s needs a value", argv[i]);
	}
	argv[out] = NULL;
	*argc = out;
	diag_init(&d, NULL);
	if (rmt_configure(&conf, &d))
		return cli_usage("%s", d.msg);
	return 0;
}
