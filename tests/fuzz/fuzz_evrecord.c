/*
 * libFuzzer target: the ring-buffer record to policy event decoder
 * (agent/in/evrecord.c) on records of any length and content, at any alignment.
 */
#include <errno.h>
#include <string.h>

#include "in/evrecord.h"
#include "policy/policy.h"
#include "fuzz.h"
#include "lib/log.h"

static const struct evrecord_ctx ctx = {
	.self_mnt_ns = 4026531841u,
	.self_pid_ns = 4026531836u,
	.tick_ns = 10000000,  /* USER_HZ 100 */
};

/* Should @raw (@len bytes) decode? Said here from the record's own words. */
static bool valid(const uint8_t *raw, size_t len)
{
	struct perfmapd_event e;

	if (len < sizeof(e))
		return false;
	memcpy(&e, raw, sizeof(e));
	return e.type >= PERFMAPD_EV_FORK && e.type <= PERFMAPD_EV_EXIT && e.tgid &&
	       e.tgid < EVRECORD_PID_MAX && e.ptgid < EVRECORD_PID_MAX;
}

static void check_event(const struct perfmapd_event *e, const struct policy_event *pe)
{
	char again[sizeof(pe->comm)];
	size_t i;

	REQUIRE(pe->type == POLICY_EV_FORK || pe->type == POLICY_EV_EXEC || pe->type == POLICY_EV_EXIT);
	REQUIRE((unsigned int)pe->type == e->type);
	REQUIRE(!(pe->flags & ~(uint32_t)(POLICY_EVF_VFORK | POLICY_EVF_FOREIGN)));
	REQUIRE(!!(pe->flags & POLICY_EVF_VFORK) == !!(e->flags & PERFMAPD_EVF_VFORK));
	REQUIRE(!!(pe->flags & POLICY_EVF_FOREIGN) ==
		(e->mnt_ns != ctx.self_mnt_ns || e->pid_ns != ctx.self_pid_ns));
	REQUIRE(pe->pid > 0 && pe->pid < EVRECORD_PID_MAX && (uint32_t)pe->pid == e->tgid);
	REQUIRE(pe->ppid >= 0 && pe->ppid < EVRECORD_PID_MAX);
	REQUIRE(pe->start_ticks == e->start_ns / ctx.tick_ns);
	REQUIRE(pe->start.lo == e->start_ns && pe->start.hi == e->start_ns);
	REQUIRE(pe->pstart.lo == e->pstart_ns && pe->at.lo == e->ts_ns);
	REQUIRE(pe->uid == e->uid && pe->gid == e->gid);
	/*
	 * The comm reaches the log: NUL-terminated within its array, no control
	 * byte, and valid UTF-8 (escaping it again for the log changes nothing).
	 */
	REQUIRE(memchr(pe->comm, '\0', sizeof(pe->comm)));
	for (i = 0; pe->comm[i]; i++)
		REQUIRE((unsigned char)pe->comm[i] >= 0x20 && pe->comm[i] != 0x7f);
	REQUIRE(log_escape(again, sizeof(again), pe->comm, sizeof(pe->comm), 0) == i &&
		!memcmp(again, pe->comm, i));
}

static void decode_at(const uint8_t *raw, size_t len)
{
	struct perfmapd_event e;
	struct policy_event pe;
	int err;

	memset(&pe, 0xa5, sizeof(pe));
	err = evrecord__decode(raw, len, &ctx, &e, &pe);
	REQUIRE(err == 0 || err == -EINVAL);
	REQUIRE(!err == valid(raw, len));
	if (!err)
		check_event(&e, &pe);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Heap copies of the exact size: ASan sees a read past the record; one is misaligned. */
	uint8_t *copy = malloc(size ? size : 1), *odd = malloc(size + 1);

	REQUIRE(copy && odd);
	memcpy(copy, data, size);
	memcpy(odd + 1, data, size);
	decode_at(copy, size);
	decode_at(odd + 1, size);
	free(odd);
	free(copy);
	return 0;
}
