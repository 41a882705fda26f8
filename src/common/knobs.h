/*
 * Name-based access to the settings table (src/common/settings.h), kept
 * for code that names a setting by its environment variable. New code
 * uses the ids: setting_u64(SETTING_MGR_SLOTS), which do not compile when
 * misspelt. A name missing from the table is logged as an error and
 * reads as NULL or 0.
 */
#ifndef INCOLL_KNOBS_H
#define INCOLL_KNOBS_H

#include "common/settings.h"

#include <stdint.h>

/* Current text of a setting (environment or default); NULL if the name is
 * not in the table. */
const char *knob_str(const char *name);
/* Numeric value: durations in the unit their name ends in (_MS, _US),
 * sizes in bytes, booleans 0/1; a bad value is logged naming the setting
 * and the default is used. */
uint64_t knob_u64(const char *name);
double knob_double(const char *name);

#endif
