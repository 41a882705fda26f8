/*
 * Logging and settings of both MPI front ends (libincoll_mpi and
 * coll/incoll) through libincoll's public API alone (include/incoll.h):
 * lines look like libincoll's own, at the level INCOLL_LOG_LEVEL sets, and
 * settings are read as libincoll reads them (incoll_setting_value).
 */
#ifndef INCOLL_MPI_LOG_H
#define INCOLL_MPI_LOG_H

#include "incoll.h"

#include <stdint.h>

#define mpi_log_at(lvl, ...)                                                   \
    do {                                                                       \
        if ((int)(lvl) <= incoll_log_level())                                  \
            incoll_log((lvl), __VA_ARGS__);                                    \
    } while (0)
#define incoll_error(...) mpi_log_at(INCOLL_LOG_ERROR, __VA_ARGS__)
#define incoll_warn(...) mpi_log_at(INCOLL_LOG_WARN, __VA_ARGS__)
#define incoll_info(...) mpi_log_at(INCOLL_LOG_INFO, __VA_ARGS__)
#define incoll_debug(...) mpi_log_at(INCOLL_LOG_DEBUG, __VA_ARGS__)

/* The text of setting name (INCOLL_...), NULL when unset. */
static inline const char *mpi_setting_str(const char *name)
{
    const char *text = NULL;
    if (incoll_setting_value(name, NULL, &text) != INCOLL_OK || text == NULL ||
        *text == '\0')
        return NULL;
    return text;
}

/* Its text, "" when unset. */
static inline const char *mpi_setting_text(const char *name)
{
    const char *text = mpi_setting_str(name);
    return text ? text : "";
}

/* Its number (integer, size, boolean, ...); 0 when unset or bad (the
 * front ends check their settings first: incoll_settings_check). */
static inline int64_t mpi_setting_num(const char *name)
{
    int64_t v = 0;
    if (incoll_setting_value(name, &v, NULL) != INCOLL_OK)
        return 0;
    return v;
}

#endif
