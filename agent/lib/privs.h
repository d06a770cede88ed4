/* The capabilities perfmapd keeps once its BPF programs are attached (docs/security.md, "Least privilege"). */
#ifndef PERFMAPD_PRIVS_H
#define PERFMAPD_PRIVS_H

/*
 * Drop every capability but the kept set from the effective, permitted,
 * inheritable and bounding sets, clear the ambient set, lock the securebits
 * and set no_new_privs. CAP_DAC_OVERRIDE stays permitted, not effective:
 * privs_override_begin() raises it for one open. Capabilities are per
 * thread: call it before any thread is made, or those keep everything.
 * A process with fewer capabilities (not root) keeps what it has of the set.
 * 0, or -errno when the capabilities could not be changed.
 */
int privs_drop(void);

/*
 * CAP_DAC_OVERRIDE in effect for the calling thread until privs_override_end():
 * around the one open for writing of a file another uid owns (a child's own
 * map, appended to). Harmless where it is not permitted: the open then fails.
 */
void privs_override_begin(void);
void privs_override_end(void);

#endif /* PERFMAPD_PRIVS_H */
