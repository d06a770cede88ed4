/* One agent per map directory: its lock and the status socket perfmapctl talks to. */
#ifndef PERFMAPD_INSTANCE_H
#define PERFMAPD_INSTANCE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct instance;

/* No group may read the status: only root. */
#define STATUS_NO_GROUP ((gid_t)-1)

/*
 * Take the lock for @map_dir and listen; NULL (after a message) when another
 * agent holds it. The socket is root's alone (0600), or root's and
 * @status_gid's (0660).
 */
struct instance *instance__open(const char *run_dir, const char *map_dir, gid_t status_gid);
void instance__free(struct instance *inst);
int instance__fd(const struct instance *inst);

/*
 * A flood of perfmapctl must not starve the event loop: at most
 * STATUS_PER_WAKEUP answers each time the loop comes by, STATUS_PER_S a
 * second. How many may be answered at @now_ns (CLOCK_MONOTONIC); 0 when
 * this second's are spent, and the socket should not be watched until then.
 */
unsigned int instance__budget(struct instance *inst, uint64_t now_ns);
/*
 * What a client asked for (docs/agent.md: the status socket). A client that
 * sends nothing gets the whole status at once, as it always did: what came
 * with its connection is read when it is accepted, never waited for. A
 * client with a request binds its socket before it connects (autobind: an
 * abstract name the kernel picks), so that the agent knows at the accept
 * that a line is coming, which it may send after: its line is then awaited,
 * STATUS_ASK_WAIT_NS at most, STATUS_ASKING_MAX clients at once (more get
 * the whole status at once, as before). "pid N\n" is that process's lines;
 * anything else, nothing, or more than STATUS_REQUEST_MAX bytes, an error line.
 */
enum status_request_kind {
	STATUS_REQ_NONE,
	STATUS_REQ_PID,
	STATUS_REQ_BAD,
};
struct status_request {
	enum status_request_kind kind;
	pid_t pid;
};
#define STATUS_REQUEST_MAX 32
#define STATUS_ASKING_MAX 8
#define STATUS_ASK_WAIT_NS (1000ull * 1000000)
/* The request in @buf (@len bytes, what was read), without system calls. */
void instance_parse_request(const char *buf, size_t len, struct status_request *rq);
/* The answer to @rq (not STATUS_REQ_NONE) into @buf (@len bytes): its length. */
typedef size_t status_answer_fn(void *ctx, const struct status_request *rq, char *buf, size_t len);
/* An answer to a request is this long at most: a process's lines. */
#define STATUS_ANSWER_MAX 8192
/*
 * Answer at most @max waiting clients at @now_ns (CLOCK_MONOTONIC): with
 * @text, or, to one that sent a request, with what @answer puts for it; a
 * client that bound its socket and whose line is not there yet is awaited.
 */
void instance__serve(struct instance *inst, const char *text, size_t len, unsigned int max,
		     uint64_t now_ns, status_answer_fn *answer, void *ctx);
/* Readable when an awaited client's line (or its end) came. */
int instance__asking_fd(const struct instance *inst);
/* Answer the awaited clients whose line came, or whose time is up (at each tick). */
void instance__serve_asking(struct instance *inst, uint64_t now_ns, status_answer_fn *answer,
			    void *ctx);
/* Answers given; seconds whose budget ran out, the rest left waiting. */
void instance__stats(const struct instance *inst, uint64_t *served, uint64_t *throttled);

#define STATUS_PER_WAKEUP 8
#define STATUS_PER_S 100

#endif /* PERFMAPD_INSTANCE_H */
