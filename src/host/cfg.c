/*
 * The context's configuration, filled once from the settings table
 * (src/host/cfg.h).
 */
#include "host/cfg.h"

#include "common/log.h"

#include <stdlib.h>
#include <string.h>

/* A copy of id's text, NULL when unset; *bad_p set on no memory. */
static char *text_copy(setting_id_t id, int *bad_p)
{
    const char *v = setting_str(id);
    char *c;
    if (v == NULL)
        return NULL;
    c = strdup(v);
    if (c == NULL)
        *bad_p = 1;
    return c;
}

/* An identity number: -1 when unset. */
static int64_t ident_of(setting_id_t id)
{
    return setting_str(id) != NULL ? setting_int(id) : -1;
}

incoll_status_t host_cfg_fill(host_cfg_t *c, char *err, size_t len)
{
    int nomem = 0;

    memset(c, 0, sizeof(*c));
    /* One rule for every setting: a bad value fails here, naming it. */
    if (settings_check("host,fault", err, len) != INCOLL_OK)
        return INCOLL_ERR_CONFIG;
    c->rank = ident_of(SETTING_RANK);
    c->size = ident_of(SETTING_SIZE);
    c->local_rank = ident_of(SETTING_LOCAL_RANK);
    c->local_size = ident_of(SETTING_LOCAL_SIZE);
    c->job = text_copy(SETTING_JOB, &nomem);
    c->host = text_copy(SETTING_HOST, &nomem);
    c->mgr = text_copy(SETTING_MGR, &nomem);
    c->fabric = text_copy(SETTING_FABRIC, &nomem);
    c->secret_file = text_copy(SETTING_SECRET_FILE, &nomem);
    c->hosts = text_copy(SETTING_HOSTS, &nomem);
    c->host_map = text_copy(SETTING_HOST_MAP, &nomem);
    c->gen = text_copy(SETTING_GEN, &nomem);
    c->tune_file = text_copy(SETTING_TUNE_FILE, &nomem);
    c->tune = text_copy(SETTING_TUNE, &nomem);
    c->progress_thread = setting_bool(SETTING_PROGRESS_THREAD);
    c->early_max = (size_t)setting_u64(SETTING_EARLY_MAX);

    c->payload = setting_u64(SETTING_PAYLOAD);
    c->mcast = setting_bool(SETTING_MCAST);
    c->mcast_probe_ops = (uint32_t)setting_int(SETTING_MCAST_PROBE_OPS);
    c->udp_buf = setting_u64(SETTING_UDP_BUF);
    c->rto_init_ns = setting_ns(SETTING_RTO_INIT_US);
    c->rto_min_ns = setting_ns(SETTING_RTO_MIN_US);
    c->rto_max_ns = setting_ns(SETTING_RTO_MAX_US);
    c->retries = (int)setting_int(SETTING_RETRIES);
    c->timeout_ns = setting_ns(SETTING_TIMEOUT_MS);
    c->wait_ns = setting_ns(SETTING_WAIT_MS);
    c->deadline_ns = setting_ns(SETTING_DEADLINE_MS);
    c->window = (uint32_t)setting_u64(SETTING_WINDOW);
    c->pace = (uint32_t)setting_u64(SETTING_PACE);
    c->window_min = (uint32_t)setting_u64(SETTING_WINDOW_MIN);
    c->copy_bytes = (uint32_t)setting_u64(SETTING_COPY_BYTES);
    c->copy_adapt = (uint32_t)setting_u64(SETTING_COPY_ADAPT);
    c->hedge_pct = (uint32_t)setting_int(SETTING_HEDGE_PCT);
    c->ask_bytes = (uint32_t)setting_u64(SETTING_ASK_BYTES);
    c->bcast_ahead = (uint32_t)setting_u64(SETTING_BCAST_AHEAD);
    c->stream_threshold = (size_t)setting_u64(SETTING_STREAM_THRESHOLD);
    c->stream_lock = text_copy(SETTING_STREAM_LOCK, &nomem);
    c->stream_window = (uint32_t)setting_u64(SETTING_STREAM_WINDOW);
    c->stream_slots = (uint32_t)setting_u64(SETTING_STREAM_SLOTS);
    c->group_slots = (uint32_t)setting_u64(SETTING_GROUP_SLOTS);

    c->mgr_connect_ms = setting_ms(SETTING_MGR_CONNECT_MS);
    c->mgr_timeout_ms = setting_ms(SETTING_MGR_TIMEOUT_MS);
    c->mgr_op_timeout_ms = setting_ms(SETTING_MGR_OP_TIMEOUT_MS);
    c->usage_ns = setting_ns(SETTING_USAGE_MS);

    c->hier = text_copy(SETTING_HIER, &nomem);
    c->hier_seg = (size_t)setting_u64(SETTING_HIER_SEG);
    c->hier_depth = (int)setting_int(SETTING_HIER_DEPTH);
    c->hier_spin_ns = setting_ns(SETTING_HIER_SPIN_US);
    c->hier_timeout_ns = setting_ns(SETTING_HIER_TIMEOUT_MS);
    c->hier_shared = setting_bool(SETTING_HIER_SHARED);

    c->p2p_rto_min_ns = setting_ns(SETTING_P2P_RTO_MIN_US);
    c->p2p_payload = setting_u64(SETTING_P2P_PAYLOAD);
    c->p2p_window = (uint32_t)setting_u64(SETTING_P2P_WINDOW);
    c->algo_cuts.short_bytes = setting_u64(SETTING_ALGO_SHORT_BYTES);
    c->algo_cuts.pipe_bytes = setting_u64(SETTING_ALGO_PIPE_BYTES);

    c->fault_no_thread = setting_bool(SETTING_FAULT_NO_THREAD);
    c->fault_mcast_join_ops =
        (uint32_t)setting_int(SETTING_FAULT_MCAST_JOIN_OPS);
    if (nomem) {
        snprintf(err, len, "no memory for the configuration");
        return INCOLL_ERR_NO_MEMORY;
    }
    return INCOLL_OK;
}

void host_cfg_free(host_cfg_t *c)
{
    char **texts[] = {&c->job,         &c->host,  &c->mgr,       &c->fabric,
                      &c->secret_file, &c->hosts, &c->host_map,  &c->gen,
                      &c->stream_lock, &c->hier,  &c->tune_file, &c->tune};
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        free(*texts[i]);
        *texts[i] = NULL;
    }
}

incoll_status_t host_cfg_check(setting_id_t id, const char *text)
{
    setting_value_t v;
    char err[512];

    if (text == NULL || *text == '\0')
        return INCOLL_OK; /* unset, as an empty variable */
    if (setting_parse(&setting_table[id], text, &v, err, sizeof(err)) ==
        INCOLL_OK)
        return INCOLL_OK;
    incoll_error("init: %s (given to incoll_init_params)", err);
    return INCOLL_ERR_CONFIG;
}

const char *host_cfg_name(setting_id_t id)
{
    return (unsigned)id < SETTING_COUNT ? setting_table[id].name : "?";
}

uint32_t host_job_generation(const char *gen, const char *job)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    setting_value_t v;
    char err[256];

    /* INCOLL_GEN (`incoll run` sets it from the clock) orders jobs: an AN
     * lets a newer generation take a group over at once (agg_core.h). */
    if (setting_parse(&setting_table[SETTING_GEN], gen, &v, err, sizeof(err)) !=
        INCOLL_OK)
        incoll_error("init: %s: ignoring it, the generation is %s", err,
                     job == NULL || *job == '\0' ? "0"
                                                 : "a hash of INCOLL_JOB");
    else if (v.set)
        return (uint32_t)v.i;
    if (job == NULL || *job == '\0')
        return 0;
    for (const char *c = job; *c; c++)
        h = (h ^ (uint8_t)*c) * 16777619u;
    return h;
}
