/* The symbolizer's state, for symbolize.c and dumpstack.c. */
#ifndef PERFMAP_PROFILE_SYMBOLIZER_H
#define PERFMAP_PROFILE_SYMBOLIZER_H

#include <limits.h>

#include "internal.h"

struct perfmap_symbolizer {
	char map_dir[PATH_MAX];
	char archive_dir[PATH_MAX];
	struct psnaps procs;
	struct kallsyms *ks;
	bool ks_tried;
	struct elfsyms *elf;
	struct states *states;
	char jitfile[PATH_MAX];    /* the last JIT name's file, before it is interned */
	struct perfmap_strtab strings;  /* interned: what the names it gives point at */
	uint64_t map_bytes;        /* of the perf maps it holds, and of the jitdumps' names */
	struct jdumps jdumps;      /* the jitdumps sampled processes map, each read once */
	char *dump;                /* perfmap_profile_dumpstack()'s text */
	size_t dump_cap;
};

/* Read (@pid, @start_ticks)'s image @image (PSNAP_LATEST: the latest) now; @ppid: its parent, for a fork. */
PROF_HIDDEN int perfmap_prof__symbolizer_read(struct perfmap_symbolizer *s, pid_t pid,
					      uint64_t start_ticks, uint32_t image, pid_t ppid);
/* The perf maps held, in all: past this much a process's JIT code goes unnamed. */
#define MAPS_MAX_BYTES (1ull << 30)

/*
 * A process that runs JIT code exits: read its perf map now, while it is at
 * its path (perfmapd retains it there), and keep it until the report, so
 * that neither the end of the retention nor the archive's quota takes its
 * names. 0, -ENOENT (no map), -ENOSPC (MAPS_MAX_BYTES reached).
 */
PROF_HIDDEN int perfmap_prof__symbolizer_keep_map(struct perfmap_symbolizer *s, pid_t pid,
						  uint64_t start_ticks);
/*
 * (@pid, @start_ticks) exits: what its jitdumps hold last is read now, from
 * the fds kept (perfmapd need not be there to name that code).
 */
PROF_HIDDEN void perfmap_prof__symbolizer_exited(struct perfmap_symbolizer *s, pid_t pid,
						 uint64_t start_ticks);
/*
 * (@pid, @start_ticks)'s image @image read during an exec: what was read may
 * be the next image's, and is dropped (its forked parent's, if any, name it).
 */
PROF_HIDDEN void perfmap_prof__symbolizer_unread(struct perfmap_symbolizer *s, pid_t pid,
						 uint64_t start_ticks, uint32_t image);
/* A fork seen, its child not read: its parent's mappings name it until it is. */
PROF_HIDDEN int perfmap_prof__symbolizer_forked(struct perfmap_symbolizer *s, pid_t pid,
						uint64_t start_ticks, pid_t ppid);
/*
 * (@pid, @start_ticks) is gone and its stacks named: what was read of it is
 * freed (a profile that runs for days keeps only the processes it may still
 * have to name). -EBUSY, nothing freed, while a forked child not read yet
 * names its code with its mappings.
 */
PROF_HIDDEN int perfmap_prof__symbolizer_forget(struct perfmap_symbolizer *s, pid_t pid,
						uint64_t start_ticks);

#endif /* PERFMAP_PROFILE_SYMBOLIZER_H */
