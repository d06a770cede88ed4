/* Sizes and durations on the command lines of perfmapd and perfmapctl. */
#include <errno.h>
#include <stdlib.h>

#include "perfmap_tools.h"

int perfmap__parse_bytes(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	}
	if (*end || v > (UINT64_MAX >> shift) || !v)
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

int perfmap__parse_duration(const char *s, uint64_t *out)
{
	unsigned long long v, mul = 1;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-' || *s == '+')
		return -EINVAL;
	switch (*end) {
	case 's': mul = 1; end++; break;
	case 'm': mul = 60; end++; break;
	case 'h': mul = 3600; end++; break;
	}
	if (*end || v > UINT64_MAX / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}
