/*
 * Start-up of a context (src/host/init.c): what the rest of the library
 * and the tests call of it.
 */
#ifndef INCOLL_HOST_INIT_H
#define INCOLL_HOST_INIT_H

#include "host/host.h"

/*
 * The job's generation and key (incoll_ctx.gen, job_key), once the world
 * exists and before anything else runs on it: with a manager, from the
 * world group's random key (every job gets a group of its own); else the
 * ranks agree on them on the hosts (a random number of each, the first
 * rank's clock), and check that they agree. No earlier job had them, so
 * packets of an earlier job never count in this one whatever the
 * launcher set (docs/security.md, "Replays across jobs"). Collective over
 * the world; INCOLL_ERR_PROTOCOL when the ranks did not agree.
 */
incoll_status_t host_job_key(incoll_ctx_h ctx);

#endif
