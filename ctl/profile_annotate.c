/*
 * Annotated source, as LuaJIT's -jp=a and =A: each file that has samples,
 * its lines with their share (or count, with r) in the left margin. With a,
 * only excerpts: the lines within three of one with samples, each excerpt
 * headed "@@ N @@". Keys that are no file:line (JIT code without a file,
 * native code without DWARF lines) cannot be annotated, and say so.
 *
 * The file names come from the profiled processes (a JIT name in a map
 * they write, the DWARF lines of a binary they built), and perfmapctl runs
 * as root: a file is opened only as every process whose samples name it
 * could have opened it (prof_source_open()), else its lines are shown
 * without their text and why is said once.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "perfmap_tools.h"
#include "profile_annotate.h"

#define ANNOTATE_MAX_BYTES (64 << 20)   /* a source file larger than this is not one */

struct line_val {
	char *file;
	long line;
	uint64_t v;                /* percentage, or count with r */
	const struct prof_cred *const *creds;   /* of the processes whose samples are at the line */
	size_t ncreds;
};

static int by_file_line(const void *a, const void *b)
{
	const struct line_val *x = a, *y = b;
	int c = strcmp(x->file, y->file);

	return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* @fl[0..n): @file's lines with samples, sorted; its value at @line, or -1. */
static long long value_at(const struct line_val *fl, size_t n, long line)
{
	size_t lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (fl[mid].line < line)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && fl[lo].line == line ? (long long)fl[lo].v : -1;
}

/* @s with its control bytes (tab aside) as \\xNN: a file's text, or its name, never drives a terminal. */
static void put_escaped(FILE *out, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
			fprintf(out, "\\x%02x", *p);
		else
			fputc(*p, out);
	}
}

/* ---- opening a source file as the process that names it could ---- */

/* What a thread acting for a process opens, and what it found. */
struct source_open {
	const char *path;
	const struct prof_cred *cred;
	dev_t pseudo_dev[3];       /* /proc, /sys and /dev, where each is a mount of its own */
	size_t npseudo;
	int fd;                    /* the file, open for reading; -1 */
	int err;                   /* an errno */
	char *why;
	size_t why_len;
};

/*
 * File systems that are the kernel's, not files a process wrote: /proc
 * (kallsyms shows root its addresses), /sys and what is mounted under it,
 * /dev's ptys. Their files say what the reader may see, not what the
 * process named, and some change the system when opened. And FUSE, whose
 * daemon answers a read when it likes: the report would wait for it.
 */
static bool pseudo_fs_type(unsigned long type)
{
	static const unsigned long types[] = {
		PROC_SUPER_MAGIC, SYSFS_MAGIC, DEBUGFS_MAGIC, TRACEFS_MAGIC, SECURITYFS_MAGIC,
		CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, BPF_FS_MAGIC, DEVPTS_SUPER_MAGIC,
		PSTOREFS_MAGIC, EFIVARFS_MAGIC, BINFMTFS_MAGIC, SELINUX_MAGIC, SMACK_MAGIC,
		NSFS_MAGIC, FUSE_SUPER_MAGIC,
	};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (type == types[i])
			return true;
	return false;
}

/* Is the canonical @path (the kernel's name of an open file) /proc, /sys or /dev, or under one? */
static bool pseudo_tree(const char *path)
{
	static const char *const trees[] = { "/proc", "/sys", "/dev" };

	for (size_t i = 0; i < sizeof(trees) / sizeof(trees[0]); i++) {
		size_t n = strlen(trees[i]);

		if (!strncmp(path, trees[i], n) && (path[n] == '/' || !path[n]))
			return true;
	}
	return false;
}

/* The devices of /proc, /sys and /dev where each is a mount point (else it is /'s, every file's). */
static void pseudo_devs(struct source_open *o)
{
	static const char *const dirs[] = { "/proc", "/sys", "/dev" };
	struct stat root, st;

	o->npseudo = 0;
	if (stat("/", &root))
		return;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (!stat(dirs[i], &st) && st.st_dev != root.st_dev)
			o->pseudo_dev[o->npseudo++] = st.st_dev;
}

/*
 * The calling thread takes @c's file-system ids and groups and no
 * capability at all: its opens are the process's own, judged by the kernel
 * (modes, ACLs, search permission on every directory, which symlinks may be
 * followed), and root's CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_SYSLOG
 * and CAP_SYS_PTRACE (through /proc/<pid>/root) are not there to widen them.
 * A root process loses its capabilities too: fewer files shown, never more.
 * Per thread: fsuid, fsgid, the groups set by the system call and the
 * capabilities are the thread's own, and end with it.
 */
static int act_as(const struct prof_cred *c)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	int err = perfmap__take_fsids(c->uid, c->gid, c->groups, c->ngroups);

	if (err)
		return -err;
	if (syscall(SYS_capget, &h, d))
		return errno;
	for (size_t i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		d[i].effective = 0;
	if (syscall(SYS_capset, &h, d))
		return errno;
	return 0;
}

__attribute__((format(printf, 3, 4)))
static int refuse(struct source_open *o, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(o->why, o->why_len, fmt, ap);
	va_end(ap);
	o->err = err;
	return err;
}

/* As the process: find the file, judge what it is, then open it for reading. */
static int open_checked(struct source_open *o)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS };
	unsigned int uid = o->cred->uid;
	char self[64], name[PATH_MAX];
	struct stat st, st2;
	struct statfs sfs;
	int pfd, err = 0;
	bool pseudo;
	ssize_t n;

	/*
	 * O_PATH opens nothing: a FIFO does not block, a device is not
	 * touched. No magic link (/proc/<pid>/root, /proc/self/fd/N): those
	 * would lead where path names cannot.
	 */
	pfd = (int)syscall(SYS_openat2, AT_FDCWD, o->path, &how, sizeof(how));
	if (pfd < 0) {
		err = errno;
		if (err == ENOSYS || err == E2BIG)
			return refuse(o, err, "this kernel has no openat2() (Linux 5.6)");
		if (err == ELOOP)
			return refuse(o, err, "uid %u cannot reach it: a symlink it may not follow, a /proc link, or a loop",
				      uid);
		if (err == ENOENT)
			return refuse(o, err, "no such file");
		return refuse(o, err, "uid %u cannot reach it: %s", uid, strerror(err));
	}
	if (fstat(pfd, &st) || fstatfs(pfd, &sfs)) {
		err = refuse(o, errno, "%s", strerror(errno));
		goto close_path;
	}
	/* By its file system, and by the name the kernel gives what was found (no "..", no link). */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	n = readlink(self, name, sizeof(name) - 1);
	name[n > 0 ? n : 0] = '\0';
	pseudo = n <= 0 || pseudo_tree(name) || pseudo_fs_type((unsigned long)sfs.f_type);
	for (size_t i = 0; i < o->npseudo; i++)
		pseudo = pseudo || st.st_dev == o->pseudo_dev[i];
	if (pseudo) {
		err = refuse(o, EPERM, "on /proc, /sys or /dev, or another file system of the kernel's: refused");
		goto close_path;
	}
	if (!S_ISREG(st.st_mode)) {
		err = refuse(o, EINVAL, "not a regular file: refused");
		goto close_path;
	}
	if (st.st_size > ANNOTATE_MAX_BYTES) {
		err = refuse(o, EFBIG, "larger than %d MiB: refused", ANNOTATE_MAX_BYTES >> 20);
		goto close_path;
	}
	/* That very file, for reading: the kernel checks that the uid may read it. */
	o->fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (o->fd < 0) {
		err = refuse(o, errno, "uid %u may not read it: %s", uid, strerror(errno));
		goto close_path;
	}
	if (fstat(o->fd, &st2) || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
		close(o->fd);
		o->fd = -1;
		err = refuse(o, ESTALE, "replaced while it was opened");
	}
close_path:
	close(pfd);
	return err;
}

static void *source_open_thread(void *arg)
{
	struct source_open *o = arg;
	int err = act_as(o->cred);

	if (err)
		refuse(o, err, "cannot act as uid %u: %s", o->cred->uid, strerror(err));
	else
		open_checked(o);
	/* The thread ends here, and its ids and capabilities with it. */
	return NULL;
}

int prof_source_open(const char *path, const struct prof_cred *cred, int *fd, char *why,
		     size_t len)
{
	struct source_open o = { .path = path, .cred = cred, .fd = -1, .why = why, .why_len = len };
	pthread_t t;
	int err;

	*fd = -1;
	if (!cred) {
		snprintf(why, len, "the credentials of a process that names it were never read");
		return -EACCES;
	}
	/*
	 * A process of another mount namespace (a container) names files in its
	 * own root: the host's file at that path is not its file, and a
	 * container's root would read the host's root-owned files as uid 0.
	 */
	if (!cred->own_mount_ns) {
		snprintf(why, len, "a process that names it is in another mount namespace: its paths are not the host's");
		return -EACCES;
	}
	pseudo_devs(&o);
	err = pthread_create(&t, NULL, source_open_thread, &o);
	if (err) {
		snprintf(why, len, "cannot start a thread to open it: %s", strerror(err));
		return -err;
	}
	pthread_join(t, NULL);
	if (o.err)
		return -o.err;
	*fd = o.fd;
	return 0;
}

/* ---- the report ---- */

static bool cred_same(const struct prof_cred *a, const struct prof_cred *b)
{
	if (a == b)
		return true;
	return a && b && a->uid == b->uid && a->gid == b->gid && a->ngroups == b->ngroups &&
	       a->own_mount_ns == b->own_mount_ns &&
	       (!a->ngroups || !memcmp(a->groups, b->groups, a->ngroups * sizeof(*a->groups)));
}

/*
 * The file of @fl[0..@n), opened as every process whose samples name it
 * could: one of them able to read it is not enough, or a process could
 * name another's source file at lines of its choosing and have root show
 * their excerpts. Each opens the same file (device and inode), or none is
 * shown. NULL with @why.
 */
static FILE *open_for_all(const struct line_val *fl, size_t n, char *why, size_t len)
{
	const struct prof_cred **seen = NULL, **ns;
	size_t nseen = 0, cap = 0, i, k, m;
	struct stat first, st;
	int fd0 = -1, fd;
	FILE *f = NULL;
	bool same;

	snprintf(why, len, "no process names it");
	for (i = 0; i < n; i++) {
		for (k = 0; k < fl[i].ncreds; k++) {
			const struct prof_cred *c = fl[i].creds[k];

			for (m = 0; m < nseen && !cred_same(seen[m], c); m++)
				;
			if (m < nseen)
				continue;
			if (nseen == cap) {
				cap = cap ? 2 * cap : 8;
				ns = realloc(seen, cap * sizeof(*seen));
				if (!ns) {
					snprintf(why, len, "%s", strerror(ENOMEM));
					goto close_first;
				}
				seen = ns;
			}
			seen[nseen++] = c;
			if (prof_source_open(fl[0].file, c, &fd, why, len))
				goto close_first;
			same = fd0 < 0 ? !fstat(fd, &first) :
			       !fstat(fd, &st) && st.st_dev == first.st_dev && st.st_ino == first.st_ino;
			if (fd0 < 0)
				fd0 = fd;
			else
				close(fd);
			if (!same) {
				snprintf(why, len, "not the same file for every process that names it");
				goto close_first;
			}
		}
	}
	if (fd0 >= 0) {
		f = fdopen(fd0, "r");
		if (f)
			fd0 = -1;
		else
			snprintf(why, len, "%s", strerror(errno));
	}
close_first:
	if (fd0 >= 0)
		close(fd0);
	free(seen);
	return f;
}

/*
 * A file not shown: its lines with samples, their shares and no text; why,
 * once, on @v->notes (stderr), as the names are printed.
 */
static void annotate_refused(FILE *out, const struct prof_view *v, const struct line_val *fl,
			     size_t n, int width, const char *why)
{
	FILE *notes = v->notes ? v->notes : stderr;

	fputs("perfmapctl: profile: annotate: ", notes);
	put_escaped(notes, fl[0].file);
	fputs(": not shown: ", notes);
	put_escaped(notes, why);
	fputc('\n', notes);
	fputs("\n====== ", out);
	put_escaped(out, fl[0].file);
	fputs(" ======\n[Source not shown]\n", out);
	for (size_t i = 0; i < n; i++) {
		fprintf(out, "@@ %ld @@\n", fl[i].line);
		if (v->raw)
			fprintf(out, "%*llu |\n", width, (unsigned long long)fl[i].v);
		else
			fprintf(out, " %3llu%% |\n", (unsigned long long)fl[i].v);
	}
}

static void annotate_file(FILE *out, const struct prof_view *v, const struct line_val *fl,
			  size_t n, int width)
{
	const int ann = v->annotate;
	long nr = 1, show = 0;
	char *text = NULL, why[256];
	size_t cap = 0, taken = 0;
	ssize_t len;
	FILE *f;

	f = open_for_all(fl, n, why, sizeof(why));
	if (!f) {
		annotate_refused(out, v, fl, n, width, why);
		return;
	}
	fputs("\n====== ", out);
	put_escaped(out, fl[0].file);
	fputs(" ======\n", out);
	if (ann) {
		for (long i = 1; i <= ann; i++) {
			if (value_at(fl, n, i) >= 0) {
				show = 1;
				fputs("@@ 1 @@\n", out);
				break;
			}
		}
	}
	/* Bounded as it is read too: its owner may append to it meanwhile. */
	while (taken <= ANNOTATE_MAX_BYTES && (len = getline(&text, &cap, f)) >= 0) {
		long long val = value_at(fl, n, nr);

		taken += (size_t)len;

		if (len && text[len - 1] == '\n')
			text[--len] = '\0';
		if (ann) {
			long long v2 = value_at(fl, n, nr + ann);

			if (show) {
				if (v2 >= 0)
					show = nr + ann;
				else if (val >= 0)
					show = nr;
				else if (show + ann < nr)
					show = 0;
			} else if (v2 >= 0) {
				show = nr + ann;
				fprintf(out, "@@ %ld @@\n", nr);
			}
			if (!show) {
				nr++;
				continue;
			}
		}
		if (val >= 0 && v->raw)
			fprintf(out, "%*lld | ", width, val);
		else if (val >= 0)
			fprintf(out, " %3lld%% | ", val);
		else
			fprintf(out, "%*s | ", v->raw ? width : 5, "");
		put_escaped(out, text);
		fputc('\n', out);
		nr++;
	}
	free(text);
	fclose(f);
}

int prof_annotate(const struct tally *t, size_t n, uint64_t total, const struct prof_view *v,
		  FILE *out)
{
	struct line_val *lv = calloc(n ? n : 1, sizeof(*lv));
	uint64_t most = 0;
	size_t k = 0, i, j;
	int width = 5;

	if (!lv)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		int pct = prof_pct(t[i].count, total);
		const char *colon = strrchr(t[i].key, ':');
		char *end;
		long line = 0;

		if (t[i].count > most)
			most = t[i].count;
		if (pct < v->min_pct)
			continue;
		if (colon && colon[1]) {
			line = strtol(colon + 1, &end, 10);
			if (*end)
				colon = NULL;
		}
		lv[k].file = colon ? strndup(t[i].key, (size_t)(colon - t[i].key)) : strdup(t[i].key);
		lv[k].line = colon ? line : 0;
		lv[k].v = v->raw ? t[i].count : (uint64_t)pct;
		lv[k].creds = t[i].creds;
		lv[k].ncreds = t[i].ncreds;
		if (lv[k].file)
			k++;
	}
	/* p.lua: max(5, ceil(log10(most))) columns. */
	for (uint64_t p10 = 100000; v->raw && p10 < most; p10 *= 10)
		width++;
	qsort(lv, k, sizeof(*lv), by_file_line);
	for (i = 0; i < k; i = j) {
		for (j = i; j < k && !strcmp(lv[j].file, lv[i].file); j++)
			;
		/* JIT code without a file, native code without lines: nothing to open. */
		if (lv[i].file[0] != '/' || !lv[i].line) {
			fputs("\n====== ", out);
			put_escaped(out, lv[i].file);
			fputs(" ======\n[Cannot annotate non-file]\n", out);
		} else
			annotate_file(out, v, lv + i, j - i, width);
	}
	for (i = 0; i < k; i++)
		free(lv[i].file);
	free(lv);
	return ferror(out) ? -EIO : 0;
}
