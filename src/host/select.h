/*
 * The selection table in force (src/host/select.c).
 */
#ifndef INCOLL_HOST_SELECT_H
#define INCOLL_HOST_SELECT_H

#include "host/host.h"

/* Loads this rank's selection table into ctx (src/host/select.c); at
 * init, before the job's key, whose exchange then compares the ranks'
 * tables too. */
incoll_status_t host_tune_load(incoll_ctx_h ctx);
/* Agrees on the selection table across the world (src/host/select.c),
 * after the job's key: nothing more when its exchange found the tables
 * the same. */
incoll_status_t host_tune_agree(incoll_ctx_h ctx);

#endif
