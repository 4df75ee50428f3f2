/* Capabilities the daemon keeps, and the per-thread fsuid of backing writes (cred.h). */
#include "cred.h"

#include <errno.h>
#include <linux/securebits.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <unistd.h>

/* What each kept capability is for. Everything else goes, CAP_SYS_RESOURCE first of all. */
static const cap_value_t cr_keep[] = {
    CAP_CHOWN,                         /* objects made for a caller are handed over to it */
    CAP_DAC_OVERRIDE,                  /* backing objects of every user are read and written */
    CAP_DAC_READ_SEARCH,               /* open_by_handle_at reopens idle files */
    CAP_FOWNER,                        /* times and modes of other users' backing objects */
    CAP_FSETID,                        /* set-ID bits a caller asked for survive the chown */
    CAP_MKNOD,                         /* device nodes made through the mount */
    CAP_SETUID,                        /* setfsuid: a user's writes are charged to the user */
    CAP_SETFCAP,                       /* security.capability set through the mount */
    CAP_SYS_ADMIN,                     /* the unmount at exit; trusted.* attributes */
    CAP_IPC_LOCK,                      /* the cards' pinned host buffers */
};

static int cr_kept(cap_value_t c)
{
    for (size_t i = 0; i < sizeof(cr_keep) / sizeof(cr_keep[0]); i++)
        if (cr_keep[i] == c)
            return 1;
    return 0;
}

static int cr_why(char *why, size_t cap, const char *what)
{
    snprintf(why, cap, "%s: %s", what, strerror(errno));
    return -1;
}

/* Without the fix-up lock, an fsuid switch to a user would clear the file capabilities the
 * daemon needs while it writes for that user. */
static int cr_no_fixup(void)
{
    int bits = prctl(PR_GET_SECUREBITS);
    if (bits < 0)
        return -1;
    bits |= SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED;
    return prctl(PR_SET_SECUREBITS, (unsigned long)bits);
}

/* Dropped from the bounding set too, so that nothing the daemon might start gets them. */
static int cr_drop_bound(void)
{
    for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++)
        if (!cr_kept(c) && CAP_IS_SUPPORTED(c) && cap_drop_bound(c) != 0)
            return -1;
    return 0;
}

static int cr_set(void)
{
    cap_t caps = cap_init();
    if (!caps)
        return -1;
    int n = (int)(sizeof(cr_keep) / sizeof(cr_keep[0]));
    int rc = cap_set_flag(caps, CAP_PERMITTED, n, cr_keep, CAP_SET);
    if (rc == 0)
        rc = cap_set_flag(caps, CAP_EFFECTIVE, n, cr_keep, CAP_SET);
    if (rc == 0)
        rc = cap_set_proc(caps);
    int e = errno;
    cap_free(caps);
    errno = e;
    return rc;
}

int cr_limit(cr_mode *mode, char *why, size_t why_cap)
{
    *mode = CR_UNPRIVILEGED;
    if (geteuid() != 0)
        return 0;
    if (cr_no_fixup() != 0)
        return cr_why(why, why_cap, "cannot keep capabilities across fsuid switches");
    if (cr_drop_bound() != 0)
        return cr_why(why, why_cap, "cannot drop capabilities from the bounding set");
    if (cap_reset_ambient() != 0 && errno != EINVAL)
        return cr_why(why, why_cap, "cannot clear the ambient capabilities");
    if (cr_set() != 0)
        return cr_why(why, why_cap, "cannot drop capabilities");
    *mode = CR_CHARGING;
    return 0;
}

uid_t cr_charge(uid_t uid)
{
    return (uid_t)setfsuid(uid);
}

void cr_restore(uid_t was)
{
    if (was != CR_NONE)
        (void)setfsuid(was);
}

int cr_have(int cap)
{
    cap_t caps = cap_get_proc();
    if (!caps)
        return -1;
    cap_flag_value_t v = CAP_CLEAR;
    int rc = cap_get_flag(caps, (cap_value_t)cap, CAP_EFFECTIVE, &v);
    cap_free(caps);
    return rc != 0 ? -1 : v == CAP_SET;
}
