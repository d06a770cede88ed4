/*
 * Acting for a process: the calling thread takes its file-system ids, groups
 * and (in the host's user namespace) its capabilities on files around what
 * the agent does in the process's own directories, and gives them back.
 */
#include <cap-ng.h>
#include <errno.h>
#include <stdbool.h>
#include <sys/fsuid.h>
#include <unistd.h>

#include "lib/actas.h"
#include "lib/log.h"
#include "perfmap_tools.h"

/* The capabilities the kernel checks on files: the only ones a process's own are honoured for. */
static const unsigned int file_caps[] = {
	CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID,
};

static __thread struct {
	void *caps;                  /* libcap-ng's state before: the capabilities given back */
	gid_t groups[256];
	int ngroups;
	uid_t fsuid;
	gid_t fsgid;
	bool active;
} saved;

static int set_effective(capng_act_t act, unsigned int cap)
{
	return capng_update(act, CAPNG_EFFECTIVE, cap) ? -EPERM : 0;
}

/* CAP_SETUID and CAP_SETGID in effect: what setfsuid() to another's id and setgroups() take. */
static int raise_setid(void)
{
	if (capng_get_caps_process() || set_effective(CAPNG_ADD, CAP_SETUID) ||
	    set_effective(CAPNG_ADD, CAP_SETGID) || capng_apply(CAPNG_SELECT_CAPS))
		return -EPERM;
	return 0;
}

/* Only the capabilities the process holds on every file (host's user namespace), nothing else. */
static int only_its_caps(const struct proc_creds *c)
{
	unsigned int cap, i;

	if (capng_get_caps_process())
		return -EPERM;
	for (cap = 0; cap <= CAP_LAST_CAP; cap++)
		capng_update(CAPNG_DROP, CAPNG_EFFECTIVE, cap);
	for (i = 0; c->host_userns && i < sizeof(file_caps) / sizeof(file_caps[0]); i++)
		if ((c->cap_eff >> file_caps[i] & 1) &&
		    capng_have_capability(CAPNG_PERMITTED, file_caps[i]) &&
		    set_effective(CAPNG_ADD, file_caps[i]))
			return -EPERM;
	return capng_apply(CAPNG_SELECT_CAPS) ? -EPERM : 0;
}

/* Our own ids and groups back, then the capabilities as they were. */
static int restore(void)
{
	int err = raise_setid();

	err = perfmap__take_fsids(saved.fsuid, saved.fsgid, saved.groups, (size_t)saved.ngroups) ?: err;
	capng_restore_state(&saved.caps);
	if (capng_apply(CAPNG_SELECT_CAPS))
		err = -EPERM;
	saved.caps = NULL;
	return err;
}

int actas_begin(const struct proc_creds *c)
{
	int err;

	if (saved.active)
		return -EBUSY;
	if (capng_get_caps_process() || !capng_have_capability(CAPNG_PERMITTED, CAP_SETUID) ||
	    !capng_have_capability(CAPNG_PERMITTED, CAP_SETGID))
		return -EPERM;
	saved.ngroups = getgroups(sizeof(saved.groups) / sizeof(saved.groups[0]), saved.groups);
	if (saved.ngroups < 0)
		return -errno;
	saved.caps = capng_save_state();
	if (!saved.caps)
		return -ENOMEM;
	saved.fsuid = (uid_t)setfsuid(-1);
	saved.fsgid = (gid_t)setfsgid(-1);
	err = raise_setid();
	if (!err)
		err = perfmap__take_fsids(c->fsuid, c->fsgid, c->groups, c->ngroups);
	if (!err)
		err = only_its_caps(c);
	if (err) {
		if (restore())
			pr_err("privileges: cannot take back our own ids after acting for uid %u failed",
			       (unsigned int)c->fsuid);
		return err;
	}
	saved.active = true;
	return 0;
}

void actas_end(void)
{
	if (!saved.active)
		return;
	saved.active = false;
	/* Not given back: this thread's later opens fail as that uid's would, and say so. */
	if (restore())
		pr_err("privileges: cannot take back our own ids and capabilities after acting for a process");
}
