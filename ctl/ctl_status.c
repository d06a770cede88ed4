/* perfmapctl status: ask the running perfmapd what it tracks. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "perfmap_tools.h"

static int status(const char *map_dir, const char *run_dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char lock[PATH_MAX], sock[PATH_MAX], buf[4096];
	ssize_t n;
	int fd, err;

	err = perfmap__run_paths(run_dir, map_dir, lock, sock, sizeof(lock));
	if (err) {
		ctl_error("status: map directory %s: %s", map_dir, strerror(-err));
		return CTL_ERROR;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ctl_error("status: socket: %s", strerror(errno));
		return CTL_ERROR;
	}
	memcpy(sa.sun_path, sock, strlen(sock) + 1);  /* fits: instance_paths checked */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = errno;
		close(fd);
		if (err == ENOENT || err == ECONNREFUSED)
			ctl_error("status: no perfmapd is running for %s (nothing listens on %s)",
				  map_dir, sock);
		else
			ctl_error("status: %s: %s", sock, strerror(err));
		return CTL_ERROR;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, n, stdout);
	close(fd);
	if (n < 0) {
		ctl_error("status: %s: %s", sock, strerror(errno));
		return CTL_ERROR;
	}
	return CTL_OK;
}

int cmd_status(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "map-dir", required_argument, NULL, 'd' },
		{ "run-dir", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *map_dir = "/tmp", *run_dir = PERFMAPD_RUN_DIR;
	int opt;

	while ((opt = getopt_long(argc, argv, "d:r:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			map_dir = optarg;
			break;
		case 'r':
			run_dir = optarg;
			break;
		case 'h':
			printf("Usage: perfmapctl status [--map-dir DIR] [--run-dir DIR]\n");
			return CTL_OK;
		default:
			return CTL_ERROR;
		}
	}
	if (optind != argc) {
		ctl_error("status: unexpected argument '%s'", argv[optind]);
		return CTL_ERROR;
	}
	return status(map_dir, run_dir);
}
