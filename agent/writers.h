/* Which processes have a given file open for writing, from /proc. */
#ifndef PERFMAPD_WRITERS_H
#define PERFMAPD_WRITERS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct writers {
	pid_t pid[8];        /* the first writers found */
	size_t count;        /* all writers found */
	size_t hidden;       /* processes whose fds we could not read */
};

/* Scan every process but ourselves for an fd open for writing on (dev, ino). */
int writers_find(dev_t dev, ino_t ino, struct writers *w);
/* "1234 (python3)" into @buf. */
void writers_describe(pid_t pid, char *buf, size_t len);

#endif /* PERFMAPD_WRITERS_H */
