/*
 * perfmapctl profile's report, after LuaJIT's jit/p.lua: over a set of
 * named samples, what a view (profile_view.h: -j's letters) asks for.
 * Pure: the unit tests give it a fixed sample set, no root, no BPF.
 */
#ifndef PERFMAPD_PROFILE_REPORT_H
#define PERFMAPD_PROFILE_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "profile_view.h"

/* One frame, named (strings outlive the report). */
struct prof_frame {
	const char *name;          /* as people read it (C++ and Rust demangled); NULL: none names it */
	const char *module;        /* a path, "[kernel]", "[anon]", "[unknown]" */
	uint64_t offset;           /* from the symbol, or from the module when no name */
	const char *file;          /* source file, or NULL */
	int line;
	char state;                /* J U I G C K */
	/* What a profile store names native code with (pprof): */
	const char *system_name;   /* the symbol as its file has it (mangled); NULL: @name */
	const char *build_id;      /* the module's GNU build id in hex, or NULL */
	bool in_file;              /* code in an ELF file: the four below are set */
	uint64_t address;          /* in the file's own terms (ELF virtual address, "normalized") */
	uint64_t map_start, map_limit, map_offset;  /* its mapping, in the same terms */
};

/* A distinct stack, leaf first, its zone and how often it was sampled. */
struct prof_sample {
	const struct prof_frame *frames;
	uint32_t n;
	const char *zone;
	uint64_t count;
	const struct prof_cred *cred;   /* its process's; NULL when never read: no source shown */
};

/* The report of @n samples: p.lua's output, or "[No samples collected]". 0, or -errno of a write. */
int prof_report(const struct prof_sample *s, size_t n, const struct prof_view *v, FILE *out);
/* What a state letter means in a report: "JIT code", "Interpreted", ... */
const char *prof_state_name(char state);

#endif /* PERFMAPD_PROFILE_REPORT_H */
