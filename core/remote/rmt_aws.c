/*
 * rmt_aws.c - S3 credentials, region and endpoint, found where the AWS CLI
 * looks: the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3 /
 * AWS_ENDPOINT_URL), then the profile (AWS_PROFILE, else "default") in the
 * shared credentials file ([NAME]) and the config file ([profile NAME],
 * [default]).  No keys: anonymous, unsigned requests (public buckets).
 * NEEDSWORK: credential_process, SSO and instance metadata are not read.
 */
#include "rmt_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/sbuf.h"

enum { K_KEY, K_SECRET, K_TOKEN, K_REGION, K_ENDPOINT, K_N };

static const char *const ini_keys[K_N] = {
	"aws_access_key_id", "aws_secret_access_key", "aws_session_token",
	"region", "endpoint_url",
};

static struct rmt_aws aws;
static bool aws_ok;
static pthread_once_t aws_once = PTHREAD_ONCE_INIT;

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* $NAME, else $HOME/DEFAULT; a leading "~/" is the home folder. */
static char *file_path(const char *name, const char *dflt)
{
	const char *v = env(name), *home = env("HOME");
	struct sbuf b = { 0 };

	if (v && strncmp(v, "~/", 2))
		return strdup(v);
	if (!home)
		return NULL;
	sb_printf(&b, "%s/%s", home, v ? v + 2 : dflt);
	return sb_detach(&b, NULL);
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' ||
			 e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/*
 * The values of ini_keys in section @sec (or @sec2) of the INI file at
 * @path, into the NULL slots of @val (malloc'd).  Indented lines are
 * sub-settings ("s3 =\n  addressing_style = path") and are skipped; a
 * missing file is no error, as for the CLI.
 */
static void ini_read(const char *path, const char *sec, const char *sec2,
		     char *val[K_N])
{
	char line[4096];
	bool in = false;
	FILE *f;

	if (!path || !(f = fopen(path, "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		char *s, *eq;

		if (line[0] == ' ' || line[0] == '\t')
			continue;
		s = trim(line);
		if (*s == '#' || *s == ';' || !*s)
			continue;
		if (*s == '[') {
			char *e = strchr(s, ']');

			if (!e)
				continue;
			*e = '\0';
			s = trim(s + 1);
			in = !strcmp(s, sec) || (sec2 && !strcmp(s, sec2));
			continue;
		}
		eq = strchr(s, '=');
		if (!in || !eq)
			continue;
		*eq = '\0';
		s = trim(s);
		for (int k = 0; k < K_N; k++)
			if (!strcmp(s, ini_keys[k]) && !val[k])
				val[k] = strdup(trim(eq + 1));
	}
	fclose(f);
}

static char *dup_env(const char *a, const char *b)
{
	const char *v = env(a);

	if (!v && b)
		v = env(b);
	return v ? strdup(v) : NULL;
}

static void aws_load(void)
{
	const char *profile = env("AWS_PROFILE");
	char *fcred[K_N] = { 0 }, *fconf[K_N] = { 0 };
	char *cred_path, *conf_path, *sec;
	struct sbuf b = { 0 };

	if (!profile)
		profile = env("AWS_DEFAULT_PROFILE");
	if (!profile)
		profile = "default";
	cred_path = file_path("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
	conf_path = file_path("AWS_CONFIG_FILE", ".aws/config");
	sb_printf(&b, "profile %s", profile);
	sec = sb_detach(&b, NULL);
	ini_read(cred_path, profile, NULL, fcred);
	ini_read(conf_path, strcmp(profile, "default") ? sec : "default",
		 strcmp(profile, "default") ? NULL : sec, fconf);

	if (env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY")) {
		aws.key = dup_env("AWS_ACCESS_KEY_ID", NULL);
		aws.secret = dup_env("AWS_SECRET_ACCESS_KEY", NULL);
		aws.token = dup_env("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN");
	} else {
		/* the keys come as a pair, from one file */
		char **src = fcred[K_KEY] && fcred[K_SECRET] ? fcred :
			     fconf[K_KEY] && fconf[K_SECRET] ? fconf : NULL;

		if (src) {
			aws.key = src[K_KEY];
			aws.secret = src[K_SECRET];
			aws.token = src[K_TOKEN];
			src[K_KEY] = src[K_SECRET] = src[K_TOKEN] = NULL;
		}
	}
	aws.region = dup_env("AWS_REGION", "AWS_DEFAULT_REGION");
	if (!aws.region && fconf[K_REGION]) {
		aws.region = fconf[K_REGION];
		fconf[K_REGION] = NULL;
	}
	if (!aws.region)
		aws.region = strdup("us-east-1");
	if (rmt_cf.endpoint)
		aws.endpoint = strdup(rmt_cf.endpoint);
	else
		aws.endpoint = dup_env("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL");
	if (!aws.endpoint && fconf[K_ENDPOINT]) {
		aws.endpoint = fconf[K_ENDPOINT];
		fconf[K_ENDPOINT] = NULL;
	}
	aws_ok = aws.region && (!aws.key || aws.secret);
	for (int k = 0; k < K_N; k++) {
		if (k == K_SECRET && fcred[k])
			memset(fcred[k], 0, strlen(fcred[k]));
		if (k == K_SECRET && fconf[k])
			memset(fconf[k], 0, strlen(fconf[k]));
		free(fcred[k]);
		free(fconf[k]);
	}
	free(sec);
	free(cred_path);
	free(conf_path);
}

const struct rmt_aws *rmt_aws_get(void)
{
	pthread_once(&aws_once, aws_load);
	return aws_ok ? &aws : NULL;
}
