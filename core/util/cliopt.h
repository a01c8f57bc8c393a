/*
 * cliopt.h - the options every command-line program of ptfs has, the
 * same letters with the same meaning (docs/user-guide.md has the table):
 * the tools (tools/cli.h) and the ptfs subcommands (fs/ptfs_cli.c) build
 * their getopt_long() tables and the end of their --help from these.  In
 * core/util because fs/ may not link tools/.  Macros only, no code; the
 * table entries need <getopt.h>.
 */
#ifndef PT_UTIL_CLIOPT_H
#define PT_UTIL_CLIOPT_H

/* struct option entries, each with its short letter as the value. */
#define CLI_LOPT_JSON		{ "json", no_argument, NULL, 'j' }
#define CLI_LOPT_QUIET		{ "quiet", no_argument, NULL, 'q' }
#define CLI_LOPT_VERBOSE	{ "verbose", no_argument, NULL, 'v' }
#define CLI_LOPT_HELP		{ "help", no_argument, NULL, 'h' }
#define CLI_LOPT_VERSION	{ "version", no_argument, NULL, 'V' }

/* Their lines in --help, in this order. */
#define CLI_HELP_JSON \
	"  -j, --json            the same as JSON (errors too: " \
	"{\"error\": ..})\n"
#define CLI_HELP_QUIET \
	"  -q, --quiet           nothing on standard output: the exit status " \
	"says it\n"
#define CLI_HELP_HELP \
	"  -h, --help            this text\n"
#define CLI_HELP_VERSION \
	"  -V, --version         print the version\n"

#endif
