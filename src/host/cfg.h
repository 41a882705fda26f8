/*
 * The context's configuration: every setting libincoll reads (the
 * "host" and "fault" components of src/common/settings.h), parsed once
 * by incoll_init into the context (incoll_ctx->cfg) and read from there
 * by the rest of src/host and by the engines it makes, so that a
 * context's behaviour does not change under it when the environment
 * does, and no operation parses a variable. The defaults are the
 * settings table's alone.
 *
 * host_cfg_fill() is the one place in src/host that reads the
 * environment or a setting's current value; tests/test_settings.c
 * (settings_host_reads_cfg_only) checks it. The documented exception,
 * read at the time of the call rather than at init:
 *   - incoll_setting_given() (src/host/api.c): a front end asks whether
 *     a variable is set, before any context exists; so do
 *     incoll_setting_value(), incoll_settings_check() and
 *     incoll_table_check() (a setting's value, a component's check, the
 *     selection table's check), for the MPI front ends.
 * Outside src/host, INCOLL_LOG_LEVEL, INCOLL_UDP_GSO/GRO, INCOLL_MAC and
 * the data path's fault injection are read by src/common (log, udp,
 * wire), per process. A program that wants other values starts a new
 * context; values given to incoll_init_params() win over the
 * environment's.
 */
#ifndef INCOLL_HOST_CFG_H
#define INCOLL_HOST_CFG_H

#include "common/settings.h"
#include "core/algo.h"

#include <stddef.h>
#include <stdint.h>

typedef struct host_cfg {
    /* identity: -1 / NULL when unset (incoll_init_params() fields win) */
    int64_t rank, size, local_rank, local_size;
    char *job, *host, *mgr, *fabric, *secret_file, *hosts, *host_map;
    char *gen; /* INCOLL_GEN as given (host_job_generation) */
    int progress_thread;
    size_t early_max;
    /* the data path */
    uint64_t payload; /* INCOLL_PAYLOAD: 0 the group's */
    int mcast;        /* INCOLL_MCAST: results by multicast */
    uint32_t mcast_probe_ops;
    uint64_t udp_buf;
    uint64_t rto_init_ns, rto_min_ns, rto_max_ns;
    int retries;
    uint64_t timeout_ns, wait_ns, deadline_ns;
    uint32_t window, pace, window_min, copy_bytes, copy_adapt, hedge_pct;
    uint32_t ask_bytes, bcast_ahead;
    size_t stream_threshold;
    char *stream_lock;
    uint32_t stream_window, stream_slots, group_slots;
    /* the manager */
    uint64_t mgr_connect_ms, mgr_timeout_ms, mgr_op_timeout_ms;
    uint64_t usage_ns;
    /* the shared-memory level */
    char *hier; /* node|socket|flat as given; NULL unset */
    /* INCOLL_TUNE_FILE, INCOLL_TUNE as given; NULL unset (select.c) */
    char *tune_file, *tune;
    size_t hier_seg;
    int hier_depth;
    uint64_t hier_spin_ns, hier_timeout_ns;
    int hier_shared; /* INCOLL_HIER_SHARED */
    /* the host-based algorithms */
    uint64_t p2p_rto_min_ns, p2p_payload;
    uint32_t p2p_window;
    algo_cuts_t algo_cuts; /* INCOLL_ALGO_SHORT_BYTES, _PIPE_BYTES */
    /* fault injection */
    int fault_no_thread;
    uint32_t fault_mcast_join_ops;
} host_cfg_t;

/*
 * Checks every host and fault setting (one rule for a bad value: err
 * names it, INCOLL_ERR_CONFIG) and fills cfg from the environment, a
 * setting not set there taking the table's default. host_cfg_free()
 * releases it (also after a failed fill).
 */
incoll_status_t host_cfg_fill(host_cfg_t *cfg, char *err, size_t len);
void host_cfg_free(host_cfg_t *cfg);

/* A value the caller gave for setting id (incoll_init_params()), checked
 * by the table's parser: INCOLL_OK, or INCOLL_ERR_CONFIG with the error
 * logged. */
incoll_status_t host_cfg_check(setting_id_t id, const char *text);

/* The environment variable of id (INCOLL_...), for messages. */
const char *host_cfg_name(setting_id_t id);

/* The generation of job's groups: gen (INCOLL_GEN's text; a bad one is
 * logged and ignored) if set, else a hash of job (0 for none). */
uint32_t host_job_generation(const char *gen, const char *job);

#endif
