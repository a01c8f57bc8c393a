/*
 * units.c - sizes as people write them (units.h).
 */
#include "util/units.h"

#include <errno.h>
#include <stdlib.h>
#include <strings.h>

bool util_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (*s < '0' || *s > '9')
		return false;	/* strtoull takes "-1" and " 1" */
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return false;
	switch (*end) {
	case 'k': case 'K': shift = 10; break;
	case 'm': case 'M': shift = 20; break;
	case 'g': case 'G': shift = 30; break;
	default: break;
	}
	if (shift) {
		end++;
		end += *end == 'i';
		end += *end == 'B' || *end == 'b';
	}
	if (*end || v > (UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

bool util_parse_shard_size(const char *arg, uint64_t *out)
{
	static const struct { const char *unit; double mul; } units[] = {
		{ "TiB", 1099511627776.0 }, { "GiB", 1073741824.0 },
		{ "MiB", 1048576.0 }, { "KiB", 1024.0 }, { "TB", 1e12 },
		{ "GB", 1e9 }, { "MB", 1e6 }, { "KB", 1e3 }, { "", 1.0 },
	};
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	while (*end == ' ')
		end++;
	for (size_t i = 0; end > arg && !errno && arg[0] >= '0' &&
	     arg[0] <= '9' && i < sizeof(units) / sizeof(*units); i++)
		if (!strcasecmp(end, units[i].unit) && v * units[i].mul >= 1 &&
		    v * units[i].mul < 1.8e19) {
			/* int(value * multiplier), as the hub rounds */
			*out = (uint64_t)(v * units[i].mul);
			return true;
		}
	return false;
}
