#include "common/log.h"

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
    const char *v = getenv("INCOLL_LOG_LEVEL");
    log_env_read = 1;
    if (v == NULL || *v == '\0')
        return;
    for (int i = 0; i < 5; i++) {
        if (strcasecmp(v, level_names[i]) == 0) {
            log_level_current = i;
            return;
        }
    }
    if (v[0] >= '0' && v[0] <= '4' && v[1] == '\0')
        log_level_current = v[0] - '0';
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
