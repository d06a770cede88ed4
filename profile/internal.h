/* libperfmap-profile's pieces, as they see each other; not installed. */
#ifndef PERFMAP_PROFILE_INTERNAL_H
#define PERFMAP_PROFILE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "perfmap_profile.h"
#include "perfmap_tools.h"

/*
 * Hidden from libperfmap-profile.so; in the static library a global name is
 * the program's too, so each carries the internal prefix perfmap_prof__
 * (tests/install/symbols.sh checks libperfmap-profile.a with nm).
 */
#define PROF_HIDDEN __attribute__((visibility("hidden")))

/* ---- a process's mappings, read while it exists (procsnap.c) ---- */

struct psnap_vma {
	uint64_t lo, hi, pgoff;
	uint64_t ino;              /* the mapped file's identity, as /proc showed it */
	uint32_t dev_major, dev_minor;
	enum perfmap_vma_kind kind;
	bool shared;
	char *path;                /* as the process sees it ("[vdso]" too); NULL for none */
};

struct jitmap;
struct jdump;

struct psnap {
	struct psnap *next;        /* in its hash chain */
	pid_t pid, ppid;
	uint64_t start_ticks;
	uint32_t image;            /* which image: execs since the profile began */
	bool forked;               /* a fork seen: until an exec, its parent's mappings are its own */
	struct psnap *parent;      /* that parent's, while this one is unread: kept for it */
	uint32_t unread_children;  /* forked children unread that name their code with this one's */
	bool read;                 /* @v was read (else: the parent's, or nothing) */
	struct psnap_vma *v;       /* executable mappings, sorted */
	size_t n;
	struct jitmap *jit;        /* its perf map, loaded at the first lookup in anonymous code */
	bool jit_tried;
	/*
	 * The jitdumps it maps, shared with every process mapping them: [0]
	 * its own (jit-<its pid>.dump), [1] another (its parent's, mapped
	 * before the fork); read on at each read of its mappings.
	 */
	struct jdump *dump[2];
	pid_t ns_pid;              /* its pid in its own pid namespace: what its dump's records carry */
	char *exe, *cgroup;        /* read with @v */
	uid_t uid;                 /* its effective uid, read with @v: who may own its perf map */
	bool uid_known;
	uid_t fsuid;               /* its file-system ids and groups, read with @v: what it could */
	gid_t fsgid;               /* open, as the source files its names carry are opened (-j a) */
	gid_t *groups;
	size_t ngroups;
	uint64_t mnt_ns;           /* its mount namespace: where the paths its names carry are */
	bool creds_known;
	char container[65];        /* a container id in @cgroup, or "" */
};

struct psnaps {
	struct psnap *bucket[1024];
	size_t count;
};

/* Any image: the latest one read. */
#define PSNAP_LATEST UINT32_MAX

/* (@pid, @start_ticks, @image); @start_ticks 0: the latest process at @pid. NULL: none. */
PROF_HIDDEN struct psnap *perfmap_prof__psnaps_find(struct psnaps *t, pid_t pid,
						    uint64_t start_ticks, uint32_t image);
/* The same, made when missing (@image PSNAP_LATEST: the latest, or image 0). */
PROF_HIDDEN struct psnap *perfmap_prof__psnaps_get(struct psnaps *t, pid_t pid,
						   uint64_t start_ticks, uint32_t image);
/*
 * Free every image read of (@pid, @start_ticks), adding the bytes of the
 * perf maps they held to *@bytes; -EBUSY (nothing freed) while a forked
 * child not read yet names its code with their mappings.
 */
PROF_HIDDEN int perfmap_prof__psnaps_forget(struct psnaps *t, pid_t pid, uint64_t start_ticks,
					    uint64_t *bytes);
/* @child, forked from @parent (NULL: none known), names its code with its mappings until read. */
PROF_HIDDEN void perfmap_prof__psnap_set_parent(struct psnap *child, struct psnap *parent);
/* (Re)read @s's executable mappings from /proc; -ESRCH when it is gone or another process. */
PROF_HIDDEN int perfmap_prof__psnap_read(struct psnap *s);
/* Forget what was read of @s's mappings: none of its own known (its parent's name it, if any). */
PROF_HIDDEN void perfmap_prof__psnap_unread(struct psnap *s);
/* The caller's own mount namespace (its inode), to tell whose paths a process's names carry. */
PROF_HIDDEN uint64_t perfmap_prof__psnap_own_mnt_ns(void);
PROF_HIDDEN const struct psnap_vma *perfmap_prof__psnap_find_vma(const struct psnap *s,
								 uint64_t addr);
PROF_HIDDEN void perfmap_prof__psnaps_free(struct psnaps *t);

/* ---- the kernel's symbols (kallsyms.c) ---- */

struct kallsyms;
PROF_HIDDEN struct kallsyms *perfmap_prof__kallsyms_load(void);
/* The symbol at or below @addr and its module ("[kernel]" or "[mod]"); NULL past the last. */
PROF_HIDDEN const char *perfmap_prof__kallsyms_find(const struct kallsyms *k, uint64_t addr,
						    uint64_t *off, const char **module);
PROF_HIDDEN void perfmap_prof__kallsyms_free(struct kallsyms *k);

/* ---- C++ and Rust names as people read them (demangle.c, libiberty) ---- */

/* The longest demangled name kept, in bytes: a longer one is cut, "[...]" ending it. */
#define DEMANGLED_MAX 4096
/* The longest mangled name demangled: libiberty's C++ side keeps two components a byte on the stack. */
#define DEMANGLE_IN_MAX 4096

/*
 * @name demangled into @buf (@len bytes: DEMANGLED_MAX + 1 holds the
 * longest), as perf report -v shows it: C++ with its parameters, Rust
 * without its legacy ::h<hash>. @buf, or NULL when @name is no C++ or Rust symbol
 * (a C name, a malformed one: left as it is).
 */
PROF_HIDDEN const char *perfmap_prof__demangle(const char *name, char *buf, size_t len);

/* ---- ELF symbols and DWARF lines of mapped files (elfsym.c, libdwfl) ---- */

struct elfsyms;
/* Copies of strings that live as long as the caller wants (the symbolizer's interned ones). */
typedef const char *(*elfsyms_intern_fn)(void *ctx, const char *str);
PROF_HIDDEN struct elfsyms *perfmap_prof__elfsyms_new(elfsyms_intern_fn intern, void *ctx);
/* What a mapped file says of a byte in it. */
struct elfsym_hit {
	const char *name;          /* its symbol, as the file has it (C++ mangled); NULL if none */
	const char *demangled;     /* @name as people read it (perfmap_prof__demangle()), else @name */
	uint64_t off;              /* from the symbol's start; the file offset when no symbol */
	const char *src;           /* DWARF's source file and line, or NULL and 0 */
	int line;
	const char *comp_dir;      /* the directory a relative @src is relative to, or NULL */
	const char *build_id;      /* the file's GNU build id in hex, or NULL */
	uint64_t vaddr;            /* the byte's address in the file's own terms (ELF virtual address) */
	bool has_vaddr;            /* in one of its PT_LOAD segments: @vaddr is set */
};

/*
 * Name the byte at @file_off of the file @v maps (opened as @open_path,
 * which may lead through /proc/<pid>/root, and only if it is still the
 * regular file @v mapped, by device and inode): 0 with @out (its name NULL
 * if no symbol), or -errno when the file cannot be read as ELF (-ESTALE:
 * another file is at its path now). The strings are @intern's copies, made
 * while a fault of the mapped file is caught: never the file's own bytes,
 * which its owner may truncate.
 */
PROF_HIDDEN int perfmap_prof__elfsyms_lookup(struct elfsyms *e, const struct psnap_vma *v,
					     const char *open_path, uint64_t file_off,
					     struct elfsym_hit *out);
PROF_HIDDEN void perfmap_prof__elfsyms_free(struct elfsyms *e);

/* ---- perf maps (jitmap.c) ---- */

/*
 * @pid's map in @map_dir, or the archive's for (@pid, @start_ticks), owned
 * by @uid (anyone may plant a file at another process's path in /tmp);
 * NULL when none.
 */
PROF_HIDDEN struct jitmap *perfmap_prof__jitmap_load(const char *map_dir, const char *archive_dir,
						     pid_t pid, uint64_t start_ticks, uid_t uid);
PROF_HIDDEN const char *perfmap_prof__jitmap_lookup(struct jitmap *j, uint64_t addr, uint64_t *off);
PROF_HIDDEN const char *perfmap_prof__jitmap_path(const struct jitmap *j);
/* The bytes of map it read. */
PROF_HIDDEN uint64_t perfmap_prof__jitmap_bytes(const struct jitmap *j);
PROF_HIDDEN void perfmap_prof__jitmap_free(struct jitmap *j);

/* ---- jitdumps the sampled processes map (jdump.c) ---- */

/* The dumps read, each once for all the processes that map it. */
struct jdumps {
	struct jdump *head;
	unsigned int fds;          /* dumps whose fd is kept open */
};

/* N of a path whose last component is jit-N.dump (a marker's), else 0. */
PROF_HIDDEN pid_t perfmap_prof__jdump_marker_pid(const char *path);
/*
 * The dump the marker @v of (@pid, @start_ticks) maps, for its uid @uid: the
 * one read already for another process of @uid mapping that file (a
 * reference more), else opened in the process's root (regular, no link,
 * owned by @uid, inode @v->ino). NULL with errno.
 */
PROF_HIDDEN struct jdump *perfmap_prof__jdump_get(struct jdumps *t, pid_t pid,
						  uint64_t start_ticks, uid_t uid,
						  const struct psnap_vma *v);
/* Is @d the file the mapping @v maps? */
PROF_HIDDEN bool perfmap_prof__jdump_is(const struct jdump *d, const struct psnap_vma *v);
/*
 * Read what was appended since the last read (bounded), while *@held, the
 * bytes of names held in all, is under @max; *@held follows what @d holds.
 * Its fd when kept, else reopened through (@pid, @start_ticks)'s root (@pid
 * 0: not).
 */
PROF_HIDDEN void perfmap_prof__jdump_update(struct jdump *d, pid_t pid, uint64_t start_ticks,
					    uint64_t *held, uint64_t max);
/* perfmap__jitdump_lookup() in @d. */
PROF_HIDDEN int perfmap_prof__jdump_lookup(const struct jdump *d, uint32_t pid, uint64_t addr,
					   struct perfmap_jitdump_sym *out);
/* The N of its jit-N.dump: the pid its producer's records carry. */
PROF_HIDDEN uint32_t perfmap_prof__jdump_name_pid(const struct jdump *d);
/* The marker's path, as the process sees it. */
PROF_HIDDEN const char *perfmap_prof__jdump_path(const struct jdump *d);
/* A reference dropped (NULL: none): the bytes it held when that freed it, else 0. */
PROF_HIDDEN uint64_t perfmap_prof__jdump_put(struct jdump *d);

/* ---- which runtime code is an interpreter or a collector (states.c) ---- */

struct states;
PROF_HIDDEN struct states *perfmap_prof__states_load(const char *path, int *err);
/* 'I', 'G' or 0 for a native symbol @name. */
PROF_HIDDEN char perfmap_prof__states_of(const struct states *s, const char *name);
PROF_HIDDEN void perfmap_prof__states_free(struct states *s);

/* The ticks of /proc/<pid>/stat field 22 of a BPF start_boottime. */
PROF_HIDDEN uint64_t perfmap_prof__ticks_of_ns(uint64_t ns);

/* ---- perfmapd's holds on the maps of processes sampled (agenthold.c) ---- */

struct agent_hold;

/* Connect to the agent's hold socket at @path; -errno (-ENOENT: no agent there). */
PROF_HIDDEN int perfmap_prof__agent_hold_open(const char *path, struct agent_hold **out);
PROF_HIDDEN void perfmap_prof__agent_hold_free(struct agent_hold *h);
/* Connected again just now (at most a try a second): the caller holds again what it samples. */
PROF_HIDDEN bool perfmap_prof__agent_hold_retry(struct agent_hold *h);
/* Queue a hold or release of (@pid, @start_ticks); @h NULL: nothing. */
PROF_HIDDEN void perfmap_prof__agent_hold_add(struct agent_hold *h, pid_t pid,
					      uint64_t start_ticks);
PROF_HIDDEN void perfmap_prof__agent_hold_release(struct agent_hold *h, pid_t pid,
						  uint64_t start_ticks);
/* Send what is queued, without blocking. */
PROF_HIDDEN void perfmap_prof__agent_hold_flush(struct agent_hold *h);
PROF_HIDDEN void perfmap_prof__agent_hold_stats(const struct agent_hold *h, uint64_t *asked,
						uint64_t *dropped, bool *connected);

#endif /* PERFMAP_PROFILE_INTERNAL_H */
