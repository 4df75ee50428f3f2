/* lg: the daemon's and the tools' log: a file, stderr, or syslog. Every error that reaches an
 * application as an errno also leaves one line here naming the file and the reason. */
#ifndef FPGALZ4FS_LOG_H
#define FPGALZ4FS_LOG_H

typedef struct lg_log_s lg_log;

typedef enum { LG_ERR = 0, LG_WARN, LG_INFO, LG_DEBUG } lg_level;

/* path: append to this file; else stderr when to_stderr; else syslog. NULL on failure. */
lg_log *lg_open(const char *path, int to_stderr, const char *ident);
void lg_printf(lg_log *lg, lg_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Accepts NULL. */
void lg_close(lg_log *lg);

#endif
