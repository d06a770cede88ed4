/* perfmapctl profile -j a / A: source files with each line's share of the samples (p.lua's prof_annotate). */
#ifndef PERFMAPD_PROFILE_ANNOTATE_H
#define PERFMAPD_PROFILE_ANNOTATE_H

#include <stdint.h>
#include <stdio.h>

#include "profile_view.h"

/*
 * The source file @path, opened for reading as a process of @cred could
 * have opened it, and only if it is a regular file no larger than 64 MiB on
 * no file system of /proc, /sys or /dev: a thread takes @cred's
 * file-system ids and groups and drops every capability, resolves @path
 * with openat2(O_PATH, RESOLVE_NO_MAGICLINKS), checks what it found, and
 * opens that for reading (O_NONBLOCK) through its descriptor; the kernel
 * judges each directory searched, each symlink followed and the read as it
 * would the process's own. 0 with *@fd, or -errno with @why (a sentence,
 * for "PATH: not shown: WHY") in @len bytes.
 */
int prof_source_open(const char *path, const struct prof_cred *cred, int *fd, char *why,
		     size_t len);

/*
 * The files of the "file:line" keys of @t: excerpts around the lines with
 * samples (v->annotate 3 lines of context) or whole files (0). 0, or -EIO.
 */
int prof_annotate(const struct tally *t, size_t n, uint64_t total, const struct prof_view *v,
		  FILE *out);

#endif /* PERFMAPD_PROFILE_ANNOTATE_H */
