/*
 * Where process events enter perfmapd: load the CO-RE BPF program, attach its
 * tracepoints (tp_btf, else raw_tp: neither needs tracefs), and hand each
 * ring-buffer record, decoded (evrecord.c), to the policy.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "lib/clock.h"
#include "in/events.h"
#include "in/evrecord.h"
#include "lib/log.h"
#include "perfmapd.skel.h"
#include "perfmapd_event.h"
#include "lib/procfs.h"
#include "policy/policy.h"

struct events {
	events_fn fn;
	void *ctx;
	struct perfmapd_bpf *skel;
	struct ring_buffer *rb;
	const char *kind;
	struct evrecord_ctx decode;
	uint64_t received[4];
};

/* libbpf's messages, at debug level: a failure is summed up by our own error line. */
__attribute__((format(printf, 2, 0)))
static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	if (level == LIBBPF_DEBUG && log_max_level < LOG_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	if (n && line[n - 1] == '\n')
		line[n - 1] = '\0';
	log_msg(LOG_DEBUG, "libbpf: %s", line);
	return 0;
}

static int handle_event(void *ctx, void *data, size_t len)
{
	struct events *ev = ctx;
	struct perfmapd_event e;
	struct policy_event pe;

	if (evrecord__decode(data, len, &ev->decode, &e, &pe))
		return 0;
	ev->received[e.type]++;
	pr_debug("event %s %d (%s) parent %d start %llu uid %u mnt_ns %u pid_ns %u%s",
		 e.type == PERFMAPD_EV_FORK ? "fork" : e.type == PERFMAPD_EV_EXEC ? "exec" : "exit",
		 (int)pe.pid, pe.comm, (int)pe.ppid, (unsigned long long)e.start_ns,
		 e.uid, e.mnt_ns, e.pid_ns, e.flags & PERFMAPD_EVF_VFORK ? " vfork" : "");
	ev->fn(ev->ctx, &pe);
	return 0;
}

/* Load with one family of programs: tp_btf (@btf) or raw_tp. */
static int load(struct events *ev, bool btf, unsigned int ringbuf_bytes)
{
	struct perfmapd_bpf *s;
	int err;

	s = perfmapd_bpf__open();
	if (!s)
		return -errno;
	bpf_program__set_autoload(s->progs.btf_fork, btf);
	bpf_program__set_autoload(s->progs.btf_exec, btf);
	bpf_program__set_autoload(s->progs.btf_exit, btf);
	bpf_program__set_autoload(s->progs.raw_fork, !btf);
	bpf_program__set_autoload(s->progs.raw_exec, !btf);
	bpf_program__set_autoload(s->progs.raw_exit, !btf);
	s->rodata->exec_wakeup_ns = EXEC_WAKEUP_NS;
	err = bpf_map__set_max_entries(s->maps.events, ringbuf_bytes);
	if (!err)
		err = perfmapd_bpf__load(s);
	if (!err)
		err = perfmapd_bpf__attach(s);
	if (err) {
		perfmapd_bpf__destroy(s);
		return err;
	}
	ev->skel = s;
	ev->kind = btf ? "tp_btf" : "raw_tp";
	return 0;
}

struct events *events__open(const struct events_config *cfg, events_fn fn, void *ctx)
{
	enum bpf_programs want = cfg->programs;
	unsigned int ringbuf_bytes = cfg->ringbuf_bytes;
	struct events *ev;
	int err;

	libbpf_set_print(libbpf_log);
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return NULL;
	ev->fn = fn;
	ev->ctx = ctx;
	ev->decode.self_mnt_ns = procfs_ns(cfg->host_ns_pid, "mnt");
	ev->decode.self_pid_ns = procfs_ns(cfg->host_ns_pid, "pid");
	ev->decode.tick_ns = clock_tick_ns();
	if (want == BPF_PROGS_RAW_TP) {
		err = load(ev, false, ringbuf_bytes);
	} else {
		err = load(ev, true, ringbuf_bytes);
		if (err && want == BPF_PROGS_AUTO) {
			pr_debug("bpf: tp_btf programs did not load (%s); trying raw_tp", strerror(-err));
			err = load(ev, false, ringbuf_bytes);
		}
	}
	if (err) {
		pr_err("bpf: cannot load or attach the fork/exec/exit tracepoint programs%s: %s%s",
		       want == BPF_PROGS_TP_BTF ? " (tp_btf)" : want == BPF_PROGS_RAW_TP ? " (raw_tp)" : "",
		       strerror(-err), err == -EPERM ?
		       " (perfmapd needs root, or CAP_BPF and CAP_PERFMON)" :
		       " (--log-level debug shows libbpf's reasons)");
		goto free_ev;
	}
	ev->rb = ring_buffer__new(bpf_map__fd(ev->skel->maps.events), handle_event, ev, NULL);
	if (!ev->rb) {
		err = -errno;
		pr_err("bpf: ring buffer: %s", strerror(-err));
		goto free_ev;
	}
	pr_info("bpf: tracing process fork, exec and exit with %s programs (ring buffer %u KiB)",
		ev->kind, ringbuf_bytes >> 10);
	return ev;

free_ev:
	events__free(ev);
	errno = -err;
	return NULL;
}

void events__free(struct events *ev)
{
	if (!ev)
		return;
	ring_buffer__free(ev->rb);
	perfmapd_bpf__destroy(ev->skel);
	free(ev);
}

int events__fd(const struct events *ev)
{
	return ring_buffer__epoll_fd(ev->rb);
}

int events__consume(struct events *ev)
{
	return ring_buffer__consume(ev->rb);
}

uint64_t events__dropped(const struct events *ev)
{
	return __atomic_load_n(&ev->skel->bss->dropped, __ATOMIC_RELAXED);
}

uint64_t events__received(const struct events *ev, unsigned int type)
{
	return type < 4 ? ev->received[type] : 0;
}

bool events__execd_since(const struct events *ev, pid_t pid, uint64_t since_ns)
{
	__u32 key = (__u32)pid;
	__u64 when;

	return !bpf_map_lookup_elem(bpf_map__fd(ev->skel->maps.execs), &key, &when) &&
	       when >= since_ns;
}

void events__set_mapped(struct events *ev, pid_t pid, bool mapped)
{
	__u32 key = (__u32)pid;
	__u8 one = 1;

	if (!ev)
		return;
	/* A full table only costs latency: those events wait for the timer tick. */
	if (mapped)
		bpf_map_update_elem(bpf_map__fd(ev->skel->maps.mapped), &key, &one, BPF_ANY);
	else
		bpf_map_delete_elem(bpf_map__fd(ev->skel->maps.mapped), &key);
}

void events__run_stats(const struct events *ev, uint64_t *run_ns, uint64_t *runs)
{
	struct bpf_program *prog;

	*run_ns = *runs = 0;
	bpf_object__for_each_program(prog, ev->skel->obj) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);

		if (bpf_program__fd(prog) < 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len))
			continue;
		*run_ns += info.run_time_ns;
		*runs += info.run_cnt;
	}
}

const char *events__kind(const struct events *ev)
{
	return ev->kind;
}
