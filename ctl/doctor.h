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

#define DOC_AGENT_JIT_MAX 1
struct doc_agent {
	bool running;
	char error[160];              /* why it could not be asked, when not running */
	char exec_mappings_source[64];
	long long lost_symbol_processes;  /* -1: not said */
	bool has_jit, jit_lost;
	unsigned long long jit_regions, jit_bytes, jit_memfd_bytes;
	bool has_mirror;
	char mirror[256];             /* "ns_pid=N container=ID bytes=B behind=B", escaped */
};

enum doc_severity { SEV_INFO, SEV_WARNING, SEV_ERROR };

#define DOC_MAX_FINDINGS 24
#define DOC_MAX_ADDRS PERFMAP_CORR_KEEP

struct doc_finding {
	const char *code;
	enum doc_severity sev;
	char cause[512];
	char fix[384];
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
	double min_coverage;          /* percent */
	uint64_t max_bytes;
};

/* doctor_proc.c: 0, -ESRCH (no such process), -EACCES. */
int doc_proc_read(pid_t pid, struct doc_proc *p);
const char *doc_runtime_str(enum doc_runtime rt);
/* Bytes of @in as printable ASCII: control bytes, quotes, backslashes and non-ASCII as \xNN. */
void doc_escape(char *out, size_t cap, const char *in, size_t len);

/* doctor_map.c */
int doc_map_find(const struct doc_opts *o, const struct doc_proc *p, struct doc_map *m);
int doc_map_check(const struct doc_opts *o, const struct perfmap_vmas *vs, struct doc_map *m);
void doc_map_release(struct doc_map *m);

/* doctor_agent.c */
void doc_agent_ask(const struct doc_opts *o, pid_t pid, struct doc_agent *a);

/* doctor_findings.c */
void doc_findings_make(const struct doc_opts *o, const struct doc_proc *p, const struct doc_map *m,
		       const struct perfmap_vmas *vs, const struct doc_agent *a,
		       struct doc_findings *f);
const char *doc_severity_str(enum doc_severity s);
/* @one for 1, else @many: "1 region", "2 regions" */
static inline const char *doc_pl(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}
/* "3.2 MiB" */
const char *doc_bytes_str(uint64_t b, char *buf, size_t len);

#endif /* PERFMAPD_CTL_DOCTOR_H */
