/*
 * What the manager core shows of itself: `incoll stat`'s lines and the
 * metrics, in the OpenMetrics text format (what Prometheus asks for) or
 * the Prometheus text format 0.0.4 (what node-exporter's textfile
 * collector and `promtool check metrics` read). Both renditions carry the
 * same samples; they differ only where the formats do (a counter family
 * is named without its _total in OpenMetrics, which also has # UNIT and
 * ends with # EOF). See docs/manager.md, "Metrics".
 *
 * Nothing secret is shown: no key, secret or endpoint of a group's data
 * path; job and host names and AN addresses are.
 */
#include "mgr/mgr_state.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t len, cap;
} sbuf_t;

static void sb_printf(sbuf_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void sb_printf(sbuf_t *s, const char *fmt, ...)
{
    va_list ap;
    int n;
    if (s->buf == NULL && s->cap != 0)
        return; /* out of memory before */
    for (;;) {
        size_t room = s->cap - s->len;
        va_start(ap, fmt);
        n = vsnprintf(s->buf ? s->buf + s->len : NULL, s->buf ? room : 0, fmt,
                      ap);
        va_end(ap);
        if (n < 0)
            return;
        if (s->buf && (size_t)n < room) {
            s->len += (size_t)n;
            return;
        }
        {
            size_t ncap = s->cap ? s->cap * 2 : 8192;
            char *nb;
            while (ncap < s->len + (size_t)n + 1)
                ncap *= 2;
            nb = realloc(s->buf, ncap);
            if (nb == NULL) {
                free(s->buf);
                s->buf = NULL;
                s->cap = 1;
                return;
            }
            s->buf = nb;
            s->cap = ncap;
        }
    }
}

/* The free fraction of an AN's scarcest resource. */
static double an_free(const place_an_load_t *l)
{
    double f = 1.0, x;
    x = l->caps.max_groups ? 1.0 - (double)l->groups / l->caps.max_groups : 0;
    f = x < f ? x : f;
    x = l->caps.slots ? 1.0 - (double)l->slots / l->caps.slots : 0;
    f = x < f ? x : f;
    x = l->caps.buffer_bytes
            ? 1.0 - (double)l->buffer_bytes / (double)l->caps.buffer_bytes
            : 0;
    f = x < f ? x : f;
    return f < 0 ? 0 : f;
}

static int ans_up(const mgr_core_t *m)
{
    int n = 0;
    for (int i = 0; i < m->topo->nswitches; i++)
        n += m->an[i].conn != NULL;
    return n;
}

/* "usage job=J network=N software=M no_manager=.. refused=.." (or
 * "usage group=G job=J ..." when group is not 0): where the collectives
 * ran, as the job's processes reported (MGR_USAGE). */
static void usage_line(sbuf_t *s, const char *pre, const char *job,
                       uint32_t group, const usage_ctr_t *u)
{
    if (group)
        sb_printf(s, "%s%u job=%s", pre, group, job);
    else
        sb_printf(s, "%s%s", pre, job);
    sb_printf(s, " network=%" PRIu64 " software=%" PRIu64, u->net, u->sw);
    for (int k = 0; k < MGR_FB_COUNT; k++)
        sb_printf(s, " %s=%" PRIu64, mgr_fb_name(k), u->fb[k]);
    sb_printf(s, "\n");
}

/* "host_counters job=J ops=N rx_datagrams=.. ... rx_per_op=X wakeups_per_op=Y":
 * the job's processes' counters of the result path (MGR_USAGE_PROC),
 * summed, and the datagrams received and wake-ups per operation of a
 * rank. */
static void counters_line(sbuf_t *s, const job_t *j)
{
    uint64_t ops = j->pc[MGR_PC_OPS];
    sb_printf(s, "host_counters job=%s", j->name);
    for (int k = 0; k < MGR_PC_COUNT; k++)
        sb_printf(s, " %s=%" PRIu64, mgr_pc_name(k), j->pc[k]);
    sb_printf(s, " rx_per_op=%.2f wakeups_per_op=%.2f\n",
              ops ? (double)j->pc[MGR_PC_RX] / (double)ops : 0.0,
              ops ? (double)j->pc[MGR_PC_WAKEUPS] / (double)ops : 0.0);
}

/* ---- `incoll stat` ---- */

char *mgr_core_stat_text(const mgr_core_t *m, uint64_t now)
{
    const topo_t *topo = m->topo;
    sbuf_t s = {0};
    mgr_io_stats_t io = {0};
    char ep[32], ops[160], dts[200];

    if (m->p.io_stats)
        m->p.io_stats(m->p.arg, &io);
    sb_printf(
        &s,
        "manager listen=%s uptime_ms=%" PRIu64 " ans=%d ans_up=%d "
        "trees=%d hosts=%d jobs=%d registered=%d groups=%d conns=%d "
        "max_conns=%d conns_unauth=%d conns_accepted=%" PRIu64
        " conns_refused=%" PRIu64 " conns_evicted=%" PRIu64
        " conns_shed=%" PRIu64 " rx_buffered=%" PRIu64 " tx_queued=%" PRIu64
        " conns_slow=%" PRIu64 " conns_timed_out=%" PRIu64
        " frames_late=%" PRIu64 " frames_refused=%" PRIu64
        " auth_failures=%" PRIu64 " malformed=%" PRIu64 " state_bytes=%" PRIu64
        " groups_made=%" PRIu64 " groups_refused=%" PRIu64
        " quota_refused=%" PRIu64 " budget_refused=%" PRIu64
        " joins_refused=%" PRIu64 " groups_failed=%" PRIu64
        " groups_released=%" PRIu64 " groups_reclaimed=%" PRIu64
        " groups_adopted=%" PRIu64 " an_failures=%" PRIu64
        " usage_reports=%" PRIu64 " usage_refused=%" PRIu64 "\n",
        m->listen, now - m->start, topo->nswitches, ans_up(m), topo->ntrees,
        topo->nhosts, m->njobs, m->nregs, place_group_count(m->pl), io.conns,
        io.max_conns, io.conns_unauth, io.conns_accepted, io.conns_refused,
        io.conns_evicted, io.conns_shed, io.rx_buffered, io.tx_queued,
        io.conns_slow, io.conns_timed_out, io.frames_late, io.frames_refused,
        io.auth_failures, io.malformed + m->ctr.malformed, m->mem,
        m->ctr.groups_made, m->ctr.groups_refused, m->ctr.quota_refused,
        m->ctr.budget_refused, m->ctr.joins_refused, m->ctr.groups_failed,
        m->ctr.groups_released, m->ctr.groups_reclaimed, m->ctr.groups_adopted,
        m->ctr.an_failures, m->ctr.usage_reports, m->ctr.usage_refused);
    for (int t = 0; t < topo->ntrees; t++) {
        int leaves = 0, sws = 0;
        for (int i = 0; i < topo->nswitches; i++) {
            if (topo->trees[t].parent[i] == -2)
                continue;
            sws++;
            leaves += topo->sw[i].level == 1;
        }
        sb_printf(&s, "tree id=%d root=%s height=%d switches=%d leaves=%d\n", t,
                  topo->sw[topo->trees[t].root].name, topo->trees[t].height,
                  sws, leaves);
    }
    for (int i = 0; i < topo->nswitches; i++) {
        place_an_load_t l;
        const an_state_t *a = &m->an[i];
        place_an_load(m->pl, i, &l);
        sb_printf(
            &s,
            "an name=%s level=%d addr=%s state=%s groups=%u "
            "max_groups=%u slots=%" PRIu64 " max_slots=%u buffer=%" PRIu64
            " max_buffer=%" PRIu64 " free=%.3f payload=%u ops=%s "
            "dtypes=%s registrations=%u\n",
            topo->sw[i].name, topo->sw[i].level,
            a->ep == INCOLL_EP_NONE || a->ep == 0
                ? "-"
                : wire_ep_str(a->ep, ep, sizeof(ep)),
            a->conn ? "up" : "down", l.groups, l.caps.max_groups, l.slots,
            l.caps.slots, l.buffer_bytes, l.caps.buffer_bytes, an_free(&l),
            l.caps.max_payload, topo_ops_str(l.caps.ops, ops, sizeof(ops)),
            topo_dtypes_str(l.caps.dtypes, dts, sizeof(dts)), a->registrations);
        if (a->conn && a->counters[0])
            sb_printf(&s, "counters %s\n", a->counters);
    }
    for (const reg_t *r = m->regs; r; r = r->next)
        sb_printf(&s,
                  "registration job=%s gen=%u quota_groups=%u "
                  "quota_slots=%u%s%s jobs=%d groups=%u\n",
                  r->name, r->gen, r->q.groups, r->q.slots,
                  r->own_quota || r->parent == NULL ? "" : " quota_of=",
                  r->own_quota || r->parent == NULL ? "" : r->parent->name,
                  r->njobs, r->q.held);
    for (const job_t *j = m->jobs; j; j = j->next) {
        sb_printf(&s,
                  "job name=%s size=%d up=%d lost=%d left=%d adopted=%d "
                  "dead=%d groups=%d state_bytes=%" PRIu64
                  " groups_refused=%" PRIu64 " quota_refused=%" PRIu64
                  "%s%s%s\n",
                  j->name, j->size, j->nstate[R_UP], j->nstate[R_LOST],
                  j->nstate[R_LEFT] + j->nleft, j->nstate[R_ADOPTED],
                  j->nstate[R_DEAD] + j->ndead, j->ngroups, j->mem,
                  j->ctr.groups_refused, j->ctr.quota_refused,
                  j->reg ? " registration=" : "", j->reg ? j->reg->name : "",
                  j->ended ? " ended=1" : "");
        usage_line(&s, "usage job=", j->name, 0, &j->usage);
        counters_line(&s, j);
        for (uint32_t i = 0; i < j->cap; i++) {
            const rank_t *rk = &j->tab[i];
            if (rk->rank < 0 || rk->state == R_UP || rk->state == R_NONE)
                continue;
            sb_printf(&s, "rank job=%s rank=%d state=%s\n", j->name,
                      (int)rk->rank, mgr_rank_state_names[rk->state]);
        }
    }
    for (int i = 0; i < place_group_count(m->pl); i++) {
        const place_group_t *g = place_group_at(m->pl, i);
        const mgroup_t *mg = g->user;
        sb_printf(&s,
                  "group id=%u job=%s comm=%016" PRIx64 " gen=%u members=%d "
                  "tree=%s slots=%u payload=%u state=%s ans=",
                  g->id, mg->job->name, mg->comm, mg->gen, g->nmembers,
                  topo->sw[topo->trees[g->tree].root].name, g->slots,
                  g->payload,
                  mg->active ? (mg->adopted ? "adopted" : "active") : "adding");
        for (int k = 0; k < g->nans; k++)
            sb_printf(&s, "%s%s", k ? "," : "", topo->sw[g->ans[k].sw].name);
        sb_printf(&s, "\n");
        usage_line(&s, "usage group=", mg->job->name, g->id, &mg->usage);
    }
    for (const pending_t *p = m->pend; p; p = p->next)
        sb_printf(&s,
                  "request job=%s comm=%016" PRIx64 " gen=%u members=%d "
                  "asked=%d\n",
                  p->job->name, p->comm, p->gen, p->n, p->nasked);
    return s.buf;
}

/* ---- metrics ---- */

/* The metrics writer: which dialect, and the family being written. */
typedef struct {
    sbuf_t s;
    int om; /* 1: OpenMetrics 1.0; 0: the Prometheus text format 0.0.4 */
} mw_t;

enum { M_GAUGE, M_COUNTER };

/*
 * Starts a family: name without _total, its type, its unit (the name's
 * last word, "" for none) and help. In the Prometheus format a counter's
 * family is called name_total, as its samples are.
 */
static void fam(mw_t *w, const char *name, int type, const char *unit,
                const char *help)
{
    const char *t = type == M_COUNTER ? "counter" : "gauge";
    const char *sfx = type == M_COUNTER && !w->om ? "_total" : "";
    sb_printf(&w->s, "# HELP %s%s %s\n# TYPE %s%s %s\n", name, sfx, help, name,
              sfx, t);
    if (w->om && unit[0])
        sb_printf(&w->s, "# UNIT %s %s\n", name, unit);
}

/* A label value as both formats want it: backslash, quote and newline
 * escaped. */
static void esc(char *out, size_t len, const char *v)
{
    size_t o = 0;
    for (; *v && o + 3 < len; v++) {
        if (*v == '\\' || *v == '"') {
            out[o++] = '\\';
            out[o++] = *v;
        } else if (*v == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
        } else {
            out[o++] = *v;
        }
    }
    out[o] = '\0';
}

/* One sample: name (a counter's without _total), labels as
 * `k="v",k2="v2"` (values escaped) or "", and the value. */
static void sample(mw_t *w, const char *name, int type, const char *labels,
                   uint64_t v)
{
    sb_printf(&w->s, "%s%s%s%s%s %" PRIu64 "\n", name,
              type == M_COUNTER ? "_total" : "", labels[0] ? "{" : "", labels,
              labels[0] ? "}" : "", v);
}

static void sample_f(mw_t *w, const char *name, const char *labels, double v)
{
    sb_printf(&w->s, "%s%s%s%s %.6g\n", name, labels[0] ? "{" : "", labels,
              labels[0] ? "}" : "", v);
}

/* A family of one sample without labels. */
static void single(mw_t *w, const char *name, int type, const char *unit,
                   const char *help, uint64_t v)
{
    fam(w, name, type, unit, help);
    sample(w, name, type, "", v);
}

/* The AN counters of the heartbeat text ("an=l0 key=value ...") that
 * become metrics: the key, the family and, for families of several keys,
 * the label. Keys not listed here go to incoll_an_other_total. */
typedef struct {
    const char *key;
    const char *family;
    const char *label; /* k="v", or "" */
} an_ctr_t;

static const an_ctr_t an_ctrs[] = {
    {"packets_in", "incoll_an_received_datagrams", ""},
    {"packets_out", "incoll_an_sent_datagrams", ""},
    {"bytes_in", "incoll_an_received_bytes", ""},
    {"bytes_out", "incoll_an_sent_bytes", ""},
    {"contribs_accepted", "incoll_an_contributions", ""},
    {"reductions", "incoll_an_reductions", ""},
    {"bytes_reduced", "incoll_an_reduced_bytes", ""},
    {"results_sent", "incoll_an_results", "kind=\"sent\""},
    {"results_resent", "incoll_an_results", "kind=\"resent\""},
    {"mcast_sent", "incoll_an_multicast_results", "kind=\"sent\""},
    {"mcast_repairs", "incoll_an_multicast_results", "kind=\"repaired\""},
    {"reforwards", "incoll_an_reforwards", ""},
    {"ahead_sent", "incoll_an_bcast_ahead", ""},
    {"asks", "incoll_an_retransmission_asks", ""},
    {"waits", "incoll_an_waits", ""},
    {"duplicates_dropped", "incoll_an_dropped_datagrams",
     "reason=\"duplicate\""},
    {"stale_dropped", "incoll_an_dropped_datagrams", "reason=\"stale\""},
    {"gen_dropped", "incoll_an_dropped_datagrams", "reason=\"generation\""},
    {"malformed_dropped", "incoll_an_dropped_datagrams",
     "reason=\"malformed\""},
    {"unknown_group", "incoll_an_dropped_datagrams",
     "reason=\"unknown_group\""},
    {"bad_mac", "incoll_an_dropped_datagrams", "reason=\"bad_mac\""},
    {"bad_source", "incoll_an_dropped_datagrams", "reason=\"bad_source\""},
    {"mismatch_dropped", "incoll_an_dropped_datagrams", "reason=\"mismatch\""},
    {"coll_allreduce", "incoll_an_collectives", "coll=\"allreduce\""},
    {"coll_reduce", "incoll_an_collectives", "coll=\"reduce\""},
    {"coll_bcast", "incoll_an_collectives", "coll=\"bcast\""},
    {"coll_barrier", "incoll_an_collectives", "coll=\"barrier\""},
    {"coll_allgather", "incoll_an_collectives", "coll=\"allgather\""},
    {"coll_gather", "incoll_an_collectives", "coll=\"gather\""},
    {"coll_scatter", "incoll_an_collectives", "coll=\"scatter\""},
    {"coll_reduce_scatter", "incoll_an_collectives", "coll=\"reduce_scatter\""},
    {"locks_granted", "incoll_an_stream_locks", "result=\"granted\""},
    {"locks_refused", "incoll_an_stream_locks", "result=\"refused\""},
    {"locks_reclaimed", "incoll_an_stream_locks", "result=\"reclaimed\""},
    {"stream_bytes", "incoll_an_stream_bytes", ""},
    {"stats_requests", "incoll_an_stats_requests", ""},
    {"generation_resets", "incoll_an_generation_resets", ""},
};

/* Keys of the heartbeat that are not counters. */
static int an_not_counter(const char *key)
{
    return strcmp(key, "an") == 0 || strcmp(key, "groups") == 0 ||
           strcmp(key, "stream_pool") == 0 || strcmp(key, "stream_holder") == 0;
}

static const struct {
    const char *family;
    const char *unit;
    const char *help;
} an_fams[] = {
    {"incoll_an_received_datagrams", "", "Datagrams the AN received."},
    {"incoll_an_sent_datagrams", "", "Datagrams the AN sent."},
    {"incoll_an_received_bytes", "bytes", "Bytes the AN received."},
    {"incoll_an_sent_bytes", "bytes", "Bytes the AN sent."},
    {"incoll_an_contributions", "",
     "Contributions the AN accepted (each counted once)."},
    {"incoll_an_reductions", "", "Slots the AN reduced."},
    {"incoll_an_reduced_bytes", "bytes", "Bytes the AN reduced."},
    {"incoll_an_results", "",
     "Results the AN sent down, first (sent) or again (resent)."},
    {"incoll_an_multicast_results", "",
     "Results the AN sent once to its hosts' multicast address (sent), and "
     "the unicast copies it sent to hosts that missed one (repaired)."},
    {"incoll_an_reforwards", "",
     "Aggregates the AN forwarded to its parent again."},
    {"incoll_an_bcast_ahead", "",
     "Broadcast data the AN sent on before every member arrived."},
    {"incoll_an_retransmission_asks", "",
     "Retransmissions the AN asked of a child."},
    {"incoll_an_waits", "",
     "Retransmissions the AN answered by waiting for other children."},
    {"incoll_an_dropped_datagrams", "", "Datagrams the AN dropped, by reason."},
    {"incoll_an_collectives", "",
     "Operations the AN completed, by collective."},
    {"incoll_an_stream_locks", "", "Streaming lock requests, by result."},
    {"incoll_an_stream_bytes", "bytes", "Bytes streamed through the AN."},
    {"incoll_an_stats_requests", "", "Counter requests the AN answered."},
    {"incoll_an_generation_resets", "",
     "Groups a newer job generation took over."},
};

/* The value of key in an AN's heartbeat text, or -1 when absent. */
static int an_value(const char *text, const char *key, uint64_t *v_p)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p;) {
        if ((p == text || p[-1] == ' ') && strncmp(p, key, kl) == 0 &&
            p[kl] == '=') {
            char *end;
            unsigned long long v = strtoull(p + kl + 1, &end, 10);
            if (end == p + kl + 1)
                return -1;
            *v_p = v;
            return 0;
        }
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    return -1;
}

static int known_an_key(const char *key, size_t n)
{
    for (size_t i = 0; i < sizeof(an_ctrs) / sizeof(an_ctrs[0]); i++)
        if (strlen(an_ctrs[i].key) == n && strncmp(an_ctrs[i].key, key, n) == 0)
            return 1;
    return 0;
}

static void an_metrics(mw_t *w, const mgr_core_t *m)
{
    const topo_t *topo = m->topo;
    char lab[512], name[128];

    fam(w, "incoll_an_up", M_GAUGE, "",
        "1 while the AN is registered and its heartbeats arrive.");
    for (int i = 0; i < topo->nswitches; i++) {
        esc(name, sizeof(name), topo->sw[i].name);
        snprintf(lab, sizeof(lab), "an=\"%s\",level=\"%d\"", name,
                 topo->sw[i].level);
        sample(w, "incoll_an_up", M_GAUGE, lab, m->an[i].conn != NULL);
    }
#define AN_LOAD(fname, type, unit, help, expr)                                 \
    do {                                                                       \
        fam(w, fname, type, unit, help);                                       \
        for (int i = 0; i < topo->nswitches; i++) {                            \
            place_an_load_t l;                                                 \
            place_an_load(m->pl, i, &l);                                       \
            esc(name, sizeof(name), topo->sw[i].name);                         \
            snprintf(lab, sizeof(lab), "an=\"%s\"", name);                     \
            sample(w, fname, type, lab, (uint64_t)(expr));                     \
        }                                                                      \
    } while (0)
    AN_LOAD("incoll_an_groups", M_GAUGE, "",
            "Groups the manager placed on the AN.", l.groups);
    AN_LOAD("incoll_an_groups_max", M_GAUGE, "", "Groups the AN offers.",
            l.caps.max_groups);
    AN_LOAD("incoll_an_slots", M_GAUGE, "", "Slots held by the AN's groups.",
            l.slots);
    AN_LOAD("incoll_an_slots_max", M_GAUGE, "", "Slots the AN offers.",
            l.caps.slots);
    AN_LOAD("incoll_an_buffer_bytes", M_GAUGE, "bytes",
            "Reduction buffer bytes held by the AN's groups.", l.buffer_bytes);
    AN_LOAD("incoll_an_buffer_max_bytes", M_GAUGE, "bytes",
            "Reduction buffer bytes the AN offers.", l.caps.buffer_bytes);
    AN_LOAD("incoll_an_registrations", M_COUNTER, "",
            "Times the AN registered with this manager.",
            m->an[i].registrations);
    AN_LOAD("incoll_an_failures", M_COUNTER, "",
            "Times this manager declared the AN down.", m->an[i].failures);
#undef AN_LOAD
    /* The AN's own counters, from its last heartbeat (up ANs only). */
    for (size_t f = 0; f < sizeof(an_fams) / sizeof(an_fams[0]); f++) {
        fam(w, an_fams[f].family, M_COUNTER, an_fams[f].unit, an_fams[f].help);
        for (int i = 0; i < topo->nswitches; i++) {
            const an_state_t *a = &m->an[i];
            if (a->conn == NULL || a->counters[0] == '\0')
                continue;
            esc(name, sizeof(name), topo->sw[i].name);
            for (size_t k = 0; k < sizeof(an_ctrs) / sizeof(an_ctrs[0]); k++) {
                uint64_t v;
                if (strcmp(an_ctrs[k].family, an_fams[f].family) != 0 ||
                    an_value(a->counters, an_ctrs[k].key, &v) != 0)
                    continue;
                snprintf(lab, sizeof(lab), "an=\"%s\"%s%s", name,
                         an_ctrs[k].label[0] ? "," : "", an_ctrs[k].label);
                sample(w, an_fams[f].family, M_COUNTER, lab, v);
            }
        }
    }
    fam(w, "incoll_an_stream_pool_bytes", M_GAUGE, "bytes",
        "Bytes of the AN's streaming pool.");
    for (int i = 0; i < topo->nswitches; i++) {
        uint64_t v;
        if (m->an[i].conn == NULL ||
            an_value(m->an[i].counters, "stream_pool", &v) != 0)
            continue;
        esc(name, sizeof(name), topo->sw[i].name);
        snprintf(lab, sizeof(lab), "an=\"%s\"", name);
        sample(w, "incoll_an_stream_pool_bytes", M_GAUGE, lab, v);
    }
    /* Counters a newer AN reports that this manager has no name for. */
    fam(w, "incoll_an_other", M_COUNTER, "",
        "Counters of the AN this manager does not know, by name.");
    for (int i = 0; i < topo->nswitches; i++) {
        const char *p = m->an[i].counters;
        if (m->an[i].conn == NULL)
            continue;
        esc(name, sizeof(name), topo->sw[i].name);
        while (p && *p) {
            const char *eq = strchr(p, '='), *sp = strchr(p, ' ');
            char key[64], *end;
            unsigned long long v;
            size_t kl;
            if (eq == NULL || (sp && sp < eq))
                break;
            kl = (size_t)(eq - p);
            v = strtoull(eq + 1, &end, 10);
            if (kl < sizeof(key) && end != eq + 1 && !known_an_key(p, kl)) {
                memcpy(key, p, kl);
                key[kl] = '\0';
                if (!an_not_counter(key)) {
                    char ek[128];
                    esc(ek, sizeof(ek), key);
                    snprintf(lab, sizeof(lab), "an=\"%s\",counter=\"%s\"", name,
                             ek);
                    sample(w, "incoll_an_other", M_COUNTER, lab, v);
                }
            }
            p = sp ? sp + 1 : NULL;
        }
    }
}

/*
 * Where collectives ran, per job (group 0) or per group:
 * incoll_job_operations_total{job,where="network|software"} and
 * incoll_job_fallbacks_total{job,reason}, or the incoll_group_ ones with
 * group and job. A series goes with its job (or group).
 */
static void usage_metrics(mw_t *w, const mgr_core_t *m, int groups)
{
    const char *ops =
        groups ? "incoll_group_operations" : "incoll_job_operations";
    const char *fbs =
        groups ? "incoll_group_fallbacks" : "incoll_job_fallbacks";
    int n = groups ? place_group_count(m->pl) : m->njobs;
    const job_t *j = m->jobs;
    char lab[640], name[160], id[64];

    for (int pass = 0; pass < 2; pass++) {
        fam(w, pass ? fbs : ops, M_COUNTER, "",
            pass ? "Collectives that ran in software (on the hosts), by "
                   "reason, as the job's processes reported."
                 : "Collectives that ran in the network or in software "
                   "(on the hosts), as the job's processes reported.");
        j = m->jobs;
        for (int i = 0; i < n; i++) {
            const usage_ctr_t *u;
            const char *jname;
            if (groups) {
                const place_group_t *g = place_group_at(m->pl, i);
                const mgroup_t *mg = g->user;
                u = &mg->usage;
                jname = mg->job->name;
                snprintf(id, sizeof(id), "group=\"%u\",", g->id);
            } else {
                if (j == NULL)
                    break;
                u = &j->usage;
                jname = j->name;
                id[0] = '\0';
                j = j->next;
            }
            esc(name, sizeof(name), jname);
            if (pass == 0) {
                snprintf(lab, sizeof(lab), "%sjob=\"%s\",where=\"network\"", id,
                         name);
                sample(w, ops, M_COUNTER, lab, u->net);
                snprintf(lab, sizeof(lab), "%sjob=\"%s\",where=\"software\"",
                         id, name);
                sample(w, ops, M_COUNTER, lab, u->sw);
                continue;
            }
            for (int k = 0; k < MGR_FB_COUNT; k++) {
                snprintf(lab, sizeof(lab), "%sjob=\"%s\",reason=\"%s\"", id,
                         name, mgr_fb_name(k));
                sample(w, fbs, M_COUNTER, lab, u->fb[k]);
            }
        }
    }
}

static void job_metrics(mw_t *w, const mgr_core_t *m)
{
    char lab[512], name[160];
    static const char *const states[] = {"up", "lost", "adopted", "left",
                                         "dead"};

    fam(w, "incoll_job_ranks", M_GAUGE, "",
        "Ranks of the job the manager knows, by state.");
    for (const job_t *j = m->jobs; j; j = j->next) {
        int v[5] = {j->nstate[R_UP], j->nstate[R_LOST], j->nstate[R_ADOPTED],
                    j->nstate[R_LEFT] + j->nleft, j->nstate[R_DEAD] + j->ndead};
        esc(name, sizeof(name), j->name);
        for (int k = 0; k < 5; k++) {
            snprintf(lab, sizeof(lab), "job=\"%s\",state=\"%s\"", name,
                     states[k]);
            sample(w, "incoll_job_ranks", M_GAUGE, lab, (uint64_t)v[k]);
        }
    }
#define JOB_ONE(fname, type, unit, help, expr)                                 \
    do {                                                                       \
        fam(w, fname, type, unit, help);                                       \
        for (const job_t *j = m->jobs; j; j = j->next) {                       \
            esc(name, sizeof(name), j->name);                                  \
            snprintf(lab, sizeof(lab), "job=\"%s\"", name);                    \
            sample(w, fname, type, lab, (uint64_t)(expr));                     \
        }                                                                      \
    } while (0)
    JOB_ONE("incoll_job_size", M_GAUGE, "", "Ranks the job declared.", j->size);
    JOB_ONE("incoll_job_groups", M_GAUGE, "", "Groups the job holds.",
            j->ngroups);
    JOB_ONE("incoll_job_requests", M_GAUGE, "",
            "Group requests of the job waiting for members.", j->npending);
    JOB_ONE("incoll_job_state_bytes", M_GAUGE, "bytes",
            "Bytes of the manager's state charged to the job.", j->mem);
    JOB_ONE("incoll_job_quota_groups", M_GAUGE, "",
            "Groups per AN the job's quota allows; 0: the default share.",
            mgr_job_quota((job_t *)j)->groups);
    JOB_ONE("incoll_job_quota_slots", M_GAUGE, "",
            "Slots per AN the job's quota allows; 0: the default share.",
            mgr_job_quota((job_t *)j)->slots);
    JOB_ONE("incoll_job_groups_made", M_COUNTER, "", "Groups made for the job.",
            j->ctr.groups_made);
    JOB_ONE("incoll_job_groups_failed", M_COUNTER, "",
            "Groups of the job torn down by a failure (an AN's).",
            j->ctr.groups_failed);
    JOB_ONE("incoll_job_groups_reclaimed", M_COUNTER, "",
            "Groups of the job reclaimed from a rank that was gone.",
            j->ctr.groups_reclaimed);
    JOB_ONE("incoll_job_groups_released", M_COUNTER, "",
            "Groups of the job released (freed, rebuilt or ended).",
            j->ctr.groups_released);
    for (int k = 0; k < MGR_PC_COUNT; k++)
        JOB_ONE(mgr_pc_metric(k), M_COUNTER, "", mgr_pc_help(k), j->pc[k]);
#undef JOB_ONE
    usage_metrics(w, m, 0);
    fam(w, "incoll_job_groups_refused", M_COUNTER, "",
        "Group requests of the job refused, by reason: its quota, the "
        "manager's state budget, or the fabric (resources, failures).");
    for (const job_t *j = m->jobs; j; j = j->next) {
        uint64_t q = j->ctr.quota_refused, b = j->ctr.budget_refused;
        uint64_t all = j->ctr.groups_refused;
        uint64_t other = all > q + b ? all - q - b : 0;
        esc(name, sizeof(name), j->name);
        snprintf(lab, sizeof(lab), "job=\"%s\",reason=\"quota\"", name);
        sample(w, "incoll_job_groups_refused", M_COUNTER, lab, q);
        snprintf(lab, sizeof(lab), "job=\"%s\",reason=\"budget\"", name);
        sample(w, "incoll_job_groups_refused", M_COUNTER, lab, b);
        snprintf(lab, sizeof(lab), "job=\"%s\",reason=\"fabric\"", name);
        sample(w, "incoll_job_groups_refused", M_COUNTER, lab, other);
    }
}

static void group_metrics(mw_t *w, const mgr_core_t *m)
{
    char lab[640], job[160];
    const topo_t *topo = m->topo;

    usage_metrics(w, m, 1);

    fam(w, "incoll_group_members", M_GAUGE, "",
        "Members of a group, with its job, communicator, tree and state.");
    for (int i = 0; i < place_group_count(m->pl); i++) {
        const place_group_t *g = place_group_at(m->pl, i);
        const mgroup_t *mg = g->user;
        char tree[128];
        esc(job, sizeof(job), mg->job->name);
        esc(tree, sizeof(tree), topo->sw[topo->trees[g->tree].root].name);
        snprintf(lab, sizeof(lab),
                 "group=\"%u\",job=\"%s\",comm=\"%016" PRIx64
                 "\",tree=\"%s\",state=\"%s\"",
                 g->id, job, mg->comm, tree,
                 mg->active ? (mg->adopted ? "adopted" : "active") : "adding");
        sample(w, "incoll_group_members", M_GAUGE, lab, (uint64_t)g->nmembers);
    }
#define GROUP_ONE(fname, help, expr)                                           \
    do {                                                                       \
        fam(w, fname, M_GAUGE, "", help);                                      \
        for (int i = 0; i < place_group_count(m->pl); i++) {                   \
            const place_group_t *g = place_group_at(m->pl, i);                 \
            const mgroup_t *mg = g->user;                                      \
            esc(job, sizeof(job), mg->job->name);                              \
            snprintf(lab, sizeof(lab), "group=\"%u\",job=\"%s\"", g->id, job); \
            sample(w, fname, M_GAUGE, lab, (uint64_t)(expr));                  \
        }                                                                      \
    } while (0)
    GROUP_ONE("incoll_group_slots", "Slots the group holds on each of its ANs.",
              g->slots);
    GROUP_ONE("incoll_group_ans", "ANs of the group.", g->nans);
    GROUP_ONE("incoll_group_payload_bytes",
              "Payload bytes per packet of the group.", g->payload);
#undef GROUP_ONE
    fam(w, "incoll_group_age_seconds", M_GAUGE, "seconds",
        "Seconds since the group was made (or adopted).");
    for (int i = 0; i < place_group_count(m->pl); i++) {
        const place_group_t *g = place_group_at(m->pl, i);
        const mgroup_t *mg = g->user;
        esc(job, sizeof(job), mg->job->name);
        snprintf(lab, sizeof(lab), "group=\"%u\",job=\"%s\"", g->id, job);
        sample_f(w, "incoll_group_age_seconds", lab,
                 (double)(m->now - mg->made) / 1000.0);
    }
}

static void manager_metrics(mw_t *w, const mgr_core_t *m, uint64_t now)
{
    mgr_io_stats_t io = {0};
    char lab[128], listen[96];
    int up = ans_up(m);

    if (m->p.io_stats)
        m->p.io_stats(m->p.arg, &io);
    esc(listen, sizeof(listen), m->listen);
    fam(w, "incoll_manager_info", M_GAUGE, "",
        "1, with the manager's address and version.");
    snprintf(lab, sizeof(lab), "listen=\"%s\",version=\"%d.%d\"", listen,
             INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR);
    sample(w, "incoll_manager_info", M_GAUGE, lab, 1);
    fam(w, "incoll_manager_uptime_seconds", M_GAUGE, "seconds",
        "Seconds since the manager started.");
    sample_f(w, "incoll_manager_uptime_seconds", "",
             (double)(now - m->start) / 1000.0);
    fam(w, "incoll_manager_ans", M_GAUGE, "", "ANs of the topology, by state.");
    sample(w, "incoll_manager_ans", M_GAUGE, "state=\"up\"", (uint64_t)up);
    sample(w, "incoll_manager_ans", M_GAUGE, "state=\"down\"",
           (uint64_t)(m->topo->nswitches - up));
    single(w, "incoll_manager_trees", M_GAUGE, "", "Reduction trees.",
           (uint64_t)m->topo->ntrees);
    single(w, "incoll_manager_hosts", M_GAUGE, "", "Hosts of the topology.",
           (uint64_t)m->topo->nhosts);
    single(w, "incoll_manager_jobs", M_GAUGE, "", "Jobs the manager knows.",
           (uint64_t)m->njobs);
    single(w, "incoll_manager_registered_jobs", M_GAUGE, "",
           "Jobs registered by an admin (the Slurm plugin).",
           (uint64_t)m->nregs);
    single(w, "incoll_manager_groups", M_GAUGE, "", "Groups placed.",
           (uint64_t)place_group_count(m->pl));
    {
        int n = 0;
        for (const pending_t *p = m->pend; p; p = p->next)
            n++;
        single(w, "incoll_manager_requests", M_GAUGE, "",
               "Group requests waiting for members.", (uint64_t)n);
    }
    fam(w, "incoll_manager_connections", M_GAUGE, "",
        "Open connections, by whether they authenticated.");
    sample(w, "incoll_manager_connections", M_GAUGE, "state=\"authenticated\"",
           (uint64_t)(io.conns - io.conns_unauth));
    sample(w, "incoll_manager_connections", M_GAUGE,
           "state=\"unauthenticated\"", (uint64_t)io.conns_unauth);
    single(w, "incoll_manager_connections_max", M_GAUGE, "",
           "Connections the manager takes at most.", (uint64_t)io.max_conns);
    single(w, "incoll_manager_connections_accepted", M_COUNTER, "",
           "Connections accepted.", io.conns_accepted);
    fam(w, "incoll_manager_connections_closed", M_COUNTER, "",
        "Connections the manager closed to protect itself, by reason.");
    sample(w, "incoll_manager_connections_closed", M_COUNTER,
           "reason=\"evicted\"", io.conns_evicted);
    sample(w, "incoll_manager_connections_closed", M_COUNTER, "reason=\"shed\"",
           io.conns_shed);
    sample(w, "incoll_manager_connections_closed", M_COUNTER,
           "reason=\"slow_reader\"", io.conns_slow);
    sample(w, "incoll_manager_connections_closed", M_COUNTER,
           "reason=\"frame_late\"", io.frames_late);
    sample(w, "incoll_manager_connections_closed", M_COUNTER,
           "reason=\"frame_refused\"", io.frames_refused);
    sample(w, "incoll_manager_connections_closed", M_COUNTER,
           "reason=\"peer_timeout\"", io.conns_timed_out);
    single(w, "incoll_manager_auth_failures", M_COUNTER, "",
           "Handshakes that failed or timed out.", io.auth_failures);
    single(w, "incoll_manager_malformed_messages", M_COUNTER, "",
           "Messages refused as malformed.", io.malformed + m->ctr.malformed);
    single(w, "incoll_manager_rx_buffered_bytes", M_GAUGE, "bytes",
           "Bytes of partial frames buffered.", io.rx_buffered);
    single(w, "incoll_manager_tx_queued_bytes", M_GAUGE, "bytes",
           "Bytes queued to peers that did not read them yet.", io.tx_queued);
    single(w, "incoll_manager_state_bytes", M_GAUGE, "bytes",
           "Bytes of state (jobs, ranks, requests, groups) charged.", m->mem);
    single(w, "incoll_manager_state_budget_bytes", M_GAUGE, "bytes",
           "The bound on the state's bytes (0: none).", m->p.state_budget);
    single(w, "incoll_manager_groups_made", M_COUNTER, "", "Groups made.",
           m->ctr.groups_made);
    fam(w, "incoll_manager_groups_refused", M_COUNTER, "",
        "Group requests refused, by reason.");
    sample(w, "incoll_manager_groups_refused", M_COUNTER, "reason=\"quota\"",
           m->ctr.quota_refused);
    sample(w, "incoll_manager_groups_refused", M_COUNTER, "reason=\"budget\"",
           m->ctr.budget_refused);
    sample(w, "incoll_manager_groups_refused", M_COUNTER, "reason=\"fabric\"",
           m->ctr.groups_refused > m->ctr.quota_refused + m->ctr.budget_refused
               ? m->ctr.groups_refused - m->ctr.quota_refused -
                     m->ctr.budget_refused
               : 0);
    fam(w, "incoll_manager_groups_ended", M_COUNTER, "",
        "Groups torn down, by cause.");
    sample(w, "incoll_manager_groups_ended", M_COUNTER, "cause=\"failed\"",
           m->ctr.groups_failed);
    sample(w, "incoll_manager_groups_ended", M_COUNTER, "cause=\"released\"",
           m->ctr.groups_released);
    sample(w, "incoll_manager_groups_ended", M_COUNTER, "cause=\"reclaimed\"",
           m->ctr.groups_reclaimed);
    single(w, "incoll_manager_groups_adopted", M_COUNTER, "",
           "Groups adopted from the ANs after a restart.",
           m->ctr.groups_adopted);
    single(w, "incoll_manager_joins_refused", M_COUNTER, "",
           "Joins refused (unregistered or ended job, state budget).",
           m->ctr.joins_refused);
    single(w, "incoll_manager_jobs_registered", M_COUNTER, "",
           "Job registrations made.", m->ctr.jobs_registered);
    single(w, "incoll_manager_jobs_ended", M_COUNTER, "",
           "Jobs ended by an admin.", m->ctr.jobs_ended);
    single(w, "incoll_manager_an_failures", M_COUNTER, "",
           "Times an AN was declared down.", m->ctr.an_failures);
    single(w, "incoll_manager_usage_reports", M_COUNTER, "",
           "Reports of where collectives ran taken from the jobs.",
           m->ctr.usage_reports);
    single(w, "incoll_manager_usage_refused", M_COUNTER, "",
           "Reports of where collectives ran refused: malformed, or for "
           "another job's group.",
           m->ctr.usage_refused);
}

char *mgr_core_metrics_text(const mgr_core_t *m, uint64_t now, int om)
{
    mw_t w = {{0}, om};
    manager_metrics(&w, m, now);
    an_metrics(&w, m);
    job_metrics(&w, m);
    group_metrics(&w, m);
    if (om)
        sb_printf(&w.s, "# EOF\n");
    return w.s.buf;
}
