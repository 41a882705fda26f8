/*
 * Logging: one line per event, lowercase, naming the object and the cause.
 * Level from INCOLL_LOG_LEVEL (error, warn, info, debug, trace; default
 * warn). Lines go to stderr as "incoll <who>: <level>: <text>".
 */
#ifndef INCOLL_LOG_H
#define INCOLL_LOG_H

#include <stdarg.h>

typedef enum {
    LOG_LEVEL_ERROR = 0,
    LOG_LEVEL_WARN = 1,
    LOG_LEVEL_INFO = 2,
    LOG_LEVEL_DEBUG = 3,
    LOG_LEVEL_TRACE = 4,
} log_level_t;

extern int log_level_current;

/* Sets who is speaking ("agg s0", "rank 3"); copied. */
void log_set_name(const char *name);
/* Re-reads INCOLL_LOG_LEVEL. */
void log_init_from_env(void);
void log_emit(log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The message of errno value err, safe in any thread (strerror is not):
 * from strerror_r into one of a few buffers of the calling thread, so a
 * message stays valid for the next few calls in that thread (several in
 * one printf are fine). */
const char *log_strerror(int err);

#define incoll_log_at(lvl, ...)                                                \
    do {                                                                       \
        if ((int)(lvl) <= log_level_current)                                   \
            log_emit((lvl), __VA_ARGS__);                                      \
    } while (0)
#define incoll_error(...) incoll_log_at(LOG_LEVEL_ERROR, __VA_ARGS__)
#define incoll_warn(...) incoll_log_at(LOG_LEVEL_WARN, __VA_ARGS__)
#define incoll_info(...) incoll_log_at(LOG_LEVEL_INFO, __VA_ARGS__)
#define incoll_debug(...) incoll_log_at(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define incoll_trace(...) incoll_log_at(LOG_LEVEL_TRACE, __VA_ARGS__)

#endif
