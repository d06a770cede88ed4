/*
 * Where an event enters the agent: BPF's process events and their decoder,
 * the kernel's reports of executable mappings, the inotify index of the map
 * directory, /proc scans and the profilers' hold socket. The one header of
 * this room that the rooms above include.
 */
#ifndef PERFMAPD_IN_H
#define PERFMAPD_IN_H

#include "in/events.h"
#include "in/execmap.h"
#include "in/execprobe.h"
#include "in/holds.h"
#include "in/jitscan.h"
#include "in/mappings.h"
#include "in/mapwatch.h"
#include "in/scan.h"

#endif /* PERFMAPD_IN_H */
