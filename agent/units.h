/* Sizes and durations on the command lines of perfmapd and perfmapctl. */
#ifndef PERFMAPD_UNITS_H
#define PERFMAPD_UNITS_H

#include <stdint.h>

/* "64M", "1g", "4096": bytes; -EINVAL on anything else. */
int parse_bytes(const char *s, uint64_t *out);
/* "90", "90s", "10m", "2h": seconds; -EINVAL on anything else. 0 is allowed. */
int parse_duration(const char *s, uint64_t *out);

#endif /* PERFMAPD_UNITS_H */
