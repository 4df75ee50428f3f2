/* What the administrator's tools (mkfpgalz4fs, fsck.fpgalz4fs, fpgalz4fs-stat) share: the one
 * line a bad command line gets, and taking the one DIR operand that each of them wants. */
#ifndef FPGALZ4FS_TL_UTIL_H
#define FPGALZ4FS_TL_UTIL_H

/* A tool as its messages name it: its name, its usage line, and the exit status it gives
 * for a bad command line (the tools differ there: fsck follows e2fsck). */
typedef struct {
    const char *name;
    const char *usage;
    int usage_status;
} tl_tool;

/* Says "NAME: WHAT 'ARG' (USAGE)" on stderr (without the quoted part when arg is NULL);
 * returns t->usage_status. */
int tl_usage_error(const tl_tool *t, const char *what, const char *arg);

/* The message for an option getopt does not know: it names an unknown short option only by
 * its letter (it may sit inside a cluster such as -xb), and an unknown long one only through
 * argv, given as arg. Returns t->usage_status. */
int tl_unknown_option(const tl_tool *t, int letter, const char *arg);

/* After getopt: exactly one operand must be left, the DIR. Returns 0 with *dir set, or the
 * usage status after the message. */
int tl_take_dir(const tl_tool *t, int argc, char **argv, int first, const char **dir);

#endif
