/* Where executable mappings enter perfmapd: PERF_RECORD_MMAP2 from a dummy perf event on each CPU. */
#ifndef PERFMAPD_EXECMAP_H
#define PERFMAPD_EXECMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "in/in_config.h"

/*
 * What code a mapping holds, as perf will look it up: anonymous memory is
 * named by perf-<pid>.map; a memfd mapping (.NET's double mapping) is looked
 * up as a file, never in the map; a file mapping has its ELF symbols.
 */
enum execmap_kind {
	EXECMAP_FILE,
	EXECMAP_ANON,
	EXECMAP_MEMFD,
	EXECMAP_JITDUMP,  /* a jitdump's marker: its file jit-<pid>.dump, mapped executable */
};

struct execmap_rec {
	pid_t pid;
	uint64_t addr, len;
	uint32_t prot;
	enum execmap_kind kind;
	uint64_t ts_ns;       /* CLOCK_BOOTTIME */
	/* EXECMAP_JITDUMP: the file, as the process sees it (valid during the callback), and its inode */
	const char *path;
	uint32_t maj, min;
	uint64_t ino;
};

/* "perf-mmap2", "procfs", "off" ("auto" before the choice) */
const char *execmap_source_name(enum execmap_source src);

/*
 * One record of a perf ring (@len bytes, header included), without system
 * calls (the fuzzer drives it): 1 with @out filled for an executable
 * anonymous or memfd mapping or a jitdump's marker, 0 for any other record, -EINVAL when it is not
 * a well-formed MMAP2 record with the sample id this source asks for.
 * Lost records are counted in @lost.
 */
int execmap_parse(const void *rec, size_t len, struct execmap_rec *out, uint64_t *lost);
/* The kind of a mapping from the file name perf gives it ("//anon", "/memfd:x (deleted)"). */
enum execmap_kind execmap_kind_of(const char *name, size_t len, bool shared);

typedef void (*execmap_fn)(void *ctx, const struct execmap_rec *rec);

struct execmap;

/* One dummy event per online CPU; NULL with errno when perf events cannot be opened. */
struct execmap *execmap__open(unsigned int ring_pages, execmap_fn fn, void *ctx);
void execmap__free(struct execmap *em);
/* An epoll fd that is readable when some ring has passed its watermark. */
int execmap__fd(const struct execmap *em);
/*
 * Note where each ring's records end now: the next consume stops there. A
 * caller reads the process events queued meanwhile in between, so that a
 * process is in its table before its first mapping is counted.
 */
void execmap__mark(struct execmap *em);
/* Hand every queued record (up to the mark, if one was made) to the callback; the number handed. */
int execmap__consume(struct execmap *em);
/* Records the kernel could not queue, since open: a gap that /proc must fill. */
uint64_t execmap__lost(const struct execmap *em);
uint64_t execmap__seen(const struct execmap *em);
unsigned int execmap__cpus(const struct execmap *em);

#endif /* PERFMAPD_EXECMAP_H */
