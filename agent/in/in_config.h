/*
 * What the agent's config chooses of this room: which BPF programs, which
 * ring size, whose namespaces are the host's, how executable mappings are
 * learned. Types only, so that the config includes this and not the room.
 */
#ifndef PERFMAPD_IN_CONFIG_H
#define PERFMAPD_IN_CONFIG_H

#include <sys/types.h>

enum bpf_programs {
	BPF_PROGS_AUTO,               /* tp_btf, else raw_tp */
	BPF_PROGS_TP_BTF,
	BPF_PROGS_RAW_TP,
};

struct events_config {
	unsigned int ringbuf_bytes;
	enum bpf_programs programs;
	/* Processes in this one's mount and pid namespaces are the host's (0: the agent's own). */
	pid_t host_ns_pid;
};

/* How the agent learns of executable mappings (docs/architecture.md has the order). */
enum execmap_source {
	EXECMAP_SRC_AUTO,     /* perf, else procfs */
	EXECMAP_SRC_PERF,     /* PERF_RECORD_MMAP2, /proc/<pid>/maps at start and after a loss */
	EXECMAP_SRC_PROCFS,   /* /proc/<pid>/maps only: every process, every JITSCAN_PERIOD_NS */
	EXECMAP_SRC_OFF,
};

#endif /* PERFMAPD_IN_CONFIG_H */
