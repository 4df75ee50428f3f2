#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

struct lg_log_s {
    FILE *out;                         /* log file or stderr; NULL means syslog */
    int owns_out;                      /* out was opened here and is closed here */
    pthread_mutex_t lock;              /* one line at a time */
};

static const char *const lg_names[] = {"error", "warning", "info", "debug"};

lg_log *lg_open(const char *path, int to_stderr, const char *ident)
{
    lg_log *lg = calloc(1, sizeof(*lg));
    if (!lg)
        return NULL;
    pthread_mutex_init(&lg->lock, NULL);
    if (path) {
        lg->out = fopen(path, "ae");
        if (!lg->out) {
            free(lg);
            return NULL;
        }
        setvbuf(lg->out, NULL, _IOLBF, 0);
        lg->owns_out = 1;
    } else if (to_stderr) {
        lg->out = stderr;
    } else {
        openlog(ident, LOG_PID, LOG_DAEMON);
    }
    return lg;
}

void lg_printf(lg_log *lg, lg_level level, const char *fmt, ...)
{
    char line[4096];                   /* the unmount line carries every counter */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (!lg) {
        fprintf(stderr, "fpgalz4fs: %s: %s\n", lg_names[level], line);
        return;
    }
    if (!lg->out) {
        static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
        syslog(prio[level], "%s", line);
        return;
    }
    struct timespec ts;
    struct tm tm;
    char stamp[32];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
    pthread_mutex_lock(&lg->lock);
    fprintf(lg->out, "%s.%03ldZ fpgalz4fs %s: %s\n", stamp, ts.tv_nsec / 1000000, lg_names[level],
            line);
    fflush(lg->out);
    pthread_mutex_unlock(&lg->lock);
}

void lg_close(lg_log *lg)
{
    if (!lg)
        return;
    if (lg->owns_out)
        fclose(lg->out);
    else if (!lg->out)
        closelog();
    pthread_mutex_destroy(&lg->lock);
    free(lg);
}
