/* perfmapctl doctor: what it learns of a process, its map and the agent, and the findings. */
#ifndef PERFMAPD_CTL_DOCTOR_H
#define PERFMAPD_CTL_DOCTOR_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "perfmap_tools.h"

enum doc_runtime {
	RT_GENERIC,
	RT_PYTHON,
	RT_NODE,
	RT_DOTNET,
	RT_JAVA,
};

/* The process: who it is and which runtime, read from /proc as root may. */
struct doc_proc {
	pid_t pid, ns_pid;            /* ns_pid: its pid in its own pid namespace */
	uid_t fsuid;
	gid_t fsgid;
	gid_t groups[64];
	size_t ngroups;
	bool other_mnt_ns;            /* its /tmp is not ours */
	char comm[64];                /* escaped */
	char exe[PATH_MAX];           /* escaped; empty when unreadable */
	enum doc_runtime rt;
	int py_minor;                 /* python 3.N; -1 unknown */
	bool perf_on;                 /* its runtime's perf map option is set */
	bool perf_jitdump_only;       /* .NET PerfMapEnabled=2: a jitdump, no map */
	char perf_how[160];           /* how it was set: "-X perf", "PYTHONPERFSUPPORT=1" ... */
};

/* Where a map was looked for, and what was found. */
struct doc_mapfile {
	char path[PATH_MAX];          /* as shown: host path, or /proc/<pid>/root/tmp/... */
	bool looked;
	bool exists;
	int refused;                  /* -errno of the safe open (symlink, FIFO, ...), 0 */
	struct stat st;
	int fd;                       /* open while the doctor runs; -1 */
};

struct doc_map {
	struct doc_mapfile host, ns;
	const struct doc_mapfile *used;  /* the one read: host, else the container's */
	bool dir_writable;            /* the map dir lets the process create its map */
	bool file_writable;           /* the existing map lets the process append */
	char why_not_writable[160];
	bool checked;                 /* report and corr are filled */
	struct perfmap_report report;
	struct perfmap_corr corr;
};

/* The process's jitdump, found by its marker mapping (jit-<N>.dump mapped executable). */
struct doc_jitdump {
	bool found;                   /* it maps one */
	char path[PATH_MAX];          /* escaped, as the host reaches it: /proc/<pid>/root/... in a container */
	pid_t named_pid;              /* the N of jit-N.dump; 0: not a number */
	int refused;                  /* -errno of the safe open (-ELOOP, -EINVAL, -EMLINK, -EPERM), -ESTALE: not the file mapped */
	struct stat st;
	bool read;                    /* opened and read to its end: stats say what it holds */
	int read_err;                 /* -errno of a read that failed (not a malformed record), 0 */
	struct perfmap_jitdump_stats stats;
};

/* Whether a perf map is written for the dump, by the agent's word. */
enum doc_jd_map {
	DOC_JD_NO_AGENT,              /* no agent to ask */
	DOC_JD_WRITTEN,               /* perfmapd writes <map-dir>/perf-<pid>.map from it */
	DOC_JD_OWN_MAP,               /* the process writes its own map too: left untouched */
	DOC_JD_PENDING,               /* read: its map is written once it names a function */
	DOC_JD_NOT_WRITTEN,           /* the agent reads it and writes none (refused, done, stopped) */
	DOC_JD_NOT_LISTED,            /* the agent's status has no line for it */
};

#define DOC_AGENT_JIT_MAX 1
/* An executable anonymous mmap perfmapd saw, against the mappings and the map now (doctor_regions.c). */
struct doc_region {
	uint64_t addr, len;
	bool mapped;                  /* still anonymous and executable, in one mapping */
	bool named;                   /* an entry names some of it */
	bool mapping_named;           /* an entry names some of the mapping it is in */
};
#define DOC_AGENT_REGIONS 64      /* the agent's JITREGIONS_PER_PROC */
struct doc_agent {
	bool running;
	char error[160];              /* why it could not be asked, when not running */
	char exec_mappings_source[64];
	long long lost_symbol_processes;  /* -1: not said */
	bool has_jit, jit_lost;
	unsigned long long jit_regions, jit_bytes, jit_memfd_bytes;
	bool has_mirror;
	char mirror[256];             /* "ns_pid=N container=ID bytes=B behind=B", escaped */
	/* jitdump_<pid>: the dump it reads for this process, and what became of its map. */
	bool has_jitdump;
	unsigned long long jd_records, jd_functions, jd_maps_written;
	char jd_map[16];              /* written, own_map, new, refused, done, none; escaped */
	bool jd_stopped;
	/* Its answer to "pid N": the mmaps it kept of the process, and how many more it saw. */
	bool has_regions;
	unsigned long long regions_kept, regions_not_kept;
	size_t nregions;
	struct doc_region regions[DOC_AGENT_REGIONS];
};

enum doc_severity { SEV_INFO, SEV_WARNING, SEV_ERROR };

#define DOC_MAX_FINDINGS 24
#define DOC_MAX_ADDRS PERFMAP_CORR_KEEP

struct doc_finding {
	const char *code;
	enum doc_severity sev;
	char cause[512];
	char fix[512];
	uint64_t count;
	size_t naddrs;
	uint64_t addrs[DOC_MAX_ADDRS];
};

struct doc_findings {
	struct doc_finding v[DOC_MAX_FINDINGS];
	size_t n;
};

struct doc_opts {
	const char *map_dir, *run_dir;
	const char *archive_dir;      /* --archive-dir; NULL: the agent's, else the default */
	double min_coverage;          /* percent */
	uint64_t max_bytes;
};

/* doctor_proc.c: 0, -ESRCH (no such process), -EACCES. */
int doc_proc_read(pid_t pid, struct doc_proc *p);
const char *doc_runtime_str(enum doc_runtime rt);

/* doctor_map.c */
int doc_map_find(const struct doc_opts *o, const struct doc_proc *p, struct doc_map *m);
int doc_map_check(const struct doc_opts *o, const struct perfmap_vmas *vs, struct doc_map *m);
void doc_map_release(struct doc_map *m);

/* A directory inside @dirfd, resolved as if @dirfd were the root, following no link: the fd or -errno. */
int doc_open_dir_in_root(int dirfd, const char *path);

/* doctor_agent.c */
void doc_agent_ask(const struct doc_opts *o, pid_t pid, struct doc_agent *a);

/* doctor_regions.c: each region of @a against the mappings @vs and the map's entries (@m checked). */
void doc_regions_judge(const struct doc_opts *o, const struct doc_map *m,
		       const struct perfmap_vmas *vs, struct doc_agent *a);

/* doctor_archive.c: for a @pid no process holds, what the archive holds of it, on stderr. */
void doc_archive_say(const struct doc_opts *o, pid_t pid);

/* doctor_jitdump.c */
void doc_jitdump_read(const struct doc_proc *p, const struct perfmap_vmas *vs, struct doc_jitdump *j);
/* Words for doc_jitdump.refused: "is a symlink, refused". */
const char *doc_jitdump_refused_str(int err);
enum doc_jd_map doc_jitdump_map(const struct doc_agent *a);
/* "written", "own_map", "pending", "not_written", "not_listed", "no_agent": --json's jitdump.map */
const char *doc_jd_map_str(enum doc_jd_map m);

/* doctor_findings.c */
void doc_findings_make(const struct doc_opts *o, const struct doc_proc *p, const struct doc_map *m,
		       const struct perfmap_vmas *vs, const struct doc_agent *a,
		       const struct doc_jitdump *j, struct doc_findings *f);
const char *doc_severity_str(enum doc_severity s);
/* @one for 1, else @many: "1 region", "2 regions" */
static inline const char *doc_pl(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}
/* "3.2 MiB" */
const char *doc_bytes_str(uint64_t b, char *buf, size_t len);

#endif /* PERFMAPD_CTL_DOCTOR_H */
