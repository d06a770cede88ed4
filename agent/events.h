/* Where process events enter perfmapd: the BPF program and its ring buffer. */
#ifndef PERFMAPD_EVENTS_H
#define PERFMAPD_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

struct agent;
struct events;

/* Load and attach the BPF programs @a->cfg asks for; NULL with a message on failure. */
struct events *events__open(struct agent *a);
void events__free(struct events *ev);
/* The ring buffer's epoll fd, for the agent's loop. */
int events__fd(const struct events *ev);
/* Hand every queued event to the policy; number handled or -errno. */
int events__consume(struct events *ev);
/* Events the BPF side could not queue, since load. */
uint64_t events__dropped(const struct events *ev);
/* Tell the BPF side whether @pid has a map at its path: its events are urgent. */
void events__set_mapped(struct events *ev, int pid, bool mapped);
/*
 * Time the kernel spent in our programs and how many runs, summed over them;
 * counted only while sysctl kernel.bpf_stats_enabled is 1 (it costs a clock
 * read per run), else both stay where they were.
 */
void events__run_stats(const struct events *ev, uint64_t *run_ns, uint64_t *runs);
/* "tp_btf" or "raw_tp": which program type attached. */
const char *events__kind(const struct events *ev);

#endif /* PERFMAPD_EVENTS_H */
