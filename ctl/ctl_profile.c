/*
 * perfmapctl profile: LuaJIT's -jp for every process on the host. Samples
 * the given processes and the children they fork (-p), the whole host
 * (-a), or runs a command and profiles it and its descendants until it
 * exits (--), then prints the view -j's letters ask for. Built on
 * libperfmap-profile: the stacks are counted in the kernel and named here,
 * at the end, each frame once.
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "perfmap_profile.h"
#include "profile_pprof.h"
#include "profile_push.h"
#include "profile_report.h"
#include "profile_series.h"

#define PIDS_MAX 256
#define LABELS_MAX 32
#define HEADERS_MAX 32
/* The continuous default: the fleet profilers' 20 Hz, not a terminal session's 100. */
#define EVERY_INTERVAL_MS 50

enum zone_kind { ZONE_CGROUP, ZONE_COMM, ZONE_EXE };

struct prof_run {
	struct prof_view view;
	enum zone_kind zone;
	struct perfmap_symbolizer *sym;   /* during the callbacks only */
	struct prof_sample *samples;
	size_t n, cap;
	struct perfmap_strtab strings;    /* interned: what the samples' frames point at */
	struct prof_cred **creds;         /* the samples' processes', once each (a and A only) */
	size_t ncreds, creds_cap;
	uint64_t total, unnamed, unknown, kernel_only;
	uint64_t every_total, periods;   /* --every: samples in the files written, and how many */
	struct perfmap_profile_stats stats;
	uint32_t max_stacks;
	bool failed;
	/* --push: each sample's workload (wls[i] is samples[i]'s), each workload once a period. */
	bool want_workloads;
	const struct prof_workload **wls;
	struct prof_workload **workloads;
	size_t nworkloads;
	struct prof_push *push;
	struct prof_series_opts so;
	char hostname[256];
	uint64_t push_total;              /* samples handed to the pusher */
	uint64_t push_unencoded;          /* samples of periods that could not be encoded */
};

static volatile sig_atomic_t stop_requested;

/* A file per module of native code read, a perf event per CPU: the soft limit up to the hard one. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* libbpf's own lines only with PERFMAPCTL_DEBUG set: the error is said once, in our words. */
__attribute__((format(printf, 2, 0)))
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	return getenv("PERFMAPCTL_DEBUG") ? vfprintf(stderr, fmt, ap) : 0;
}

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* @s kept until the report is written, once per content; NULL for NULL. */
static const char *keep(struct prof_run *r, const char *s)
{
	const char *k;

	if (!s)
		return NULL;
	k = perfmap__strtab_intern(&r->strings, s);
	if (!k)
		r->failed = true;
	return k;
}

/*
 * @c kept until the report is written, once per content: annotation opens
 * the source files a sample's frames name as its process could have.
 */
static const struct prof_cred *keep_cred(struct prof_run *r, const struct perfmap_creds *c)
{
	struct prof_cred *k, **nc;
	gid_t *groups;

	for (size_t i = 0; i < r->ncreds; i++) {
		k = r->creds[i];
		if (k->uid == c->uid && k->gid == c->gid && k->ngroups == c->ngroups &&
		    k->own_mount_ns == c->own_mount_ns &&
		    (!c->ngroups || !memcmp(k->groups, c->groups, c->ngroups * sizeof(*c->groups))))
			return k;
	}
	if (r->ncreds == r->creds_cap) {
		size_t cap = r->creds_cap ? 2 * r->creds_cap : 16;

		nc = realloc(r->creds, cap * sizeof(*nc));
		if (!nc)
			goto nomem;
		r->creds = nc;
		r->creds_cap = cap;
	}
	/* The groups right after the struct, freed with it. */
	k = malloc(sizeof(*k) + c->ngroups * sizeof(*groups));
	if (!k)
		goto nomem;
	groups = (gid_t *)(k + 1);
	if (c->ngroups)
		memcpy(groups, c->groups, c->ngroups * sizeof(*groups));
	*k = (struct prof_cred){ .uid = c->uid, .gid = c->gid, .ngroups = c->ngroups, .groups = groups,
				 .own_mount_ns = c->own_mount_ns };
	r->creds[r->ncreds++] = k;
	return k;
nomem:
	r->failed = true;
	return NULL;
}

/* The zone of a sample: its thread's name, its executable, or its container (else its cgroup). */
static const char *zone_of(struct prof_run *r, const struct perfmap_profile_stack *st)
{
	struct perfmap_process pr;
	char buf[64];
	const char *slash;

	if (r->zone == ZONE_COMM)
		return keep(r, st->comm);
	if (perfmap_symbolizer_process(r->sym, st->pid, st->start_ticks, &pr))
		return keep(r, "(unknown)");
	if (r->zone == ZONE_EXE) {
		slash = pr.exe ? strrchr(pr.exe, '/') : NULL;
		return keep(r, slash ? slash + 1 : pr.exe ? pr.exe : "(unknown)");
	}
	if (pr.container) {
		snprintf(buf, sizeof(buf), "container:%.12s", pr.container);
		return keep(r, buf);
	}
	return keep(r, pr.cgroup ? pr.cgroup : "(unknown)");
}

/* @st's process's workload, kept for the period, once per content: the series it is pushed in. */
static const struct prof_workload *workload_of(struct prof_run *r, const struct perfmap_profile_stack *st)
{
	struct prof_workload w, *k, **nw;
	struct perfmap_process pr;
	char buf[2048];

	if (perfmap_symbolizer_process(r->sym, st->pid, st->start_ticks, &pr))
		pr = (struct perfmap_process){ 0 };
	prof_workload_of(pr.exe ? pr.exe : st->comm, pr.cgroup, pr.container, &w, buf, sizeof(buf));
	/* Interned: equal contents are one pointer, so a workload is found by its pointers. */
	w.service = keep(r, w.service);
	w.container = keep(r, w.container);
	w.pod_uid = keep(r, w.pod_uid);
	w.unit = keep(r, w.unit);
	w.cgroup = keep(r, w.cgroup);
	for (size_t i = 0; i < r->nworkloads; i++) {
		k = r->workloads[i];
		if (k->service == w.service && k->container == w.container && k->pod_uid == w.pod_uid &&
		    k->unit == w.unit && k->cgroup == w.cgroup)
			return k;
	}
	nw = realloc(r->workloads, (r->nworkloads + 1) * sizeof(*nw));
	k = malloc(sizeof(*k));
	if (nw)
		r->workloads = nw;
	if (!nw || !k) {
		free(k);
		r->failed = true;
		return NULL;
	}
	*k = w;
	r->workloads[r->nworkloads++] = k;
	return k;
}

/* The library's callback: each distinct stack, named now, while the symbolizer has it all. */
static void on_stack(void *data, const struct perfmap_profile_stack *st)
{
	const struct prof_cred *cred = NULL;
	struct prof_run *r = data;
	struct perfmap_frame fr;
	struct perfmap_creds pc;
	struct prof_frame *f;
	struct prof_sample *ns;

	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 1024;

		ns = realloc(r->samples, cap * sizeof(*ns));
		if (!ns) {
			r->failed = true;
			return;
		}
		r->samples = ns;
		r->cap = cap;
		if (r->want_workloads) {
			const struct prof_workload **nw = realloc(r->wls, cap * sizeof(*nw));

			if (!nw) {
				r->failed = true;
				return;
			}
			r->wls = nw;
		}
	}
	f = calloc(st->nips ? st->nips : 1, sizeof(*f));
	if (!f) {
		r->failed = true;
		return;
	}
	for (uint32_t i = 0; i < st->nips; i++) {
		/* The name as people read it for every view; the mangled one, build id and address for pprof. */
		fr = (struct perfmap_frame){ .sz = sizeof(fr) };
		perfmap_symbolizer_lookup_frame(r->sym, st->pid, st->start_ticks, st->image, st->ips[i],
						&fr);
		f[i] = (struct prof_frame){ .name = keep(r, fr.demangled), .module = keep(r, fr.sym.module),
					    .offset = fr.sym.offset, .file = keep(r, fr.sym.file),
					    .line = fr.sym.line, .state = fr.sym.state,
					    .system_name = keep(r, fr.sym.name),
					    .build_id = keep(r, fr.build_id), .in_file = fr.in_file,
					    .address = fr.file_addr, .map_start = fr.map_start,
					    .map_limit = fr.map_limit, .map_offset = fr.map_offset };
	}
	/* Whose eyes its sources are opened with (a and A): none read, none shown. */
	if (r->view.annotate >= 0 &&
	    !perfmap_symbolizer_creds(r->sym, st->pid, st->start_ticks, st->image, &pc))
		cred = keep_cred(r, &pc);
	if (r->want_workloads)
		r->wls[r->n] = workload_of(r, st);
	r->samples[r->n++] = (struct prof_sample){ .frames = f, .n = st->nips,
						   .zone = zone_of(r, st), .count = st->samples,
						   .cred = cred };
	r->total += st->samples;
	/* What could not be named, and why: the first user frame tells. */
	for (uint32_t i = st->nkernel; i < st->nips; i++) {
		if (f[i].state == '?')
			r->unknown += st->samples;
		else if (f[i].state == 'U')
			r->unnamed += st->samples;
		break;
	}
	if (st->nips == st->nkernel)
		r->kernel_only += st->samples;
}

static const char usage[] =
	"Usage: perfmapctl profile [-j LETTERS] [-o FILE] [-d DURATION] [--zone cgroup|comm|exe]\n"
	"                          [--every DURATION] [--max-stacks N] [--no-keep-maps] [--states FILE]\n"
	"                          [--map-dir DIR] [--archive-dir DIR] [--run-dir DIR]\n"
	"                          [--push URL [--push-protocol pyroscope|pyroscope-ingest|parca|parca-grpc]\n"
	"                           [--push-ca FILE] [--push-basic-auth-file FILE] [--push-token-file FILE]\n"
	"                           [--push-tenant ID] [--push-header 'NAME: VALUE']... [--label NAME=VALUE]...\n"
	"                           [--push-spool DIR] [--push-spool-max SIZE] [--push-timeout DURATION]]\n"
	"                          (-p PID[,PID...] ... | -a | -- COMMAND [ARGS...])\n"
	"\n"
	"Samples the processes (and the children they fork), the whole host, or\n"
	"COMMAND and its descendants until it exits, every 10 ms on every CPU,\n"
	"and prints where they spend their time, as LuaJIT's -jp. -j's letters:\n"
	"  f  function name, else module+offset (default)   F  module:name\n"
	"  l  file:line                 N / -N  stack depth / caller first\n"
	"  s  split after the first level         p  full paths\n"
	"  v  where the leaf is: J JIT, U unnamed JIT, I interpreter, G collector,\n"
	"     C native, K kernel                  z  zones (--zone)\n"
	"  r  raw counts   a / A  annotate source   G  folded stacks for flame graphs\n"
	"  m<N>  minimum percent (3)              i<N>  interval in ms (10)\n"
	"-o FILE.pb.gz writes pprof (go tool pprof); --every writes a profile per period\n"
	"to -o FILE with the period's start time in its name, sampling at 20 Hz unless\n"
	"-j gives i<N>. --push URL sends each period's profile, a series per workload,\n"
	"to Grafana Pyroscope (the default) or Parca, from a bounded spool with retries;\n"
	"credentials are read from files, never given on the command line. With perfmapd running\n"
	"(its --run-dir), it keeps the maps of the processes sampled until they are named.\n"
	"docs/profile.md has them all beside LuaJIT's.\n";

static int parse_pids(const char *arg, pid_t *pids, size_t *n)
{
	char *end;
	long v;

	for (const char *p = arg; *p; p = *end ? end + 1 : end) {
		v = strtol(p, &end, 10);
		if (end == p || v < 1 || v > 4194304 || (*end && *end != ','))
			return -EINVAL;
		if (*n == PIDS_MAX)
			return -E2BIG;
		pids[(*n)++] = (pid_t)v;
	}
	return 0;
}

/* COMMAND forked, stopped at a pipe until the profile holds its pid: its first instruction is sampled. */
static pid_t spawn(char **argv, int *go_fd)
{
	int pfd[2];
	pid_t pid;
	char c;

	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -errno;
	}
	if (!pid) {
		close(pfd[1]);
		if (read(pfd[0], &c, 1) != 1)
			_exit(127);
		execvp(argv[0], argv);
		fprintf(stderr, "perfmapctl: profile: %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[0]);
	*go_fd = pfd[1];
	return pid;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void say_unnamed(const struct prof_run *r)
{
	uint64_t t = r->total ? r->total : 1;

	if (r->unnamed)
		fprintf(stderr,
			"perfmapctl: profile: %llu of %llu samples (%d%%) are in JIT code no perf map names (no map, or no entry for the address): `perfmapctl doctor PID` says why\n",
			(unsigned long long)r->unnamed, (unsigned long long)r->total,
			prof_pct(r->unnamed, t));
	if (r->stats.lost_keys)
		fprintf(stderr,
			"perfmapctl: profile: %llu samples not counted: more distinct stacks than --max-stacks %u\n",
			(unsigned long long)r->stats.lost_keys, r->max_stacks);
	if (r->unknown)
		fprintf(stderr,
			"perfmapctl: profile: %llu of %llu samples (%d%%) are in code whose mappings could not be read (the process was gone first)\n",
			(unsigned long long)r->unknown, (unsigned long long)r->total,
			prof_pct(r->unknown, t));
}

struct prof_args {
	const char *letters, *out, *states, *map_dir, *archive_dir, *run_dir;
	struct prof_push_opts push;
	const char *headers[HEADERS_MAX];
	struct prof_label labels[LABELS_MAX];
	size_t nlabels;
	uint64_t duration_s, every_s;
	uint32_t max_stacks;
	bool no_keep_maps;
	pid_t pids[PIDS_MAX];
	size_t npids;
	bool all;
	char **cmd;
};

/*
 * The hold socket of the agent for the map directory, when there is one:
 * the agent then keeps each sampled process's map until it is named. No
 * agent is no error; one that cannot be reached is said.
 */
static const char *hold_socket(const struct prof_args *a, char *path, size_t len)
{
	const char *run_dir = a->run_dir ? a->run_dir : PERFMAPD_RUN_DIR;
	struct stat st;

	if (perfmap__hold_path(run_dir, a->map_dir ? a->map_dir : "/tmp", path, len))
		return NULL;
	if (stat(path, &st)) {
		/* Named with --run-dir: an agent that starts later is held with once it is there. */
		if (errno == ENOENT && a->run_dir)
			return path;
		if (errno != ENOENT)
			ctl_error("profile: warning: perfmapd's hold socket %s: %s; maps are read as perf reads them",
				 path, strerror(errno));
		return NULL;
	}
	return path;
}

/* "Name: value", a header as curl sends it: a token, a colon, no line break to smuggle another. */
static bool header_ok(const char *h)
{
	size_t n = strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_");

	return n && h[n] == ':' && !strpbrk(h, "\r\n");
}

/* The --push options, into @a->push. */
static int parse_push_arg(int opt, const char *arg, struct prof_args *a)
{
	struct prof_push_opts *o = &a->push;
	uint64_t v;

	switch (opt) {
	case 'U':
		if (strncmp(arg, "http://", 7) && strncmp(arg, "https://", 8)) {
			ctl_error("profile: --push %s: an http:// or https:// URL", arg);
			return -EINVAL;
		}
		o->url = arg;
		break;
	case 'P' + 256:
		if (prof_push_protocol_parse(arg, &o->protocol)) {
			ctl_error("profile: --push-protocol %s: pyroscope, pyroscope-ingest, parca or parca-grpc", arg);
			return -EINVAL;
		}
		break;
	case 'C' + 256: o->ca_file = arg; break;
	case 'B' + 256: o->basic_auth_file = arg; break;
	case 'T' + 256: o->token_file = arg; break;
	case 'N' + 256: o->tenant = arg; break;
	case 'S' + 256: o->spool_dir = arg; break;
	case 'H' + 256:
		if (!header_ok(arg) || o->nheaders == HEADERS_MAX) {
			ctl_error("profile: --push-header: 'Name: value', one line (%d at most)", HEADERS_MAX);
			return -EINVAL;
		}
		a->headers[o->nheaders++] = arg;
		o->headers = a->headers;
		break;
	case 'L' + 256:
		if (a->nlabels == LABELS_MAX || prof_label_parse(arg, &a->labels[a->nlabels])) {
			ctl_error("profile: --label %s: NAME=VALUE, NAME [a-zA-Z_][a-zA-Z0-9_]* not starting with __, VALUE 1 to 1024 bytes (%d labels at most)",
				  arg, LABELS_MAX);
			return -EINVAL;
		}
		a->nlabels++;
		break;
	case 'M' + 256:
		if (perfmap__parse_bytes(arg, &v) || v < 4096) {
			ctl_error("profile: --push-spool-max %s: a size, 4K at least (64M, 1G)", arg);
			return -EINVAL;
		}
		o->spool_max = v;
		break;
	case 'O' + 256:
		if (perfmap__parse_duration(arg, &v) || !v || v > 600) {
			ctl_error("profile: --push-timeout %s: 1s to 10m", arg);
			return -EINVAL;
		}
		o->timeout_ms = v * 1000;
		break;
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct prof_args *a, struct prof_run *r)
{
	static const struct option longopts[] = {
		{ "zone", required_argument, NULL, 'Z' },
		{ "states", required_argument, NULL, 'S' },
		{ "map-dir", required_argument, NULL, 'M' },
		{ "archive-dir", required_argument, NULL, 'A' },
		{ "run-dir", required_argument, NULL, 'R' },
		{ "every", required_argument, NULL, 'E' },
		{ "max-stacks", required_argument, NULL, 'X' },
		{ "no-keep-maps", no_argument, NULL, 'K' },
		{ "push", required_argument, NULL, 'U' },
		{ "push-protocol", required_argument, NULL, 'P' + 256 },
		{ "push-ca", required_argument, NULL, 'C' + 256 },
		{ "push-basic-auth-file", required_argument, NULL, 'B' + 256 },
		{ "push-token-file", required_argument, NULL, 'T' + 256 },
		{ "push-tenant", required_argument, NULL, 'N' + 256 },
		{ "push-header", required_argument, NULL, 'H' + 256 },
		{ "label", required_argument, NULL, 'L' + 256 },
		{ "push-spool", required_argument, NULL, 'S' + 256 },
		{ "push-spool-max", required_argument, NULL, 'M' + 256 },
		{ "push-timeout", required_argument, NULL, 'O' + 256 },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char err[128];
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "+j:o:d:p:ah", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j': a->letters = optarg; break;
		case 'o': a->out = optarg; break;
		case 'd':
			if (perfmap__parse_duration(optarg, &a->duration_s) || !a->duration_s) {
				ctl_error("profile: -d %s: a duration is 10, 10s, 5m or 1h", optarg);
				return -EINVAL;
			}
			break;
		case 'p':
			if (parse_pids(optarg, a->pids, &a->npids)) {
				ctl_error("profile: -p %s: pids are numbers, comma-separated (%d at most)",
					  optarg, PIDS_MAX);
				return -EINVAL;
			}
			break;
		case 'a': a->all = true; break;
		case 'Z':
			if (!strcmp(optarg, "cgroup"))
				r->zone = ZONE_CGROUP;
			else if (!strcmp(optarg, "comm"))
				r->zone = ZONE_COMM;
			else if (!strcmp(optarg, "exe"))
				r->zone = ZONE_EXE;
			else {
				ctl_error("profile: --zone %s: cgroup, comm or exe", optarg);
				return -EINVAL;
			}
			break;
		case 'E':
			if (perfmap__parse_duration(optarg, &a->every_s) || !a->every_s) {
				ctl_error("profile: --every %s: a duration is 60, 60s, 5m or 1h", optarg);
				return -EINVAL;
			}
			break;
		case 'X': {
			uint64_t v;

			if (perfmap__parse_bytes(optarg, &v) || v < 16 || v > (1u << 22)) {
				ctl_error("profile: --max-stacks %s: 16 to 4M", optarg);
				return -EINVAL;
			}
			a->max_stacks = (uint32_t)v;
			break;
		}
		case 'K': a->no_keep_maps = true; break;
		case 'U':
		case 'P' + 256:
		case 'C' + 256:
		case 'B' + 256:
		case 'T' + 256:
		case 'N' + 256:
		case 'H' + 256:
		case 'L' + 256:
		case 'S' + 256:
		case 'M' + 256:
		case 'O' + 256:
			if (parse_push_arg(opt, optarg, a))
				return -EINVAL;
			break;
		case 'S': a->states = optarg; break;
		case 'M': a->map_dir = optarg; break;
		case 'A': a->archive_dir = optarg; break;
		case 'R': a->run_dir = optarg; break;
		case 'h': fputs(usage, stdout); return 1;
		default: fputs(usage, stderr); return -EINVAL;
		}
	}
	if (optind < argc)
		a->cmd = argv + optind;
	if (!!a->npids + a->all + !!a->cmd != 1) {
		ctl_error("profile: give one of -p PID, -a or -- COMMAND");
		return -EINVAL;
	}
	if (a->every_s && !a->push.url && (!a->out || !strcmp(a->out, "-"))) {
		ctl_error("profile: --every writes a file per period: give -o FILE, or --push URL");
		return -EINVAL;
	}
	if (!a->push.url && (a->push.ca_file || a->push.token_file || a->push.basic_auth_file ||
			     a->push.tenant || a->push.nheaders || a->nlabels || a->push.spool_dir)) {
		ctl_error("profile: --push-* and --label go with --push URL");
		return -EINVAL;
	}
	if (prof_view_parse(a->letters, &r->view, err, sizeof(err))) {
		ctl_error("profile: -j %s: %s", a->letters, err);
		return -EINVAL;
	}
	if (a->every_s && !(a->letters && strchr(a->letters, 'i')))
		r->view.interval_ms = EVERY_INTERVAL_MS;
	r->want_workloads = a->push.url != NULL;
	return 0;
}

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* @out with @at (UTC) before its extension: host.pb.gz -> host-20261127T011500Z.pb.gz. */
/*
 * -o FILE with the period's start (UTC) before its extension, and "-N"
 * after the time for the Nth name taken already (periods of a second whose
 * starts fall in one second).
 */
static void period_path(const char *out, uint64_t at_ns, unsigned int n, char *buf, size_t len)
{
	const char *ext = strstr(out, ".pb.gz");
	const char *slash = strrchr(out, '/'), *dot = strrchr(out, '.');
	time_t t = (time_t)(at_ns / 1000000000ull);
	char stamp[32];
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	if (!ext && dot && (!slash || dot > slash))
		ext = dot;
	if (!ext)
		ext = out + strlen(out);
	if (n)
		snprintf(stamp + strlen(stamp), sizeof(stamp) - strlen(stamp), "-%u", n);
	snprintf(buf, len, "%.*s-%s%s", (int)(ext - out), out, stamp, ext);
}



/*
 * The samples of [@start_ns, @end_ns), to @path (NULL or "-": standard
 * output); @fresh: a new file, -EEXIST if the name is taken. 0 or -errno.
 */
static int write_report(const struct prof_run *r, const char *path, uint64_t start_ns,
			uint64_t end_ns, bool fresh)
{
	struct prof_pprof_info info = {
		.interval_ns = r->view.interval_ms * 1000000ull, .time_ns = start_ns,
		.duration_ns = end_ns - start_ns, .fresh = fresh,
	};
	FILE *out = stdout;
	int err;

	if (prof_pprof_wanted(path))
		return prof_pprof_write(r->samples, r->n, &info, path);
	if (path && strcmp(path, "-")) {
		/* Not through a link another user left at the name. */
		int fd = open(path, O_WRONLY | O_CREAT | (fresh ? O_EXCL : O_TRUNC) | O_NOFOLLOW | O_CLOEXEC,
			      0644);

		out = fd < 0 ? NULL : fdopen(fd, "w");
		if (!out) {
			err = -errno;
			if (fd >= 0)
				close(fd);
			return err;
		}
	}
	err = prof_report(r->samples, r->n, &r->view, out);
	if (out != stdout && fclose(out) && !err)
		err = -errno;
	fflush(stdout);
	return err;
}

/*
 * A period's samples to a file of their own, under the first name no earlier
 * period took (created, never written over); its name in @path.
 */
static int write_period_file(const struct prof_run *r, const char *out, uint64_t start_ns,
			     uint64_t end_ns, char *path, size_t len)
{
	int err = -EEXIST;

	for (unsigned int n = 0; n < 1000 && err == -EEXIST; n++) {
		period_path(out, start_ns, n, path, len);
		err = write_report(r, path, start_ns, end_ns, true);
	}
	return err;
}

/* The period's samples to the pusher, a series per workload; never waits on the server. */
static void push_out(struct prof_run *r, const struct prof_args *a, uint64_t start_ns, uint64_t end_ns)
{
	struct prof_pprof_info info = {
		.interval_ns = r->view.interval_ms * 1000000ull, .time_ns = start_ns,
		.duration_ns = end_ns - start_ns,
	};
	struct prof_push_stats ps;
	struct push_req **reqs;
	size_t nreqs, nseries, bytes = 0;
	int err;

	err = r->failed ? -ENOMEM :
	      push_period_requests(a->push.protocol, a->push.tenant, r->samples, r->wls, r->n, &r->so,
				   &info, &reqs, &nreqs, &nseries);
	if (err) {
		ctl_error("profile: push: cannot make the period's profiles: %s; its %llu samples are not sent",
			  strerror(-err), (unsigned long long)r->total);
		r->push_unencoded += r->total;
		return;
	}
	for (size_t i = 0; i < nreqs; i++)
		bytes += reqs[i]->len;
	prof_push__submit(r->push, reqs, nreqs);
	r->push_total += r->total;
	prof_push__stats(r->push, &ps);
	/* A line a period, as the file's: what this period made, and how the pushes have gone. */
	fprintf(stderr,
		"perfmapctl: profile: push: %zu series, %zu bytes; pushed %llu, retried %llu, rejected %llu, dropped %llu, waiting %llu (%llu bytes)%s%s\n",
		nseries, bytes, (unsigned long long)ps.pushed, (unsigned long long)ps.retried,
		(unsigned long long)ps.rejected, (unsigned long long)ps.dropped,
		(unsigned long long)ps.waiting, (unsigned long long)ps.waiting_bytes,
		ps.last_error[0] ? "; last error: " : "", ps.last_error);
}

/*
 * The end of a push: what waits is tried for a request's timeout more,
 * then kept in the spool directory or counted dropped; the final counts.
 */
static void push_final(struct prof_run *r, const struct prof_args *a)
{
	struct prof_push_stats ps;

	prof_push__drain(r->push, (a->push.timeout_ms ? a->push.timeout_ms : PROF_PUSH_TIMEOUT_MS_DEFAULT) + 5000);
	prof_push__stats(r->push, &ps);
	fprintf(stderr,
		"perfmapctl: profile: push: %llu samples in %llu periods; pushed %llu requests (%llu samples, %llu bytes), retried %llu, rejected %llu (%llu samples), dropped %llu (%llu samples), kept in the spool %llu (%llu bytes), not encoded %llu samples; the kernel took %llu (%llu past --max-stacks)%s%s\n",
		(unsigned long long)r->push_total, (unsigned long long)r->periods + 1,
		(unsigned long long)ps.pushed, (unsigned long long)ps.pushed_samples,
		(unsigned long long)ps.bytes, (unsigned long long)ps.retried,
		(unsigned long long)ps.rejected, (unsigned long long)ps.rejected_samples,
		(unsigned long long)ps.dropped, (unsigned long long)ps.dropped_samples,
		(unsigned long long)ps.waiting, (unsigned long long)ps.waiting_disk,
		(unsigned long long)r->push_unencoded, (unsigned long long)r->stats.taken,
		(unsigned long long)r->stats.lost_keys, ps.last_error[0] ? "; last error: " : "",
		ps.last_error);
}

/* The kept strings and credentials, once no sample points at them: a period's run for days keeps its own only. */
static void strings_reset(struct prof_run *r)
{
	for (size_t i = 0; i < r->nworkloads; i++)
		free(r->workloads[i]);
	free(r->workloads);
	r->workloads = NULL;
	r->nworkloads = 0;
	perfmap__strtab_release(&r->strings);
	for (size_t i = 0; i < r->ncreds; i++)
		free(r->creds[i]);
	free(r->creds);
	r->creds = NULL;
	r->creds_cap = r->ncreds = 0;
}

static void samples_reset(struct prof_run *r)
{
	for (size_t i = 0; i < r->n; i++)
		free((void *)r->samples[i].frames);
	r->n = 0;
	r->total = r->unnamed = r->unknown = r->kernel_only = 0;
	r->failed = false;
}

/* --every: the period's samples to a file of their own, and a fresh count. */
static int write_period(struct perfmap_profile *p, struct prof_run *r, const struct prof_args *a,
			uint64_t *start_ns)
{
	/* The period ends as the samples turn to the other map, not when its stacks are named. */
	uint64_t end_ns = real_ns();
	char path[4096];
	int err;

	err = perfmap_profile_flush(p);
	if (!err && r->failed)
		err = -ENOMEM;
	if (!err && a->out) {
		err = write_period_file(r, a->out, *start_ns, end_ns, path, sizeof(path));
		if (err)
			ctl_error("profile: %s: %s", path, strerror(-err));
	}
	if (!err || a->push.url) {
		say_unnamed(r);
		r->every_total += r->total;
		r->periods++;
		/* A line a period, for the journal of a profiler that runs for days. */
		perfmap_profile_stats(p, &r->stats);
		fprintf(stderr, "perfmapctl: profile: %s: %llu samples; %llu processes followed now, %llu since the start\n",
			a->out ? path : "period", (unsigned long long)r->total,
			(unsigned long long)r->stats.tracked, (unsigned long long)r->stats.processes);
		if (a->push.url)
			push_out(r, a, *start_ns, end_ns);
		/* A file that cannot be written does not stop the pushes. */
		if (a->push.url)
			err = 0;
	}
	samples_reset(r);
	strings_reset(r);
	*start_ns = end_ns;
	return err;
}

/* Sample until the duration ends, a signal comes, or COMMAND exits (then *@reaped). */
static int run(struct perfmap_profile *p, struct prof_run *r, const struct prof_args *a,
	       pid_t child, int *status, bool *reaped, uint64_t *start_ns)
{
	uint64_t deadline = a->duration_s ? mono_ms() + a->duration_s * 1000 : 0;
	uint64_t next = a->every_s ? mono_ms() + a->every_s * 1000 : 0;
	int err;

	while (!stop_requested) {
		err = perfmap_profile_poll(p, 50);
		if (err)
			return err;
		if (child > 0 && waitpid(child, status, WNOHANG) == child) {
			*reaped = true;
			break;
		}
		if (deadline && mono_ms() >= deadline)
			break;
		if (next && mono_ms() >= next) {
			next += a->every_s * 1000;
			err = write_period(p, r, a, start_ns);
			if (err)
				return err;
		}
	}
	return 0;
}

int cmd_profile(int argc, char **argv)
{
	struct perfmap_profile_opts o = { .sz = sizeof(o) };
	struct prof_args a = { 0 };
	struct prof_run r = { 0 };
	struct perfmap_profile *p;
	char mode[32];
	int go_fd = -1, status = 0, err, rc = CTL_ERROR;
	uint64_t start_ns = real_ns(), end_ns;
	bool reaped = false;
	char path[4096], hold_path[PATH_MAX];
	pid_t child = 0;

	err = parse_args(argc, argv, &a, &r);
	if (err)
		return err > 0 ? CTL_OK : CTL_ERROR;
	if (a.push.url) {
		r.so = (struct prof_series_opts){ .name = "process_cpu", .hostname = r.hostname,
						  .extra = a.labels, .nextra = a.nlabels };
		if (gethostname(r.hostname, sizeof(r.hostname) - 1))
			snprintf(r.hostname, sizeof(r.hostname), "unknown");
		r.push = prof_push__new(&a.push);
		if (!r.push)
			goto free_labels;
	}
	libbpf_set_print(libbpf_print);
	raise_fd_limit();
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (a.cmd) {
		child = spawn(a.cmd, &go_fd);
		if (child < 0) {
			ctl_error("profile: cannot start %s: %s", a.cmd[0], strerror((int)-child));
			goto free_push;
		}
		a.pids[a.npids++] = child;
	}
	o.pids = a.pids;
	o.npids = a.npids;
	o.all = a.all;
	o.map_dir = a.map_dir;
	o.archive_dir = a.archive_dir;
	o.states_file = a.states;
	o.max_stacks = a.max_stacks;
	o.no_keep_maps = a.no_keep_maps;
	o.hold_socket = hold_socket(&a, hold_path, sizeof(hold_path));
	r.max_stacks = a.max_stacks ? a.max_stacks : 16384;
	snprintf(mode, sizeof(mode), "i%u", r.view.interval_ms);
	p = perfmap_profile_start(&o, mode, on_stack, &r);
	if (!p) {
		err = errno;
		if (err == ESRCH)
			ctl_error("profile: no such process (of -p %d%s)", (int)a.pids[0],
				  a.npids > 1 ? ", ..." : "");
		else if (err == EPERM || err == EACCES)
			ctl_error("profile: cannot load the BPF sampler: %s (root, or CAP_BPF and CAP_PERFMON, is needed)",
				  strerror(err));
		else
			ctl_error("profile: cannot start sampling: %s", strerror(err));
		goto kill_child;
	}
	r.sym = perfmap_profile_symbolizer(p);
	perfmap_profile_stats(p, &r.stats);
	if (o.hold_socket && !r.stats.agent_holds)
		ctl_error("profile: warning: perfmapd's hold socket %s: cannot connect; tried again every second, maps are read as perf reads them meanwhile",
			  o.hold_socket);
	if (go_fd >= 0) {
		if (write(go_fd, "g", 1) != 1)
			ctl_error("profile: cannot start %s", a.cmd[0]);
		close(go_fd);
		go_fd = -1;
	}
	err = run(p, &r, &a, child, &status, &reaped, &start_ns);
	if (err)
		ctl_error("profile: %s", strerror(-err));
	/* Sampling ends here: what the kernel took is then the whole profile's. */
	perfmap_profile_detach(p);
	perfmap_profile_stats(p, &r.stats);
	end_ns = real_ns();
	err = perfmap_profile_stop(p);
	if (err || r.failed) {
		ctl_error("profile: cannot read the samples: %s", strerror(err ? -err : ENOMEM));
		goto free_samples;
	}
	err = 0;
	if (a.every_s && a.out)
		err = write_period_file(&r, a.out, start_ns, end_ns, path, sizeof(path));
	else if (!a.push.url || a.out)
		err = write_report(&r, a.out, start_ns, end_ns, false);
	if (err) {
		ctl_error("profile: cannot write the report%s%s: %s", a.out ? " to " : "",
			  a.every_s ? path : a.out ? a.out : "", strerror(-err));
		if (!a.push.url)
			goto free_samples;
	}
	say_unnamed(&r);
	if (a.push.url)
		push_out(&r, &a, start_ns, end_ns);
	if (a.every_s && a.out)
		fprintf(stderr, "perfmapctl: profile: %llu samples in %llu files; the kernel took %llu (%llu past --max-stacks)\n",
			(unsigned long long)(r.every_total + r.total), (unsigned long long)r.periods + 1,
			(unsigned long long)r.stats.taken, (unsigned long long)r.stats.lost_keys);
	if (a.push.url)
		push_final(&r, &a);
	rc = err ? CTL_ERROR : CTL_OK;
free_samples:
	samples_reset(&r);
	free(r.samples);
	free(r.wls);
	strings_reset(&r);
kill_child:
	if (go_fd >= 0)
		close(go_fd);  /* the command never starts: its read fails */
	if (child > 0 && !reaped)
		waitpid(child, &status, 0);
free_push:
	prof_push__free(r.push);
free_labels:
	for (size_t i = 0; i < a.nlabels; i++) {
		free(a.labels[i].name);
		free(a.labels[i].value);
	}
	return rc;
}
