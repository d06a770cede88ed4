/*
 * perfmapctl doctor: the process. Its identity, its namespaces, and which
 * runtime it is with which perf option, from /proc/<pid>/exe, cmdline,
 * environ and maps, all of which root may read. Everything a process wrote
 * itself (its name, arguments, paths) is escaped before it is kept.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "doctor.h"

#define ARGS_MAX (64u << 10)
#define ENV_MAX (256u << 10)
#define MAPS_TEXT_MAX (8u << 20)

static const char *const runtime_names[] = {
	[RT_GENERIC] = "generic", [RT_PYTHON] = "python", [RT_NODE] = "node",
	[RT_DOTNET] = "dotnet", [RT_JAVA] = "java",
};

const char *doc_runtime_str(enum doc_runtime rt)
{
	return runtime_names[rt];
}

/* All of /proc/<pid>/@name up to @cap bytes, NUL-terminated, in a new buffer; -errno. */
static ssize_t read_proc(pid_t pid, const char *name, size_t cap, char **out)
{
	char path[64], *buf;
	size_t len = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	buf = malloc(cap + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (n = 1; len < cap && n; ) {
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
	}
	n = n < 0 ? -errno : (ssize_t)len;
	close(fd);
	if (n < 0) {
		free(buf);
		return n;
	}
	buf[len] = '\0';
	*out = buf;
	return n;
}

/* The value of "@key:" in /proc/<pid>/status as up to @max numbers; how many. */
static size_t status_numbers(const char *status, const char *key, unsigned long *v, size_t max)
{
	size_t klen = strlen(key), n = 0;
	const char *p = status;
	char *end;

	for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, klen) || p[klen] != ':')
			continue;
		p += klen + 1;
		while (n < max) {
			while (*p == ' ' || *p == '\t')
				p++;
			if (*p < '0' || *p > '9')
				break;
			v[n++] = strtoul(p, &end, 10);
			p = end;
		}
		break;
	}
	return n;
}

static int read_status(struct doc_proc *p)
{
	unsigned long v[64];
	char *status;
	ssize_t len;
	size_t n, i;

	len = read_proc(p->pid, "status", 16u << 10, &status);
	if (len < 0)
		return (int)len;
	if (status_numbers(status, "Uid", v, 4) == 4)
		p->fsuid = (uid_t)v[3];
	if (status_numbers(status, "Gid", v, 4) == 4)
		p->fsgid = (gid_t)v[3];
	p->ngroups = status_numbers(status, "Groups", v, 64);
	for (i = 0; i < p->ngroups; i++)
		p->groups[i] = (gid_t)v[i];
	/* NSpid lists the pid in every namespace from ours down: its own is the last. */
	n = status_numbers(status, "NSpid", v, 64);
	p->ns_pid = n ? (pid_t)v[n - 1] : p->pid;
	free(status);
	return 0;
}

static bool same_mnt_ns(pid_t pid)
{
	char path[64];
	struct stat a, b;

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	if (stat("/proc/self/ns/mnt", &a) || stat(path, &b))
		return true;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* The value of @key in an environ block (NUL-separated KEY=VALUE), or NULL. */
static const char *env_get(const char *env, size_t len, const char *key)
{
	size_t klen = strlen(key);
	const char *p = env, *end = env + len;

	for (; p < end; p += strlen(p) + 1)
		if (!strncmp(p, key, klen) && p[klen] == '=')
			return p + klen + 1;
	return NULL;
}

static bool env_on(const char *v)
{
	return v && *v && strcmp(v, "0");
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* 3.N from "python3.N", "libpython3.N" or ".../versions/3.N"; -1 when none says. */
static int python_minor(const char *exe_base, const char *exe, const char *maps)
{
	const char *s;

	if (!strncmp(exe_base, "python3.", 8))
		return atoi(exe_base + 8);
	if (maps && (s = strstr(maps, "libpython3.")))
		return atoi(s + 11);
	if ((s = strstr(exe, "/versions/3.")))
		return atoi(s + 12);
	return -1;
}

struct args {
	const char *v[256];
	size_t n;
};

static void split_args(char *buf, size_t len, struct args *a)
{
	char *p = buf, *end = buf + len;

	a->n = 0;
	for (; p < end && a->n < 256; p += strlen(p) + 1)
		a->v[a->n++] = p;
}

static void set_how(struct doc_proc *p, const char *how, const char *val)
{
	char esc[64];

	ctl_escape(esc, sizeof(esc), val, strlen(val));
	snprintf(p->perf_how, sizeof(p->perf_how), "%s%s", how, esc);
}

/* CPython: -X perf (a map), -X perf_jit (a jitdump), or PYTHONPERFSUPPORT unless -E or -I. */
static void python_flags(struct doc_proc *p, const struct args *a, const char *env, size_t elen)
{
	bool ignore_env = false;
	const char *x, *v;
	size_t i;

	for (i = 1; i < a->n; i++) {
		x = a->v[i];
		if (x[0] != '-' || !strcmp(x, "-") || !strcmp(x, "-c") || !strcmp(x, "-m"))
			break;
		if (!strcmp(x, "-E") || !strcmp(x, "-I"))
			ignore_env = true;
		if (!strcmp(x, "-X") && i + 1 < a->n)
			x = a->v[++i];
		else if (!strncmp(x, "-X", 2))
			x += 2;
		else
			continue;
		if (!strcmp(x, "perf")) {
			p->perf_on = true;
			set_how(p, "-X ", x);
		} else if (!strcmp(x, "perf_jit")) {
			p->perf_jitdump_only = true;
			set_how(p, "-X ", x);
		}
	}
	if (p->perf_on || ignore_env)
		return;
	if (env_on(v = env_get(env, elen, "PYTHONPERFSUPPORT"))) {
		p->perf_on = true;
		p->perf_jitdump_only = false;
		set_how(p, "PYTHONPERFSUPPORT=", v);
	} else if (env_on(v = env_get(env, elen, "PYTHON_PERF_JIT_SUPPORT"))) {
		p->perf_jitdump_only = true;
		set_how(p, "PYTHON_PERF_JIT_SUPPORT=", v);
	}
}

/* V8: --perf-basic-prof[-only-functions] writes a map, --perf-prof a jitdump; also NODE_OPTIONS. */
static void node_flag(struct doc_proc *p, const char *x, const char *how)
{
	if (!strncmp(x, "--perf-basic-prof", 17) || !strncmp(x, "--perf_basic_prof", 17)) {
		p->perf_on = true;
		set_how(p, how, x);
	} else if (!p->perf_on && (!strcmp(x, "--perf-prof") || !strcmp(x, "--perf_prof"))) {
		p->perf_jitdump_only = true;
		set_how(p, how, x);
	}
}

static void node_flags(struct doc_proc *p, const struct args *a, const char *env, size_t elen)
{
	char opts[1024], *tok, *save = NULL;
	const char *v;
	size_t i;

	for (i = 1; i < a->n && a->v[i][0] == '-'; i++)
		node_flag(p, a->v[i], "");
	v = env_get(env, elen, "NODE_OPTIONS");
	if (!v || p->perf_on)
		return;
	snprintf(opts, sizeof(opts), "%s", v);
	for (tok = strtok_r(opts, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save))
		node_flag(p, tok, "NODE_OPTIONS=");
}

/* .NET: PerfMapEnabled 1 (map and jitdump), 2 (jitdump only), 3 (map only). */
static void dotnet_flags(struct doc_proc *p, const char *env, size_t elen)
{
	const char *key = "DOTNET_PerfMapEnabled", *v = env_get(env, elen, key);
	char how[64];

	if (!v) {
		key = "COMPlus_PerfMapEnabled";
		v = env_get(env, elen, key);
	}
	if (!env_on(v))
		return;
	snprintf(how, sizeof(how), "%s=", key);
	set_how(p, how, v);
	if (!strcmp(v, "2"))
		p->perf_jitdump_only = true;
	else
		p->perf_on = true;
}

static void java_flags(struct doc_proc *p, const struct args *a)
{
	size_t i;

	for (i = 1; i < a->n; i++)
		if (!strcmp(a->v[i], "-XX:+DumpPerfMapAtExit")) {
			p->perf_on = true;
			set_how(p, "", a->v[i]);
		}
}

static enum doc_runtime which_runtime(const char *base, const char *maps)
{
	if (!strncmp(base, "python", 6) || (maps && strstr(maps, "/libpython3.")))
		return RT_PYTHON;
	if (!strcmp(base, "node") || !strcmp(base, "nodejs") || (maps && strstr(maps, "/libnode.so")))
		return RT_NODE;
	if (!strcmp(base, "dotnet") || (maps && strstr(maps, "/libcoreclr.so")))
		return RT_DOTNET;
	if (!strcmp(base, "java") || (maps && strstr(maps, "/libjvm.so")))
		return RT_JAVA;
	return RT_GENERIC;
}

static void detect_runtime(struct doc_proc *p, const char *exe_raw)
{
	char *args = NULL, *env = NULL, *maps = NULL;
	ssize_t alen, elen;
	const char *base;
	struct args a;

	alen = read_proc(p->pid, "cmdline", ARGS_MAX, &args);
	elen = read_proc(p->pid, "environ", ENV_MAX, &env);
	if (read_proc(p->pid, "maps", MAPS_TEXT_MAX, &maps) < 0)
		maps = NULL;
	if (alen < 0)
		alen = 0;
	if (elen < 0)
		elen = 0;
	split_args(args ? args : (char *)"", (size_t)alen, &a);
	base = base_name(exe_raw);
	p->rt = which_runtime(base, maps);
	p->py_minor = p->rt == RT_PYTHON ? python_minor(base, exe_raw, maps) : -1;
	if (p->rt == RT_PYTHON)
		python_flags(p, &a, env ? env : "", (size_t)elen);
	else if (p->rt == RT_NODE)
		node_flags(p, &a, env ? env : "", (size_t)elen);
	else if (p->rt == RT_DOTNET)
		dotnet_flags(p, env ? env : "", (size_t)elen);
	else if (p->rt == RT_JAVA)
		java_flags(p, &a);
	free(maps);
	free(env);
	free(args);
}

int doc_proc_read(pid_t pid, struct doc_proc *p)
{
	char raw[PATH_MAX], path[64], *comm;
	ssize_t n;
	int err;

	memset(p, 0, sizeof(*p));
	p->pid = pid;
	err = read_status(p);
	if (err)
		return err;
	n = read_proc(pid, "comm", 64, &comm);
	if (n > 0) {
		ctl_escape(p->comm, sizeof(p->comm), comm, (size_t)n - (comm[n - 1] == '\n'));
		free(comm);
	}
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, raw, sizeof(raw) - 1);
	raw[n > 0 ? n : 0] = '\0';
	ctl_escape(p->exe, sizeof(p->exe), raw, strlen(raw));
	p->other_mnt_ns = !same_mnt_ns(pid);
	detect_runtime(p, raw);
	return 0;
}
