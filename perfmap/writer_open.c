/*
 * The writer's state and its map: where the map is, opening it, making sure
 * it is ours. Below writer.c and fork.c, which both open the map through it
 * (fork.c in a fork child): it calls neither.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "writer.h"

struct perfmap_writer perfmap__writer = { .fd = -1, .fork_size = -1 };

static int resolve_dir(struct perfmap_writer *w)
{
	/* secure_getenv: a setuid JIT must not be steered by its caller. */
	const char *dir = secure_getenv("PERFMAP_DIR");
	size_t len;

	if (!dir || !*dir)
		dir = "/tmp";
	len = strlen(dir);
	if (len >= sizeof(w->dir))
		return -ENAMETOOLONG;
	memcpy(w->dir, dir, len + 1);
	w->have_dir = true;
	return 0;
}

/* The map must be ours alone: a regular file, one link, owned by us. */
static int check_own_map(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	return perfmap__check_map_inode(&st, true, geteuid(), 0);
}

int perfmap__writer_open_locked(bool reuse_dir)
{
	struct perfmap_writer *w = &perfmap__writer;
	char path[PATH_MAX];
	int fd, err;

	if (w->fd >= 0)
		return 0;
	if (!reuse_dir || !w->have_dir) {
		err = resolve_dir(w);
		if (err)
			return err;
	}
	err = perfmap__map_path(path, sizeof(path), w->dir, getpid());
	if (err)
		return err;
	/*
	 * CPython's flags, plus O_NONBLOCK so a FIFO planted at the path fails
	 * (ENXIO) instead of hanging the JIT; it changes nothing for a file.
	 */
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC |
			O_NONBLOCK | O_NOCTTY, 0600);
	if (fd < 0)
		return -errno;
	err = check_own_map(fd);
	if (err) {
		close(fd);
		return err;
	}
	w->fd = fd;
	w->pid = getpid();
	return 0;
}
