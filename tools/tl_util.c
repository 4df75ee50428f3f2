/* Command line messages shared by the administrator's tools (tl_util.h). */
#include "tl_util.h"

#include <stdio.h>

int tl_usage_error(const tl_tool *t, const char *what, const char *arg)
{
    fprintf(stderr, "%s: %s%s%s%s (%s)\n", t->name, what, arg ? " '" : "", arg ? arg : "",
            arg ? "'" : "", t->usage);
    return t->usage_status;
}

int tl_unknown_option(const tl_tool *t, int letter, const char *arg)
{
    char text[3] = {'-', (char)letter, '\0'};
    return tl_usage_error(t, "unknown option", letter ? text : arg);
}

int tl_take_dir(const tl_tool *t, int argc, char **argv, int first, const char **dir)
{
    if (first >= argc)
        return tl_usage_error(t, "missing DIR", NULL);
    if (first + 1 < argc)
        return tl_usage_error(t, "too many arguments, from", argv[first + 1]);
    *dir = argv[first];
    return 0;
}
