/*
 * perfmapctl profile --push without a server: workloads from real cgroup
 * paths (Kubernetes with either cgroup driver, podman, docker, systemd),
 * --label's rules, series split and labelled as the servers want, and
 * each protocol's request decoded back with the servers' messages.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile_pprof.h"
#include "profile_push.h"
#include "profile_series.h"
#include "profile.pb-c.h"
#include "profilestore.pb-c.h"
#include "push.pb-c.h"

static const char pod_systemd[] =
	"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f3c2a9e_5b1d_4c7e_9a2b_7d8e6f5a4b3c.slice/cri-containerd-4f1d2c3b4a5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8.scope";
static const char pod_cgroupfs[] =
	"/kubepods/besteffort/pod0f3c2a9e-5b1d-4c7e-9a2b-7d8e6f5a4b3c/4f1d2c3b4a5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";
static const char cid[] = "4f1d2c3b4a5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";

static void test_workloads_from_cgroups(void **state)
{
	struct prof_workload w;
	char buf[1024];

	(void)state;
	prof_workload_of("/usr/bin/python3.12", pod_systemd, cid, &w, buf, sizeof(buf));
	assert_string_equal(w.service, "pod:0f3c2a9e-5b1d-4c7e-9a2b-7d8e6f5a4b3c");
	assert_string_equal(w.pod_uid, "0f3c2a9e-5b1d-4c7e-9a2b-7d8e6f5a4b3c");
	assert_string_equal(w.container, "4f1d2c3b4a5e");
	assert_null(w.unit);
	prof_workload_of("/usr/bin/python3.12", pod_cgroupfs, cid, &w, buf, sizeof(buf));
	assert_string_equal(w.service, "pod:0f3c2a9e-5b1d-4c7e-9a2b-7d8e6f5a4b3c");
	/* podman and docker: the container, no pod; their scope is no service unit. */
	prof_workload_of("/usr/bin/node", "/machine.slice/libpod-4f1d2c3b4a5e6f70.scope/container", cid,
			 &w, buf, sizeof(buf));
	assert_string_equal(w.service, "container:4f1d2c3b4a5e");
	assert_null(w.pod_uid);
	assert_null(w.unit);
	prof_workload_of("/usr/bin/node", "/system.slice/docker-4f1d2c3b4a5e.scope", cid, &w, buf,
			 sizeof(buf));
	assert_string_equal(w.service, "container:4f1d2c3b4a5e");
	/* A unit, the innermost one under a user's manager. */
	prof_workload_of("/usr/sbin/nginx", "/system.slice/nginx.service", NULL, &w, buf, sizeof(buf));
	assert_string_equal(w.service, "nginx.service");
	assert_string_equal(w.unit, "nginx.service");
	prof_workload_of("/usr/bin/gjs",
			 "/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-x.service",
			 NULL, &w, buf, sizeof(buf));
	assert_string_equal(w.unit, "app-gnome-x.service");
	/* Else the executable's name; else "unknown". */
	prof_workload_of("/opt/app/bin/server", "/user.slice/user-0.slice/session-3.scope", NULL, &w,
			 buf, sizeof(buf));
	assert_string_equal(w.service, "server");
	assert_string_equal(w.cgroup, "/user.slice/user-0.slice/session-3.scope");
	prof_workload_of(NULL, NULL, NULL, &w, buf, sizeof(buf));
	assert_string_equal(w.service, "unknown");
	/* A buffer too small loses labels, never writes past its end. */
	prof_workload_of("/usr/bin/python3", pod_systemd, cid, &w, buf, 20);
	assert_non_null(w.service);
}

/* A local user names its executable and cgroup: what reaches a server is valid UTF-8, bounded. */
static void test_label_values_a_server_takes(void **state)
{
	char longer[3000], *v;

	(void)state;
	v = prof_label_value("caf\xc3\xa9 \xe2\x82\xac");
	assert_string_equal(v, "caf\xc3\xa9 \xe2\x82\xac");
	free(v);
	/* A lone continuation byte, an overlong '/', a surrogate, a cut sequence, control characters. */
	v = prof_label_value("a\x80" "b\xc0\xaf" "c\xed\xa0\x80" "d\xe2\x82\n" "e\x1b");
	assert_string_equal(v, "a_b__c___d___e_");
	free(v);
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	longer[PROF_LABEL_VALUE_MAX - 1] = '\xc3';
	longer[PROF_LABEL_VALUE_MAX] = '\xa9';
	v = prof_label_value(longer);
	/* Cut at the bound, never inside a character. */
	assert_int_equal(strlen(v), PROF_LABEL_VALUE_MAX - 1);
	free(v);
}

static void test_label_rules(void **state)
{
	static const char *const bad[] = { "x", "=v", "1a=v", "a-b=v", "__name__=x", "__x=y", "a=",
					   "a b=c" };
	struct prof_label l;

	(void)state;
	assert_int_equal(prof_label_parse("cluster=eu-west-1", &l), 0);
	assert_string_equal(l.name, "cluster");
	assert_string_equal(l.value, "eu-west-1");
	free(l.name);
	free(l.value);
	assert_int_equal(prof_label_parse("_a9=x=y", &l), 0);
	assert_string_equal(l.value, "x=y");
	free(l.name);
	free(l.value);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		assert_int_equal(prof_label_parse(bad[i], &l), -EINVAL);
}

static const struct prof_frame f_hot = { .name = "hot", .module = "/tmp/perf-1.map", .state = 'J' };
static const struct prof_frame f_main = { .name = "main", .module = "/usr/bin/app", .state = 'C' };
static const struct prof_frame st_a[] = { f_hot, f_main };
static const struct prof_frame st_b[] = { f_main };

static struct prof_workload wl_nginx = { .service = "nginx.service", .unit = "nginx.service",
					  .cgroup = "/system.slice/nginx.service" };
static struct prof_workload wl_pod = { .service = "pod:u1", .pod_uid = "u1", .container = "abc" };
/* Equal in content to wl_pod, another object: one series all the same. */
static struct prof_workload wl_pod2 = { .service = "pod:u1", .pod_uid = "u1", .container = "abc" };

static const struct prof_sample set4[] = {
	{ .frames = st_a, .n = 2, .count = 7 },
	{ .frames = st_b, .n = 1, .count = 5 },
	{ .frames = st_a, .n = 2, .count = 11 },
	{ .frames = st_b, .n = 1, .count = 1 },
};
static const struct prof_workload *const wls[] = { &wl_nginx, &wl_pod, &wl_pod2, &wl_nginx };

static const char *label(const struct prof_series *s, const char *name)
{
	for (size_t i = 0; i < s->nlabels; i++)
		if (!strcmp(s->labels[i].name, name))
			return s->labels[i].value;
	return NULL;
}

static const struct prof_label extra[] = { { "cluster", "dev" }, { "service_name", "web" } };

static void test_series_by_workload(void **state)
{
	struct prof_series_opts o = { .name = "process_cpu", .hostname = "node-1", .extra = extra,
				      .nextra = 1 };
	struct prof_series_set set;
	const struct prof_series *nginx, *pod;

	(void)state;
	assert_int_equal(prof_series_split(set4, wls, 4, &o, &set), 0);
	assert_int_equal(set.n, 2);
	nginx = !strcmp(label(&set.series[0], "service_name"), "nginx.service") ? &set.series[0] : &set.series[1];
	pod = nginx == &set.series[0] ? &set.series[1] : &set.series[0];
	assert_int_equal(nginx->n, 2);
	assert_int_equal(nginx->count, 8);
	assert_int_equal(pod->n, 2);
	assert_int_equal(pod->count, 16);
	assert_string_equal(label(nginx, "__name__"), "process_cpu");
	assert_string_equal(label(nginx, "hostname"), "node-1");
	assert_string_equal(label(nginx, "systemd_unit"), "nginx.service");
	assert_string_equal(label(nginx, "cluster"), "dev");
	assert_null(label(nginx, "container_id"));
	assert_string_equal(label(pod, "container_id"), "abc");
	assert_string_equal(label(pod, "pod_uid"), "u1");
	assert_null(label(pod, "pid"));
	/* Sorted by name, each name once, each a valid name. */
	for (size_t i = 0; i < pod->nlabels; i++) {
		assert_true(prof_label_name_ok(pod->labels[i].name));
		if (i)
			assert_true(strcmp(pod->labels[i - 1].name, pod->labels[i].name) < 0);
	}
	prof_series_set_free(&set);
	/* A --label of a name perfmapctl sets wins: the user names the service. */
	o.nextra = 2;
	assert_int_equal(prof_series_split(set4, wls, 4, &o, &set), 0);
	assert_string_equal(label(&set.series[0], "service_name"), "web");
	assert_string_equal(label(&set.series[1], "service_name"), "web");
	prof_series_set_free(&set);
	prof_series_set_free(NULL);
}

/* The requests for the sample set in @proto, with the pprof each series carries. */
static void encode(enum prof_push_protocol proto, struct push_req ***reqs, size_t *n)
{
	struct prof_series_opts o = { .name = "process_cpu", .hostname = "node-1" };
	struct prof_pprof_info info = { .interval_ns = 50000000, .time_ns = 1700000000123456789ull,
					.duration_ns = 60000000000ull };
	size_t nseries;

	assert_int_equal(push_period_requests(proto, "team-a", set4, wls, 4, &o, &info, reqs, n,
					      &nseries), 0);
	assert_int_equal(nseries, 2);
}

/* A raw_profile: gzip, a pprof with the period's samples and the servers' rules. */
static uint64_t check_profile(const uint8_t *gz, size_t len)
{
	Perftools__Profiles__Profile *p;
	uint8_t out[65536];
	uLongf olen = sizeof(out);
	z_stream z = { 0 };
	uint64_t samples = 0;

	assert_true(len > 2 && gz[0] == 0x1f && gz[1] == 0x8b);
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)gz;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)olen;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	olen = z.total_out;
	inflateEnd(&z);
	p = perftools__profiles__profile__unpack(NULL, olen, out);
	assert_non_null(p);
	assert_true(p->n_string_table > 0);
	assert_string_equal(p->string_table[0], "");
	assert_int_equal(p->n_sample_type, 2);
	assert_string_equal(p->string_table[p->sample_type[0]->type], "samples");
	assert_string_equal(p->string_table[p->sample_type[1]->unit], "nanoseconds");
	assert_int_equal(p->period, 50000000);
	assert_int_equal(p->time_nanos, 1700000000123456789ll);
	for (size_t i = 0; i < p->n_location; i++)
		assert_int_equal(p->location[i]->id, i + 1);
	for (size_t i = 0; i < p->n_function; i++)
		assert_int_equal(p->function[i]->id, i + 1);
	for (size_t i = 0; i < p->n_sample; i++) {
		assert_int_equal(p->sample[i]->n_value, 2);
		assert_int_equal(p->sample[i]->value[1], p->sample[i]->value[0] * 50000000);
		samples += (uint64_t)p->sample[i]->value[0];
	}
	perftools__profiles__profile__free_unpacked(p, NULL);
	return samples;
}

static void free_reqs(struct push_req **reqs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		push_req_free(reqs[i]);
	free(reqs);
}

static void test_pyroscope_push_request(void **state)
{
	Push__V1__PushRequest *m;
	struct push_req **reqs;
	uint64_t total = 0;
	size_t n;

	(void)state;
	encode(PUSH_PYROSCOPE, &reqs, &n);
	assert_int_equal(n, 1);
	assert_string_equal(reqs[0]->target, "/push.v1.PusherService/Push");
	assert_string_equal(reqs[0]->content_type, "application/proto");
	assert_int_equal(reqs[0]->samples, 24);
	m = push__v1__push_request__unpack(NULL, reqs[0]->len, reqs[0]->body);
	assert_non_null(m);
	assert_int_equal(m->n_series, 2);
	for (size_t i = 0; i < m->n_series; i++) {
		assert_int_equal(m->series[i]->n_samples, 1);
		assert_int_equal(strlen(m->series[i]->samples[0]->id), 36);
		total += check_profile(m->series[i]->samples[0]->raw_profile.data,
				       m->series[i]->samples[0]->raw_profile.len);
		assert_string_equal(m->series[i]->labels[0]->name, "__name__");
	}
	assert_int_equal(total, 24);
	push__v1__push_request__free_unpacked(m, NULL);
	free_reqs(reqs, n);
}

static void test_parca_write_raw_framed(void **state)
{
	Parca__Profilestore__V1alpha1__WriteRawRequest *m;
	struct push_req **reqs;
	const uint8_t *b;
	uint64_t total = 0;
	size_t n, len;

	(void)state;
	for (int web = 0; web < 2; web++) {
		encode(web ? PUSH_PARCA : PUSH_PARCA_GRPC, &reqs, &n);
		assert_int_equal(n, 1);
		assert_string_equal(reqs[0]->target,
				    "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw");
		assert_string_equal(reqs[0]->content_type,
				    web ? "application/grpc-web+proto" : "application/grpc+proto");
		/* gRPC's frame: uncompressed, the length big-endian, then the message. */
		b = reqs[0]->body;
		len = (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4];
		assert_int_equal(b[0], 0);
		assert_int_equal(len + 5, reqs[0]->len);
		m = parca__profilestore__v1alpha1__write_raw_request__unpack(NULL, len, b + 5);
		assert_non_null(m);
		assert_string_equal(m->tenant, "team-a");
		assert_true(m->normalized);
		assert_int_equal(m->n_series, 2);
		total = 0;
		for (size_t i = 0; i < m->n_series; i++) {
			assert_non_null(m->series[i]->labels);
			assert_true(m->series[i]->labels->n_labels >= 3);
			total += check_profile(m->series[i]->samples[0]->raw_profile.data,
					       m->series[i]->samples[0]->raw_profile.len);
		}
		assert_int_equal(total, 24);
		parca__profilestore__v1alpha1__write_raw_request__free_unpacked(m, NULL);
		free_reqs(reqs, n);
	}
}

static void test_ingest_a_request_per_series(void **state)
{
	struct push_req **reqs;
	uint64_t total = 0;
	size_t n;

	(void)state;
	encode(PUSH_PYROSCOPE_INGEST, &reqs, &n);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++) {
		assert_true(!strncmp(reqs[i]->target, "/ingest?format=pprof&name=", 26));
		assert_non_null(strstr(reqs[i]->target, "&from=1700000000&until=1700000061"));
		assert_non_null(strstr(reqs[i]->target, "&sampleRate=20"));
		/* name=<service>{hostname=node-1,...}, percent-encoded; __name__ is not in it. */
		assert_non_null(strstr(reqs[i]->target, "hostname%3Dnode-1"));
		assert_null(strstr(reqs[i]->target, "__name__"));
		assert_string_equal(reqs[i]->content_type, "application/octet-stream");
		total += check_profile(reqs[i]->body, reqs[i]->len);
	}
	assert_non_null(strstr(reqs[0]->target, "nginx.service%7B") ?: strstr(reqs[1]->target, "nginx.service%7B"));
	/* The app's name takes [a-zA-Z0-9_.-/] only: pod:u1 is pod_u1. */
	assert_non_null(strstr(reqs[0]->target, "name=pod_u1%7B") ?: strstr(reqs[1]->target, "name=pod_u1%7B"));
	assert_int_equal(total, 24);
	free_reqs(reqs, n);
}

/* A JIT name and a path of a local user's choosing, not UTF-8: the profile's strings are, escaped. */
static void test_profile_strings_are_utf8(void **state)
{
	static const struct prof_frame evil = { .name = "jit\xff\xfe" "fn", .module = "/var/tmp/e\xc0\xaf\nx",
						.state = 'J' };
	static const struct prof_sample one = { .frames = &evil, .n = 1, .count = 3 };
	struct prof_pprof_info info = { .interval_ns = 50000000 };
	Perftools__Profiles__Profile *p;
	uint8_t out[65536], *gz;
	z_stream z = { 0 };
	bool name = false, path = false;
	size_t len;

	(void)state;
	assert_int_equal(prof_pprof_encode(&one, 1, &info, &gz, &len), 0);
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = gz;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = sizeof(out);
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	p = perftools__profiles__profile__unpack(NULL, z.total_out, out);
	inflateEnd(&z);
	assert_non_null(p);
	for (size_t i = 0; i < p->n_string_table; i++) {
		const char *t = p->string_table[i];

		for (size_t k, o = 0; t[o]; o += k) {
			k = prof_utf8_len((const unsigned char *)t + o);
			assert_true(k > 0);
		}
		name |= !strcmp(t, "jit\\xff\\xfefn");
		path |= !strcmp(t, "/var/tmp/e\\xc0\\xaf\nx");
	}
	assert_true(name);
	assert_true(path);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(gz);
}

static void test_protocol_names(void **state)
{
	enum prof_push_protocol p;

	(void)state;
	assert_int_equal(prof_push_protocol_parse("parca-grpc", &p), 0);
	assert_int_equal(p, PUSH_PARCA_GRPC);
	assert_string_equal(prof_push_protocol_name(PUSH_PYROSCOPE_INGEST), "pyroscope-ingest");
	assert_int_equal(prof_push_protocol_parse("otlp", &p), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_workloads_from_cgroups),
		cmocka_unit_test(test_label_rules),
		cmocka_unit_test(test_label_values_a_server_takes),
		cmocka_unit_test(test_series_by_workload),
		cmocka_unit_test(test_pyroscope_push_request),
		cmocka_unit_test(test_parca_write_raw_framed),
		cmocka_unit_test(test_ingest_a_request_per_series),
		cmocka_unit_test(test_profile_strings_are_utf8),
		cmocka_unit_test(test_protocol_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
