/* The metrics endpoint: Prometheus's text format on --metrics-listen, served off the event loop. */
#ifndef PERFMAPD_METRICS_H
#define PERFMAPD_METRICS_H

#include <sys/socket.h>

struct metrics_values;

struct metrics;

/*
 * "HOST:PORT" (a numeric IPv4 address, or an IPv6 one in brackets, and a
 * port from 1 to 65535) into @addr; 0 or -EINVAL.
 */
int metrics_parse_listen(const char *spec, struct sockaddr_storage *addr);

/*
 * Listen on @spec and serve GET /metrics from a thread of the HTTP library's
 * own, which never touches the agent's state: it answers with the text last
 * published by metrics__update(). NULL and errno when it cannot listen.
 */
struct metrics *metrics__start(const char *spec);
/*
 * The loop's thread: @v's counters (read by the report), with what the
 * endpoint reads of its own connections and of the agent process, rendered
 * and published for the next scrapes.
 */
void metrics__update(struct metrics *m, struct metrics_values *v);
/* Stop serving (connections open are closed) and free; NULL is fine. */
void metrics__free(struct metrics *m);

#endif /* PERFMAPD_METRICS_H */
