/*
 * Unit tests of the manager core's jobs (src/mgr/mgr_jobs.c) through the
 * in-memory control network of mgrnet.h: the default share of an AN one
 * job may hold, registered quotas (a job's own and its steps'), an admin
 * ending a job, registered-only admission, the state budget, sparse
 * ranks (a job's declared size costs nothing), and the metrics text.
 */
#include "test.h"

#include "mgrnet.h"

#include "common/mgr_codec.h"

#include <stdint.h>
#include <stdio.h>

/* One leaf of two hosts under a root: a group of h0 and h1 is on l0
 * alone (pruning), so each group takes exactly one of l0's groups. */
static const char topo_leaf[] = "switch s0 level=2\n"
                                "switch l0 level=1 slots=256 groups=16\n"
                                "switch l1 level=1\n"
                                "link l0 s0\n"
                                "link l1 s0\n"
                                "host h0 leaf=l0\n"
                                "host h1 leaf=l0\n"
                                "host h2 leaf=l1\n"
                                "host h3 leaf=l1\n";

static const int pair[2] = {0, 1};

typedef struct {
    mgrnet_t *net;
    int an[3];
} fab_t;

static int fab_up(fab_t *f, const mgrnet_cfg_t *cfg)
{
    f->net = mgrnet_create(topo_leaf, cfg);
    CHECK(f->net != NULL);
    f->an[0] = mgrnet_an_start(f->net, "s0");
    f->an[1] = mgrnet_an_start(f->net, "l0");
    f->an[2] = mgrnet_an_start(f->net, "l1");
    mgrnet_run(f->net, 20);
    return 0;
}

static mgrnet_host_view_t view(fab_t *f, int h)
{
    mgrnet_host_view_t v;
    mgrnet_host_view(f->net, h, &v);
    return v;
}

static mgr_core_counts_t counts(fab_t *f)
{
    mgr_core_counts_t c;
    mgr_core_counts(mgrnet_core(f->net), &c);
    return c;
}

/* Two ranks of job on h0 and h1, joined; their indexes in h[2]. */
static int job_pair(fab_t *f, const char *job, int h[2])
{
    h[0] = mgrnet_host_add(f->net, job, 0, 2, "h0");
    h[1] = mgrnet_host_add(f->net, job, 1, 2, "h1");
    mgrnet_host_join(f->net, h[0]);
    mgrnet_host_join(f->net, h[1]);
    mgrnet_run(f->net, 10);
    return view(f, h[0]).joined && view(f, h[1]).joined ? 0 : -1;
}

/* Both ranks ask for comm's group with slots; 0 when both got one. */
static int ask(fab_t *f, const int h[2], uint64_t comm, uint32_t slots)
{
    for (int i = 0; i < 2; i++)
        mgrnet_host_request_slots(f->net, h[i], comm, 0, pair, 2, slots);
    mgrnet_run(f->net, 20);
    return view(f, h[0]).answered && view(f, h[0]).status == INCOLL_OK &&
                   view(f, h[1]).status == INCOLL_OK
               ? 0
               : -1;
}

/* The value of key on the first line of text starting with prefix. */
static long long stat_val(const char *text, const char *prefix, const char *key)
{
    char k[64];
    const char *line = strstr(text, prefix), *p, *end;
    if (line == NULL)
        return -1;
    end = strchr(line, '\n');
    snprintf(k, sizeof(k), " %s=", key);
    p = strstr(line, k);
    if (p == NULL || (end && p > end))
        return -1;
    return strtoll(p + strlen(k), NULL, 10);
}

/* Without a quota, one job holds at most the share of an AN: its ninth
 * group of 16 slots on l0 (256 slots, 16 groups, share 0.5: 8 groups and
 * 128 slots) is refused with the reason, and another job still gets
 * groups there. Before quotas the first job took l0 whole. */
TEST(mgr_jobs_default_share, TEST_UNIT)
{
    fab_t f;
    mgrnet_cfg_t cfg = {.job_share = 0.5};
    int a[2], b[2], made = 0;
    mgrnet_host_view_t v;

    CHECK(fab_up(&f, &cfg) == 0);
    CHECK(job_pair(&f, "hog", a) == 0);
    for (uint64_t c = 1; c <= 16; c++)
        made += ask(&f, a, c, 16) == 0;
    CHECK_EQ_INT(made, 8);
    v = view(&f, a[0]);
    CHECK_MSG(strcmp(v.reason, "over job hog's share (50% of an an, "
                               "INCOLL_MGR_JOB_SHARE): no group left on an "
                               "l0") == 0,
              "%s", v.reason);
    CHECK_EQ_INT(counts(&f).quota_refused, 8);
    CHECK(job_pair(&f, "next", b) == 0);
    CHECK_MSG(ask(&f, b, 1, 16) == 0, "%s", view(&f, b[0]).reason);
    mgrnet_destroy(f.net);
    return TEST_PASSED;
}

/* A registered quota: 2 groups and 24 slots per AN. The first group asks
 * for 16 slots and gets them, the second asks for 16 and gets the 8 left,
 * the third is refused naming the quota; the job's steps ("q1.0") share
 * it; the answer to the admin names the generation and the quota. */
TEST(mgr_jobs_registered_quota, TEST_UNIT)
{
    fab_t f;
    mgrnet_cfg_t cfg = {.job_share = 0.5};
    int adm, a[2], s[2];
    mgrnet_host_view_t v;

    CHECK(fab_up(&f, &cfg) == 0);
    adm = mgrnet_admin_add(f.net);
    mgrnet_admin_register(f.net, adm, "q1", 2, 24);
    mgrnet_run(f.net, 10);
    v = view(&f, adm);
    CHECK_EQ_INT(v.reg_ok, 1);
    CHECK_EQ_INT(v.reg_groups, 2);
    CHECK_EQ_INT(v.reg_slots, 24);
    CHECK(v.reg_gen != 0);
    /* A step asks for its own generation and shares q1's quota. */
    mgrnet_admin_register(f.net, adm, "q1.0", 0, 0);
    mgrnet_run(f.net, 10);
    v = view(&f, adm);
    CHECK_EQ_INT(v.reg_ok, 2);
    CHECK_EQ_INT(v.reg_groups, 2);
    CHECK(v.reg_gen > 0);
    CHECK(job_pair(&f, "q1.0", s) == 0);
    CHECK(job_pair(&f, "q1", a) == 0);
    CHECK(ask(&f, a, 1, 16) == 0);
    CHECK(ask(&f, s, 2, 16) == 0);
    CHECK_EQ_INT(view(&f, s[0]).status, INCOLL_OK);
    CHECK(ask(&f, a, 3, 8) != 0);
    v = view(&f, a[0]);
    CHECK_MSG(strcmp(v.reason, "over job q1's quota (2 groups, 24 slots per "
                               "an): no group left on an l0") == 0,
              "%s", v.reason);
    CHECK_EQ_INT(counts(&f).quota_refused, 1);
    /* Registering again returns the same generation. */
    {
        uint32_t gen = view(&f, adm).reg_gen;
        mgrnet_admin_register(f.net, adm, "q1.0", 0, 0);
        mgrnet_run(f.net, 10);
        CHECK_EQ_INT(view(&f, adm).reg_gen, gen);
    }
    mgrnet_destroy(f.net);
    return TEST_PASSED;
}

/* An admin ends a job: its groups (and its steps') are torn down at once,
 * the members hear why, the registration is gone, joins are refused while
 * the job's processes linger, and nothing of it is left. */
TEST(mgr_jobs_end, TEST_UNIT)
{
    fab_t f;
    mgrnet_cfg_t cfg = {0};
    int adm, a[2], late;
    mgrnet_host_view_t v;

    CHECK(fab_up(&f, &cfg) == 0);
    adm = mgrnet_admin_add(f.net);
    mgrnet_admin_register(f.net, adm, "e1", 0, 0);
    mgrnet_run(f.net, 10);
    CHECK(job_pair(&f, "e1.3", a) == 0);
    CHECK(ask(&f, a, 1, 8) == 0);
    CHECK(ask(&f, a, 2, 8) == 0);
    CHECK_EQ_INT(counts(&f).groups, 2);
    mgrnet_admin_end(f.net, adm, "e1");
    mgrnet_run(f.net, 20);
    v = view(&f, adm);
    CHECK_EQ_INT(v.end_ok, 1);
    CHECK_EQ_INT(v.end_jobs, 1);
    CHECK_EQ_INT(v.end_groups, 2);
    CHECK_EQ_INT(counts(&f).groups, 0);
    CHECK_EQ_INT(counts(&f).registrations, 0);
    v = view(&f, a[1]);
    CHECK_EQ_INT(v.failed, 2);
    CHECK_MSG(strstr(v.failed_reason, "job e1 ended"), "%s", v.failed_reason);
    CHECK(!mgrnet_an_holds(f.net, f.an[1], view(&f, a[0]).group));
    /* A late rank of the ended job is refused; a new request too. */
    late = mgrnet_host_add(f.net, "e1.3", 1, 2, "h1");
    mgrnet_host_join(f.net, late);
    mgrnet_run(f.net, 10);
    v = view(&f, late);
    CHECK(!v.joined);
    CHECK_MSG(strstr(v.error, "job e1.3 has ended"), "%s", v.error);
    CHECK(ask(&f, a, 3, 8) != 0);
    /* Once its processes go, nothing is left. */
    mgrnet_host_bye(f.net, a[0]);
    mgrnet_host_bye(f.net, a[1]);
    mgrnet_run(f.net, 300);
    CHECK_EQ_INT(counts(&f).jobs, 0);
    CHECK_EQ_INT(counts(&f).state_bytes, 0);
    mgrnet_destroy(f.net);
    return TEST_PASSED;
}

/* INCOLL_MGR_JOBS=registered: an unregistered job is refused with the
 * reason, a registered one (or its step) joins; a registration nothing
 * uses is forgotten after the linger time. */
TEST(mgr_jobs_registered_only, TEST_UNIT)
{
    fab_t f;
    mgrnet_cfg_t cfg = {.registered_only = 1, .job_linger_ms = 5000};
    int adm, x, a[2];
    mgrnet_host_view_t v;

    CHECK(fab_up(&f, &cfg) == 0);
    x = mgrnet_host_add(f.net, "stranger", 0, 2, "h0");
    mgrnet_host_join(f.net, x);
    mgrnet_run(f.net, 10);
    v = view(&f, x);
    CHECK(!v.joined);
    CHECK_MSG(strstr(v.error, "job stranger is not registered"), "%s", v.error);
    adm = mgrnet_admin_add(f.net);
    mgrnet_admin_register(f.net, adm, "r1", 0, 0);
    mgrnet_admin_register(f.net, adm, "idle", 0, 0);
    mgrnet_run(f.net, 10);
    CHECK(job_pair(&f, "r1.0", a) == 0);
    CHECK(ask(&f, a, 1, 8) == 0);
    CHECK_EQ_INT(counts(&f).registrations, 2);
    mgrnet_run(f.net, 6000);
    /* "idle" lingered too long; r1 governs a live job. */
    CHECK_EQ_INT(counts(&f).registrations, 1);
    mgrnet_destroy(f.net);
    return TEST_PASSED;
}

/* A client with the secret declares 300 jobs of 2^18 ranks (one joins of
 * each) and asks for groups of 2^18 members: the ranks cost nothing until
 * they join, the requests are charged to the budgets and refused beyond
 * them with the reason, and everything is given back when they go. */
TEST(mgr_jobs_state_budget, TEST_UNIT)
{
    fab_t f;
    mgrnet_cfg_t cfg = {.state_budget = 16u << 20,
                        .job_state_budget = 8u << 20};
    int h[300], refused = 0;
    mgr_wbuf_t mem = {0}, w = {0};
    mgr_group_req_t rq = {0};
    mgr_core_counts_t c;

    CHECK(fab_up(&f, &cfg) == 0);
    for (int i = 0; i < 300; i++) {
        char job[32];
        snprintf(job, sizeof(job), "big%d", i);
        h[i] = mgrnet_host_add(f.net, job, 0, MGR_MAX_MEMBERS, "h0");
        mgrnet_host_join(f.net, h[i]);
    }
    mgrnet_run(f.net, 10);
    c = counts(&f);
    CHECK_EQ_INT(c.jobs, 300);
    CHECK_MSG(c.state_bytes < 300 * 4096, "%llu bytes for 300 jobs",
              (unsigned long long)c.state_bytes);
    /* Requests of 2^18 members: about 6 MiB each. */
    for (uint32_t i = 0; i < MGR_MAX_MEMBERS; i++)
        mgr_w_u32(&mem, i);
    rq.nmembers = MGR_MAX_MEMBERS;
    rq.members = mem.buf;
    /* A second request of one job goes over the job's budget. */
    for (uint64_t comm = 7; comm <= 8; comm++) {
        rq.req = 1;
        rq.comm = comm;
        w.len = 0;
        mgr_enc_group_req(&w, &rq);
        mgrnet_host_send_raw(f.net, h[0], MGR_GROUP_REQ, w.buf, w.len);
        mgrnet_run(f.net, 5);
    }
    CHECK_EQ_INT(view(&f, h[0]).errors, 1);
    CHECK_MSG(strstr(view(&f, h[0]).error, "job big0's state is full") &&
                  strstr(view(&f, h[0]).error, "INCOLL_MGR_JOB_STATE_BUDGET"),
              "%s", view(&f, h[0]).error);
    /* Other jobs' go over the manager's. */
    for (int i = 1; i < 8; i++) {
        mgrnet_host_view_t v;
        rq.req = 1;
        rq.comm = 7;
        w.len = 0;
        mgr_enc_group_req(&w, &rq);
        mgrnet_host_send_raw(f.net, h[i], MGR_GROUP_REQ, w.buf, w.len);
        mgrnet_run(f.net, 5);
        v = view(&f, h[i]);
        if (v.errors) {
            refused++;
            CHECK_MSG(strstr(v.error, "the manager's state is full") &&
                          strstr(v.error, "INCOLL_MGR_STATE_BUDGET"),
                      "%s", v.error);
        }
    }
    mgr_wbuf_free(&w);
    mgr_wbuf_free(&mem);
    c = counts(&f);
    CHECK_MSG(refused >= 6, "%d refused", refused);
    CHECK(c.requests == 2);
    CHECK(c.state_bytes <= cfg.state_budget);
    CHECK(c.budget_refused >= 7);
    for (int i = 0; i < 300; i++)
        mgrnet_host_bye(f.net, h[i]);
    mgrnet_run(f.net, 500);
    c = counts(&f);
    CHECK_EQ_INT(c.jobs, 0);
    CHECK_EQ_INT(c.requests, 0);
    CHECK_EQ_INT(c.state_bytes, 0);
    mgrnet_destroy(f.net);
    return TEST_PASSED;
}

/* Ranks that come and go in a job that lives on do not pile up: left
 * ranks are counted, not kept. */
TEST(mgr_jobs_ranks_do_not_pile_up, TEST_UNIT)
{
    fab_t f;
    mgrnet_cfg_t cfg = {0};
    int keep, h[20], adm;
    uint64_t before;
    const char *text;

    CHECK(fab_up(&f, &cfg) == 0);
    keep = mgrnet_host_add(f.net, "churn", 0, MGR_MAX_MEMBERS, "h0");
    mgrnet_host_join(f.net, keep);
    for (int i = 0; i < 20; i++)
        h[i] = mgrnet_host_add(f.net, "churn", 1, MGR_MAX_MEMBERS, "h1");
    mgrnet_run(f.net, 200);
    before = counts(&f).state_bytes;
    for (int r = 1; r <= 2000; r += 20) {
        for (int i = 0; i < 20; i++) {
            mgrnet_host_set_rank(f.net, h[i], r + i);
            mgrnet_host_join(f.net, h[i]);
        }
        mgrnet_run(f.net, 3);
        for (int i = 0; i < 20; i++)
            mgrnet_host_bye(f.net, h[i]);
        mgrnet_run(f.net, 100);
    }
    mgrnet_run(f.net, 200);
    CHECK_MSG(
        counts(&f).state_bytes <= before + 1024, "%llu bytes, %llu before",
        (unsigned long long)counts(&f).state_bytes, (unsigned long long)before);
    adm = mgrnet_admin_add(f.net);
    mgrnet_admin_stat(f.net, adm, 0);
    mgrnet_run(f.net, 5);
    text = mgrnet_stat_text(f.net);
    CHECK_MSG(stat_val(text, "job name=churn", "left") == 2000, "%s", text);
    CHECK_EQ_INT(stat_val(text, "job name=churn", "up"), 1);
    mgrnet_destroy(f.net);
    return TEST_PASSED;
}

/* The metrics of a job with a group and a refusal, in both formats: the
 * same samples, OpenMetrics with its counter families named without
 * _total, # UNIT and # EOF; no key in either. */
TEST(mgr_jobs_metrics_text, TEST_UNIT)
{
    fab_t f;
    mgrnet_cfg_t cfg = {.job_share = 0.5};
    int adm, a[2];
    char *om, *pr;

    CHECK(fab_up(&f, &cfg) == 0);
    adm = mgrnet_admin_add(f.net);
    mgrnet_admin_register(f.net, adm, "m1", 1, 16);
    mgrnet_run(f.net, 10);
    CHECK(job_pair(&f, "m1", a) == 0);
    CHECK(ask(&f, a, 1, 16) == 0);
    CHECK(ask(&f, a, 2, 16) != 0);
    om = mgr_core_metrics_text(mgrnet_core(f.net), mgrnet_now(f.net), 1);
    pr = mgr_core_metrics_text(mgrnet_core(f.net), mgrnet_now(f.net), 0);
    CHECK(om && pr);
    CHECK(strstr(om, "# TYPE incoll_job_groups_refused counter\n"));
    CHECK(strstr(pr, "# TYPE incoll_job_groups_refused_total counter\n"));
    CHECK(strstr(om, "incoll_job_groups_refused_total{job=\"m1\","
                     "reason=\"quota\"} 1\n"));
    CHECK(strstr(pr, "incoll_job_groups_refused_total{job=\"m1\","
                     "reason=\"quota\"} 1\n"));
    CHECK(strstr(om, "incoll_job_groups{job=\"m1\"} 1\n"));
    CHECK(strstr(om, "incoll_job_quota_slots{job=\"m1\"} 16\n"));
    CHECK(strstr(om, "incoll_an_up{an=\"l0\",level=\"1\"} 1\n"));
    CHECK(strstr(om, "incoll_an_slots{an=\"l0\"} 16\n"));
    CHECK(strstr(om, "# UNIT incoll_an_buffer_bytes bytes\n"));
    CHECK(strstr(pr, "# UNIT") == NULL);
    CHECK(strstr(om, "incoll_group_members{group=\""));
    CHECK(strcmp(om + strlen(om) - 6, "# EOF\n") == 0);
    CHECK(strstr(pr, "# EOF") == NULL);
    CHECK(strstr(om, "key") == NULL && strstr(pr, "key") == NULL);
    /* Same samples: every sample line of one is a line of the other. */
    for (const char *p = pr; *p;) {
        const char *nl = strchr(p, '\n');
        char line[512];
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n < sizeof(line) && p[0] != '#') {
            memcpy(line, p, n);
            line[n] = '\n';
            line[n + 1] = '\0';
            if (strncmp(line, "incoll_manager_uptime_seconds", 29) != 0 &&
                strncmp(line, "incoll_group_age_seconds", 24) != 0)
                CHECK_MSG(strstr(om, line), "%s", line);
        }
        p = nl ? nl + 1 : p + n;
    }
    free(om);
    free(pr);
    mgrnet_destroy(f.net);
    return TEST_PASSED;
}
