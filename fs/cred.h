/* cr: whose space the daemon's backing writes take (docs/SECURITY.md, "Reserved blocks and
 * quotas").
 *
 * A daemon that serves other users (allow_other) runs as root. ext4 lets a task write into
 * its reserved blocks when the task's filesystem uid owns the reserve (root, by default) or
 * when it has CAP_SYS_RESOURCE, and disk quotas let CAP_SYS_RESOURCE pass their hard limits.
 * So the daemon keeps only the capabilities it uses, and makes a user's backing writes with
 * that user's filesystem uid (setfsuid, per thread). SECBIT_NO_SETUID_FIXUP keeps the
 * remaining capabilities across those switches: the daemon still opens, reopens by handle
 * and chowns whatever it must while it writes for a user. */
#ifndef FPGALZ4FS_CRED_H
#define FPGALZ4FS_CRED_H

#include <stddef.h>
#include <sys/types.h>

typedef enum {
    CR_UNPRIVILEGED = 0,               /* not root: writes are the daemon user's anyway */
    CR_CHARGING,                       /* capabilities cut; cr_charge switches the fsuid */
} cr_mode;

/* Before any thread starts (capabilities are per thread, and new threads inherit them):
 * keeps the capabilities the daemon uses, drops the rest from every set and from the
 * bounding set, and keeps them across fsuid switches. 0 with *mode set, or -1 with why. */
int cr_limit(cr_mode *mode, char *why, size_t why_cap);

#define CR_NONE ((uid_t)-1)           /* no switch was made: nothing to put back */

/* Makes the calling thread's backing writes uid's; returns the fsuid it had, for
 * cr_restore. */
uid_t cr_charge(uid_t uid);
void cr_restore(uid_t was);            /* CR_NONE: nothing */

/* Whether the calling thread has capability cap (CAP_*) in its effective set: 1, 0, or -1. */
int cr_have(int cap);

#endif
