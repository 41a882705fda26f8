#include "common/log.h"

#include "common/settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int log_level_current = LOG_LEVEL_WARN;
static char log_name[64] = "";
static int log_env_read;

static const char *const level_names[] = {"error", "warn", "info", "debug",
                                          "trace"};

void log_set_name(const char *name)
{
    snprintf(log_name, sizeof(log_name), "%s", name ? name : "");
}

void log_init_from_env(void)
{
    setting_value_t v;
    char err[256];

    /* Set first: logging below lands here again. A bad INCOLL_LOG_LEVEL
     * leaves the level as it is, silently: the component's check of its
     * settings refuses it, naming it (libincoll's init fails, a daemon
     * exits), rather than a message here that it was taken as the
     * default. */
    log_env_read = 1;
    if (setting_get(SETTING_LOG_LEVEL, &v, err, sizeof(err)) == INCOLL_OK &&
        v.set)
        log_level_current = (int)v.i;
}

void log_emit(log_level_t level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;

    n = snprintf(line, sizeof(line), "incoll%s%s: %s: ", log_name[0] ? " " : "",
                 log_name, level_names[level]);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    /* One write per line so lines of several processes do not interleave. */
    fprintf(stderr, "%s\n", line);
}

__attribute__((constructor)) static void log_ctor(void)
{
    if (!log_env_read)
        log_init_from_env();
}

const char *log_strerror(int err)
{
    static _Thread_local char bufs[4][96];
    static _Thread_local unsigned next;
    char *buf = bufs[next++ % 4];
    /* The GNU strerror_r (_GNU_SOURCE): returns its message, in buf or
     * a constant string. */
    return strerror_r(err, buf, sizeof(bufs[0]));
}
