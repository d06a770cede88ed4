/* What this kernel lets the agent use to learn of executable mappings, probed at start. */
#ifndef PERFMAPD_EXECPROBE_H
#define PERFMAPD_EXECPROBE_H

#include <stddef.h>

/*
 * One word per source, in the order of preference of docs/architecture.md:
 * "bpf-lsm=EPERM fentry=EPERM kprobe=absent perf-mmap2=ok". Each program
 * is loaded (never attached) and unloaded at once.
 */
void execprobe_describe(char *buf, size_t len, int perf_err);

#endif /* PERFMAPD_EXECPROBE_H */
