/*
 * The journal of staged maps, one small file per staged map in a directory
 * of the archive. Why there: the archive directory is root's alone (0700,
 * checked at start), it lasts as long as the maps it protects (--run-dir is
 * usually a tmpfs, emptied at boot while a disk /tmp is not), and a record
 * per file is written whole by a rename, so a crash leaves a record or none.
 * No fsync: the journal guards against the agent's crash, which the page
 * cache survives; after a power loss a staged map without its record is
 * left alone in the map directory, not lost, and a sync per move would cost
 * the event loop milliseconds.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/archive_journal.h"
#include "lib/log.h"
#include "perfmap_tools.h"

#define REC_MAX 512
#define STAGED_RANDOM_HEX 32
#define STAGED_LEN (sizeof(STAGE_PREFIX) - 1 + STAGED_RANDOM_HEX + 4)
#define TMP_PREFIX ".tmp-"

/* ".perfmapd.<32 hex digits from getrandom()>.map": nobody can make it first but by chance. */
int archive_journal__new_name(char *buf, size_t len)
{
	unsigned char rnd[STAGED_RANDOM_HEX / 2];
	char hex[STAGED_RANDOM_HEX + 1];
	size_t i;

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -errno;
	for (i = 0; i < sizeof(rnd); i++)
		snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
	snprintf(buf, len, STAGE_PREFIX "%s.map", hex);
	return 0;
}

bool archive_journal__name_ok(const char *name)
{
	size_t i, pre = sizeof(STAGE_PREFIX) - 1;

	if (strlen(name) != STAGED_LEN || strncmp(name, STAGE_PREFIX, pre) ||
	    strcmp(name + pre + STAGED_RANDOM_HEX, ".map"))
		return false;
	for (i = pre; i < pre + STAGED_RANDOM_HEX; i++)
		if (!strchr("0123456789abcdef", name[i]))
			return false;
	return true;
}

/* ".staged-<id>", the id perfmap__run_paths() gives the map directory's lock. */
static int journal_dir_name(const char *map_dir, char *buf, size_t len)
{
	char lock[PATH_MAX], sock[PATH_MAX], *dot;
	int err;

	err = perfmap__run_paths("", map_dir, lock, sock, sizeof(lock));
	if (err)
		return err;
	dot = strrchr(lock, '.');
	if (dot)
		*dot = '\0';
	if ((size_t)snprintf(buf, len, ".staged-%s", lock + 1) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int archive_journal__open(const char *archive_dir, const char *map_dir)
{
	char name[NAME_MAX + 1], path[PATH_MAX];
	struct stat st;
	int fd, err;

	err = journal_dir_name(map_dir, name, sizeof(name));
	if (err)
		return err;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", archive_dir, name) >= sizeof(path))
		return -ENAMETOOLONG;
	if (mkdir(path, 0700) && errno != EEXIST)
		return -errno;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Records others could write would let them name what the agent finishes. */
	if (fstat(fd, &st) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		pr_err("archive journal %s: must be a directory of uid %u that no one else can use",
		       path, (unsigned int)geteuid());
		close(fd);
		return -EPERM;
	}
	return fd;
}

int archive_journal__add(int jfd, const struct staged_rec *r)
{
	char tmp[sizeof(r->staged) + sizeof(TMP_PREFIX)], line[REC_MAX];
	int fd, len, err = 0;

	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%s", r->staged);
	/* The run last: a record without it (an older agent's) still reads. */
	len = snprintf(line, sizeof(line), "v1 %s %llu %llu %u %u %llx\n", r->name,
		       (unsigned long long)r->dev, (unsigned long long)r->ino,
		       (unsigned int)r->uid, (unsigned int)r->gid, (unsigned long long)r->run);
	unlinkat(jfd, tmp, 0);
	fd = openat(jfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	err = perfmap__write_all(fd, line, (size_t)len);
	close(fd);
	if (!err && renameat(jfd, tmp, jfd, r->staged))
		err = -errno;
	if (err)
		unlinkat(jfd, tmp, 0);
	return err;
}

int archive_journal__get(int jfd, const char *staged, struct staged_rec *r)
{
	unsigned long long dev, ino, run = 0;
	unsigned int uid, gid;
	char line[REC_MAX];
	ssize_t n;
	int fd;

	fd = openat(jfd, staged, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -errno;
	n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (n <= 0)
		return -EINVAL;
	line[n] = '\0';
	memset(r, 0, sizeof(*r));
	/* %95s: sizeof(r->name) - 1. */
	if (sscanf(line, "v1 %95s %llu %llu %u %u %llx", r->name, &dev, &ino, &uid, &gid, &run) < 5)
		return -EINVAL;
	snprintf(r->staged, sizeof(r->staged), "%s", staged);
	r->dev = (dev_t)dev;
	r->ino = (ino_t)ino;
	r->uid = (uid_t)uid;
	r->gid = (gid_t)gid;
	r->run = run;
	return 0;
}

void archive_journal__remove(int jfd, const char *staged)
{
	unlinkat(jfd, staged, 0);
}

int archive_journal__for_each(int jfd, void (*fn)(const struct staged_rec *r, void *ctx), void *ctx)
{
	struct staged_rec r;
	struct dirent *de;
	DIR *d;
	int fd;

	fd = openat(jfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' && (!de->d_name[1] || !strcmp(de->d_name, "..")))
			continue;
		/* A record the agent died writing: never renamed into place, never trusted. */
		if (!strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX))) {
			unlinkat(jfd, de->d_name, 0);
			continue;
		}
		if (archive_journal__get(jfd, de->d_name, &r)) {
			pr_warn("archive journal: record %s is unreadable; removed", de->d_name);
			unlinkat(jfd, de->d_name, 0);
			continue;
		}
		fn(&r, ctx);
	}
	closedir(d);
	return 0;
}
