/*
 * libperfmap-profile's C API, whole: profile a child that spins in a named
 * function for a second, then print each distinct stack with dumpstack's
 * letters, caller first, and look one address up with the symbolizer.
 * docs/profile.md shows it; make test builds it against the installed
 * library through pkg-config and runs it (root: it loads BPF).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <perfmap_profile.h>

static struct perfmap_profile *prof;

/* Native code with a name of its own, kept out of line: what the profile must show. */
__attribute__((noinline)) static unsigned long spin(unsigned long n)
{
	volatile unsigned long s = 0;

	for (unsigned long i = 0; i < n; i++)
		s += i;
	return s;
}

static void on_stack(void *data, const struct perfmap_profile_stack *st)
{
	struct perfmap_symbolizer *sym = perfmap_profile_symbolizer(prof);
	struct perfmap_symbol leaf;
	size_t len;
	const char *text = perfmap_profile_dumpstack(sym, st, "fZ;", -20, &len);

	(void)data;
	if (!text || !st->nips)
		return;
	printf("%.*s %llu\n", (int)len, text, (unsigned long long)st->samples);
	if (!perfmap_symbolizer_lookup(sym, st->pid, st->start_ticks, st->ips[0], &leaf))
		printf("  leaf: %s in %s, state %c\n", leaf.name, leaf.module, leaf.state);
}

int main(void)
{
	struct perfmap_profile_opts o = { .sz = sizeof(o) };
	struct timespec t0, t;
	pid_t child;
	int status;

	child = fork();
	if (child < 0)
		return 1;
	if (!child) {
		for (;;)
			spin(100000000);
	}
	o.pids = &child;
	o.npids = 1;
	prof = perfmap_profile_start(&o, "i5", on_stack, NULL);
	if (!prof) {
		fprintf(stderr, "profile_example: cannot start: %s\n", strerror(errno));
		kill(child, SIGKILL);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		/* Forks, execs and exits of the profiled processes: their mappings are read now. */
		perfmap_profile_poll(prof, 100);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 1);
	perfmap_profile_stop(prof);   /* on_stack for each distinct stack, then freed */
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	return 0;
}
