/* perfmapctl profile -o FILE.pb.gz: the named samples as a gzipped pprof profile (protobuf-c, zlib). */
#ifndef PERFMAPD_PROFILE_PPROF_H
#define PERFMAPD_PROFILE_PPROF_H

#include <stddef.h>
#include <stdint.h>

#include "profile_report.h"

struct prof_pprof_info {
	uint64_t interval_ns;      /* the sampling period: each sample stands for this much CPU */
	uint64_t time_ns;          /* when the profile began, since the epoch */
	uint64_t duration_ns;
	bool fresh;                /* a new file: -EEXIST if @path is taken (never written over) */
};

/* Bytes of the valid UTF-8 sequence at @s (no overlong form, no surrogate), 0 if none. */
size_t prof_utf8_len(const unsigned char *s);
/* Does @path ask for pprof (it ends in .pb.gz)? */
bool prof_pprof_wanted(const char *path);
/* The @n samples as a gzipped pprof Profile in *@out (*@out_len bytes; the caller frees it); 0 or -errno. */
int prof_pprof_encode(const struct prof_sample *s, size_t n, const struct prof_pprof_info *info,
		      uint8_t **out, size_t *out_len);
/* Write the @n samples to @path as a gzipped pprof Profile; 0 or -errno. */
int prof_pprof_write(const struct prof_sample *s, size_t n, const struct prof_pprof_info *info,
		     const char *path);

#endif /* PERFMAPD_PROFILE_PPROF_H */
