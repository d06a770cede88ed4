/* perfmapctl: inspect and repair perf maps; entry point and subcommand dispatch. */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "perfmap.h"

static const char usage[] =
	"Usage: perfmapctl COMMAND [ARGS]\n"
	"\n"
	"  check [--max-bytes N] FILE...   entries, malformed lines, duplicates,\n"
	"                                  overlaps, and whether perf, samply,\n"
	"                                  blazesym and bcc read each FILE as\n"
	"                                  written ('-' reads standard input)\n"
	"  compact [--max-bytes N] FILE [-o OUT]\n"
	"                                  write FILE's canonical form to OUT, or\n"
	"                                  in place when no process has FILE open\n"
	"                                  for writing ('-o -' writes to stdout)\n"
	"  jitdump FILE [-o MAP] [--pid PID]\n"
	"                                  convert a jitdump (jit-<pid>.dump) into a\n"
	"                                  canonical perf map, to stdout or a new file\n"
	"                                  MAP: the live functions the header's pid\n"
	"                                  (or PID: a forked child's records) loaded\n"
	"  status [--map-dir DIR] [--all | --json | --pretty]\n"
	"                                  what the running perfmapd manages, what it\n"
	"                                  did and what went wrong, in a few lines;\n"
	"                                  every counter by group with --all, as JSON\n"
	"                                  with --json (--pretty: indented)\n"
	"  restore [--archive-dir DIR] [--map-dir DIR] [--run-dir DIR] [--dry-run]\n"
	"          (PID [--start-ticks N | --at TIME] ... | --perf-data FILE)\n"
	"                                  put archived maps back at DIR/perf-<pid>.map\n"
	"                                  (/tmp) for a late perf report: a pid's newest,\n"
	"                                  the one started at tick N or alive at TIME\n"
	"                                  (2026-11-22T10:00:00, @<unix s>, -10m), or each\n"
	"                                  pid a perf.data recorded; never over a file,\n"
	"                                  nor at a pid another live process holds; from\n"
	"                                  the archive of the perfmapd running for the\n"
	"                                  map directory unless --archive-dir names one\n"
	"  doctor [--map-dir DIR] [--run-dir DIR] [--archive-dir DIR] [--json | --pretty]\n"
	"         [--min-coverage PCT] PID\n"
	"                                  why PID's JIT code may have no names in a\n"
	"                                  profile: its runtime and perf option, its\n"
	"                                  map on the host and in its container, the\n"
	"                                  map's entries against its executable\n"
	"                                  mappings, what the agent knows; each\n"
	"                                  finding with its cause and fix; for a PID\n"
	"                                  gone, whether the archive holds its map\n"
	"  profile [-j LETTERS] [-o FILE] [-d DURATION] [--every DURATION]\n"
	"          [--zone cgroup|comm|exe] (-p PID[,PID...] | -a | -- COMMAND [ARGS...])\n"
	"                                  where processes spend their time, as\n"
	"                                  LuaJIT's -jp: BPF samples every 10 ms on\n"
	"                                  every CPU, JIT code named by its perf map,\n"
	"                                  native code by ELF and DWARF, the kernel by\n"
	"                                  kallsyms (root); -o FILE.pb.gz: pprof;\n"
	"                                  'profile -h' lists the letters\n"
	"  help                            this text\n"
	"\n"
	"N takes a K, M or G suffix; files are read up to 1G by default.\n"
	"Exit status: 0 fine; 1 check found a consumer that misreads, compact\n"
	"refused to replace a file in use, jitdump met a malformed record or\n"
	"header (what came before it is written), restore refused or did not\n"
	"find a map, or doctor found an error or a warning; 2 usage or I/O error,\n"
	"(status) no agent running, (doctor) no such process or no permission, or\n"
	"(profile) a bad letter, no such process, or no permission to load BPF.\n";

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
};

static int cmd_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fputs(usage, stdout);
	return CTL_OK;
}

static const struct cmd cmds[] = {
	{ "check", cmd_check },
	{ "compact", cmd_compact },
	{ "jitdump", cmd_jitdump },
	{ "status", cmd_status },
	{ "restore", cmd_restore },
	{ "doctor", cmd_doctor },
	{ "profile", cmd_profile },
	{ "help", cmd_help },
};

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? CTL_ERROR : CTL_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("perfmapctl %d.%d\n", PERFMAP_VERSION_MAJOR, PERFMAP_VERSION_MINOR);
		return CTL_OK;
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	ctl_error("unknown command '%s'; see 'perfmapctl help'", argv[1]);
	return CTL_ERROR;
}
