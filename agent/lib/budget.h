/*
 * Per-uid budgets of bytes: a token bucket per uid over the agent's clock.
 * The policy spends them on copies; nothing here touches the system, so
 * unit tests drive it with a fake clock.
 */
#ifndef PERFMAPD_BUDGET_H
#define PERFMAPD_BUDGET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct budget;

/* @rate bytes a second for each uid, at most @burst saved up; a rate of 0 is no bound. */
struct budget *budget__new(uint64_t rate, uint64_t burst);
void budget__free(struct budget *b);
/*
 * A new @rate and @burst (a SIGHUP): what each uid has saved up stays, up
 * to the new burst; nothing is handed out for the change.
 */
void budget__set(struct budget *b, uint64_t rate, uint64_t burst);
/* Spend @bytes of @uid's budget at @now_ns: false (nothing spent) when it has fewer. */
bool budget__take(struct budget *b, uid_t uid, uint64_t bytes, uint64_t now_ns);
/* Give back what a copy did not use; take more for what it used beyond its estimate. */
void budget__settle(struct budget *b, uid_t uid, uint64_t taken, uint64_t used);
/*
 * Was something said of @uid within @interval_ns before @now_ns? If not,
 * it is being said now (false). For log lines an adversary could repeat.
 */
bool budget__quiet(struct budget *b, uid_t uid, uint64_t now_ns, uint64_t interval_ns);
/* What @uid has left at @now_ns (UINT64_MAX without a bound), for messages. */
uint64_t budget__left(struct budget *b, uid_t uid, uint64_t now_ns);

#endif /* PERFMAPD_BUDGET_H */
