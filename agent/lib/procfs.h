/* What perfmapd reads of a process from /proc when it has no event for it. */
#ifndef PERFMAPD_PROCFS_H
#define PERFMAPD_PROCFS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct proc_info {
	pid_t pid;
	pid_t ppid;
	uint64_t start_ticks;  /* field 22 of /proc/<pid>/stat */
	char state;            /* field 3: 'Z' or 'X' once it has exited */
	unsigned long flags;   /* field 9: PF_EXITING from the start of its exit */
	uid_t uid;             /* effective ids */
	gid_t gid;
	uint64_t mnt_ns;
	uint64_t pid_ns;
	pid_t ns_pid;          /* the last "NSpid:" of status: its pid in its own namespace */
	char comm[16];
};

/*
 * The parsers of /proc text, without system calls (the fuzzers drive them):
 * @buf is NUL-terminated; 0 or -EINVAL; pi->comm is NUL-terminated, cut at
 * 15 bytes, and not escaped.
 */
int procfs_parse_stat(const char *buf, struct proc_info *pi);
int procfs_parse_status(const char *buf, struct proc_info *pi);

/* 0, -ENOENT when the process is gone, or -errno. */
int procfs_read(pid_t pid, struct proc_info *pi);
/*
 * The start of /proc/<@pid>/<@name> (at most @cap - 1 bytes, one read) into
 * @buf, NUL-terminated: 0, -ESRCH when the process is gone, or -errno.
 */
int procfs_read_text(pid_t pid, const char *name, char *buf, size_t cap);
/*
 * Is (@pid, @start_ticks) alive, the same process, and not exiting? A zombie
 * is not, nor a process in its exit, whose memory may be going.
 */
bool procfs_is(pid_t pid, uint64_t start_ticks);
/* Does a process other than (@pid, @start_ticks) hold @pid (0: any process)? */
bool procfs_pid_held(pid_t pid, uint64_t start_ticks);
/* The executable's identity: a child that did not exec shares its parent's. */
int procfs_exe(pid_t pid, dev_t *dev, ino_t *ino);
/* Namespace inode of "mnt" or "pid" for @pid (0: ourselves). */
uint64_t procfs_ns(pid_t pid, const char *ns);
/* Calls @fn for every process in /proc; stops at a non-zero return. */
int procfs_for_each(int (*fn)(pid_t pid, void *ctx), void *ctx);

#endif /* PERFMAPD_PROCFS_H */
