/* Catching up from /proc and the map directory: at start, and after lost events. */
#ifndef PERFMAPD_SCAN_H
#define PERFMAPD_SCAN_H

#include <stdbool.h>

struct agent;

/*
 * Bring the process table in line with /proc: processes we did not see fork
 * get their parent's map (when they still run the parent's image), processes
 * we did not see exit are handled as exits.
 */
int scan_procs(struct agent *a);
/*
 * Adopt, retain or archive every map in the map directory by the same rules;
 * at @startup, also finish the archiving of maps a crash left staged.
 */
int scan_maps(struct agent *a, bool startup);

#endif /* PERFMAPD_SCAN_H */
