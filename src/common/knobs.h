/*
 * Knobs: one table (src/common/knobs.c) drives environment variables,
 * defaults and `incoll info`, so the documentation and the code can't
 * drift. A knob's value comes from its environment variable if set, else
 * its default.
 */
#ifndef INCOLL_KNOBS_H
#define INCOLL_KNOBS_H

#include <stdint.h>

typedef struct {
    const char *name;      /* environment variable */
    const char *def;       /* default, as text */
    const char *component; /* "host", "agg", "fault", "tool", ... */
    const char *doc;       /* one sentence */
} knob_t;

/* The table, terminated by an entry with name NULL. */
extern const knob_t knob_table[];

/* Current text value of a knob (environment or default); NULL if the knob
 * is not in the table. */
const char *knob_str(const char *name);
/* Numeric value; a value that does not parse logs a warning naming the
 * variable and falls back to the default. */
uint64_t knob_u64(const char *name);
double knob_double(const char *name);

#endif
