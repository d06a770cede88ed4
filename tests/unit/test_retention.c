/* retention: maps waiting at their paths, and the rules for trying again. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "policy/retention.h"

#define MS 1000000ull
#define SEC 1000000000ull

static int dues, gave_ups;
static enum retain_result answer;

static enum retain_result due(void *ctx, const struct retained *e)
{
	(void)ctx;
	(void)e;
	dues++;
	return answer;
}

static void gave_up(void *ctx, const struct retained *e)
{
	(void)ctx;
	(void)e;
	gave_ups++;
}

static const struct retention_cb cb = { .due = due, .gave_up = gave_up };

static void test_add_find_replace_forget(void **state)
{
	struct retention *r = retention__new();
	struct retained e = { .pid = 7, .kind = RETAIN_EXITED, .deadline_ns = 10 * SEC };
	int i;

	(void)state;
	assert_non_null(r);
	assert_int_equal(retention__add(r, &e), 0);
	e.deadline_ns = 20 * SEC;
	assert_int_equal(retention__add(r, &e), 0);  /* same pid: replaced */
	assert_int_equal(retention__count(r, RETAIN_EXITED), 1);
	assert_int_equal(retention__find(r, 7)->deadline_ns, 20 * SEC);
	/* Many, to make the table grow. */
	for (i = 100; i < 2100; i++) {
		e.pid = i;
		assert_int_equal(retention__add(r, &e), 0);
	}
	assert_int_equal(retention__count(r, RETAIN_EXITED), 2001);
	assert_non_null(retention__find(r, 1500));
	retention__forget(r, 1500);
	assert_null(retention__find(r, 1500));
	assert_int_equal(retention__count(r, RETAIN_EXITED), 2000);
	retention__free(r);
	retention__free(NULL);
}

static void test_nothing_before_its_deadline(void **state)
{
	struct retention *r = retention__new();
	struct retained e = { .pid = 7, .kind = RETAIN_EXITED, .deadline_ns = 10 * SEC };

	(void)state;
	dues = 0;
	answer = RETAIN_DONE;
	retention__add(r, &e);
	retention__expire(r, 10 * SEC - 1, &cb);
	assert_int_equal(dues, 0);
	retention__expire(r, 10 * SEC, &cb);
	assert_int_equal(dues, 1);
	assert_null(retention__find(r, 7));
	retention__free(r);
}

static void test_busy_exited_map_waits_ten_seconds_without_end(void **state)
{
	struct retention *r = retention__new();
	struct retained e = { .pid = 7, .kind = RETAIN_EXITED, .deadline_ns = 10 * SEC };
	uint64_t t = 10 * SEC;
	int i;

	(void)state;
	dues = gave_ups = 0;
	answer = RETAIN_BUSY;
	retention__add(r, &e);
	for (i = 0; i < 100; i++, t += RETRY_EXITED_NS) {
		retention__expire(r, t + RETRY_EXITED_NS - 1, &cb);
		assert_int_equal(dues, i + 1);
	}
	assert_int_equal(gave_ups, 0);
	assert_non_null(retention__find(r, 7));
	/* Busy moves are not exited maps: no early timer for these. */
	assert_int_equal(retention__next_move(r), UINT64_MAX);
	retention__free(r);
}

static void test_busy_move_backs_off_then_gives_up(void **state)
{
	struct retention *r = retention__new();
	struct retained e = { .pid = 9, .reason = 1 };
	uint64_t now = 5 * SEC, prev_wait = 0, wait;

	(void)state;
	dues = gave_ups = 0;
	answer = RETAIN_BUSY;
	assert_int_equal(retention__add_move(r, &e, now), 0);
	assert_int_equal(retention__count(r, RETAIN_MOVE), 1);
	assert_int_equal(retention__next_move(r), now + RETRY_MOVE_FIRST_NS);
	while (retention__find(r, 9)) {
		wait = retention__next_move(r) - now;
		/* 1 ms, then twice as long each time, never more than RETRY_MOVE_MAX_NS. */
		assert_true(wait <= RETRY_MOVE_MAX_NS);
		assert_true(!prev_wait || wait == prev_wait * 2 || wait == RETRY_MOVE_MAX_NS);
		prev_wait = wait;
		now += wait;
		retention__expire(r, now, &cb);
	}
	assert_int_equal(gave_ups, 1);
	assert_true(now - 5 * SEC >= MOVE_BUDGET_NS);
	assert_true(now - 5 * SEC < MOVE_BUDGET_NS + RETRY_MOVE_MAX_NS);
	assert_int_equal(retention__next_move(r), UINT64_MAX);
	retention__free(r);
}

/* Orphans are counted per owner through every way an entry comes and goes. */
static void test_orphans_counted_per_owner(void **state)
{
	struct retention *r = retention__new();
	struct retained e = { .kind = RETAIN_EXITED, .orphan = true, .uid = 65534,
			      .deadline_ns = 10 * SEC };
	pid_t pid;

	(void)state;
	assert_non_null(r);
	for (pid = 1; pid <= 20; pid++) {
		e.pid = pid;
		e.uid = pid <= 12 ? 65534 : 1000 + pid;  /* nine owners: the table grows */
		assert_int_equal(retention__add(r, &e), 0);
	}
	assert_int_equal(retention__orphans(r, 65534), 12);
	assert_int_equal(retention__orphans(r, 1013), 1);
	/* Replaced by an exited process's map: no orphan any more. */
	e = (struct retained){ .pid = 3, .kind = RETAIN_EXITED, .uid = 65534, .deadline_ns = 10 * SEC };
	assert_int_equal(retention__add(r, &e), 0);
	assert_int_equal(retention__orphans(r, 65534), 11);
	retention__forget(r, 4);
	retention__forget(r, 13);
	assert_int_equal(retention__orphans(r, 65534), 10);
	assert_int_equal(retention__orphans(r, 1013), 0);
	/* Done when due: all gone, the other owners' counts too. */
	answer = RETAIN_DONE;
	retention__expire(r, 10 * SEC, &cb);
	assert_int_equal(retention__orphans(r, 65534), 0);
	assert_int_equal(retention__orphans(r, 1020), 0);
	assert_int_equal(retention__count(r, RETAIN_EXITED), 0);
	retention__free(r);
}

static uint64_t last_deadline;
static int out_of_order;

static enum retain_result due_in_order(void *ctx, const struct retained *e)
{
	(void)ctx;
	if (e->deadline_ns < last_deadline)
		out_of_order++;
	last_deadline = e->deadline_ns;
	dues++;
	return RETAIN_DONE;
}

/* Deadlines in any order, entries replaced and forgotten: each tick hands over exactly the due ones, earliest first. */
static void test_due_entries_come_earliest_first_and_only_them(void **state)
{
	const struct retention_cb ordered = { .due = due_in_order };
	struct retention *r = retention__new();
	struct retained e = { .kind = RETAIN_EXITED };
	uint64_t t;
	pid_t pid;
	size_t left = 0;

	(void)state;
	for (pid = 1; pid <= 5000; pid++) {
		e.pid = pid;
		e.deadline_ns = (uint64_t)((pid * 7919) % 5000 + 1) * MS;  /* a permutation of 1..5000 ms */
		assert_int_equal(retention__add(r, &e), 0);
	}
	/* Moved later by a replacement, and forgotten: neither is due at its old deadline. */
	e.pid = 10;
	e.deadline_ns = 9000 * MS;
	assert_int_equal(retention__add(r, &e), 0);
	for (pid = 2000; pid < 3000; pid++)
		retention__forget(r, pid);
	dues = out_of_order = 0;
	last_deadline = 0;
	for (t = 0; t <= 5000 * MS; t += 100 * MS) {
		retention__expire(r, t, &ordered);
		left = retention__count(r, RETAIN_EXITED);
		/* Nothing due is left: every entry left has a later deadline. */
		assert_true(left == 0 || retention__find(r, 10));
	}
	assert_int_equal(out_of_order, 0);
	assert_int_equal(dues, 5000 - 1000 - 1);
	assert_int_equal(left, 1);
	retention__expire(r, 9000 * MS, &ordered);
	assert_int_equal(dues, 5000 - 1000);
	retention__free(r);
}

/* The next move's deadline is the earliest of the moves', whatever the exited maps wait for. */
static void test_next_move_is_the_earliest_move(void **state)
{
	struct retention *r = retention__new();
	struct retained e = { .pid = 1, .kind = RETAIN_EXITED, .deadline_ns = 1 * MS };
	pid_t pid;

	(void)state;
	retention__add(r, &e);
	for (pid = 2; pid < 100; pid++) {
		e.pid = pid;
		assert_int_equal(retention__add_move(r, &e, (uint64_t)(200 - pid) * SEC), 0);
	}
	assert_int_equal(retention__next_move(r), 101 * SEC + RETRY_MOVE_FIRST_NS);
	retention__forget(r, 99);
	assert_int_equal(retention__next_move(r), 102 * SEC + RETRY_MOVE_FIRST_NS);
	/* An exited map replaced by a move of its pid: counted as a move, its exit no more. */
	e.pid = 1;
	e.uid = 0;
	assert_int_equal(retention__add_move(r, &e, 0), 0);
	assert_int_equal(retention__next_move(r), RETRY_MOVE_FIRST_NS);
	assert_int_equal(retention__count(r, RETAIN_EXITED), 0);
	assert_int_equal(retention__exited(r, 0), 0);
	retention__free(r);
}

/* Exited maps are counted per owner, for the cap; the cap's log line is said once until none are left. */
static void test_exited_counted_per_owner_and_said_once(void **state)
{
	struct retention *r = retention__new();
	struct retained e = { .kind = RETAIN_EXITED, .uid = 1000, .deadline_ns = 10 * SEC };
	pid_t pid;

	(void)state;
	assert_false(retention__first_over(r, 1000));  /* has none: nothing to say */
	for (pid = 1; pid <= 30; pid++) {
		e.pid = pid;
		e.uid = pid <= 20 ? 1000 : 2000;
		assert_int_equal(retention__add(r, &e), 0);
	}
	assert_int_equal(retention__exited(r, 1000), 20);
	assert_int_equal(retention__exited(r, 2000), 10);
	assert_true(retention__first_over(r, 1000));
	assert_false(retention__first_over(r, 1000));
	assert_true(retention__first_over(r, 2000));
	retention__forget(r, 1);
	assert_int_equal(retention__exited(r, 1000), 19);
	answer = RETAIN_DONE;
	retention__expire(r, 10 * SEC, &cb);
	assert_int_equal(retention__exited(r, 1000), 0);
	e.pid = 1;
	e.uid = 1000;
	assert_int_equal(retention__add(r, &e), 0);
	assert_true(retention__first_over(r, 1000));  /* none were left between: said again */
	retention__free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_find_replace_forget),
		cmocka_unit_test(test_nothing_before_its_deadline),
		cmocka_unit_test(test_busy_exited_map_waits_ten_seconds_without_end),
		cmocka_unit_test(test_busy_move_backs_off_then_gives_up),
		cmocka_unit_test(test_orphans_counted_per_owner),
		cmocka_unit_test(test_due_entries_come_earliest_first_and_only_them),
		cmocka_unit_test(test_next_move_is_the_earliest_move),
		cmocka_unit_test(test_exited_counted_per_owner_and_said_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
