/*
 * libperfmap-profile: sample processes on every CPU with BPF, count their
 * stacks in the kernel, and name each frame: JIT code by the perf maps
 * perfmapd keeps right (/tmp/perf-<pid>.map, or its archive once the
 * process is gone) and by the jitdump the process maps (jit-<pid>.dump,
 * read by the profiler itself), native code by its ELF symbols and DWARF lines
 * (elfutils' libdwfl), the kernel by /proc/kallsyms.
 *
 * The API follows LuaJIT's profiler (luaJIT_profile_start, _stop and
 * _dumpstack): start sampling with a mode string and a callback, stop, and
 * format a stack with dumpstack's letters. perfmapctl profile is built on
 * it. Errors are negative errno values, or NULL with errno set.
 *
 *	static struct perfmap_profile *prof;
 *
 *	static void on_stack(void *data, const struct perfmap_profile_stack *st)
 *	{
 *		size_t len;
 *		const char *s = perfmap_profile_dumpstack(perfmap_profile_symbolizer(prof),
 *							  st, "fZ;", -20, &len);
 *
 *		printf("%.*s %llu\n", (int)len, s, (unsigned long long)st->samples);
 *	}
 *
 *	pid_t pid = 1234;
 *	struct perfmap_profile_opts o = { .sz = sizeof(o), .pids = &pid, .npids = 1 };
 *	prof = perfmap_profile_start(&o, "i10", on_stack, NULL);
 *	... perfmap_profile_poll(prof, 100) for a while ...
 *	perfmap_profile_stop(prof);   (on_stack once per distinct stack; prof is freed)
 *
 * tests/install/profile_example.c is a complete program (docs/profile.md
 * shows it); make test builds it against the installed library.
 */
#ifndef PERFMAP_PROFILE_H
#define PERFMAP_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef PERFMAP_PROFILE_API
#define PERFMAP_PROFILE_API __attribute__((visibility("default")))
#endif

/* ---- the symbolizer: (pid, start time, address) -> module, name, offset ---- */

/*
 * Where a frame is, the letters of `perfmapctl profile -j v`:
 * J JIT code a perf map or jitdump names, U anonymous executable code none names
 * (lost symbols), I a runtime's interpreter loop, G a runtime's garbage
 * collector, C native code in a file, K the kernel.
 */
enum perfmap_frame_state {
	PERFMAP_STATE_JIT = 'J',
	PERFMAP_STATE_UNNAMED = 'U',
	PERFMAP_STATE_INTERP = 'I',
	PERFMAP_STATE_GC = 'G',
	PERFMAP_STATE_NATIVE = 'C',
	PERFMAP_STATE_KERNEL = 'K',
	PERFMAP_STATE_UNKNOWN = '?',
};

struct perfmap_symbol {
	const char *module;   /* the ELF file, the perf map, the jitdump, or "[kernel]"; "[unknown]" in no mapping read */
	const char *name;     /* the symbol or JIT name; NULL when none names the address */
	uint64_t offset;      /* from the symbol's start; from the module's when no name */
	const char *file;     /* source file: DWARF's, a jitdump's line table's, or the one a JIT name carries; NULL */
	int line;             /* its line, 0 when unknown */
	char state;           /* enum perfmap_frame_state */
};

struct perfmap_symbolizer_opts {
	size_t sz;                 /* sizeof(struct perfmap_symbolizer_opts) */
	const char *map_dir;       /* where perf maps are: NULL for /tmp */
	const char *archive_dir;   /* perfmapd's archive, for processes gone: NULL for /var/lib/perfmapd/archive */
	const char *states_file;   /* more symbol patterns for the I and G states; NULL: the built-in table */
};

struct perfmap_symbolizer;

PERFMAP_PROFILE_API struct perfmap_symbolizer *
perfmap_symbolizer_new(const struct perfmap_symbolizer_opts *opts);
/*
 * Read what names @pid's code now: its mappings, its perf map and the
 * jitdumps it maps (read on at each later read and at its exit). The
 * lookup does it for a process it has not seen; a profiler calls it at a
 * process's fork and exec, while the process is there to be read. @ppid:
 * the parent whose mappings a forked child shares until it execs (0: none).
 */
PERFMAP_PROFILE_API int perfmap_symbolizer_add_process(struct perfmap_symbolizer *s, pid_t pid,
							uint64_t start_ticks, pid_t ppid);
/* The process exec'd: its new image is read now; what was read before stays its old image's. */
PERFMAP_PROFILE_API void perfmap_symbolizer_exec(struct perfmap_symbolizer *s, pid_t pid,
						  uint64_t start_ticks);
/*
 * Name @addr in process (@pid, @start_ticks), start_ticks as
 * /proc/<pid>/stat field 22 (0: whichever process @pid is). @out's strings
 * live as long as the symbolizer. 0, or -ENOENT with @out naming what is
 * known (no name; module "[unknown]" and state ? when no mapping held it).
 */
PERFMAP_PROFILE_API int perfmap_symbolizer_lookup(struct perfmap_symbolizer *s, pid_t pid,
						   uint64_t start_ticks, uint64_t addr,
						   struct perfmap_symbol *out);
/*
 * The same in the process's image @image (perfmap_profile_stack.image: its
 * execs since the profile began), whose mappings were read while it ran:
 * a sample of an image since replaced is named as that image had it.
 */
PERFMAP_PROFILE_API int perfmap_symbolizer_lookup_image(struct perfmap_symbolizer *s, pid_t pid,
							 uint64_t start_ticks, uint32_t image,
							 uint64_t addr, struct perfmap_symbol *out);
/* What was read of a process with its mappings: for zones, and to say what a profile saw. */
struct perfmap_process {
	pid_t ppid;
	const char *exe;      /* its executable's path, as it sees it; NULL when unknown */
	const char *cgroup;   /* its cgroup (v2 path, or v1's first line's); NULL when unknown */
	const char *container;/* the 64 hex digits of a container id in its cgroup, or NULL */
};

/* 0 with @out, or -ENOENT for a process never read. Strings live as long as @s. */
PERFMAP_PROFILE_API int perfmap_symbolizer_process(struct perfmap_symbolizer *s, pid_t pid,
						    uint64_t start_ticks, struct perfmap_process *out);
PERFMAP_PROFILE_API void perfmap_symbolizer_free(struct perfmap_symbolizer *s);

/* ---- sampling ---- */

/* One distinct stack of one process and thread name, and how often it was sampled. */
struct perfmap_profile_stack {
	pid_t pid;
	uint64_t start_ticks;      /* /proc/<pid>/stat field 22: (pid, start_ticks) is the process */
	uint32_t image;            /* its execs since the profile began: which image was sampled */
	const char *comm;          /* the thread's name when sampled */
	const uint64_t *ips;       /* leaf first: the kernel's frames, then the user's */
	uint32_t nips;
	uint32_t nkernel;          /* how many of @ips are the kernel's */
	uint64_t samples;
};

typedef void (*perfmap_profile_cb)(void *data, const struct perfmap_profile_stack *st);

struct perfmap_profile_opts {
	size_t sz;                 /* sizeof(struct perfmap_profile_opts) */
	const pid_t *pids;         /* the processes sampled, and the children they fork later */
	size_t npids;
	bool all;                  /* every process of the host instead */
	bool no_kernel;            /* user stacks only */
	bool no_keep_maps;         /* do not read a process's perf map at its exit (memory): rely on
				    * perfmapd's retention and archive to have it at the report */
	const char *map_dir;       /* as perfmap_symbolizer_opts */
	const char *archive_dir;
	const char *states_file;
	uint32_t max_stacks;       /* distinct (process, thread, stack) counted; 0: 16384. Each takes
				    * some 1.6 KiB of kernel memory, allocated when first seen */
	const char *hold_socket;   /* perfmapd's hold socket (perfmapctl profile finds it from
				    * --run-dir): each process sampled is held there, its map kept at
				    * its path past the retention until its stacks are named (its
				    * flush, or the stop); NULL: no holds. No agent there, or one
				    * that goes: tried again every second, and every process still
				    * followed held again once it answers */
};

struct perfmap_profile_stats {
	uint64_t samples;          /* counted */
	uint64_t lost_keys;        /* not counted: more distinct stacks than max_stacks */
	uint64_t lost_events;      /* process events lost: mappings of those read late or not */
	uint64_t processes;        /* distinct processes followed since the start */
	uint64_t held;             /* processes perfmapd was asked to hold (hold_socket) */
	uint64_t holds_dropped;    /* holds not asked: the queue to the agent was full */
	bool agent_holds;          /* the agent's hold socket is connected */
	uint64_t tracked;          /* processes followed now: those gone are forgotten once a
				    * flush has named their stacks */
	uint64_t taken;            /* samples the kernel took: after the stop, samples + lost_keys
				    * (none lost at a flush's turn) */
};

struct perfmap_profile;

/*
 * Start sampling: @mode "i<ms>" sets the interval (10 ms, as LuaJIT's -jp),
 * on every CPU. Needs CAP_BPF and CAP_PERFMON (or root). @cb gets the
 * stacks at perfmap_profile_flush() and perfmap_profile_stop(), with @data.
 */
PERFMAP_PROFILE_API struct perfmap_profile *
perfmap_profile_start(const struct perfmap_profile_opts *opts, const char *mode,
		      perfmap_profile_cb cb, void *data);
/*
 * An fd that becomes readable when perfmap_profile_poll() has process events
 * to handle. With opts->all, exits wake nobody (an interrupt each, for a
 * kernel event that can wait): call perfmap_profile_poll() at least every
 * 100 ms or so, readable or not, as perfmapctl does every 50 ms.
 */
PERFMAP_PROFILE_API int perfmap_profile_fd(const struct perfmap_profile *p);
/*
 * Handle the forks, execs and exits of profiled processes (their mappings
 * are read while they exist), waiting up to @timeout_ms. Call it often: a
 * child that runs and exits between two calls is named from its parent's
 * mappings, or not at all.
 */
PERFMAP_PROFILE_API int perfmap_profile_poll(struct perfmap_profile *p, int timeout_ms);
/* Hand the stacks counted so far to the callback, and count anew (a profile per period). */
PERFMAP_PROFILE_API int perfmap_profile_flush(struct perfmap_profile *p);
/*
 * Stop sampling, and nothing else: the counts stay for perfmap_profile_stop()
 * to hand out, and perfmap_profile_stats() says what the whole profile took.
 */
PERFMAP_PROFILE_API int perfmap_profile_detach(struct perfmap_profile *p);
/* Stop sampling, hand the last stacks to the callback, and free @p (NULL is fine). */
PERFMAP_PROFILE_API int perfmap_profile_stop(struct perfmap_profile *p);
PERFMAP_PROFILE_API void perfmap_profile_stats(const struct perfmap_profile *p,
						struct perfmap_profile_stats *st);
/* The profile's symbolizer, to look addresses up or format stacks with. */
PERFMAP_PROFILE_API struct perfmap_symbolizer *perfmap_profile_symbolizer(struct perfmap_profile *p);

/*
 * Format @st as LuaJIT's dumpstack: @fmt's letters are p (full module
 * paths in what follows), f (function name, else module+offset), F
 * (module:name), l (file:line, else module+offset), Z (drop what follows
 * after the last frame); every other character is copied. |@depth| frames
 * at most, callee first; a negative @depth dumps caller first. The text
 * (not NUL-terminated; its length in *@len) lives in a buffer of @s that
 * the next call overwrites.
 */
PERFMAP_PROFILE_API const char *perfmap_profile_dumpstack(struct perfmap_symbolizer *s,
							   const struct perfmap_profile_stack *st,
							   const char *fmt, int depth, size_t *len);

/* ---- whose eyes a process had (added in 0.1 after the above) ---- */

/* A process's file-system ids and groups, as the host saw them when its mappings were read. */
struct perfmap_creds {
	uid_t uid;                 /* its file-system uid: what the kernel checks its opens with */
	gid_t gid;                 /* its file-system gid */
	size_t ngroups;
	const gid_t *groups;       /* its supplementary groups; live until the symbolizer forgets the
				    * process (perfmap_profile_flush() after its exit) or reads it again */
	bool own_mount_ns;         /* in the caller's mount namespace: the paths it names are the
				    * caller's paths (a container's name files in its own root) */
};

/*
 * The credentials of (@pid, @start_ticks)'s image @image (as
 * perfmap_symbolizer_lookup_image(); UINT32_MAX: the latest) when it was
 * last read: what it could open, so that a tool opens what its names carry
 * (a JIT name's or a DWARF line's source file) only as it could have. A
 * forked child never read has its parent's. 0, or -ENOENT when never read,
 * or when an exec came while it was read (they may be another image's).
 */
PERFMAP_PROFILE_API int perfmap_symbolizer_creds(struct perfmap_symbolizer *s, pid_t pid,
						  uint64_t start_ticks, uint32_t image,
						  struct perfmap_creds *out);

/* ---- a frame as people read it, and as a profile store names it (added in 0.2) ---- */

/*
 * Everything the symbolizer knows of an address: perfmap_symbol, the name
 * as perf shows it, and for code in a file what a profile store needs to
 * name the frame itself from the file (pprof's Mapping.build_id and
 * Location.address): the file's build id, the address in the file's own
 * terms, and the mapping in the same terms. The caller sets @sz; the
 * library writes no field past it.
 */
struct perfmap_frame {
	size_t sz;                 /* sizeof(struct perfmap_frame) */
	struct perfmap_symbol sym; /* as perfmap_symbolizer_lookup_image(): the name as the code has it */
	const char *demangled;     /* sym.name as perf report -v shows it: a C++ or Rust symbol of
				    * a file demangled (libiberty: C++ with its parameters, Rust
				    * without its ::h<hash>; past 4 KiB cut, "[...]" ending it); else
				    * sym.name, JIT and kernel names as they are (as perf). NULL when
				    * no name */
	const char *build_id;      /* code in a file: its GNU build id in hex; NULL when none was read */
	bool in_file;              /* code in an ELF file, at one of its PT_LOAD segments: the four
				    * below are set ("normalized", as Parca and Pyroscope take them) */
	uint64_t file_addr;        /* the address as the file's symbols have it (its ELF virtual address) */
	uint64_t map_start;        /* the executable mapping that held it, in the same terms: a process's */
	uint64_t map_limit;        /* address minus the file's load bias, so that file_addr - map_start */
	uint64_t map_offset;       /* + map_offset is its offset in the file, as pprof reads a Mapping */
};

/*
 * perfmap_symbolizer_lookup_image() for a whole frame: 0, or -ENOENT with
 * @out naming what is known, as it; -EINVAL when @out->sz is too small for sym.
 */
PERFMAP_PROFILE_API int perfmap_symbolizer_lookup_frame(struct perfmap_symbolizer *s, pid_t pid,
							 uint64_t start_ticks, uint32_t image,
							 uint64_t addr, struct perfmap_frame *out);

#ifdef __cplusplus
}
#endif

#endif /* PERFMAP_PROFILE_H */
