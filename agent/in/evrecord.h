/* The BPF program's event record turned into a policy event: pure, so a fuzzer drives it. */
#ifndef PERFMAPD_EVRECORD_H
#define PERFMAPD_EVRECORD_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "perfmapd_event.h"

struct policy_event;

/* include/linux/threads.h, PID_MAX_LIMIT: every pid on any kernel is below it. */
#define EVRECORD_PID_MAX (4 * 1024 * 1024)

/* What the decoder compares a record with: the agent's own namespaces and tick. */
struct evrecord_ctx {
	uint64_t self_mnt_ns, self_pid_ns;
	uint64_t tick_ns;     /* clock_tick_ns(), never 0 */
};

/*
 * The ring-buffer record @data (@len bytes, any alignment) into @pe, and a
 * copy of the record into @rec: 0, or -EINVAL for a record too short, of an
 * unknown type, or naming no possible process (pid 0, or not below the
 * kernel's limit), which the agent drops. pe->comm is printable and NUL-terminated.
 */
int evrecord__decode(const void *data, size_t len, const struct evrecord_ctx *ctx,
		     struct perfmapd_event *rec, struct policy_event *pe);

#endif /* PERFMAPD_EVRECORD_H */
