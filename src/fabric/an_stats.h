/* Asking a fabric's ANs for their counters; see an_stats.c. */
#ifndef INCOLL_FABRIC_AN_STATS_H
#define INCOLL_FABRIC_AN_STATS_H

#include "common/fabric_conf.h"

/*
 * Asks every AN of conf whose replies[i] is still NULL for its counters,
 * up to attempts times, waiting wait_ms for the answers each time, and
 * stores each reply (one line of text, malloc'ed, the caller frees it) in
 * replies[i]. Returns how many ANs never answered.
 */
int fabric_an_stats(const fabric_conf_t *conf, int attempts, int wait_ms,
                    char **replies);

#endif
