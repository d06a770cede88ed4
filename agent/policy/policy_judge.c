/*
 * Who wrote a map, decided on evidence the kernel orders: when the file's
 * inode appeared (the inotify index, against the event's time), whether it is
 * a file seen before and unchanged since, and whether its newest entries name
 * memory the process has mapped. Never on file times, which move in clock
 * ticks. Where the evidence cannot tell, the map stays where it is (nothing
 * is lost), and that is counted.
 */
#include "policy/policy_internal.h"

void policy__judge(struct policy *p, pid_t pid, uint64_t start_ticks, const struct map_info *mi,
		   struct span change, const struct known_file *known, enum mappings_of mappings,
		   struct judgement *j)
{
	enum map_entries e;
	bool before;

	/* Seen before the change, the earlier holder's alone: what changed since is the new one's. */
	if (known && same_file(mi, known->dev, known->ino) && known->seen_ns < change.lo) {
		j->by = BY_IDENTITY;
		if (mi->size == known->size) {
			j->verdict = EARLIER;
			j->why = "the same file, unchanged since its earlier holder ended";
		} else if (mi->size < known->size) {
			j->verdict = LATER;
			j->why = "the same file, rewritten since its earlier holder ended";
		} else {
			j->verdict = AMBIGUOUS;
			j->why = "the earlier holder's file, appended to since: by the new holder?";
		}
		return;
	}
	if (span_before(change, mi->born)) {
		*j = (struct judgement){ LATER, BY_INDEX, "made after it" };
		return;
	}
	/*
	 * Made before (or the index cannot say): the entries tell. The new
	 * holder names code it has mapped; an earlier holder's addresses lie
	 * in an address space that is gone.
	 */
	before = span_before(mi->born, change);
	e = p->store.ops->entries(p->store.ctx, pid, start_ticks, change.hi, mi);
	switch (e) {
	case ENTRIES_MAPPED:
		if (before)
			*j = (struct judgement){ AMBIGUOUS, BY_MAPPINGS,
				"made before it, but its newest entries name the process's memory: appended to since?" };
		else if (mappings == MAPPINGS_INHERITED)
			*j = (struct judgement){ AMBIGUOUS, BY_MAPPINGS,
				"its newest entries name the memory the process shares with its parent, as a sibling's would" };
		else
			*j = (struct judgement){ LATER, BY_MAPPINGS,
				"its newest entries name the process's memory" };
		return;
	case ENTRIES_MIXED:
		*j = (struct judgement){ AMBIGUOUS, BY_MAPPINGS,
			"some of its newest entries name the process's memory, some do not: written by both?" };
		return;
	case ENTRIES_UNMAPPED:
		if (before)
			*j = (struct judgement){ EARLIER, BY_INDEX, "made before it" };
		else
			*j = (struct judgement){ EARLIER, BY_MAPPINGS,
				"none of its newest entries names the process's memory" };
		return;
	case ENTRIES_NONE:
		if (before)
			*j = (struct judgement){ EARLIER, BY_INDEX, "made before it (empty)" };
		else
			*j = (struct judgement){ AMBIGUOUS, BY_NOTHING,
				"empty, and the index cannot say when it was made" };
		return;
	case ENTRIES_UNKNOWN:
		break;
	}
	*j = (struct judgement){ AMBIGUOUS, BY_NOTHING, before ?
		"made before it, but the file or the process cannot be read to tell whether it was appended to since" :
		"the index cannot say when it was made, and the file or the process cannot be read" };
}

void policy__count_judgement(struct policy *p, const struct judgement *j)
{
	switch (j->by) {
	case BY_INDEX: p->stats.by_index++; break;
	case BY_IDENTITY: p->stats.by_identity++; break;
	case BY_MAPPINGS: p->stats.by_mappings++; break;
	case BY_NOTHING: break;
	}
	if (j->verdict == AMBIGUOUS)
		p->stats.ambiguous_kept++;
}
