/*
 * units.c - sizes as people write them (units.h).
 */
#include "util/units.h"

#include <errno.h>
#include <stdlib.h>

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
