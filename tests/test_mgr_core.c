/*
 * Unit tests of the manager's state machine (src/mgr/mgr_core.c), driven
 * through the in-memory control network and virtual clock of mgrnet.h:
 * a group's life (request, placement, acknowledgement, answer, release),
 * heartbeat loss, AN death and restart, job death with and without a
 * goodbye, adoption after a manager restart (with and without the hosts
 * and the ANs coming back), tombstones, request timeouts, generations and
 * refusals. Deterministic: the clock is virtual and so are the delays.
 */
#include "test.h"

#include "mgrnet.h"

#include <stdint.h>

/* A root over two leaves of two hosts each. */
static const char topo2x2[] = "switch s0 level=2\n"
                              "switch l0 level=1\n"
                              "switch l1 level=1\n"
                              "link l0 s0\n"
                              "link l1 s0\n"
                              "host h0 leaf=l0\n"
                              "host h1 leaf=l0\n"
                              "host h2 leaf=l1\n"
                              "host h3 leaf=l1\n";

#define COMM 0x77ull
#define HB 200

static const int all4[4] = {0, 1, 2, 3};

typedef struct {
    mgrnet_t *net;
    int s0, l0, l1;
    int h[4];
    uint32_t group;
} fab_t;

static mgr_core_counts_t counts(fab_t *f)
{
    mgr_core_counts_t c;
    mgr_core_counts(mgrnet_core(f->net), &c);
    return c;
}

static mgrnet_host_view_t host(fab_t *f, int i)
{
    mgrnet_host_view_t v;
    mgrnet_host_view(f->net, f->h[i], &v);
    return v;
}

static mgrnet_an_view_t an(fab_t *f, int a)
{
    mgrnet_an_view_t v;
    mgrnet_an_view(f->net, a, &v);
    return v;
}

/* Every member asks for the group of COMM, generation gen. */
static void request_all(fab_t *f, uint32_t gen)
{
    for (int i = 0; i < 4; i++)
        mgrnet_host_request(f->net, f->h[i], COMM, gen, all4, 4);
    mgrnet_run(f->net, 20);
}

/* Checks that every member got the same group, placed on all three ANs,
 * each member at a distinct child index of its leaf; returns 0 if so. */
static int check_group(fab_t *f)
{
    mgrnet_host_view_t v0 = host(f, 0);
    CHECK_EQ_INT(v0.answered, 1);
    CHECK_MSG(v0.status == INCOLL_OK, "status %d: %s", v0.status, v0.reason);
    for (int i = 1; i < 4; i++) {
        mgrnet_host_view_t v = host(f, i);
        CHECK_EQ_INT(v.answered, 1);
        CHECK_EQ_INT(v.status, INCOLL_OK);
        CHECK_EQ_INT(v.group, v0.group);
        CHECK(v.key == v0.key);
    }
    /* Ranks 0, 1 hang off l0, ranks 2, 3 off l1. */
    CHECK(host(f, 0).an == host(f, 1).an);
    CHECK(host(f, 2).an == host(f, 3).an);
    CHECK(host(f, 0).an != host(f, 2).an);
    CHECK(host(f, 0).child != host(f, 1).child);
    CHECK(host(f, 2).child != host(f, 3).child);
    CHECK(mgrnet_an_holds(f->net, f->s0, v0.group));
    CHECK(mgrnet_an_holds(f->net, f->l0, v0.group));
    CHECK(mgrnet_an_holds(f->net, f->l1, v0.group));
    f->group = v0.group;
    return 0;
}

/* The fabric up, the job joined, and (with group) its group made. */
static int fab_up(fab_t *f, const mgrnet_cfg_t *cfg, int group)
{
    mgrnet_cfg_t def = {0};
    const char *hosts[4] = {"h0", "h1", "h2", "h3"};
    memset(f, 0, sizeof(*f));
    f->net = mgrnet_create(topo2x2, cfg ? cfg : &def);
    CHECK(f->net != NULL);
    f->s0 = mgrnet_an_start(f->net, "s0");
    f->l0 = mgrnet_an_start(f->net, "l0");
    f->l1 = mgrnet_an_start(f->net, "l1");
    CHECK(f->s0 >= 0 && f->l0 >= 0 && f->l1 >= 0);
    mgrnet_run(f->net, 10);
    CHECK_EQ_INT(counts(f).ans_up, 3);
    CHECK_EQ_INT(an(f, f->l1).registered, 1);
    for (int i = 0; i < 4; i++) {
        f->h[i] = mgrnet_host_add(f->net, "job", i, 4, hosts[i]);
        mgrnet_host_join(f->net, f->h[i]);
    }
    mgrnet_run(f->net, 10);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT(host(f, i).joined, 1);
    CHECK_EQ_INT(counts(f).jobs, 1);
    if (!group)
        return 0;
    request_all(f, 0);
    if (check_group(f) != 0)
        return -1;
    CHECK_EQ_INT(counts(f).groups, 1);
    CHECK_EQ_INT(counts(f).groups_made, 1);
    return 0;
}

/* Each check below may return early: the network is freed by the caller
 * of the body. */
#define RUN_BODY(body)                                                         \
    do {                                                                       \
        fab_t f_;                                                              \
        int ret_ = body(&f_);                                                  \
        mgrnet_destroy(f_.net);                                                \
        return ret_;                                                           \
    } while (0)

static int lifecycle_body(fab_t *f)
{
    char *stat;
    f->net = NULL;
    if (fab_up(f, NULL, 1) != 0)
        return TEST_FAILED;
    CHECK_EQ_INT(an(f, f->s0).adds, 1);
    CHECK_EQ_INT(an(f, f->l0).adds, 1);
    /* Asked again on the same connection: answered at once, same group. */
    mgrnet_host_request(f->net, f->h[2], COMM, 0, all4, 4);
    mgrnet_run(f->net, 5);
    CHECK_EQ_INT(host(f, 2).answered, 1);
    CHECK_EQ_INT(host(f, 2).group, f->group);
    CHECK_EQ_INT(an(f, f->s0).adds, 1);
    stat = mgr_core_stat_text(mgrnet_core(f->net), mgrnet_now(f->net));
    CHECK(stat != NULL);
    CHECK(strstr(stat, "ans=3 ans_up=3") != NULL);
    CHECK(strstr(stat, "groups_made=1 ") != NULL);
    CHECK(strstr(stat, "job name=job size=4 up=4 ") != NULL);
    CHECK(strstr(stat, "state=active ans=") != NULL);
    free(stat);
    /* Released by three: kept; by the fourth: removed from every AN. */
    for (int i = 0; i < 3; i++)
        mgrnet_host_release(f->net, f->h[i], COMM, f->group);
    mgrnet_run(f->net, 10);
    CHECK_EQ_INT(counts(f).groups, 1);
    CHECK(mgrnet_an_holds(f->net, f->l1, f->group));
    mgrnet_host_release(f->net, f->h[3], COMM, f->group);
    mgrnet_run(f->net, 10);
    CHECK_EQ_INT(counts(f).groups, 0);
    CHECK_EQ_INT(counts(f).groups_released, 1);
    CHECK_EQ_INT(counts(f).groups_failed, 0);
    CHECK_EQ_INT(an(f, f->s0).ngroups, 0);
    CHECK_EQ_INT(an(f, f->l0).ngroups, 0);
    CHECK_EQ_INT(an(f, f->l1).ngroups, 0);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT(host(f, i).failed, 0);
    /* Goodbyes: the job is forgotten at the next tick. */
    for (int i = 0; i < 4; i++)
        mgrnet_host_bye(f->net, f->h[i]);
    mgrnet_run(f->net, 200);
    CHECK_EQ_INT(host(f, 0).connected, 0);
    CHECK_EQ_INT(counts(f).jobs, 0);
    return TEST_PASSED;
}

TEST(mgr_core_group_lifecycle, TEST_UNIT)
{
    RUN_BODY(lifecycle_body);
}

/* Multicast addresses (docs/multicast.md): the hosts of one leaf share
 * their group's address there, another leaf has another, and a second
 * group over some of the same hosts gets addresses of its own. */
static int mcast_body(fab_t *f)
{
    static const int two[2] = {0, 2};
    incoll_ep_t a0, a1, a2, b0, b2;
    f->net = NULL;
    if (fab_up(f, NULL, 1) != 0)
        return TEST_FAILED;
    a0 = host(f, 0).mcast;
    a1 = host(f, 1).mcast;
    a2 = host(f, 2).mcast;
    CHECK(((a0 >> 16) & 0xffff0000u) == 0xefc00000u); /* 239.192/16 */
    CHECK_EQ_INT(a0 & 0xffff, 18517);
    CHECK(a0 == a1);
    CHECK(a0 != a2);
    mgrnet_host_request(f->net, f->h[0], COMM + 1, 0, two, 2);
    mgrnet_host_request(f->net, f->h[2], COMM + 1, 0, two, 2);
    mgrnet_run(f->net, 20);
    CHECK_EQ_INT(host(f, 0).status, INCOLL_OK);
    CHECK(host(f, 0).group != f->group);
    b0 = host(f, 0).mcast;
    b2 = host(f, 2).mcast;
    CHECK(((b0 >> 16) & 0xffff0000u) == 0xefc00000u);
    CHECK_MSG(b0 != a0 && b0 != a2 && b2 != a0 && b2 != a2,
              "%llx %llx %llx %llx", (unsigned long long)a0,
              (unsigned long long)a2, (unsigned long long)b0,
              (unsigned long long)b2);
    /* (the pruned tree: both hang off one AN, so one address) */
    CHECK((b0 == b2) == (host(f, 0).an == host(f, 2).an));
    return TEST_PASSED;
}

TEST(mgr_core_mcast_addresses, TEST_UNIT)
{
    RUN_BODY(mcast_body);
}

/* An AN that stops sending heartbeats (its connection open) is dead after
 * MGR_HB_MISSED of them: its groups are torn down and their members told;
 * when it comes back still holding the group, the group stays dead (the
 * other ANs of the group do not hold it), it is not adopted. */
static int hb_loss_body(fab_t *f)
{
    uint64_t t0;
    f->net = NULL;
    if (fab_up(f, NULL, 1) != 0)
        return TEST_FAILED;
    mgrnet_an_hang(f->net, f->l1, 1);
    t0 = mgrnet_now(f->net);
    /* Its last heartbeat came less than one interval before t0. */
    mgrnet_run(f->net, (MGR_HB_MISSED - 1) * HB);
    CHECK_EQ_INT(counts(f).ans_up, 3);
    CHECK_EQ_INT(counts(f).groups, 1);
    CHECK_EQ_INT(host(f, 0).failed, 0);
    mgrnet_run(f->net, 2 * HB + 100);
    CHECK_EQ_INT(counts(f).ans_up, 2);
    CHECK_EQ_INT(counts(f).groups, 0);
    CHECK_EQ_INT(counts(f).groups_failed, 1);
    CHECK(mgrnet_now(f->net) - t0 <= (MGR_HB_MISSED + 1) * HB + 200);
    for (int i = 0; i < 4; i++) {
        mgrnet_host_view_t v = host(f, i);
        CHECK_EQ_INT(v.failed, 1);
        CHECK_EQ_INT(v.failed_group, f->group);
        CHECK_MSG(strstr(v.failed_reason, "an l1 failed: heartbeats missed"),
                  "%s", v.failed_reason);
    }
    CHECK(!mgrnet_an_holds(f->net, f->s0, f->group));
    CHECK(!mgrnet_an_holds(f->net, f->l0, f->group));
    CHECK(mgrnet_an_holds(f->net, f->l1, f->group)); /* it heard nothing */
    /* It recovers, reconnects (within the manager's recover window) and
     * reports the group: told to remove it. */
    mgrnet_an_hang(f->net, f->l1, 0);
    mgrnet_run(f->net, 600);
    CHECK_EQ_INT(an(f, f->l1).registrations, 2);
    CHECK_EQ_INT(counts(f).ans_up, 3);
    CHECK(!mgrnet_an_holds(f->net, f->l1, f->group));
    CHECK_EQ_INT(counts(f).groups_adopted, 0);
    CHECK_EQ_INT(counts(f).groups, 0);
    /* A rebuild places a new group. */
    request_all(f, 1);
    if (check_group(f) != 0)
        return TEST_FAILED;
    CHECK_EQ_INT(host(f, 0).gen, 1);
    return TEST_PASSED;
}

TEST(mgr_core_heartbeat_loss, TEST_UNIT)
{
    RUN_BODY(hb_loss_body);
}

/* An AN whose connection breaks fails its groups at once; the AN comes
 * back with the group, inside the recover window, and is told to remove
 * it. An AN that restarts empty serves the rebuild. */
static int an_death_body(fab_t *f)
{
    uint32_t old;
    f->net = NULL;
    if (fab_up(f, NULL, 1) != 0)
        return TEST_FAILED;
    old = f->group;
    mgrnet_an_cut(f->net, f->l0);
    mgrnet_run(f->net, 5);
    CHECK_EQ_INT(counts(f).ans_up, 2);
    CHECK_EQ_INT(counts(f).groups, 0);
    CHECK_EQ_INT(host(f, 3).failed, 1);
    CHECK(strstr(host(f, 3).failed_reason, "an l0 failed") != NULL);
    CHECK(!mgrnet_an_holds(f->net, f->l1, old));
    /* It reconnects after 500 ms still holding the group. */
    CHECK(mgrnet_an_holds(f->net, f->l0, old));
    mgrnet_run(f->net, 600);
    CHECK_EQ_INT(an(f, f->l0).registrations, 2);
    CHECK(!mgrnet_an_holds(f->net, f->l0, old));
    CHECK_EQ_INT(counts(f).groups_adopted, 0);
    /* The AN process dies and restarts empty. */
    mgrnet_an_kill(f->net, f->l1);
    mgrnet_run(f->net, 1000);
    CHECK_EQ_INT(counts(f).ans_up, 2);
    CHECK_EQ_INT(an(f, f->l1).connected, 0); /* dead: no reconnection */
    request_all(f, 1);
    /* With l1 down, no tree reaches ranks 2 and 3. */
    CHECK_EQ_INT(host(f, 0).answered, 1);
    CHECK(host(f, 0).status != INCOLL_OK);
    CHECK_EQ_INT(counts(f).groups_refused, 1);
    mgrnet_an_start(f->net, "l1");
    mgrnet_run(f->net, 10);
    CHECK_EQ_INT(counts(f).ans_up, 3);
    request_all(f, 2);
    if (check_group(f) != 0)
        return TEST_FAILED;
    CHECK(f->group != old);
    return TEST_PASSED;
}

TEST(mgr_core_an_death, TEST_UNIT)
{
    RUN_BODY(an_death_body);
}

/* A job whose processes die without a goodbye keeps its groups for
 * host_grace_ms (a rank may reconnect), then they are reclaimed and the
 * job forgotten. A rank that reconnects within the grace keeps them. */
static int job_death_body(fab_t *f)
{
    mgrnet_cfg_t cfg = {.host_grace_ms = 3000};
    f->net = NULL;
    if (fab_up(f, &cfg, 1) != 0)
        return TEST_FAILED;
    /* Rank 2 loses its connection and comes back within the grace. */
    mgrnet_host_crash(f->net, f->h[2]);
    mgrnet_run(f->net, 1000);
    mgrnet_host_join(f->net, f->h[2]);
    mgrnet_run(f->net, 3000);
    CHECK_EQ_INT(counts(f).groups, 1);
    CHECK_EQ_INT(counts(f).groups_reclaimed, 0);
    /* Now the whole job dies. */
    for (int i = 0; i < 4; i++)
        mgrnet_host_crash(f->net, f->h[i]);
    mgrnet_run(f->net, 2900);
    CHECK_EQ_INT(counts(f).groups, 1);
    CHECK(mgrnet_an_holds(f->net, f->s0, f->group));
    mgrnet_run(f->net, 300);
    CHECK_EQ_INT(counts(f).groups, 0);
    CHECK_EQ_INT(counts(f).groups_reclaimed, 1);
    CHECK(!mgrnet_an_holds(f->net, f->s0, f->group));
    CHECK(!mgrnet_an_holds(f->net, f->l0, f->group));
    CHECK(!mgrnet_an_holds(f->net, f->l1, f->group));
    CHECK_EQ_INT(counts(f).jobs, 0);
    return TEST_PASSED;
}

TEST(mgr_core_job_death, TEST_UNIT)
{
    RUN_BODY(job_death_body);
}

/* The manager restarts: the ANs report their group with its record and the
 * new manager adopts it; the members rejoin and get the same group back at
 * once, and it stays after the adopt grace. */
static int adopt_body(fab_t *f)
{
    mgrnet_cfg_t cfg = {.adopt_grace_ms = 2000};
    uint64_t boot;
    f->net = NULL;
    if (fab_up(f, &cfg, 1) != 0)
        return TEST_FAILED;
    boot = host(f, 0).boot_id;
    mgrnet_restart_manager(f->net);
    CHECK_EQ_INT(counts(f).groups, 0);
    CHECK_EQ_INT(host(f, 0).connected, 0);
    mgrnet_run(f->net, 600);
    CHECK_EQ_INT(counts(f).ans_up, 3);
    CHECK_EQ_INT(counts(f).groups, 1);
    CHECK_EQ_INT(counts(f).groups_adopted, 1);
    CHECK_EQ_INT(counts(f).jobs, 1);
    CHECK_EQ_INT(an(f, f->s0).removes, 0);
    CHECK(an(f, f->s0).boot_id != boot);
    for (int i = 0; i < 4; i++)
        mgrnet_host_join(f->net, f->h[i]);
    mgrnet_run(f->net, 10);
    CHECK(host(f, 0).boot_id != boot);
    request_all(f, 0);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(host(f, i).answered, 1);
        CHECK_EQ_INT(host(f, i).status, INCOLL_OK);
        CHECK_EQ_INT(host(f, i).group, f->group);
    }
    CHECK_EQ_INT(an(f, f->s0).adds, 1); /* nothing added again */
    mgrnet_run(f->net, 3000);
    CHECK_EQ_INT(counts(f).groups, 1);
    CHECK_EQ_INT(counts(f).groups_failed + counts(f).groups_reclaimed, 0);
    for (int i = 0; i < 4; i++)
        mgrnet_host_release(f->net, f->h[i], COMM, f->group);
    mgrnet_run(f->net, 10);
    CHECK_EQ_INT(counts(f).groups, 0);
    CHECK_EQ_INT(counts(f).groups_released, 1);
    CHECK(!mgrnet_an_holds(f->net, f->l1, f->group));
    return TEST_PASSED;
}

TEST(mgr_core_adopt_after_restart, TEST_UNIT)
{
    RUN_BODY(adopt_body);
}

/* The fabric up with its group, then the manager restarted while l1 is
 * away: hung through the restart (it does not register again until it is
 * well), or killed after it. The group is adopted from s0 and l0. */
static int restart_l1_away(fab_t *f, uint32_t adopt_grace_ms, int kill)
{
    mgrnet_cfg_t cfg = {.adopt_grace_ms = adopt_grace_ms};
    f->net = NULL;
    if (fab_up(f, &cfg, 1) != 0)
        return -1;
    if (!kill)
        mgrnet_an_hang(f->net, f->l1, 1);
    mgrnet_restart_manager(f->net);
    if (kill)
        mgrnet_an_kill(f->net, f->l1);
    mgrnet_run(f->net, 600);
    CHECK_EQ_INT(counts(f).groups_adopted, 1);
    CHECK_EQ_INT(counts(f).ans_up, 2);
    return 0;
}

/* After a restart, an adopted group whose members never come back is
 * reclaimed after adopt_grace_ms, and a second AN that reports it later
 * is told to remove it (tombstone). */
static int adopt_orphan_body(fab_t *f)
{
    /* l1 hangs (and so does not register again) through the grace. */
    if (restart_l1_away(f, 2000, 0) != 0)
        return TEST_FAILED;
    /* Adopted about 500 ms after the restart: 2000 ms of grace. */
    mgrnet_run(f->net, 1800);
    CHECK_EQ_INT(counts(f).groups, 1);
    mgrnet_run(f->net, 300);
    CHECK_EQ_INT(counts(f).groups, 0);
    CHECK_EQ_INT(counts(f).groups_reclaimed, 1);
    CHECK_EQ_INT(counts(f).jobs, 0);
    CHECK(!mgrnet_an_holds(f->net, f->s0, f->group));
    CHECK(!mgrnet_an_holds(f->net, f->l0, f->group));
    /* l1 comes back with the group inside the recover window and is told
     * to remove it. */
    mgrnet_an_hang(f->net, f->l1, 0);
    mgrnet_run(f->net, 1000);
    CHECK(an(f, f->l1).registrations >= 2);
    CHECK(!mgrnet_an_holds(f->net, f->l1, f->group));
    CHECK_EQ_INT(counts(f).groups_adopted, 1);
    CHECK_EQ_INT(counts(f).groups, 0);
    return TEST_PASSED;
}

TEST(mgr_core_adopt_orphan, TEST_UNIT)
{
    RUN_BODY(adopt_orphan_body);
}

/* After a restart an AN of the group does not come back: the members'
 * requests wait (an answer now would name an AN without an address), and
 * when the adopt grace ends the group is torn down and every member is
 * answered with the reason, so it falls back to host-based collectives. */
static int adopt_an_missing_body(fab_t *f)
{
    if (restart_l1_away(f, 2000, 1) != 0)
        return TEST_FAILED;
    for (int i = 0; i < 4; i++)
        mgrnet_host_join(f->net, f->h[i]);
    mgrnet_run(f->net, 10);
    request_all(f, 0);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(host(f, i).answered, 0);
        CHECK_EQ_INT(host(f, i).bad_info, 0);
        CHECK_EQ_INT(host(f, i).errors, 0);
    }
    mgrnet_run(f->net, 1800);
    CHECK_EQ_INT(counts(f).groups, 1);
    CHECK_EQ_INT(host(f, 0).answered, 0);
    mgrnet_run(f->net, 300);
    CHECK_EQ_INT(counts(f).groups, 0);
    CHECK_EQ_INT(counts(f).groups_failed, 1);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(host(f, i).answered, 1);
        CHECK_EQ_INT(host(f, i).status, INCOLL_ERR_NO_RESOURCE);
        CHECK_MSG(strstr(host(f, i).reason, "not every an came back"), "%s",
                  host(f, i).reason);
        CHECK_EQ_INT(host(f, i).bad_info, 0);
        CHECK_EQ_INT(host(f, i).failed, 1);
        CHECK_MSG(strstr(host(f, i).failed_reason, "not every an came back"),
                  "%s", host(f, i).failed_reason);
    }
    CHECK(!mgrnet_an_holds(f->net, f->s0, f->group));
    return TEST_PASSED;
}

TEST(mgr_core_adopt_an_missing, TEST_UNIT)
{
    RUN_BODY(adopt_an_missing_body);
}

/* After a restart an AN of the group comes back late (hung through the
 * restart, then well again, within the grace): the members that asked
 * meanwhile get the group, with their leaf AN's address, once it has
 * reported the group. */
static int adopt_an_late_body(fab_t *f)
{
    if (restart_l1_away(f, 5000, 0) != 0)
        return TEST_FAILED;
    for (int i = 0; i < 4; i++)
        mgrnet_host_join(f->net, f->h[i]);
    mgrnet_run(f->net, 10);
    request_all(f, 0);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT(host(f, i).answered, 0);
    mgrnet_an_hang(f->net, f->l1, 0);
    mgrnet_run(f->net, 2000);
    CHECK_EQ_INT(counts(f).ans_up, 3);
    if (check_group(f) != 0)
        return TEST_FAILED;
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(host(f, i).group, f->group);
        CHECK_EQ_INT(host(f, i).bad_info, 0);
        CHECK_EQ_INT(host(f, i).failed, 0);
    }
    mgrnet_run(f->net, 5000);
    CHECK_EQ_INT(counts(f).groups, 1);
    CHECK_EQ_INT(counts(f).groups_failed, 0);
    return TEST_PASSED;
}

TEST(mgr_core_adopt_an_late, TEST_UNIT)
{
    RUN_BODY(adopt_an_late_body);
}

/* A request not every member makes in request_ms fails with a timeout; a
 * newer generation asked by one member tears the older group down at once
 * and tells the others. */
static int request_body(fab_t *f)
{
    mgrnet_cfg_t cfg = {.request_ms = 1000};
    f->net = NULL;
    if (fab_up(f, &cfg, 0) != 0)
        return TEST_FAILED;
    for (int i = 0; i < 3; i++)
        mgrnet_host_request(f->net, f->h[i], COMM, 0, all4, 4);
    mgrnet_run(f->net, 900);
    CHECK_EQ_INT(counts(f).requests, 1);
    CHECK_EQ_INT(host(f, 0).errors, 0);
    mgrnet_run(f->net, 300);
    CHECK_EQ_INT(counts(f).requests, 0);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(host(f, i).errors, 1);
        CHECK_EQ_INT(host(f, i).error_status, INCOLL_ERR_TIMEOUT);
        CHECK(strstr(host(f, i).error, "only 3 of 4 members") != NULL);
    }
    CHECK_EQ_INT(host(f, 3).errors, 0);
    request_all(f, 0);
    if (check_group(f) != 0)
        return TEST_FAILED;
    /* Rank 1 recovers first and asks for generation 1. */
    mgrnet_host_request(f->net, f->h[1], COMM, 1, all4, 4);
    mgrnet_run(f->net, 10);
    CHECK_EQ_INT(counts(f).groups, 0);
    CHECK_EQ_INT(host(f, 0).failed, 1);
    CHECK(strstr(host(f, 0).failed_reason, "rank 1 asked for generation 1"));
    CHECK(!mgrnet_an_holds(f->net, f->l1, f->group));
    for (int i = 0; i < 4; i++)
        if (i != 1)
            mgrnet_host_request(f->net, f->h[i], COMM, 1, all4, 4);
    mgrnet_run(f->net, 20);
    CHECK_EQ_INT(host(f, 1).answered, 1);
    CHECK_EQ_INT(host(f, 1).gen, 1);
    if (check_group(f) != 0)
        return TEST_FAILED;
    /* Bad requests: members repeated, asker not among them. */
    {
        int rep[3] = {0, 0, 2}, other[2] = {0, 1};
        mgrnet_host_request(f->net, f->h[2], 0x99, 0, rep, 3);
        mgrnet_host_request(f->net, f->h[3], 0x98, 0, other, 2);
        mgrnet_run(f->net, 10);
        CHECK_EQ_INT(host(f, 2).error_status, INCOLL_ERR_INVALID_ARG);
        CHECK(strstr(host(f, 2).error, "out of range or repeated"));
        CHECK_EQ_INT(host(f, 3).error_status, INCOLL_ERR_INVALID_ARG);
        CHECK(strstr(host(f, 3).error, "rank 3 is not among the members"));
    }
    return TEST_PASSED;
}

TEST(mgr_core_requests, TEST_UNIT)
{
    RUN_BODY(request_body);
}

/* An AN that refuses a group fails the request with its reason; an AN
 * that does not acknowledge at all fails it after the ack timeout; a
 * malformed frame from a host is answered with an error and counted. */
static int refuse_body(fab_t *f)
{
    uint8_t junk[3] = {1, 2, 3};
    f->net = NULL;
    if (fab_up(f, NULL, 0) != 0)
        return TEST_FAILED;
    mgrnet_an_refuse(f->net, f->l0, INCOLL_ERR_NO_RESOURCE);
    request_all(f, 0);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(host(f, i).answered, 1);
        CHECK_EQ_INT(host(f, i).status, INCOLL_ERR_NO_RESOURCE);
        CHECK(strstr(host(f, i).reason, "an l0 refused the group"));
    }
    CHECK_EQ_INT(counts(f).groups_refused, 1);
    CHECK_EQ_INT(counts(f).groups, 0);
    CHECK(!mgrnet_an_holds(f->net, f->s0, host(f, 0).group));
    /* l1 hangs before it acknowledges: the group fails after 5 s (and l1
     * itself after its heartbeats). */
    mgrnet_an_hang(f->net, f->l1, 1);
    request_all(f, 1);
    CHECK_EQ_INT(host(f, 0).answered, 0);
    mgrnet_run(f->net, 6000);
    CHECK_EQ_INT(host(f, 0).answered, 1);
    CHECK(host(f, 0).status != INCOLL_OK);
    CHECK_EQ_INT(counts(f).groups, 0);
    mgrnet_host_send_raw(f->net, f->h[0], MGR_GROUP_REQ, junk, sizeof(junk));
    mgrnet_run(f->net, 10);
    CHECK_EQ_INT(host(f, 0).error_status, INCOLL_ERR_PROTOCOL);
    CHECK(strstr(host(f, 0).error, "malformed group_req"));
    CHECK_EQ_INT(counts(f).malformed, 1);
    CHECK_EQ_INT(host(f, 0).connected, 1);
    return TEST_PASSED;
}

TEST(mgr_core_refusals, TEST_UNIT)
{
    RUN_BODY(refuse_body);
}

/* A group on one AN only (both members below l0): when that AN's
 * connection breaks the group is torn down; the AN comes back with it
 * inside the recover window, and no other AN could say the group is gone:
 * only the tombstone keeps it from being adopted. */
static int tombstone_body(fab_t *f)
{
    const int pair[2] = {0, 1};
    uint32_t id;
    f->net = NULL;
    if (fab_up(f, NULL, 0) != 0)
        return TEST_FAILED;
    mgrnet_host_request(f->net, f->h[0], 0x55, 0, pair, 2);
    mgrnet_host_request(f->net, f->h[1], 0x55, 0, pair, 2);
    mgrnet_run(f->net, 20);
    CHECK_EQ_INT(host(f, 0).status, INCOLL_OK);
    id = host(f, 0).group;
    CHECK(mgrnet_an_holds(f->net, f->l0, id));
    CHECK(!mgrnet_an_holds(f->net, f->s0, id));
    CHECK(!mgrnet_an_holds(f->net, f->l1, id));
    mgrnet_an_cut(f->net, f->l0);
    mgrnet_run(f->net, 5);
    CHECK_EQ_INT(counts(f).groups, 0);
    CHECK_EQ_INT(host(f, 1).failed, 1);
    mgrnet_run(f->net, 600);
    CHECK_EQ_INT(an(f, f->l0).registrations, 2);
    CHECK_EQ_INT(counts(f).groups_adopted, 0);
    CHECK_EQ_INT(counts(f).groups, 0);
    CHECK(!mgrnet_an_holds(f->net, f->l0, id));
    /* The same after a manager restart is an adoption: the new manager
     * never tore the group down. */
    mgrnet_host_request(f->net, f->h[0], 0x55, 1, pair, 2);
    mgrnet_host_request(f->net, f->h[1], 0x55, 1, pair, 2);
    mgrnet_run(f->net, 20);
    CHECK_EQ_INT(host(f, 0).status, INCOLL_OK);
    id = host(f, 0).group;
    mgrnet_restart_manager(f->net);
    mgrnet_run(f->net, 600);
    CHECK_EQ_INT(counts(f).groups_adopted, 1);
    CHECK(mgrnet_an_holds(f->net, f->l0, id));
    return TEST_PASSED;
}

TEST(mgr_core_tombstone, TEST_UNIT)
{
    RUN_BODY(tombstone_body);
}

/* A usage report from host h: one entry for comm and group. */
static void send_usage(fab_t *f, int h, uint64_t comm, uint32_t group,
                       uint64_t net, uint64_t requested, uint64_t refused)
{
    mgr_usage_entry_t e = {0};
    mgr_wbuf_t w = {0};
    e.comm = comm;
    e.group = group;
    e.ops_net = net;
    e.ops_sw = requested + refused;
    e.fb[MGR_FB_REQUESTED] = requested;
    e.fb[MGR_FB_REFUSED] = refused;
    mgr_enc_usage(&w, &e, 1);
    mgrnet_host_send_raw(f->net, h, MGR_USAGE, w.buf, w.len);
    mgr_wbuf_free(&w);
}

/* The value of the sample line "sample value" in a metrics text, or -1. */
static double sample_of(const char *text, const char *sample)
{
    size_t n = strlen(sample);
    for (const char *p = text; p && *p;
         p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, sample, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

/*
 * Where a job's collectives ran: reports add up per job and per group in
 * `incoll stat` and the metrics; a malformed report and one for another
 * job's group are refused, counted and change nothing; the group's series
 * go with the group, the job's with the job.
 */
static int usage_body(fab_t *f)
{
    mgr_core_t *core;
    char *stat, *om, want[256];
    int other;
    mgr_wbuf_t w = {0};

    f->net = NULL;
    if (fab_up(f, NULL, 1) != 0)
        return TEST_FAILED;
    core = mgrnet_core(f->net);
    other = mgrnet_host_add(f->net, "other", 0, 2, "h0");
    mgrnet_host_join(f->net, other);
    mgrnet_run(f->net, 10);
    CHECK_EQ_INT(host(f, 0).errors, 0);
    /* Two reports of rank 0 (the group's comm), one of a software-only
     * communicator (no group). */
    send_usage(f, f->h[0], COMM, f->group, 5, 2, 0);
    send_usage(f, f->h[0], COMM, f->group, 3, 0, 1);
    send_usage(f, f->h[0], 0x99, 0, 0, 0, 4);
    mgrnet_run(f->net, 10);
    CHECK_EQ_INT(host(f, 0).errors, 0);
    stat = mgr_core_stat_text(core, mgrnet_now(f->net));
    CHECK(stat != NULL);
    CHECK_MSG(strstr(stat, "usage job=job network=8 software=7 no_manager=0 "
                           "refused=5 group_failed=0 unsupported=0 "
                           "requested=2\n") != NULL,
              "%s", stat);
    snprintf(want, sizeof(want),
             "usage group=%u job=job network=8 software=3 no_manager=0 "
             "refused=1 group_failed=0 unsupported=0 requested=2\n",
             f->group);
    CHECK_MSG(strstr(stat, want) != NULL, "%s", stat);
    CHECK(strstr(stat, "usage_reports=3 usage_refused=0") != NULL);
    free(stat);
    om = mgr_core_metrics_text(core, mgrnet_now(f->net), 1);
    CHECK(om != NULL);
    CHECK(sample_of(om, "incoll_job_operations_total{job=\"job\",where="
                        "\"network\"}") == 8);
    CHECK(sample_of(om, "incoll_job_operations_total{job=\"job\",where="
                        "\"software\"}") == 7);
    CHECK(sample_of(om, "incoll_job_fallbacks_total{job=\"job\",reason="
                        "\"refused\"}") == 5);
    CHECK(sample_of(om, "incoll_job_operations_total{job=\"other\",where="
                        "\"network\"}") == 0);
    snprintf(want, sizeof(want),
             "incoll_group_operations_total{group=\"%u\",job=\"job\","
             "where=\"network\"}",
             f->group);
    CHECK(sample_of(om, want) == 8);
    snprintf(want, sizeof(want),
             "incoll_group_fallbacks_total{group=\"%u\",job=\"job\","
             "reason=\"requested\"}",
             f->group);
    CHECK(sample_of(om, want) == 2);
    free(om);
    /* Malformed: fallbacks that do not add up; a truncated body. */
    mgr_w_u16(&w, 1);
    mgr_w_u8(&w, MGR_FB_COUNT);
    mgr_w_u64(&w, COMM);
    mgrnet_host_send_raw(f->net, f->h[1], MGR_USAGE, w.buf, w.len);
    mgr_wbuf_free(&w);
    {
        mgr_usage_entry_t e = {0};
        e.comm = COMM;
        e.group = f->group;
        e.ops_sw = 9;
        e.fb[MGR_FB_REFUSED] = 1;
        mgr_enc_usage(&w, &e, 1);
        mgrnet_host_send_raw(f->net, f->h[1], MGR_USAGE, w.buf, w.len);
        mgr_wbuf_free(&w);
    }
    /* Another job's group (the right comm id, even). */
    send_usage(f, other, COMM, f->group, 100, 0, 0);
    mgrnet_run(f->net, 10);
    CHECK_EQ_INT(host(f, 1).errors, 2);
    CHECK_EQ_INT(host(f, 1).error_status, INCOLL_ERR_PROTOCOL);
    CHECK_MSG(strstr(host(f, 1).error, "malformed usage: fallback counts"),
              "%s", host(f, 1).error);
    {
        mgrnet_host_view_t v;
        mgrnet_host_view(f->net, other, &v);
        CHECK_EQ_INT(v.errors, 1);
        CHECK_EQ_INT(v.error_status, INCOLL_ERR_INVALID_ARG);
        CHECK_MSG(strstr(v.error, "is not comm") && strstr(v.error, "of job "
                                                                    "other"),
                  "%s", v.error);
        CHECK_EQ_INT(v.connected, 1);
    }
    CHECK_EQ_INT(host(f, 1).connected, 1);
    stat = mgr_core_stat_text(core, mgrnet_now(f->net));
    CHECK(strstr(stat, "usage job=job network=8 software=7 ") != NULL);
    CHECK(strstr(stat, "usage job=other network=0 software=0 ") != NULL);
    CHECK(strstr(stat, "usage_reports=3 usage_refused=3") != NULL);
    free(stat);
    /* The group released: its series go, the job's stay. */
    for (int i = 0; i < 4; i++)
        mgrnet_host_release(f->net, f->h[i], COMM, f->group);
    mgrnet_run(f->net, 10);
    CHECK_EQ_INT(counts(f).groups, 0);
    om = mgr_core_metrics_text(core, mgrnet_now(f->net), 1);
    CHECK(strstr(om, "incoll_group_operations_total{") == NULL);
    CHECK(sample_of(om, "incoll_job_operations_total{job=\"job\",where="
                        "\"network\"}") == 8);
    free(om);
    /* The job ends: its series go too. */
    for (int i = 0; i < 4; i++)
        mgrnet_host_bye(f->net, f->h[i]);
    mgrnet_run(f->net, 200);
    om = mgr_core_metrics_text(core, mgrnet_now(f->net), 1);
    CHECK(strstr(om, "job=\"job\"") == NULL);
    CHECK(sample_of(om, "incoll_manager_usage_refused_total") == 3);
    free(om);
    return TEST_PASSED;
}

TEST(mgr_core_usage, TEST_UNIT)
{
    RUN_BODY(usage_body);
}

/* A process's counters of the result path from host h, all v but ops. */
static void send_proc(fab_t *f, int h, uint64_t ops, uint64_t v)
{
    uint64_t c[MGR_PC_COUNT];
    mgr_wbuf_t w = {0};
    for (int k = 0; k < MGR_PC_COUNT; k++)
        c[k] = v;
    c[MGR_PC_OPS] = ops;
    mgr_enc_usage_proc(&w, c);
    mgrnet_host_send_raw(f->net, h, MGR_USAGE_PROC, w.buf, w.len);
    mgr_wbuf_free(&w);
}

/*
 * The processes' counters of the result path: every process's reports add
 * up per job in `incoll stat` (with the per-operation ratios) and in the
 * metrics; a report of a version this manager does not read is refused
 * with an error that names it and changes nothing.
 */
static int usage_proc_body(fab_t *f)
{
    mgr_core_t *core;
    char *stat, *om;
    mgr_wbuf_t w = {0};

    f->net = NULL;
    if (fab_up(f, NULL, 1) != 0)
        return TEST_FAILED;
    core = mgrnet_core(f->net);
    send_proc(f, f->h[0], 10, 3);
    send_proc(f, f->h[1], 10, 2);
    send_proc(f, f->h[1], 20, 5);
    mgrnet_run(f->net, 10);
    CHECK_EQ_INT(host(f, 1).errors, 0);
    stat = mgr_core_stat_text(core, mgrnet_now(f->net));
    CHECK_MSG(strstr(stat, "host_counters job=job ops=40 rx_datagrams=10 "
                           "tx_datagrams=10 wakeups=10 mcast_results=10 "
                           "mcast_duplicates=10 mcast_repaired=10 "
                           "mcast_fallbacks=10 rx_per_op=0.25 "
                           "wakeups_per_op=0.25\n"),
              "%s", stat);
    free(stat);
    om = mgr_core_metrics_text(core, mgrnet_now(f->net), 1);
    CHECK(sample_of(om, "incoll_job_rank_operations_total{job=\"job\"}") == 40);
    for (int k = 1; k < MGR_PC_COUNT; k++) {
        char name[160];
        snprintf(name, sizeof(name), "%s_total{job=\"job\"}", mgr_pc_metric(k));
        CHECK_MSG(sample_of(om, name) == 10, "%s in\n%s", name, om);
    }
    free(om);
    /* A later version: refused, named, nothing added. */
    {
        uint64_t c[MGR_PC_COUNT] = {7};
        mgr_enc_usage_proc(&w, c);
        w.buf[0] = MGR_PC_VERSION + 1;
        mgrnet_host_send_raw(f->net, f->h[2], MGR_USAGE_PROC, w.buf, w.len);
        mgr_wbuf_free(&w);
    }
    mgrnet_run(f->net, 10);
    CHECK_EQ_INT(host(f, 2).errors, 1);
    CHECK_EQ_INT(host(f, 2).error_status, INCOLL_ERR_PROTOCOL);
    CHECK_MSG(strstr(host(f, 2).error, "usage_proc") &&
                  strstr(host(f, 2).error, "version"),
              "%s", host(f, 2).error);
    CHECK_EQ_INT(host(f, 2).connected, 1);
    stat = mgr_core_stat_text(core, mgrnet_now(f->net));
    CHECK(strstr(stat, "host_counters job=job ops=40 ") != NULL);
    free(stat);
    return TEST_PASSED;
}

TEST(mgr_core_usage_proc, TEST_UNIT)
{
    RUN_BODY(usage_proc_body);
}
