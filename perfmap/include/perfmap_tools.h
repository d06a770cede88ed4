/*
 * What libperfmap offers perfmapd and perfmapctl only: code both tools share.
 * Not installed and not part of libperfmap.so's ABI (the tools link the
 * static library); names carry the library's internal prefix, perfmap__.
 * Errors are negative errno values throughout.
 */
#ifndef PERFMAP_TOOLS_H
#define PERFMAP_TOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "perfmap.h"

/* ---- opening and copying maps (safe_open.c, copy_fd.c, copy.c, format.c) ---- */

/*
 * perfmap_open_map() relative to @dirfd, with @flags (O_RDONLY, O_RDWR |
 * O_APPEND, ...; O_NONBLOCK, O_CLOEXEC and O_NOCTTY are added): the same
 * refusals, and the inode that was checked in @st. The fd, or -errno.
 */
int perfmap__open_map_at(int dirfd, const char *name, int flags,
			 const struct perfmap_open_opts *opts, struct stat *st);
/*
 * Append the entries of @src_fd, up to @limit bytes, to @dst_fd in whole
 * canonical lines, with the caller's buffers: @buf (@cap bytes) and @out
 * (@out_cap bytes, at least PERFMAP_LINE_MAX). Async-signal-safe. The number
 * of entries copied, or -errno.
 */
long perfmap__copy_fd(int src_fd, uint64_t limit, int dst_fd, char *buf,
		      size_t cap, char *out, size_t out_cap);
/* Is the entry [@start, @start + @size) to be copied? */
typedef bool (*perfmap_keep_fn)(void *ctx, uint64_t start, uint64_t size);
/* perfmap__copy_fd() of the entries @keep keeps (NULL: all); those left out are added to *@dropped. */
long perfmap__copy_fd_if(int src_fd, uint64_t limit, int dst_fd, char *buf, size_t cap,
			 char *out, size_t out_cap, perfmap_keep_fn keep, void *ctx,
			 long *dropped);
/* write() all of @buf, through EINTR and short writes; 0 or -errno. */
int perfmap__write_all(int fd, const char *buf, size_t len);
/*
 * The whole lines of @buf[0, @len) rewritten in place as the canonical
 * lines of their entries, names sanitized and cut as the writer cuts them;
 * a line that is no entry (text, an empty line, a rejected one) is left out
 * and counted in *@dropped (empty lines are not counted). A canonical line is
 * never longer than the line it comes from. Bytes after the last newline are
 * left out too. The new length.
 */
size_t perfmap__canonical_lines(char *buf, size_t len, uint64_t *dropped);

/* ---- acting as a process (fsids.c) ---- */

/*
 * The calling thread, and it alone, takes @uid and @gid as its file-system
 * ids and @groups as its supplementary groups (CAP_SETUID and CAP_SETGID
 * in effect, unless they are its own already): its file operations are
 * then judged as that process's. The capabilities are the caller's to
 * drop. 0, or -errno (-EPERM: an id was not taken).
 */
int perfmap__take_fsids(uid_t uid, gid_t gid, const gid_t *groups, size_t ngroups);
/* The inode of /proc/<@pid>/ns/<@ns> ("mnt", "user", ...; @pid 0: our own); 0 when unreadable. */
uint64_t perfmap__ns_inode(pid_t pid, const char *ns);
/* The same for the process whose /proc/<pid> directory is open at @dirfd (O_PATH will do). */
uint64_t perfmap__ns_inode_at(int dirfd, const char *ns);

/* ---- a process's /proc/<pid>/stat (procstat.c) ---- */

struct perfmap_proc_stat {
	char comm[16];           /* field 2: NUL-terminated, cut at 15 bytes, not escaped */
	char state;              /* field 3: 'Z' or 'X' once it has exited */
	pid_t ppid;              /* field 4 */
	unsigned long flags;     /* field 9: PF_EXITING from the start of its exit */
	uint64_t utime_ticks;    /* field 14: CPU time in user mode, all its threads' */
	uint64_t stime_ticks;    /* field 15: CPU time in the kernel, all its threads' */
	uint64_t start_ticks;    /* field 22: with the pid, which process it is */
	uint64_t vsize_bytes;    /* field 23: its virtual memory */
	uint64_t rss_pages;      /* field 24: resident, in pages */
};

/*
 * The text of a /proc/<pid>/stat in @buf (NUL-terminated) into @out: 0, or
 * -EINVAL (@out untouched) when a field up to 24 is not there. No system
 * calls (fuzzed).
 */
int perfmap__proc_stat_parse(const char *buf, struct perfmap_proc_stat *out);
/*
 * /proc/<@pid>/stat, read and parsed: 0, -ESRCH when no process holds @pid
 * (or it went while read), -EINVAL for text no stat line, or -errno.
 */
int perfmap__proc_stat_read(pid_t pid, struct perfmap_proc_stat *out);
/*
 * The same through @dirfd, the process's /proc/<pid> directory (O_PATH will
 * do): a directory opened while the process lived names that process only,
 * and every read through it once it is reaped is -ESRCH, never another
 * process's at the pid (a zombie's stat still reads, state 'Z').
 */
int perfmap__proc_stat_read_at(int dirfd, struct perfmap_proc_stat *out);
/* /proc/self/stat, the caller's own, as perfmap__proc_stat_read(). */
int perfmap__proc_stat_read_self(struct perfmap_proc_stat *out);

/* ---- strings kept once per content (strtab.c) ---- */

/* Zeroed: empty. Equal strings interned get the same copy. */
struct perfmap_strtab {
	char **slot;             /* open addressing, by content */
	size_t count, cap;
};

/* @str's copy in @t, kept until perfmap__strtab_release(); NULL without memory. */
const char *perfmap__strtab_intern(struct perfmap_strtab *t, const char *str);
/* The same for the first @len bytes of @str (fewer at a NUL): a name inside a larger text. */
const char *perfmap__strtab_intern_n(struct perfmap_strtab *t, const char *str, size_t len);
/* Free every copy: @t is empty, and may be used again. Accepts NULL. */
void perfmap__strtab_release(struct perfmap_strtab *t);

/* ---- who writes a file (writers.c) ---- */

struct perfmap_writers {
	pid_t pid[8];        /* the first writers found */
	size_t count;        /* all writers found */
	size_t hidden;       /* processes whose fds we could not read */
};

/* Scan every process but ourselves for an fd open for writing on (dev, ino). */
int perfmap__writers_find(dev_t dev, ino_t ino, struct perfmap_writers *w);
/* "1234 (python3)" into @buf. */
void perfmap__writer_describe(pid_t pid, char *buf, size_t len);

/* ---- replacing and moving maps, never under a writer (replace.c) ---- */

/* Write the new contents of the file open as @src_fd to @out_fd; 0 or -errno. */
typedef int (*perfmap_fill_fn)(int src_fd, int out_fd, void *ctx);

struct perfmap_replace_result {
	struct perfmap_writers writers;  /* who holds the file open for writing */
	bool guarded;            /* a read lease kept writers out throughout */
	const char *why;         /* what went wrong, in words, when not 0 */
	char kept[4096];         /* where the original was left, if not at its path */
};

/*
 * Replace @path, open read-only as @src_fd, with what @fill writes, through
 * a temporary file in the same directory and rename(). A process holding the
 * file open for writing would go on appending to the old inode, so refuse
 * with -EBUSY when one does, or when one opens it before the swap is done.
 * Blocks SIGIO while it runs and consumes the SIGIO a lease break raises:
 * not for programs that use SIGIO themselves.
 */
int perfmap__replace(const char *path, int src_fd, perfmap_fill_fn fill, void *ctx,
		     struct perfmap_replace_result *res);
/* Write what @fill makes to @path, atomically (temporary file and rename()). */
int perfmap__write_atomic(const char *path, int src_fd, perfmap_fill_fn fill,
			  void *ctx, struct perfmap_replace_result *res);
/*
 * Rename @name in @dirfd, open read-only as @fd, to @dest in the same
 * directory, unless a process has it open for writing (-EBUSY) or @name is
 * another file by now (-ESTALE). With @size not UINT64_MAX, also -ESTALE
 * unless the file is still @size bytes once no writer can change it: it was
 * judged as it was. Never replaces an existing @dest.
 */
int perfmap__move_aside(int dirfd, const char *name, int fd, uint64_t size, const char *dest,
			struct perfmap_replace_result *res);

/* ---- compaction (compact.c) ---- */

struct perfmap_compact_job {
	uint64_t max_bytes;                  /* in: read at most this much; 0 default */
	uint64_t max_table_bytes;            /* in: bound on the table's memory; 0: none */
	bool uncompacted;                    /* out: copied as it was, in whole lines */
	struct perfmap_reader_stats read;    /* out */
	struct perfmap_table_stats table;    /* out (uncompacted: entries and lines_out) */
};

/*
 * A perfmap_fill_fn: the canonical form of all of @src_fd into @out_fd.
 * -EFBIG when the map is larger than @job->max_bytes: a prefix would lose the rest.
 * A map whose table would need more than @job->max_table_bytes is copied
 * as it is instead (perfmap__stream_fill(), from offset 0), @job->uncompacted.
 */
int perfmap__compact_fill(int src_fd, int out_fd, void *job);
/*
 * A perfmap_fill_fn in bounded memory: the entries of @src_fd as they are
 * (canonical lines, not sorted or merged), up to @job->max_bytes in whole lines.
 */
int perfmap__stream_fill(int src_fd, int out_fd, void *job);

/* ---- what the two tools agree on (units.c, runpaths.c) ---- */

/* "64M", "1g", "4096": bytes; -EINVAL on anything else. */
int perfmap__parse_bytes(const char *s, uint64_t *out);
/* "90", "90s", "10m", "2h": seconds; -EINVAL on anything else. 0 is allowed. */
int perfmap__parse_duration(const char *s, uint64_t *out);

#define PERFMAPD_RUN_DIR "/run/perfmapd"

/*
 * The name a jitdump is archived under beside its map: "perf-<rest>.map"
 * gives "jit-<rest>.dump" (perf-42-1234.map: jit-42-1234.dump). 0, -EINVAL
 * for a name that is no archived map's, -ENAMETOOLONG.
 */
int perfmap__archived_dump_name(const char *map_name, char *buf, size_t len);

/*
 * The extended attribute `perfmapctl restore` sets on a map it put back: the
 * name of the archived map it copied. The agent deletes such a map after its
 * retention, rather than archiving it a second time, while that archived map
 * is still there, the same size and of the same owner. A user.* name, not
 * trusted.*: the agent runs without CAP_SYS_ADMIN, and trusted.* names are
 * invisible without it. Whoever may write the map may set it too, and so
 * have the agent delete that map rather than archive it: no more than such a
 * writer can do by truncating it.
 */
#define PERFMAP_RESTORED_XATTR "user.perfmapd.restored"

/*
 * The lock and status socket of the agent for @map_dir, which perfmapd
 * creates and perfmapctl connects to: "/tmp" -> "<run_dir>/tmp.lock" and
 * "tmp.sock". Distinct directories always get distinct names.
 */
int perfmap__run_paths(const char *run_dir, const char *map_dir, char *lock, char *sock,
		       size_t len);
/*
 * The agent's hold socket beside them ("<run_dir>/tmp.hold"), where
 * perfmapctl profile asks it to keep the maps of the processes it sampled.
 */
int perfmap__hold_path(const char *run_dir, const char *map_dir, char *path, size_t len);

/* ---- a process's mappings, /proc/<pid>/maps (procmaps.c) ---- */

/*
 * How perf resolves samples in a mapping. perf (tools/perf/util/map.c,
 * map__new()) looks an executable mapping up in perf-<pid>.map when its name
 * is_anon_memory() ("//anon", which /proc shows as no path, "/dev/zero...",
 * "/anon_hugepage...", or MAP_HUGETLB) or is_no_dso_memory() ("[stack...",
 * "/SYSV...", "[heap]"); a named anonymous mapping ("[anon:NAME]",
 * "[anon_shmem:NAME]") reaches perf as "//anon", the kernel's
 * PERF_RECORD_MMAP2 ignoring such names. Those are PERFMAP_VMA_ANON.
 */
enum perfmap_vma_kind {
	PERFMAP_VMA_ANON,    /* perf looks these up in perf-<pid>.map */
	PERFMAP_VMA_MEMFD,   /* "/memfd:...": perf resolves it as a file, never through a map */
	PERFMAP_VMA_FILE,
	PERFMAP_VMA_SPECIAL, /* [vdso] [vvar] [vsyscall] [uprobes] ... */
};

struct perfmap_vma {
	uint64_t lo, hi, pgoff, ino;
	uint32_t dev_major, dev_minor;
	unsigned int prot;   /* PROT_READ|PROT_WRITE|PROT_EXEC */
	bool shared;         /* 's' */
	enum perfmap_vma_kind kind;
};

struct perfmap_vmas {
	struct perfmap_vma *v;
	size_t n, cap;
	/*
	 * The first executable file mapping named jit-*.dump, a jitdump's
	 * marker (its path as the reader's root sees it; "" when none, or when
	 * longer than the buffer), and its inode.
	 */
	char marker[256];
	uint64_t marker_ino;
};

/* More mappings than this (the kernel's default vm.max_map_count is 65530) is -E2BIG. */
#define PERFMAP_VMAS_MAX (1u << 16)

/* One /proc/<pid>/maps line (@len bytes, no NUL needed): 0, or -EINVAL. No system calls (fuzzed). */
int perfmap__vma_parse(const char *line, size_t len, struct perfmap_vma *out);
/*
 * The same, and where the line's path starts (@path, @path_len bytes, the
 * kernel's " (deleted)" kept; length 0 for none): the doctor reads names.
 */
int perfmap__vma_parse_path(const char *line, size_t len, struct perfmap_vma *out,
			    const char **path, size_t *path_len);
/*
 * The first mapping at or above @addr (executable ones only, when
 * @exec_only) of the process whose /proc/<pid>/maps is open at @fd, asked of
 * the kernel with PROCMAP_QUERY (Linux 6.11): 0, @out, and its path as the
 * maps text shows it (" (deleted)" kept, a newline escaped) in @path,
 * NUL-terminated, @path_len bytes. The kernel answers from the process's
 * own tree of mappings: the gate area the text lists last ("[vsyscall]" on
 * x86_64, the same in every process) is never among them. -ENOENT past the
 * last one; -ENOTTY or
 * -EINVAL from a kernel without the query (read the text instead);
 * -ENAMETOOLONG when the path does not fit @path_cap; -ESRCH or -errno.
 */
int perfmap__vma_query(int fd, uint64_t addr, bool exec_only, struct perfmap_vma *out,
		       char *path, size_t path_cap, size_t *path_len);
/*
 * All of /proc/<pid>/maps (or of the open fd @fd), sorted as the kernel lists
 * them, at most PERFMAP_VMAS_MAX: 0 or -errno (-ESRCH when the process is
 * gone, -EINVAL for a line that is no mapping, -E2BIG past the bound).
 * @out is emptied first.
 */
int perfmap__vmas_read(pid_t pid, struct perfmap_vmas *out);
int perfmap__vmas_read_fd(int fd, struct perfmap_vmas *out);
/* The same, but -E2BIG once more than @max_bytes of the file were read: a bounded cost. */
int perfmap__vmas_read_max(pid_t pid, size_t max_bytes, struct perfmap_vmas *out);
int perfmap__vmas_read_fd_max(int fd, size_t max_bytes, struct perfmap_vmas *out);
/*
 * The complete lines of @buf (@len bytes) appended to @vs; the bytes used
 * (a last line without a newline is left), or -errno. No system calls.
 */
long perfmap__vmas_parse_buf(struct perfmap_vmas *vs, const char *buf, size_t len);
/* The mapping holding @addr, or NULL (binary search). */
/*
 * A JIT's memfd code: a shared memfd mapping (its second view, as .NET's
 * double mapping). A private one is an executable file run from memory
 * (runc, sandboxes execute themselves from a sealed memfd): a file to perf.
 */
static inline bool perfmap__vma_is_jit_memfd(const struct perfmap_vma *v)
{
	return v->kind == PERFMAP_VMA_MEMFD && v->shared;
}
const struct perfmap_vma *perfmap__vmas_find(const struct perfmap_vmas *vs, uint64_t addr);
/* Accepts NULL and an empty list. */
void perfmap__vmas_release(struct perfmap_vmas *vs);

/* ---- a map's entries against a process's mappings (correlate.c) ---- */

/* How many examples of each kind a correlation keeps. */
#define PERFMAP_CORR_KEEP 8

struct perfmap_corr_entry {
	uint64_t start, size;
	char name[64];        /* the start of its name, raw bytes: escape before printing */
};

struct perfmap_corr_list {
	uint64_t count;       /* all of them */
	uint64_t bytes;
	size_t kept;          /* the first PERFMAP_CORR_KEEP, in address order */
	struct perfmap_corr_entry v[PERFMAP_CORR_KEEP];
};

struct perfmap_corr {
	/* The process's executable mappings perf resolves through the map. */
	uint64_t exec_anon_regions, exec_anon_bytes;
	uint64_t named_bytes;              /* of those, bytes at least one entry covers */
	/*
	 * Of those, bytes from each region's start to the end of the highest
	 * entry in it. JITs fill their code arenas upwards (CPython's trampoline
	 * arenas are 64 KiB, V8's code pages 256 KiB): what lies above is not
	 * code yet, and named / used is how much of the code there is is named.
	 */
	uint64_t used_bytes;
	struct perfmap_corr_list unnamed;  /* exec anon mappings no entry touches (.name empty) */
	/* Executable mappings perf resolves as files: memfd (.NET's double mapping). */
	uint64_t exec_memfd_regions, exec_memfd_bytes;
	/* Entries by where their start lies. */
	uint64_t in_anon;                  /* an exec anon mapping: what perf can use */
	struct perfmap_corr_list in_memfd; /* an exec memfd mapping: perf never looks them up */
	struct perfmap_corr_list in_file;  /* an exec file-backed or special mapping */
	struct perfmap_corr_list stale;    /* no executable mapping: freed code, or another image's */
	struct perfmap_reader_stats read;
	struct perfmap_table_stats table;  /* entries, duplicates, overlapping, ... */
};

/*
 * Read @r to its end and set every entry against @vs (as perfmap__vmas_read()
 * gives them, sorted): @out. 0 or -errno.
 */
int perfmap__correlate(struct perfmap_reader *r, const struct perfmap_vmas *vs,
		       struct perfmap_corr *out);

/* ---- inside another process's root (procroot.c) ---- */

/* Why a directory in a process's root was not opened, when refused rather than failed. */
enum perfmap_root_refusal {
	PERFMAP_ROOT_OK,
	PERFMAP_ROOT_DIR,          /* a symlink on the way, or not a directory */
	PERFMAP_ROOT_FUSE,         /* on FUSE (or a mount its table does not show): a lookup could hang */
	PERFMAP_ROOT_UNREACHABLE,  /* its root cannot be reached (/proc refused it) */
};

/*
 * The directory @path (absolute, as the process sees it) inside @pid's root,
 * resolved there without following any link (openat2 RESOLVE_IN_ROOT), as an
 * O_PATH fd; its identity in @st. -errno, with @why set when refused rather
 * than failed (-ESRCH/-ENOENT: the process or the directory is gone).
 */
int perfmap__root_open_dir(pid_t pid, const char *path, struct stat *st,
			   enum perfmap_root_refusal *why);
/*
 * Is mount @id on FUSE ("fuse", "fuse.<name>", "fuseblk"), by the mount
 * table @f (/proc/<pid>/mountinfo)? 1 or 0; -ENOENT when the table does not
 * show it. The file system itself is never asked.
 */
int perfmap__mountinfo_fuse(FILE *f, uint64_t id);
/* The pid of a path whose last component (of @len bytes) is "jit-<pid>.dump", perf's marker; else 0. */
pid_t perfmap__jitdump_name_pid(const char *path, size_t len);
/*
 * A jitdump at @path (absolute, as @pid sees it) opened for reading inside
 * @pid's root, as a map of a process not trusted is: no link followed, no
 * FIFO or device, single-linked, regular, @owner's, and the inode @ino (0:
 * any) the kernel saw mapped (-ESTALE). The fd, or -errno (@why set when the
 * directory was refused).
 */
int perfmap__jitdump_open(pid_t pid, const char *path, uid_t owner, uint64_t ino,
			  struct stat *st, enum perfmap_root_refusal *why);

/* ---- jitdump files, jit-<pid>.dump (jitdump.c) ---- */

/*
 * The jitdump format (perf's tools/perf/util/jitdump.h and
 * Documentation/jitdump-specification.txt), read as untrusted input and as
 * it grows: a header, then records {u32 id, u32 total_size, u64 timestamp,
 * payload}. Either byte order is read (the magic says which; perf reads
 * both). The bounds below stop what a hostile producer could make a reader
 * allocate, read or wait for.
 */
#define PERFMAP_JITDUMP_HEADER_MAX 4096u          /* header total_size */
#define PERFMAP_JITDUMP_RECORD_MAX (64u << 20)    /* record total_size; code_size too */
#define PERFMAP_JITDUMP_NAME_MAX 65535u           /* a function's name, NUL excluded */
#define PERFMAP_JITDUMP_DEBUG_MAX (16u << 20)     /* debug info read whole; larger: skipped */
#define PERFMAP_JITDUMP_FUNCS_MAX (1u << 20)      /* live functions */
#define PERFMAP_JITDUMP_NAME_BYTES_MAX (256u << 20) /* their names, as kept */
#define PERFMAP_JITDUMP_LINES_BYTES_MAX (256u << 20) /* line tables kept, all of them */
#define PERFMAP_JITDUMP_FILE_MAX 4095u            /* a line entry's file name, as kept */

/* Why a dump stopped being read: the first malformed record or header. */
enum perfmap_jitdump_stop {
	PERFMAP_JITDUMP_OK = 0,
	PERFMAP_JITDUMP_BAD_MAGIC,        /* not 0x4A695444 in either byte order */
	PERFMAP_JITDUMP_BAD_VERSION,      /* not 1 */
	PERFMAP_JITDUMP_BAD_HEADER_SIZE,  /* below the header or above PERFMAP_JITDUMP_HEADER_MAX */
	PERFMAP_JITDUMP_BAD_PID,          /* 0, or above the kernel's PID_MAX_LIMIT */
	PERFMAP_JITDUMP_RECORD_TOO_SMALL, /* total_size below what its kind holds */
	PERFMAP_JITDUMP_RECORD_TOO_LARGE, /* total_size above PERFMAP_JITDUMP_RECORD_MAX */
	PERFMAP_JITDUMP_NAME_UNTERMINATED, /* no NUL before the code bytes */
	PERFMAP_JITDUMP_NAME_TOO_LONG,    /* no NUL in PERFMAP_JITDUMP_NAME_MAX + 1 bytes */
	PERFMAP_JITDUMP_CODE_SIZE,        /* code size larger than its record allows */
	PERFMAP_JITDUMP_BAD_RANGE,        /* code at address 0, or past the end of the address space */
	PERFMAP_JITDUMP_BAD_DEBUG_INFO,   /* entries that do not fit their record */
	PERFMAP_JITDUMP_TOO_MANY,         /* past PERFMAP_JITDUMP_FUNCS_MAX or _NAME_BYTES_MAX */
	PERFMAP_JITDUMP_PID_MISMATCH,     /* the header's pid is not the one expected (its file's name) */
	__PERFMAP_JITDUMP_STOP_MAX,
};

struct perfmap_jitdump_stats {
	uint32_t pid;            /* the header's, once read */
	bool header;             /* the header was read and is valid */
	bool swapped;            /* written in the other byte order */
	uint64_t offset;         /* bytes consumed: the next record starts here */
	uint64_t torn_bytes;     /* bytes after offset at the last read's end: a torn record */
	uint64_t records;
	uint64_t loads;          /* JIT_CODE_LOAD records */
	uint64_t empty;          /* of those, without code (size 0): no entry */
	uint64_t moves;          /* JIT_CODE_MOVE records */
	uint64_t moves_unmatched; /* naming no live function at its old address */
	uint64_t debug_info;     /* JIT_CODE_DEBUG_INFO records, validated */
	uint64_t debug_entries;  /* their line entries */
	uint64_t debug_unread;   /* larger than PERFMAP_JITDUMP_DEBUG_MAX: skipped */
	/* With perfmap__jitdump_keep_lines() only: */
	uint64_t lines_tables;   /* line tables kept now, on live functions */
	uint64_t lines_bytes;    /* their bytes, at most the bound */
	uint64_t lines_over;     /* tables not kept: the bound was reached */
	uint64_t lines_unattached; /* debug records followed by no load of their code_addr,
				    * or with no entry in its code */
	uint64_t closes;         /* JIT_CODE_CLOSE */
	uint64_t skipped;        /* JIT_CODE_UNWINDING_INFO and unknown ids */
	uint64_t replaced;       /* live functions a later load or move overlapped: gone */
	uint64_t removed;        /* ranges no longer named: replaced, or moved away */
	uint64_t funcs;          /* live functions now */
	uint64_t name_bytes;     /* their names' bytes */
	enum perfmap_jitdump_stop stop;
	uint64_t stop_offset;    /* where the malformed record (or header) starts */
};

struct perfmap_jitdump;

/* An empty reader, before the header: NULL with errno. */
struct perfmap_jitdump *perfmap__jitdump_new(void);
/* Accepts NULL. */
void perfmap__jitdump_free(struct perfmap_jitdump *j);
/*
 * Read the whole records @fd (a regular file, read with pread() from the
 * offset kept, never moved) holds now after those read before, at most
 * @max_records of them (0: all): a torn last record is left for a later
 * call. The records read (>= 0); -EBADMSG once a malformed header or record
 * stopped the reading (now or before: the reason and offset are in the
 * stats, nothing after it is read); or -errno (-EINVAL: not a regular file).
 */
long perfmap__jitdump_read(struct perfmap_jitdump *j, int fd, size_t max_records);
const struct perfmap_jitdump_stats *perfmap__jitdump_stats(const struct perfmap_jitdump *j);
/* "record size above 64 MiB", for a stop reason. */
const char *perfmap__jitdump_stop_str(enum perfmap_jitdump_stop stop);
/* "record_too_large": the reason as a word, for a status key or a label. */
const char *perfmap__jitdump_stop_key(enum perfmap_jitdump_stop stop);
/*
 * The live functions whose record carries @pid (0: every pid's, whose ranges
 * may overlap when there are several), as canonical perf-map lines in address
 * order, to @fd: names without leading blanks (consumers skip them), cut
 * and sanitized as the writer's, those under 3 bytes left out (as the
 * compactor does; perf drops them). Functions of one pid never overlap: a
 * load or move over live code replaced it. The lines written (>= 0), or
 * -errno.
 */
long perfmap__jitdump_write_map(const struct perfmap_jitdump *j, int fd, uint32_t pid);
/*
 * As perfmap__jitdump_write_map(), only the functions loaded or moved after
 * @after_seq (a perfmap__jitdump_seq() value): what to append to a map
 * written before, as long as stats.removed has not moved since.
 */
long perfmap__jitdump_write_since(const struct perfmap_jitdump *j, int fd, uint32_t pid,
				  uint64_t after_seq);
/* The sequence number of the newest function loaded or moved (0: none yet). */
uint64_t perfmap__jitdump_seq(const struct perfmap_jitdump *j);
/* The lowest pid above @after with a live function, or 0: walk them from 0. */
uint32_t perfmap__jitdump_next_pid(const struct perfmap_jitdump *j, uint32_t after);
/*
 * Tighter bounds than PERFMAP_JITDUMP_FUNCS_MAX and _NAME_BYTES_MAX (0: the
 * default), for a reader of many dumps at once: past them, TOO_MANY.
 */
void perfmap__jitdump_set_limits(struct perfmap_jitdump *j, uint64_t max_funcs,
				 uint64_t max_name_bytes);
/*
 * Bounds shared by several readers (a uid's dumps, all dumps): the live
 * functions and their names' bytes kept by all of them together. A reader
 * counts what it keeps in the budgets it shares (perfmap__jitdump_share(),
 * before its first read) and gives it back when freed; past a budget's
 * bound, the reader that would pass it stops, TOO_MANY.
 */
struct perfmap_jitdump_budget {
	uint64_t funcs, name_bytes;           /* kept now */
	uint64_t max_funcs, max_name_bytes;
};
/* @a and @b (either may be NULL) outlive @j. */
void perfmap__jitdump_share(struct perfmap_jitdump *j, struct perfmap_jitdump_budget *a,
			    struct perfmap_jitdump_budget *b);
/*
 * The header must name @pid (the N of jit-N.dump): else the reading stops
 * at the header (PID_MISMATCH), before any record. Before the first read.
 */
void perfmap__jitdump_expect_pid(struct perfmap_jitdump *j, uint32_t pid);
/*
 * Keep the line tables of JIT_CODE_DEBUG_INFO records, @max_bytes for all of
 * them at most (capped at PERFMAP_JITDUMP_LINES_BYTES_MAX; 0, the default:
 * none, as a reader writing perf maps needs none). A record's table goes to
 * the function the next load at its code_addr makes (perf's order: the
 * debug record comes first; a record naming the code of the load just
 * before it goes to that function too), its entries outside that code left
 * out, and goes with it (replaced, moved away); one past the bound is not
 * kept (stats.lines_over). Before the first read.
 */
void perfmap__jitdump_keep_lines(struct perfmap_jitdump *j, uint64_t max_bytes);

/* What names an address of a dump's code. */
struct perfmap_jitdump_sym {
	const char *name;        /* NUL-terminated, cut and sanitized as the map's line */
	size_t name_len;
	uint64_t start, size;    /* the function's code */
	const char *file;        /* the line entry at or below the address: its file, or NULL */
	uint32_t line;           /* and its line (0 without a file) */
};
/*
 * The live function of @pid (the pid its records carry) holding @addr,
 * and its source line when its table is kept: 0 with @out, whose strings
 * live until the next read or the free, or -ENOENT.
 */
int perfmap__jitdump_lookup(const struct perfmap_jitdump *j, uint32_t pid, uint64_t addr,
			    struct perfmap_jitdump_sym *out);

#endif /* PERFMAP_TOOLS_H */
