/*
 * perfmapctl profile's views, after LuaJIT's jit/p.lua: what -j's letters
 * mean, and the report they ask for over a set of named samples. Pure: the
 * unit tests give it a fixed sample set, no root, no BPF.
 */
#ifndef PERFMAPD_PROFILE_REPORT_H
#define PERFMAPD_PROFILE_REPORT_H

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

/* One frame, named (strings outlive the report). */
struct prof_frame {
	const char *name;          /* NULL: none names it */
	const char *module;        /* a path, "[kernel]", "[anon]", "[unknown]" */
	uint64_t offset;           /* from the symbol, or from the module when no name */
	const char *file;          /* source file, or NULL */
	int line;
	char state;                /* J U I G C K */
};

/* A distinct stack, leaf first, its zone and how often it was sampled. */
struct prof_sample {
	const struct prof_frame *frames;
	uint32_t n;
	const char *zone;
	uint64_t count;
	const struct prof_cred *cred;   /* its process's; NULL when never read: no source shown */
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

/* Parse @letters (NULL or "": the default, "f"); -EINVAL with @err naming the letter. */
int prof_view_parse(const char *letters, struct prof_view *v, char *err, size_t errlen);
/* The report of @n samples: p.lua's output, or "[No samples collected]". 0, or -errno of a write. */
int prof_report(const struct prof_sample *s, size_t n, const struct prof_view *v, FILE *out);
/* @v's share of @total in whole percent, rounded half up as p.lua does. */
int prof_pct(uint64_t v, uint64_t total);
/* What a state letter means in a report: "JIT code", "Interpreted", ... */
const char *prof_state_name(char state);

#endif /* PERFMAPD_PROFILE_REPORT_H */
