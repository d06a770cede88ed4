/* Where process events enter perfmapd: the BPF program and its ring buffer. */
#ifndef PERFMAPD_EVENTS_H
#define PERFMAPD_EVENTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "in/in_config.h"

struct policy_event;

/*
 * An exec of a pid without a map wakes the agent at most this often
 * (bpf/perfmapd.bpf.c, on_exec): often enough that most execs are read
 * before their new image has made a map, rarely enough that an exec-heavy
 * host does not pay a cross-CPU wake-up per exec.
 */
#define EXEC_WAKEUP_NS (10ull * 1000000)

/* Told of each event, in the order the kernel queued them. */
typedef void (*events_fn)(void *ctx, const struct policy_event *ev);

struct events;

/* Load and attach the BPF programs @cfg asks for; NULL with a message on failure. */
struct events *events__open(const struct events_config *cfg, events_fn fn, void *ctx);
void events__free(struct events *ev);
/* The ring buffer's epoll fd, for the agent's loop. */
int events__fd(const struct events *ev);
/* Hand every queued event to the callback; number handled or -errno. */
int events__consume(struct events *ev);
/* Events the BPF side could not queue, since load. */
uint64_t events__dropped(const struct events *ev);
/* Events received, by PERFMAPD_EV_* (1 fork, 2 exec, 3 exit). */
uint64_t events__received(const struct events *ev, unsigned int type);
/* Tell the BPF side whether @pid has a map at its path: its events are urgent. */
void events__set_mapped(struct events *ev, pid_t pid, bool mapped);
/* Did @pid exec at or after @since_ns (CLOCK_BOOTTIME)? The kernel's record. */
bool events__execd_since(const struct events *ev, pid_t pid, uint64_t since_ns);
/*
 * Time the kernel spent in our programs and how many runs, summed over them;
 * counted only while sysctl kernel.bpf_stats_enabled is 1 (it costs a clock
 * read per run), else both stay where they were.
 */
void events__run_stats(const struct events *ev, uint64_t *run_ns, uint64_t *runs);
/* "tp_btf" or "raw_tp": which program type attached. */
const char *events__kind(const struct events *ev);

#endif /* PERFMAPD_EVENTS_H */
