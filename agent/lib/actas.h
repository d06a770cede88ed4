/*
 * Acting for a process: what the agent creates, appends to or removes in a
 * process's own directories (a container's /tmp) it does with the process's
 * own file-system ids and groups and, in the host's user namespace, its
 * capabilities on files, so that the kernel allows it only what the process
 * could have done itself, and what it makes gets ids that exist in the
 * process's user namespace (docs/security.md, "Acting for a process").
 */
#ifndef PERFMAPD_ACTAS_H
#define PERFMAPD_ACTAS_H

#include "lib/creds.h"

/*
 * The calling thread takes @c's file-system ids and groups, and holds only
 * the capabilities the kernel would honour for the process on any file
 * (none outside the host's user namespace), until actas_end(). 0, or
 * -errno with nothing changed (-EPERM: the agent may not, lacking
 * CAP_SETUID or CAP_SETGID; it then does nothing for the process). Per
 * thread: the other threads keep their own.
 */
int actas_begin(const struct proc_creds *c);
/* Our own ids, groups and capabilities back. */
void actas_end(void);

#endif /* PERFMAPD_ACTAS_H */
