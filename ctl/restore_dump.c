/*
 * perfmapctl restore: the jitdump the agent archived beside a map, put back
 * beside the restored map at <map dir>/jit-<pid>.dump, where perf inject -j
 * and perfmapctl profile look. Never over a file that is there (a runtime's
 * live dump, or anyone's file: the map directory is usually /tmp), never
 * through a link.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "ctl.h"
#include "perfmap.h"
#include "restore.h"

/* The agent archives none over --max-map-bytes; a bound all the same, for a file it did not write. */
#define DUMP_MAX_BYTES (4ull << 30)
#define COPY_BUF (64u << 10)

static int copy_all(int src, int dst)
{
	char *buf = malloc(COPY_BUF);
	ssize_t n;
	int err = 0;

	if (!buf)
		return -ENOMEM;
	while ((n = read(src, buf, COPY_BUF)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		err = perfmap__write_all(dst, buf, (size_t)n);
		if (err)
			break;
	}
	free(buf);
	return err;
}

/* Our new file at @name, not finished: removed only if it is still ours. */
static void unlink_ours(int map_fd, const char *name, int fd)
{
	struct stat a, b;

	if (!fstat(fd, &a) && !fstatat(map_fd, name, &b, AT_SYMLINK_NOFOLLOW) &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		unlinkat(map_fd, name, 0);
}

/* The archived dump @src (its inode checked as @st) into @dst: its owner's, 0600, marked. */
static int fill(int src, int dst, const char *from, const struct stat *st, const char **why,
		bool *marked)
{
	int err;

	err = copy_all(src, dst);
	if (err) {
		*why = "cannot copy the archived jitdump";
		return err;
	}
	if (fchmod(dst, 0600) || fchown(dst, st->st_uid, st->st_gid)) {
		*why = "cannot give it the archived jitdump's owner";
		return -errno;
	}
	/* So that the agent deletes it with its map, rather than archiving it again. */
	*marked = !fsetxattr(dst, PERFMAP_RESTORED_XATTR, from, strlen(from), 0);
	return 0;
}

int restore_dump(int archive_fd, const char *archive_dir, int map_fd, const char *map_dir,
		 const struct archived *a, bool dry_run)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts, .max_bytes = DUMP_MAX_BYTES);
	const char *why = NULL;
	char from[160], name[32];
	bool marked = false;
	struct stat st, there;
	int src, dst, err;

	if (perfmap__archived_dump_name(a->name, from, sizeof(from)))
		return CTL_OK;
	src = perfmap__open_map_at(archive_fd, from, O_RDONLY, &oopts, &st);
	if (src == -ENOENT)
		return CTL_OK;  /* its process wrote no dump in the map directory */
	snprintf(name, sizeof(name), "jit-%d.dump", (int)a->pid);
	if (src < 0) {
		ctl_error("restore %d: %s/%s: %s/%s: %s; the jitdump not restored", (int)a->pid,
			  map_dir, name, archive_dir, from, perfmap_open_strerror(src));
		return CTL_ERROR;
	}
	err = CTL_OK;
	/* The agent makes it the map's owner's: any other was not its doing. */
	if (st.st_uid != a->uid) {
		ctl_error("restore %d: %s/%s: %s/%s is uid %u's, not the map's owner's (%u); the jitdump not restored",
			  (int)a->pid, map_dir, name, archive_dir, from, (unsigned int)st.st_uid,
			  (unsigned int)a->uid);
		err = CTL_FINDING;
		goto close_src;
	}
	if (!fstatat(map_fd, name, &there, AT_SYMLINK_NOFOLLOW)) {
		ctl_error("restore %d: %s/%s: %s; the jitdump %s not restored, nothing written there",
			  (int)a->pid, map_dir, name,
			  S_ISLNK(there.st_mode) ? "a symlink is there" : "a file is there", from);
		err = CTL_FINDING;
		goto close_src;
	}
	if (dry_run) {
		printf("restore %d: would write %s/%s from %s (its jitdump, %llu bytes)\n", (int)a->pid,
		       map_dir, name, from, (unsigned long long)st.st_size);
		goto close_src;
	}
	dst = openat(map_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (dst < 0) {
		ctl_error("restore %d: %s/%s: %s; the jitdump %s not restored", (int)a->pid, map_dir,
			  name, errno == EEXIST ? "a file was made there meanwhile" : strerror(errno),
			  from);
		err = errno == EEXIST ? CTL_FINDING : CTL_ERROR;
		goto close_src;
	}
	err = fill(src, dst, from, &st, &why, &marked);
	if (err) {
		unlink_ours(map_fd, name, dst);
		close(dst);
		ctl_error("restore %d: %s/%s: %s/%s: %s (%s); the jitdump not restored", (int)a->pid,
			  map_dir, name, archive_dir, from, why, strerror(-err));
		err = CTL_ERROR;
		goto close_src;
	}
	close(dst);
	printf("restore %d: wrote %s/%s from %s (its jitdump, %llu bytes)%s\n", (int)a->pid, map_dir,
	       name, from, (unsigned long long)st.st_size,
	       marked ? "" :
	       "; not marked as restored (the file system took no " PERFMAP_RESTORED_XATTR " attribute), so perfmapd will archive it again");
close_src:
	close(src);
	return err;
}
