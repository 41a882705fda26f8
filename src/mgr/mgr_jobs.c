/*
 * The manager core's jobs: their ranks (kept sparsely), the registrations
 * an admin makes for them with their quotas, what each job holds on each
 * AN against its quota, and the state budget every job, rank record,
 * request, group and registration is charged to. See mgr_state.h and
 * docs/manager.md ("Jobs and quotas", "Limits on clients").
 */
#include "mgr/mgr_state.h"

#include "common/hashtab.h"
#include "common/log.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RANK_TAB_MIN 16u

const char *const mgr_rank_state_names[R_NSTATES] = {"none", "up",      "lost",
                                                     "left", "adopted", "dead"};

/* ---- the state budget ---- */

static void say_mib(char *buf, size_t len, uint64_t bytes)
{
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
        snprintf(buf, len, "%" PRIu64 " MiB", bytes >> 20);
    else
        snprintf(buf, len, "%" PRIu64 " bytes", bytes);
}

int mgr_charge(mgr_core_t *m, job_t *job, uint64_t bytes, char *why,
               size_t whylen)
{
    char b1[48], b2[48];
    if (m->p.state_budget && m->mem + bytes > m->p.state_budget) {
        say_mib(b1, sizeof(b1), m->mem);
        say_mib(b2, sizeof(b2), m->p.state_budget);
        snprintf(why, whylen,
                 "the manager's state is full (%s of its %s, "
                 "INCOLL_MGR_STATE_BUDGET)",
                 b1, b2);
        return -1;
    }
    if (job && m->p.job_state_budget &&
        job->mem + bytes > m->p.job_state_budget) {
        say_mib(b1, sizeof(b1), job->mem);
        say_mib(b2, sizeof(b2), m->p.job_state_budget);
        snprintf(why, whylen,
                 "job %s's state is full (%s of its %s, "
                 "INCOLL_MGR_JOB_STATE_BUDGET)",
                 job->name, b1, b2);
        return -1;
    }
    m->mem += bytes;
    if (job)
        job->mem += bytes;
    return 0;
}

void mgr_uncharge(mgr_core_t *m, job_t *job, uint64_t bytes)
{
    m->mem -= bytes <= m->mem ? bytes : m->mem;
    if (job)
        job->mem -= bytes <= job->mem ? bytes : job->mem;
}

/* ---- quotas ---- */

static int quota_init(quota_t *q, int nsw)
{
    memset(q, 0, sizeof(*q));
    q->g_used = calloc((size_t)nsw + 1, sizeof(*q->g_used));
    q->s_used = calloc((size_t)nsw + 1, sizeof(*q->s_used));
    if (q->g_used == NULL || q->s_used == NULL) {
        free(q->g_used);
        free(q->s_used);
        return -1;
    }
    return 0;
}

static void quota_fini(quota_t *q)
{
    free(q->g_used);
    free(q->s_used);
    q->g_used = q->s_used = NULL;
}

/* The registration whose quota rg's jobs use. */
static reg_t *quota_owner(reg_t *rg)
{
    return rg->own_quota || rg->parent == NULL ? rg : rg->parent;
}

quota_t *mgr_job_quota(job_t *job)
{
    return job->reg ? &quota_owner(job->reg)->q : &job->own;
}

/* A limit of a quota on an AN of capacity cap: the quota's, or the share
 * of the capacity (rounded down, at least 1). */
static uint32_t limit(const mgr_core_t *m, uint32_t quota, uint32_t cap)
{
    double share = m->p.job_share;
    if (quota)
        return quota < cap ? quota : cap;
    uint32_t v;
    if (share <= 0 || share >= 1)
        return cap;
    /* At least one: an AN of one group (or slot) is not closed to all. */
    v = (uint32_t)floor(share * (double)cap);
    return v ? v : (cap ? 1 : 0);
}

void mgr_quota_left(mgr_core_t *m, const job_t *job, const quota_t *q,
                    char *who, size_t wholen)
{
    const reg_t *owner = job->reg ? quota_owner(job->reg) : NULL;
    for (int sw = 0; sw < m->topo->nswitches; sw++) {
        place_an_load_t l;
        uint32_t g, s;
        place_an_load(m->pl, sw, &l);
        g = limit(m, q->groups, l.caps.max_groups);
        s = limit(m, q->slots, l.caps.slots);
        m->q_groups_left[sw] = g > q->g_used[sw] ? g - q->g_used[sw] : 0;
        m->q_slots_left[sw] = s > q->s_used[sw] ? s - q->s_used[sw] : 0;
    }
    if (q->groups || q->slots) {
        char gs[40], ss[40];
        int other = owner && strcmp(owner->name, job->name) != 0;
        if (q->groups)
            snprintf(gs, sizeof(gs), "%u group%s", q->groups,
                     q->groups == 1 ? "" : "s");
        else
            snprintf(gs, sizeof(gs), "%.0f%% of the groups",
                     100 * m->p.job_share);
        if (q->slots)
            snprintf(ss, sizeof(ss), "%u slots", q->slots);
        else
            snprintf(ss, sizeof(ss), "%.0f%% of the slots",
                     100 * m->p.job_share);
        snprintf(who, wholen, "job %s's quota (%s, %s per an%s%s%s)", job->name,
                 gs, ss, other ? ", " : "", other ? owner->name : "",
                 other ? "'s" : "");
    } else if (m->p.job_share > 0 && m->p.job_share < 1) {
        snprintf(who, wholen,
                 "job %s's share (%.0f%% of an an, INCOLL_MGR_JOB_SHARE)",
                 job->name, 100 * m->p.job_share);
    } else {
        snprintf(who, wholen, "job %s", job->name);
    }
}

void mgr_quota_take(quota_t *q, const place_group_t *g)
{
    for (int i = 0; i < g->nans; i++) {
        q->g_used[g->ans[i].sw]++;
        q->s_used[g->ans[i].sw] += g->slots;
    }
    q->held++;
}

void mgr_quota_give(quota_t *q, const place_group_t *g)
{
    for (int i = 0; i < g->nans; i++) {
        int sw = g->ans[i].sw;
        q->g_used[sw] -= q->g_used[sw] ? 1 : 0;
        q->s_used[sw] -= q->s_used[sw] >= g->slots ? g->slots : q->s_used[sw];
    }
    q->held -= q->held ? 1 : 0;
}

/* ---- registrations ---- */

static reg_t *reg_find(const mgr_core_t *m, const char *name)
{
    for (reg_t *r = m->regs; r; r = r->next)
        if (strcmp(r->name, name) == 0)
            return r;
    return NULL;
}

/* The family of "A.B" is "A": into buf, or -1 when the name has none. */
static int family(const char *name, char *buf, size_t len)
{
    const char *dot = strrchr(name, '.');
    if (dot == NULL || dot == name || (size_t)(dot - name) >= len)
        return -1;
    memcpy(buf, name, (size_t)(dot - name));
    buf[dot - name] = '\0';
    return 0;
}

/* The registration governing a job called name: its own, else its
 * family's. */
static reg_t *reg_for(const mgr_core_t *m, const char *name)
{
    char fam[MGR_NAME_MAX];
    reg_t *r = reg_find(m, name);
    if (r == NULL && family(name, fam, sizeof(fam)) == 0)
        r = reg_find(m, fam);
    return r;
}

/* A fresh generation: the base plus the ms since the core started, and
 * always above the last one handed out (never 0). */
static uint32_t next_gen(mgr_core_t *m)
{
    uint32_t g = m->p.gen_base + (uint32_t)(m->now - m->start);
    if ((int32_t)(g - m->last_gen) <= 0)
        g = m->last_gen + 1;
    if (g == 0)
        g = 1;
    m->last_gen = g;
    return g;
}

static void reg_free(mgr_core_t *m, reg_t *r)
{
    for (reg_t **pr = &m->regs; *pr; pr = &(*pr)->next) {
        if (*pr == r) {
            *pr = r->next;
            break;
        }
    }
    for (reg_t *c = m->regs; c; c = c->next)
        if (c->parent == r)
            c->parent = NULL;
    if (r->parent)
        r->parent->nchildren--;
    for (job_t *j = m->jobs; j; j = j->next)
        if (j->reg == r)
            j->reg = NULL;
    mgr_uncharge(m, NULL, r->mem);
    quota_fini(&r->q);
    free(r);
    m->nregs--;
}

void mgr_on_job_register(mgr_core_t *m, mgr_peer_t *c, const uint8_t *body,
                         size_t len)
{
    mgr_rbuf_t rd = {body, len, 0, 0};
    char name[MGR_NAME_MAX], fam[MGR_NAME_MAX], why[256];
    uint32_t groups, slots;
    reg_t *r;
    mgr_wbuf_t w = {0};
    quota_t *q;

    mgr_r_str(&rd, name, sizeof(name));
    groups = mgr_r_u32(&rd);
    slots = mgr_r_u32(&rd);
    mgr_r_u32(&rd); /* flags, none yet */
    if (mgr_r_done(&rd) || name[0] == '\0' || slots > 65535) {
        m->ctr.malformed++;
        mgr_send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "malformed job_register");
        return;
    }
    r = reg_find(m, name);
    if (r == NULL) {
        uint64_t bytes = sizeof(*r) + 2 * ((size_t)m->topo->nswitches + 1) *
                                          sizeof(uint32_t);
        if (mgr_charge(m, NULL, bytes, why, sizeof(why)) != 0) {
            mgr_send_error(m, c, 0, INCOLL_ERR_NO_RESOURCE, "%s", why);
            return;
        }
        r = calloc(1, sizeof(*r));
        if (r == NULL || quota_init(&r->q, m->topo->nswitches) != 0) {
            free(r);
            mgr_uncharge(m, NULL, bytes);
            mgr_send_error(m, c, 0, INCOLL_ERR_NO_MEMORY, "out of memory");
            return;
        }
        snprintf(r->name, sizeof(r->name), "%s", name);
        r->mem = bytes;
        r->gen = next_gen(m);
        r->created = m->now;
        r->idle_since = m->now;
        if (family(name, fam, sizeof(fam)) == 0 &&
            (r->parent = reg_find(m, fam)) != NULL)
            r->parent->nchildren++;
        r->next = m->regs;
        m->regs = r;
        m->nregs++;
        m->ctr.jobs_registered++;
        /* Jobs that joined before and have nothing charged yet are
         * governed by it from now on. */
        for (job_t *j = m->jobs; j; j = j->next) {
            if (j->reg == NULL && j->own.held == 0 &&
                reg_for(m, j->name) == r) {
                j->reg = r;
                r->njobs++;
                r->idle_since = 0;
            }
        }
    }
    if (groups || slots || r->parent == NULL) {
        r->q.groups = groups;
        r->q.slots = slots;
        r->own_quota = groups || slots;
    }
    q = &quota_owner(r)->q;
    incoll_info("job %s registered by conn %u: generation %u, %u groups and "
                "%u slots per an (0: %.0f%% of each an)%s%s",
                r->name, c->id, r->gen, q->groups, q->slots,
                100 * (m->p.job_share > 0 ? m->p.job_share : 1),
                quota_owner(r) != r ? ", the quota of " : "",
                quota_owner(r) != r ? quota_owner(r)->name : "");
    mgr_w_u32(&w, r->gen);
    mgr_w_u32(&w, q->groups);
    mgr_w_u32(&w, q->slots);
    mgr_send_msg(m, c, MGR_JOB_REGISTER_OK, &w);
    mgr_wbuf_free(&w);
}

/* 1 when name is root or one of root's steps ("root.x"). */
static int of_family(const char *name, const char *root)
{
    size_t n = strlen(root);
    return strncmp(name, root, n) == 0 && (name[n] == '\0' || name[n] == '.');
}

void mgr_on_job_end(mgr_core_t *m, mgr_peer_t *c, const uint8_t *body,
                    size_t len)
{
    mgr_rbuf_t rd = {body, len, 0, 0};
    char name[MGR_NAME_MAX], reason[128], text[256];
    uint32_t njobs = 0, ngroups = 0;
    mgr_wbuf_t w = {0};

    mgr_r_str(&rd, name, sizeof(name));
    mgr_r_str(&rd, reason, sizeof(reason));
    if (mgr_r_done(&rd) || name[0] == '\0') {
        m->ctr.malformed++;
        mgr_send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "malformed job_end");
        return;
    }
    snprintf(text, sizeof(text), "job %s ended%s%s", name,
             reason[0] ? ": " : "", reason);
    for (job_t *j = m->jobs; j; j = j->next) {
        if (!of_family(j->name, name))
            continue;
        njobs++;
        j->ended = 1;
        ngroups += (uint32_t)mgr_job_teardown(m, j, text);
        /* Ranks whose connection was lost are not waited for any more:
         * the job is gone as soon as its live ones are. */
        for (uint32_t i = 0; i < j->cap; i++)
            if (j->tab[i].rank >= 0 &&
                (j->tab[i].state == R_LOST || j->tab[i].state == R_ADOPTED))
                mgr_rank_set_state(j, &j->tab[i], R_DEAD);
    }
    for (reg_t *r = m->regs, *next; r; r = next) {
        next = r->next;
        if (of_family(r->name, name)) {
            reg_free(m, r);
            next = m->regs; /* the list changed */
        }
    }
    m->ctr.jobs_ended++;
    incoll_info("%s (conn %u): %u jobs, %u groups released", text, c->id, njobs,
                ngroups);
    mgr_w_u32(&w, njobs);
    mgr_w_u32(&w, ngroups);
    mgr_send_msg(m, c, MGR_JOB_END_OK, &w);
    mgr_wbuf_free(&w);
}

/* ---- jobs ---- */

job_t *mgr_job_find(const mgr_core_t *m, const char *name)
{
    for (job_t *j = m->jobs; j; j = j->next)
        if (strcmp(j->name, name) == 0)
            return j;
    return NULL;
}

job_t *mgr_job_get(mgr_core_t *m, const char *name, int size, int adopted,
                   char *why, size_t whylen)
{
    job_t *j = mgr_job_find(m, name);
    reg_t *r;
    uint64_t bytes;

    if (j)
        return j;
    r = reg_for(m, name);
    if (r == NULL && m->p.registered_only && !adopted) {
        snprintf(why, whylen,
                 "job %s is not registered (this manager admits registered "
                 "jobs only, INCOLL_MGR_JOBS=registered)",
                 name);
        return NULL;
    }
    bytes =
        sizeof(*j) + 2 * ((size_t)m->topo->nswitches + 1) * sizeof(uint32_t);
    if (mgr_charge(m, NULL, bytes, why, whylen) != 0)
        return NULL;
    j = calloc(1, sizeof(*j));
    if (j == NULL || quota_init(&j->own, m->topo->nswitches) != 0) {
        free(j);
        mgr_uncharge(m, NULL, bytes);
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    snprintf(j->name, sizeof(j->name), "%s", name);
    j->size = size;
    j->mem = bytes;
    j->created = m->now;
    if (r) {
        j->reg = r;
        r->njobs++;
        r->idle_since = 0;
    }
    j->next = m->jobs;
    m->jobs = j;
    m->njobs++;
    return j;
}

int mgr_job_busy(const job_t *j)
{
    return j->nstate[R_UP] + j->nstate[R_LOST] + j->nstate[R_ADOPTED] > 0 ||
           j->ngroups > 0 || j->npending > 0;
}

static void job_free(mgr_core_t *m, job_t *j)
{
    uint64_t bytes = j->mem;
    if (j->reg && --j->reg->njobs == 0)
        j->reg->idle_since = m->now;
    quota_fini(&j->own);
    free(j->tab);
    free(j);
    mgr_uncharge(m, NULL, bytes);
    m->njobs--;
}

/* ---- ranks: a hash table on the rank number (src/common/hashtab.h) ----
 * job_t keeps the table's slots, size and count itself (tab, cap, nrec:
 * other files walk the slots); rank_tab() is the table over them. */

static uint64_t rank_hash(const void *rec, const void *arg)
{
    (void)arg;
    return (uint32_t)((const rank_t *)rec)->rank * 2654435761u;
}

static int rank_empty(const void *rec)
{
    return ((const rank_t *)rec)->rank < 0;
}

static void rank_clear(void *rec)
{
    ((rank_t *)rec)->rank = -1;
}

static int rank_eq(const void *rec, const void *key)
{
    return ((const rank_t *)rec)->rank == *(const int *)key;
}

static hashtab_t rank_tab(const job_t *j)
{
    return (hashtab_t){.slots = j->tab,
                       .esz = sizeof(rank_t),
                       .cap = j->cap,
                       .n = j->nrec,
                       .hash = rank_hash,
                       .empty = rank_empty,
                       .clear = rank_clear};
}

rank_t *mgr_rank_find(const job_t *j, int rank)
{
    hashtab_t t = rank_tab(j);
    rank_t key = {.rank = rank};
    return hashtab_find(&t, rank_hash(&key, NULL), rank_eq, &rank);
}

/* Puts rk (a record of another table, or a fresh one) into j's table,
 * which has room. */
static rank_t *rank_put(job_t *j, const rank_t *rk)
{
    hashtab_t t = rank_tab(j);
    rank_t *r = hashtab_put(&t, rk);
    j->nrec = t.n;
    return r;
}

/* Rebuilds j's table with cap entries, keeping the records keep() keeps
 * (all with NULL). Returns 0 or -1 (out of memory or budget, unchanged). */
static int rank_rebuild(mgr_core_t *m, job_t *j, uint32_t cap,
                        int (*keep)(const rank_t *), char *why, size_t whylen)
{
    rank_t *old = j->tab;
    uint32_t oldcap = j->cap;
    rank_t *tab;
    uint64_t more =
        cap > oldcap ? (uint64_t)(cap - oldcap) * sizeof(rank_t) : 0;

    if (more && mgr_charge(m, j, more, why, whylen) != 0)
        return -1;
    tab = malloc((size_t)cap * sizeof(*tab));
    if (tab == NULL) {
        mgr_uncharge(m, j, more);
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    {
        hashtab_t t = rank_tab(j);
        hashtab_swap(&t, tab, cap); /* every slot empty */
        j->tab = tab;
        j->cap = cap;
        j->nrec = 0;
    }
    for (uint32_t i = 0; i < oldcap; i++) {
        if (old[i].rank < 0)
            continue;
        if (keep == NULL || keep(&old[i])) {
            rank_put(j, &old[i]);
        } else {
            j->nstate[old[i].state]--;
            if (old[i].state == R_LEFT)
                j->nleft++;
            else
                j->ndead++;
        }
    }
    if (cap < oldcap)
        mgr_uncharge(m, j, (uint64_t)(oldcap - cap) * sizeof(rank_t));
    free(old);
    return 0;
}

rank_t *mgr_rank_get(mgr_core_t *m, job_t *j, int rank, char *why,
                     size_t whylen)
{
    rank_t *rk = mgr_rank_find(j, rank), fresh;
    if (rk)
        return rk;
    hashtab_t t = rank_tab(j);
    if (hashtab_full(&t) &&
        rank_rebuild(m, j, j->cap ? j->cap * 2 : RANK_TAB_MIN, NULL, why,
                     whylen) != 0)
        return NULL;
    memset(&fresh, 0, sizeof(fresh));
    fresh.rank = rank;
    fresh.state = R_NONE;
    fresh.host = -1;
    fresh.ep = INCOLL_EP_NONE;
    j->nstate[R_NONE]++;
    return rank_put(j, &fresh);
}

void mgr_rank_set_state(job_t *j, rank_t *rk, int state)
{
    j->nstate[rk->state]--;
    rk->state = state;
    j->nstate[state]++;
}

static int rank_keep(const rank_t *rk)
{
    return rk->state != R_LEFT && rk->state != R_DEAD;
}

void mgr_jobs_gc(mgr_core_t *m)
{
    char why[160];
    for (job_t **pj = &m->jobs; *pj;) {
        job_t *j = *pj;
        int gone = j->nstate[R_LEFT] + j->nstate[R_DEAD];
        if (gone > 0) {
            /* Left and dead ranks are only counted from now on; the table
             * shrinks to what the live ones need. */
            uint32_t keep = j->nrec - (uint32_t)gone, cap = RANK_TAB_MIN;
            while (cap < 2 * keep)
                cap *= 2;
            if (cap > j->cap)
                cap = j->cap;
            rank_rebuild(m, j, cap, rank_keep, why, sizeof(why));
        }
        if (mgr_job_busy(j)) {
            pj = &j->next;
            continue;
        }
        incoll_info("job %s: gone, nothing left of it", j->name);
        *pj = j->next;
        job_free(m, j);
    }
    for (reg_t *r = m->regs, *next; r; r = next) {
        uint64_t linger =
            m->p.job_linger_ms ? m->p.job_linger_ms : 24ull * 3600 * 1000;
        next = r->next;
        if (r->njobs == 0 && r->nchildren == 0 && r->idle_since &&
            m->now >= r->idle_since + linger) {
            incoll_info("job %s: registration forgotten after %" PRIu64
                        " ms with nothing of it",
                        r->name, m->now - r->idle_since);
            reg_free(m, r);
            next = m->regs;
        }
    }
}

void mgr_jobs_free(mgr_core_t *m)
{
    while (m->jobs) {
        job_t *j = m->jobs;
        m->jobs = j->next;
        j->reg = NULL;
        job_free(m, j);
    }
    while (m->regs)
        reg_free(m, m->regs);
}
