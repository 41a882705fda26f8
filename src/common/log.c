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
    /* Set first: a bad INCOLL_LOG_LEVEL is logged, which lands here. */
    log_env_read = 1;
    if (setting_str(SETTING_LOG_LEVEL) != NULL)
        log_level_current = setting_enum(SETTING_LOG_LEVEL);
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
