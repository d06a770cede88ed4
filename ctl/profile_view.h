/*
 * What perfmapctl profile's report and its annotation share: the view -j's
 * letters ask for, the credentials a sample's source files are opened
 * with, a level of counted keys, and a share in percent. The report calls
 * the annotation, never the other way round; both see this.
 */
#ifndef PERFMAPD_PROFILE_VIEW_H
#define PERFMAPD_PROFILE_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/*
 * Whose eyes a sample's process had: its file-system uid and gid and its
 * supplementary groups, as the host saw them. Annotation opens the source
 * files its frames name with these, never with root's.
 */
struct prof_cred {
	uid_t uid;
	gid_t gid;
	size_t ngroups;
	const gid_t *groups;
	/*
	 * In perfmapctl's mount namespace: the paths its names carry are ours.
	 * A container's name files in its own root, which need not be there any
	 * more, and whose host namesakes it could not open (root there is root).
	 */
	bool own_mount_ns;
};

/* What -j's letters ask for (p.lua's prof_start). */
struct prof_view {
	char scope;                /* 'f', 'F', 'l', or 0: states or zones only */
	bool paths;                /* p */
	int depth;                 /* N: frames of a key, callee first; < 0 caller first */
	int split;                 /* 0 none, 1 state first, 2 split after the first level, 3 f then l */
	char states;               /* 'v', 'z' or 0 */
	char raw;                  /* 0 percentages, 'r' counts, 'G' folded */
	int min_pct;               /* m<N> */
	int annotate;              /* -1 none; 3: a (excerpts), 0: A (whole files) */
	unsigned interval_ms;      /* i<N> */
	FILE *notes;               /* where a and A say why a file is not shown; NULL: stderr */
};

/* A key and its count, at one level of a report. */
struct tally {
	const char *key;
	uint64_t count;
	size_t first, last;        /* its second-level tallies, in the level below */
	const struct prof_cred *const *creds;   /* a and A: its samples' processes' (NULL ones too) */
	size_t ncreds;
};

/* Parse @letters (NULL or "": the default, "f"); -EINVAL with @err naming the letter. */
int prof_view_parse(const char *letters, struct prof_view *v, char *err, size_t errlen);
/* @v's share of @total in whole percent, rounded half up as p.lua does. */
int prof_pct(uint64_t v, uint64_t total);

#endif /* PERFMAPD_PROFILE_VIEW_H */
