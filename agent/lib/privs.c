/*
 * Least privilege. perfmapd needs CAP_BPF and CAP_PERFMON only to load and
 * attach its programs. After that, what it does to other users' files and
 * processes needs the kept set below, each found by trying the operation
 * without it (docs/security.md, "Least privilege"). Everything else goes,
 * from every set, and no_new_privs keeps any exec from getting it back.
 */
#include <cap-ng.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "lib/log.h"
#include "lib/privs.h"

/* In effect for the agent's whole life. */
static const unsigned int kept[] = {
	CAP_CHOWN,            /* a child's copy is given to the child's uid */
	CAP_DAC_READ_SEARCH,  /* other uids' 0600 maps are read, copied and archived */
	CAP_FOWNER,           /* that copy, no longer ours, is linked in (protected_hardlinks) */
	CAP_LEASE,            /* a read lease on another uid's map guards its move */
	CAP_SYS_PTRACE,       /* /proc/<pid>/maps, exe and ns of other uids' processes */
};

/* Permitted only: in effect around one open (privs_override_begin()). */
#define OVERRIDE CAP_DAC_OVERRIDE

/*
 * Permitted only: in effect around setfsuid(), setfsgid() and setgroups()
 * to a process's own ids, while the agent acts for it in its directories
 * (creds.c), with none of the agent's capabilities in effect meanwhile.
 */
static const unsigned int setid[] = { CAP_SETUID, CAP_SETGID };

static bool override_permitted;

/* What of the kept set this process holds now: root holds it all. */
static void want_kept(bool have[], bool *override, bool setid_have[])
{
	size_t i;

	for (i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		have[i] = capng_have_capability(CAPNG_PERMITTED, kept[i]);
	*override = capng_have_capability(CAPNG_PERMITTED, OVERRIDE);
	for (i = 0; i < sizeof(setid) / sizeof(setid[0]); i++)
		setid_have[i] = capng_have_capability(CAPNG_PERMITTED, setid[i]);
}

static int set_no_new_privs(void)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		int err = -errno;

		pr_err("privileges: cannot set no_new_privs: %s", strerror(-err));
		return err;
	}
	return 0;
}

/* The capabilities in effect now, for the log. */
static void log_result(bool bounds)
{
	char *eff;

	capng_get_caps_process();
	eff = capng_print_caps_text(CAPNG_PRINT_BUFFER, CAPNG_EFFECTIVE);
	pr_info("privileges: keeping %s%s; no_new_privs set%s", eff ? eff : "?",
		override_permitted ? " (dac_override permitted, in effect only to append to a child's map; setuid, setgid permitted, in effect only to take a process's own ids)" : "",
		bounds ? "" : "; bounding set left as it was (no CAP_SETPCAP)");
	free(eff);
}

int privs_drop(void)
{
	bool have[sizeof(kept) / sizeof(kept[0])], setid_have[sizeof(setid) / sizeof(setid[0])];
	bool setpcap;
	capng_select_t what;
	size_t i;

	if (capng_get_caps_process()) {
		pr_err("privileges: cannot read our capabilities");
		return -EPERM;
	}
	if (capng_have_capabilities(CAPNG_SELECT_CAPS) == CAPNG_NONE) {
		/* Not root: nothing to drop; the ambient set is cleared all the same. */
		capng_clear(CAPNG_SELECT_AMBIENT);
		capng_apply(CAPNG_SELECT_AMBIENT);
		pr_debug("privileges: none held, none dropped");
		return set_no_new_privs();
	}
	want_kept(have, &override_permitted, setid_have);
	/* Dropping from the bounding set and locking the securebits take CAP_SETPCAP. */
	setpcap = capng_have_capability(CAPNG_EFFECTIVE, CAP_SETPCAP);
	capng_clear(CAPNG_SELECT_ALL);
	for (i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		if (have[i])
			capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED | CAPNG_BOUNDING_SET,
				     kept[i]);
	if (override_permitted)
		capng_update(CAPNG_ADD, CAPNG_PERMITTED | CAPNG_BOUNDING_SET, OVERRIDE);
	for (i = 0; i < sizeof(setid) / sizeof(setid[0]); i++)
		if (setid_have[i])
			capng_update(CAPNG_ADD, CAPNG_PERMITTED | CAPNG_BOUNDING_SET, setid[i]);
	/* Root regains nothing by an exec either (SECBIT_NOROOT), locked. */
	if (setpcap && capng_lock())
		pr_warn("privileges: cannot lock the securebits");
	what = setpcap ? CAPNG_SELECT_ALL : CAPNG_SELECT_CAPS | CAPNG_SELECT_AMBIENT;
	if (capng_apply(what)) {
		pr_err("privileges: cannot drop capabilities; refusing to run with all of root's");
		return -EPERM;
	}
	if (set_no_new_privs())
		return -EPERM;
	log_result(setpcap);
	return 0;
}

/* CAP_DAC_OVERRIDE into or out of this thread's effective set. */
static void override_set(capng_act_t act)
{
	if (!override_permitted)
		return;
	/* Read afresh: libcap-ng's state is per thread, and capabilities are too. */
	if (!capng_get_caps_process() && !capng_update(act, CAPNG_EFFECTIVE, OVERRIDE) &&
	    !capng_apply(CAPNG_SELECT_CAPS))
		return;
	/* Not raised: the open it was for fails, and says so. Not lowered: worth a word. */
	if (act == CAPNG_ADD)
		pr_debug("privileges: cannot raise dac_override");
	else
		pr_warn("privileges: cannot lower dac_override again; it stays in effect");
}

void privs_override_begin(void)
{
	override_set(CAPNG_ADD);
}

void privs_override_end(void)
{
	override_set(CAPNG_DROP);
}
