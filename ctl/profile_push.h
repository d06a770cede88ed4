/*
 * perfmapctl profile --push: each period's series to Grafana Pyroscope or
 * Parca, from a thread of its own (sampling never waits on a server), with
 * retries from a bounded spool, memory first and then a directory.
 */
#ifndef PERFMAPD_PROFILE_PUSH_H
#define PERFMAPD_PROFILE_PUSH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile_series.h"

enum prof_push_protocol {
	PUSH_PYROSCOPE,         /* Connect: POST /push.v1.PusherService/Push, application/proto */
	PUSH_PYROSCOPE_INGEST,  /* POST /ingest?format=pprof&name=..., a series a request */
	PUSH_PARCA,             /* gRPC-web over HTTP/1.1: ProfileStoreService/WriteRaw */
	PUSH_PARCA_GRPC,        /* gRPC over HTTP/2 (h2c for http://) */
};

/* "pyroscope", ...: 0 with *@out, or -EINVAL. */
int prof_push_protocol_parse(const char *s, enum prof_push_protocol *out);
const char *prof_push_protocol_name(enum prof_push_protocol p);

/* One request, ready to send: what the spool keeps. */
struct push_req {
	uint64_t seq;
	char *target;           /* after the URL: "/push.v1.PusherService/Push", "/ingest?..." */
	char *content_type;
	uint8_t *body;          /* NULL while it waits in the spool directory */
	size_t len;
	size_t disk_len;        /* its spool file's size, header included, while on disk */
	uint64_t samples;       /* the samples it carries */
	uint32_t series;
	unsigned int attempts;
	uint64_t next_ms;       /* not before (CLOCK_MONOTONIC ms) */
	bool on_disk;
};

void push_req_free(struct push_req *r);

/* A period: its start and length, and the profile each of its series carries (gzipped pprof). */
struct push_period {
	uint64_t start_ns, duration_ns;
	uint32_t rate_hz;
	const struct prof_series_set *set;
	uint8_t *const *profiles;
	const size_t *lens;
};

/*
 * The requests @p needs in @proto (one for all series, or one a series for
 * the ingest API) into *@reqs (*@n of them; the caller frees each and the
 * array): 0 or -ENOMEM. Pure: the unit tests decode what it makes.
 */
int push_encode(enum prof_push_protocol proto, const struct push_period *p, const char *tenant,
		struct push_req ***reqs, size_t *n);

struct prof_pprof_info;

/*
 * A period's @n samples as requests in @proto: split into series by their
 * workloads @wl (profile_series.h), a gzipped pprof each (@info), then
 * push_encode(). 0 or -ENOMEM; *@nseries: how many series.
 */
int push_period_requests(enum prof_push_protocol proto, const char *tenant,
			 const struct prof_sample *s, const struct prof_workload *const *wl, size_t n,
			 const struct prof_series_opts *so, const struct prof_pprof_info *info,
			 struct push_req ***reqs, size_t *nreqs, size_t *nseries);

struct prof_push_opts {
	const char *url;
	enum prof_push_protocol protocol;
	const char *ca_file;              /* --push-ca: NULL, the system's CAs */
	const char *basic_auth_file;      /* one line, user:password */
	const char *token_file;           /* a bearer token */
	const char *tenant;               /* X-Scope-OrgID */
	const char *const *headers;       /* "Name: value" */
	size_t nheaders;
	const char *spool_dir;            /* NULL: memory only */
	uint64_t spool_max;               /* bytes waiting, memory and directory together */
	uint64_t timeout_ms;              /* a request's, connection included */
};

#define PROF_PUSH_SPOOL_MAX_DEFAULT (64ull << 20)
#define PROF_PUSH_MEM_MAX (16ull << 20)
#define PROF_PUSH_TIMEOUT_MS_DEFAULT 10000

struct prof_push_stats {
	uint64_t pushed, pushed_samples, bytes;
	uint64_t retried;
	uint64_t dropped, dropped_samples;      /* past the spool's bound, or waiting at the end */
	uint64_t rejected, rejected_samples;    /* a 4xx that will never succeed */
	uint64_t waiting, waiting_bytes, waiting_disk;
	char last_error[256];
};

struct prof_push;

/* NULL with errno, said (a spool directory that cannot be used, no libcurl). */
struct prof_push *prof_push__new(const struct prof_push_opts *o);
/* Queue a period's requests (taken over, even on error): never waits on the network. */
void prof_push__submit(struct prof_push *p, struct push_req **reqs, size_t n);
void prof_push__stats(struct prof_push *p, struct prof_push_stats *s);
/*
 * Try for up to @drain_ms to send what waits, then stop sending: what
 * still waits stays in the spool directory for the next start, or is
 * counted dropped. The stats are then the final ones.
 */
void prof_push__drain(struct prof_push *p, uint64_t drain_ms);
void prof_push__free(struct prof_push *p);

#endif /* PERFMAPD_PROFILE_PUSH_H */
