/*
 * Unit tests of the manager's topology (src/mgr/topo.c) and group
 * placement (src/mgr/place.c): the file format and its errors, the
 * fat-tree generator and its trees, and placement of groups of any members
 * in any order, checked against an independent computation of the part of
 * the tree they need; quotas until exhaustion, release, least-loaded
 * choice, capabilities, down ANs and adoption.
 */
#include "test.h"

#include "common/settings.h"
#include "mgr/place.h"
#include "mgr/topo.h"

#include <inttypes.h>
#include <stdint.h>

static uint64_t rng_state = 88172645463325252ull;

static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

/* 1 if switch a is b or one of b's ancestors in tree t. */
static int is_ancestor(const topo_t *topo, int t, int a, int b)
{
    for (int x = b; x >= 0; x = topo->trees[t].parent[x])
        if (x == a)
            return 1;
    return 0;
}

/*
 * Checks a placed group against the members' hosts: consistent child
 * lists, parents before children, every member once, and the ANs exactly
 * the switches of the tree below which at least two of the members' paths
 * meet (or every switch on the paths, without pruning). Returns 0 if good.
 */
static int check_group(const topo_t *topo, const place_group_t *g,
                       const int *hosts, int n, int prune)
{
    int t = g->tree;
    int *cnt = calloc((size_t)topo->nswitches, sizeof(int));
    int *seen = calloc((size_t)n, sizeof(int));
    int nexpect = 0, ret = -1;

    if (cnt == NULL || seen == NULL)
        goto out;
    if (g->nmembers != n || g->nans < 1 || g->ans[0].parent != -1)
        goto out;
    /* Reference: for each switch, how many distinct children (member or
     * switch) of the union of paths hang below it. */
    for (int m = 0; m < n; m++) {
        int leaf = topo->hosts[hosts[m]].leaf;
        if (g->member_host[m] != hosts[m])
            goto out;
        cnt[leaf]++;
    }
    /* A switch is on a path if some member's leaf is below it; it is a
     * child of its parent then. */
    for (int sw = 0; sw < topo->nswitches; sw++) {
        int on = 0, p = topo->trees[t].parent[sw];
        for (int m = 0; m < n && !on; m++)
            on = is_ancestor(topo, t, sw, topo->hosts[hosts[m]].leaf);
        if (on && p >= 0)
            cnt[p]++;
    }
    for (int sw = 0; sw < topo->nswitches; sw++) {
        int on = 0, want;
        for (int m = 0; m < n && !on; m++)
            on = is_ancestor(topo, t, sw, topo->hosts[hosts[m]].leaf);
        want = on && (!prune || cnt[sw] >= 2);
        nexpect += want;
        if (want) {
            int found = -1;
            for (int i = 0; i < g->nans; i++)
                if (g->ans[i].sw == sw)
                    found = i;
            if (found < 0 || g->ans[found].nchildren != cnt[sw]) {
                fprintf(stderr,
                        "    switch %s: expected in the group with "
                        "%d children\n",
                        topo->sw[sw].name, cnt[sw]);
                goto out;
            }
        }
    }
    if (nexpect != g->nans) {
        fprintf(stderr, "    group has %d ans, expected %d\n", g->nans,
                nexpect);
        goto out;
    }
    for (int i = 0; i < g->nans; i++) {
        const place_an_t *a = &g->ans[i];
        if (i > 0 && (a->parent < 0 || a->parent >= i))
            goto out;
        if (i > 0 && !is_ancestor(topo, t, g->ans[a->parent].sw, a->sw))
            goto out;
        if (i > 0 && g->ans[a->parent].child[a->index_at_parent] != i)
            goto out;
        if (a->buffer_bytes !=
            place_an_bytes(g->slots, g->payload, a->nchildren))
            goto out;
        for (int c = 0; c < a->nchildren; c++) {
            int k = a->child[c];
            if (k >= 0) {
                if (k >= g->nans || g->ans[k].parent != i ||
                    g->ans[k].index_at_parent != c)
                    goto out;
                /* AN children come before member children. */
                if (c > 0 && a->child[c - 1] < 0)
                    goto out;
            } else {
                int m = -k - 1;
                if (m >= n || g->member_an[m] != i || g->member_child[m] != c ||
                    seen[m]++)
                    goto out;
                if (!is_ancestor(topo, t, a->sw, topo->hosts[hosts[m]].leaf))
                    goto out;
                /* Members in member order. */
                if (c > 0 && a->child[c - 1] < 0 && -a->child[c - 1] - 1 > m)
                    goto out;
            }
        }
    }
    for (int m = 0; m < n; m++)
        if (seen[m] != 1)
            goto out;
    ret = 0;
out:
    free(cnt);
    free(seen);
    return ret;
}

static const char good_topo[] =
    "# two spines, three leaves of uneven size\n"
    "defaults payload=4096 slots=256 groups=8 buffer=16M\n"
    "switch s0 level=2 addr=127.0.0.1:41000\n"
    "switch s1 level=2 addr=127.0.0.1:41001 ops=sum,max dtypes=float32,int32\n"
    "switch l0 level=1 addr=127.0.0.1:41002   # a comment\n"
    "switch l1 level=1\n"
    "switch l2 level=1 addr=- payload=65000 buffer=1G\n"
    "link l0 s0\n"
    "link s1 l0\n"
    "link l1 s0\n"
    "link l1 s1\n"
    "link l2 s0\n"
    "link l2 s1\n"
    "host h0 leaf=l0\n"
    "host h1 leaf=l1 addr=10.0.0.2\n"
    "host h2 leaf=l1\n"
    "host h3 leaf=l1\n"
    "host h4 leaf=l2\n"
    "\n";

TEST(mgr_topo_parse, TEST_UNIT)
{
    topo_t topo;
    char err[256] = "";
    int s0, s1, l0, l1, l2;

    CHECK_MSG(topo_parse(good_topo, "t.topo", &topo, err, sizeof(err)) ==
                  INCOLL_OK,
              "%s", err);
    CHECK_EQ_INT(topo.nswitches, 5);
    CHECK_EQ_INT(topo.nhosts, 5);
    CHECK_EQ_INT(topo.nlinks, 6);
    CHECK_EQ_INT(topo.ntrees, 2);
    CHECK_EQ_INT(topo.levels, 2);
    s0 = topo_find_switch(&topo, "s0");
    s1 = topo_find_switch(&topo, "s1");
    l0 = topo_find_switch(&topo, "l0");
    l1 = topo_find_switch(&topo, "l1");
    l2 = topo_find_switch(&topo, "l2");
    CHECK(s0 >= 0 && s1 >= 0 && l0 >= 0 && l1 >= 0 && l2 >= 0);
    CHECK(topo.sw[s0].addr == wire_ep(0x7f000001u, 41000));
    CHECK(topo.sw[l1].addr == INCOLL_EP_NONE);
    CHECK(topo.sw[l2].addr == INCOLL_EP_NONE);
    CHECK_EQ_INT(topo.sw[s0].caps.max_payload, 4096);
    CHECK_EQ_INT(topo.sw[l2].caps.max_payload, 65000);
    CHECK(topo.sw[l2].caps.buffer_bytes == 1ull << 30);
    CHECK(topo.sw[s0].caps.buffer_bytes == 16ull << 20);
    CHECK_EQ_INT(topo.sw[s0].caps.max_groups, 8);
    CHECK_EQ_INT(topo.sw[s1].caps.ops,
                 (1u << INCOLL_OP_SUM) | (1u << INCOLL_OP_MAX));
    CHECK_EQ_INT(topo.sw[s1].caps.dtypes,
                 (1u << INCOLL_FLOAT32) | (1u << INCOLL_INT32));
    CHECK_EQ_INT(topo.sw[s0].caps.ops, TOPO_OPS_ALL);
    CHECK_EQ_INT(topo.hosts[1].ip, 0x0a000002);
    CHECK_EQ_INT(topo.hosts[3].leaf, l1);
    /* One tree per spine, each reaching every leaf through its root. */
    for (int t = 0; t < 2; t++) {
        int r = topo.trees[t].root;
        CHECK(r == s0 || r == s1);
        CHECK_EQ_INT(topo.trees[t].parent[r], -1);
        CHECK_EQ_INT(topo.trees[t].parent[l0], r);
        CHECK_EQ_INT(topo.trees[t].parent[l1], r);
        CHECK_EQ_INT(topo.trees[t].parent[l2], r);
        CHECK_EQ_INT(topo.trees[t].parent[r == s0 ? s1 : s0], -2);
        CHECK_EQ_INT(topo.trees[t].height, 2);
    }
    topo_free(&topo);
    return TEST_PASSED;
}

/* Each bad file and the "name:line: cause" its error must start with. */
static const struct {
    const char *text;
    const char *want;
} bad_topos[] = {
    {"switch s0 level=1\nbogus x\n", "b.topo:2: unknown record 'bogus'"},
    {"switch s0 level=1\nswitch s0 level=1\n",
     "b.topo:2: duplicate switch 's0' (also line 1)"},
    {"switch s0 level=0\n", "b.topo:1: switch s0: level '0' is not in 1..8"},
    {"switch s0\n", "b.topo:1: switch s0: missing level="},
    {"switch s0 level=1 colour=red\n",
     "b.topo:1: switch s0: unknown key 'colour'"},
    {"switch s0 level=1 addr=1.2.3\n", "b.topo:1: switch s0: addr '1.2.3'"},
    {"switch s0 level=1 ops=sum,avg\n", "b.topo:1: ops: 'avg' is not an op"},
    {"switch s0 level=1 dtypes=float128\n",
     "b.topo:1: dtypes: 'float128' is not a dtype"},
    {"switch s0 level=1 payload=4\n", "b.topo:1: payload '4' is not a byte"},
    {"switch s0 level=1 buffer=12Q\n", "b.topo:1: buffer '12Q'"},
    {"defaults slots=0\n", "b.topo:1: slots '0' is not a number"},
    {"switch a level=1\nswitch b level=1\n\nlink a b\n",
     "b.topo:4: link a b: both switches are on level 1"},
    {"switch a level=1\nswitch b level=2\nlink a b\nlink b a\n",
     "b.topo:4: link a b: duplicate (also line 3)"},
    {"switch a level=1\nlink a zz\n", "b.topo:2: link: unknown switch 'zz'"},
    {"switch a level=1\nlink a\n", "b.topo:2: link record wants two switch"},
    {"switch a level=1\nhost h0 leaf=b\n",
     "b.topo:2: host h0: unknown leaf switch 'b'"},
    {"switch a level=2\nhost h0 leaf=a\n",
     "b.topo:2: host h0: switch a is on level 2"},
    {"switch a level=1\nhost h0\n", "b.topo:2: host h0: missing leaf="},
    {"switch a level=1\nhost h0 leaf=a\nhost h0 leaf=a\n",
     "b.topo:3: duplicate host 'h0' (also line 2)"},
    {"switch a level=1\nhost h0 leaf=a addr=300.1.1.1\n",
     "b.topo:2: host h0: addr '300.1.1.1'"},
    {"switch a level=1 addr=127.0.0.1:5\nswitch b level=2 addr=127.0.0.1:5\n",
     "b.topo:2: switch b: same addr as a (line 1)"},
    {"switch a/b level=1\n", "b.topo:1: switch name 'a/b'"},
    {"# nothing\n", "b.topo:0: no switch records"},
    {"switch level=1\n", "b.topo:1: switch record needs a name first"},
};

TEST(mgr_topo_errors, TEST_UNIT)
{
    for (size_t i = 0; i < sizeof(bad_topos) / sizeof(bad_topos[0]); i++) {
        topo_t topo;
        char err[256] = "";
        incoll_status_t status =
            topo_parse(bad_topos[i].text, "b.topo", &topo, err, sizeof(err));
        CHECK_MSG(status == INCOLL_ERR_CONFIG, "case %zu parsed", i);
        CHECK_MSG(
            strncmp(err, bad_topos[i].want, strlen(bad_topos[i].want)) == 0,
            "case %zu: got '%s', want '%s...'", i, err, bad_topos[i].want);
        CHECK(topo.sw == NULL && topo.nswitches == 0);
    }
    return TEST_PASSED;
}

TEST(mgr_topo_file, TEST_UNIT)
{
    topo_t a, b;
    char path[4200], err[256] = "";
    FILE *f;

    /* A missing file names itself. */
    CHECK(topo_load("/nonexistent/x.topo", &a, err, sizeof(err)) ==
          INCOLL_ERR_CONFIG);
    CHECK(strncmp(err, "/nonexistent/x.topo:0: cannot open", 34) == 0);
    /* Save and load give the same topology back. */
    CHECK(topo_fat_tree(4, 3, 13, NULL, &a) == INCOLL_OK);
    a.sw[3].addr = wire_ep(0x7f000001u, 40003);
    a.sw[5].caps.ops = (1u << INCOLL_OP_SUM);
    a.hosts[2].ip = 0x0a000001;
    snprintf(path, sizeof(path), "%s/t.topo", test_tmpdir());
    CHECK(topo_save(&a, path) == INCOLL_OK);
    CHECK_MSG(topo_load(path, &b, err, sizeof(err)) == INCOLL_OK, "%s", err);
    CHECK_EQ_INT(b.nswitches, a.nswitches);
    CHECK_EQ_INT(b.nlinks, a.nlinks);
    CHECK_EQ_INT(b.nhosts, a.nhosts);
    CHECK_EQ_INT(b.ntrees, a.ntrees);
    for (int i = 0; i < a.nswitches; i++) {
        CHECK(strcmp(a.sw[i].name, b.sw[i].name) == 0);
        CHECK(a.sw[i].addr == b.sw[i].addr);
        /* Field by field: topo_caps_t has padding before buffer_bytes,
         * which neither load nor save defines. */
        CHECK(a.sw[i].caps.ops == b.sw[i].caps.ops);
        CHECK(a.sw[i].caps.dtypes == b.sw[i].caps.dtypes);
        CHECK(a.sw[i].caps.max_payload == b.sw[i].caps.max_payload);
        CHECK(a.sw[i].caps.slots == b.sw[i].caps.slots);
        CHECK(a.sw[i].caps.max_groups == b.sw[i].caps.max_groups);
        CHECK(a.sw[i].caps.buffer_bytes == b.sw[i].caps.buffer_bytes);
    }
    for (int h = 0; h < a.nhosts; h++) {
        CHECK(a.hosts[h].leaf == b.hosts[h].leaf);
        CHECK(a.hosts[h].ip == b.hosts[h].ip);
    }
    for (int t = 0; t < a.ntrees; t++)
        CHECK(memcmp(a.trees[t].parent, b.trees[t].parent,
                     (size_t)a.nswitches * sizeof(int)) == 0);
    topo_free(&b);
    /* An error in a file carries its path and line. */
    f = fopen(path, "a");
    CHECK(f != NULL);
    fprintf(f, "link e0-0 e0-1\n");
    fclose(f);
    CHECK(topo_load(path, &b, err, sizeof(err)) == INCOLL_ERR_CONFIG);
    {
        char want[4300];
        int lines = 2 + a.nswitches + a.nlinks + a.nhosts + 1;
        snprintf(want, sizeof(want), "%s:%d: link e0-0 e0-1: both", path,
                 lines);
        CHECK_MSG(strncmp(err, want, strlen(want)) == 0, "got '%s'", err);
    }
    topo_free(&a);
    return TEST_PASSED;
}

TEST(mgr_topo_fat_tree, TEST_UNIT)
{
    topo_t topo;

    CHECK(topo_fat_tree(3, 2, 0, NULL, &topo) == INCOLL_ERR_INVALID_ARG);
    CHECK(topo_fat_tree(4, 4, 0, NULL, &topo) == INCOLL_ERR_INVALID_ARG);
    CHECK(topo_fat_tree(4, 2, 9, NULL, &topo) == INCOLL_ERR_INVALID_ARG);

    /* Leaf-spine: 4 leaves of 2 hosts, 2 spines, a tree per spine. */
    CHECK(topo_fat_tree(4, 2, 0, NULL, &topo) == INCOLL_OK);
    CHECK_EQ_INT(topo.nswitches, 6);
    CHECK_EQ_INT(topo.nhosts, 8);
    CHECK_EQ_INT(topo.ntrees, 2);
    CHECK_EQ_INT(topo.levels, 2);
    for (int t = 0; t < 2; t++)
        for (int l = 0; l < 4; l++)
            CHECK_EQ_INT(topo.trees[t].parent[l], topo.trees[t].root);
    CHECK_EQ_INT(topo.hosts[5].leaf, topo_find_switch(&topo, "l2"));
    topo_free(&topo);

    /* Three levels, k = 4: 4 pods of 2 edge and 2 aggregation switches, 4
     * cores; core (j, m) reaches edge e<p>-<i> through a<p>-<j>. */
    CHECK(topo_fat_tree(4, 3, 0, NULL, &topo) == INCOLL_OK);
    CHECK_EQ_INT(topo.nswitches, 20);
    CHECK_EQ_INT(topo.nhosts, 16);
    CHECK_EQ_INT(topo.ntrees, 4);
    CHECK_EQ_INT(topo.levels, 3);
    for (int t = 0; t < topo.ntrees; t++) {
        const topo_tree_t *tr = &topo.trees[t];
        int j, m;
        CHECK(sscanf(topo.sw[tr->root].name, "c%d-%d", &j, &m) == 2);
        CHECK_EQ_INT(tr->height, 3);
        for (int p = 0; p < 4; p++)
            for (int i = 0; i < 2; i++) {
                char e[32], a[32];
                int ei, ai;
                snprintf(e, sizeof(e), "e%d-%d", p, i);
                snprintf(a, sizeof(a), "a%d-%d", p, j);
                ei = topo_find_switch(&topo, e);
                ai = topo_find_switch(&topo, a);
                CHECK_EQ_INT(tr->parent[ei], ai);
                CHECK_EQ_INT(tr->parent[ai], tr->root);
            }
    }
    topo_free(&topo);

    /* Uneven: 13 hosts on k = 4 fill 6 leaves with 2 and one with 1. */
    CHECK(topo_fat_tree(4, 3, 13, NULL, &topo) == INCOLL_OK);
    CHECK_EQ_INT(topo.nhosts, 13);
    CHECK_EQ_INT(topo.hosts[12].leaf, 6);
    CHECK_EQ_INT(topo.hosts[11].leaf, 5);
    topo_free(&topo);
    return TEST_PASSED;
}

static place_t *new_place(const topo_t *topo, int prune)
{
    place_params_t pp;
    place_params_default(&pp);
    pp.start_up = 1;
    pp.prune = prune;
    return place_create(topo, &pp);
}

/* Random members (several may share a host) in random order. */
static int random_members(const topo_t *topo, int *hosts, int max)
{
    int n = 2 + (int)rnd((uint32_t)max - 1);
    for (int i = 0; i < n; i++)
        hosts[i] = (int)rnd((uint32_t)topo->nhosts);
    return n;
}

TEST(mgr_place_random_shapes, TEST_UNIT)
{
    static const struct {
        int radix, levels, nhosts, prune;
    } shapes[] = {
        {4, 2, 0, 1},  {4, 3, 0, 1}, {4, 3, 13, 1}, {6, 3, 50, 1},
        {8, 2, 29, 1}, {4, 3, 0, 0}, {8, 3, 0, 1},  {2, 3, 0, 1},
    };
    int hosts[64];

    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        topo_t topo;
        place_t *pl;
        CHECK(topo_fat_tree(shapes[s].radix, shapes[s].levels, shapes[s].nhosts,
                            NULL, &topo) == INCOLL_OK);
        pl = new_place(&topo, shapes[s].prune);
        CHECK(pl != NULL);
        for (int iter = 0; iter < 200; iter++) {
            place_group_t *g;
            char why[256] = "";
            int n = random_members(&topo, hosts, 40);
            place_req_t req = {.slots = 8, .min_slots = 1, .payload = 0};
            incoll_status_t status =
                place_group_create(pl, hosts, n, &req, &g, why, sizeof(why));
            CHECK_MSG(status == INCOLL_OK, "shape %zu iter %d: %s", s, iter,
                      why);
            CHECK_MSG(check_group(&topo, g, hosts, n, shapes[s].prune) == 0,
                      "shape %zu iter %d: bad group", s, iter);
            CHECK(g->id >= 256 && g->key != 0);
            CHECK_EQ_INT(g->slots, 8);
            CHECK_EQ_INT(g->payload, 8192);
            CHECK(place_group_release(pl, g->id) == INCOLL_OK);
        }
        for (int sw = 0; sw < topo.nswitches; sw++) {
            place_an_load_t l;
            place_an_load(pl, sw, &l);
            CHECK(l.groups == 0 && l.slots == 0 && l.buffer_bytes == 0);
        }
        place_destroy(pl);
        topo_free(&topo);
    }
    return TEST_PASSED;
}

TEST(mgr_place_shape_3level, TEST_UNIT)
{
    topo_t topo;
    place_t *pl;
    place_group_t *g;
    char why[256];
    /* Hosts h15 (on e3-1), h3 (e0-1), h4 (e1-0), h0 (e0-0) and h5
     * (e1-0), in scrambled order. */
    int hosts[] = {15, 3, 4, 0, 5};
    int e00, e01, e10, e31;

    CHECK(topo_fat_tree(4, 3, 0, NULL, &topo) == INCOLL_OK);
    pl = new_place(&topo, 1);
    CHECK(place_group_create(pl, hosts, 5, NULL, &g, why, sizeof(why)) ==
          INCOLL_OK);
    CHECK(check_group(&topo, g, hosts, 5, 1) == 0);
    e00 = topo_find_switch(&topo, "e0-0");
    e01 = topo_find_switch(&topo, "e0-1");
    e10 = topo_find_switch(&topo, "e1-0");
    e31 = topo_find_switch(&topo, "e3-1");
    /* Root: the core (pods 0, 1 and 3 meet there); pod 0's aggregation
     * switch joins e0-0 and e0-1; e1-0 has two members; e3-1 and pod 3's
     * aggregation switch have one child each and are pruned, as are the
     * edges with one member. */
    CHECK_EQ_INT(topo.sw[g->ans[0].sw].level, 3);
    CHECK_EQ_INT(g->nans, 3);
    CHECK_EQ_INT(g->ans[0].nchildren, 3);
    CHECK(!place_group_uses(g, e00) && !place_group_uses(g, e01));
    CHECK(place_group_uses(g, e10) && !place_group_uses(g, e31));
    /* Member 0 (h15) sends straight to the core. */
    CHECK_EQ_INT(g->member_an[0], 0);
    /* Core children: the pod-0 aggregation switch, e1-0, then h15. */
    CHECK(g->ans[0].child[0] >= 0 && g->ans[0].child[1] >= 0);
    CHECK_EQ_INT(g->ans[0].child[2], -1);
    CHECK_EQ_INT(g->member_child[0], 2);
    /* h4 and h5 under e1-0 in member order: members 2 and 4. */
    {
        const place_an_t *e = &g->ans[g->member_an[2]];
        CHECK_EQ_INT(e->sw, e10);
        CHECK_EQ_INT(e->nchildren, 2);
        CHECK_EQ_INT(e->child[0], -3);
        CHECK_EQ_INT(e->child[1], -5);
    }
    place_destroy(pl);

    /* Without pruning every switch on the paths is in the group. */
    pl = new_place(&topo, 0);
    CHECK(place_group_create(pl, hosts, 5, NULL, &g, why, sizeof(why)) ==
          INCOLL_OK);
    CHECK(check_group(&topo, g, hosts, 5, 0) == 0);
    CHECK_EQ_INT(g->nans, 1 + 3 + 4);
    CHECK(place_group_uses(g, e00) && place_group_uses(g, e31));
    place_destroy(pl);
    topo_free(&topo);
    return TEST_PASSED;
}

TEST(mgr_place_uneven_file, TEST_UNIT)
{
    topo_t topo;
    place_t *pl;
    place_group_t *g;
    char err[256], why[256];
    int all[5] = {4, 3, 2, 1, 0}, two[2] = {1, 3}, lone[2] = {0, 4};

    CHECK(topo_parse(good_topo, "t", &topo, err, sizeof(err)) == INCOLL_OK);
    pl = new_place(&topo, 1);
    CHECK(place_group_create(pl, all, 5, NULL, &g, why, sizeof(why)) ==
          INCOLL_OK);
    CHECK(check_group(&topo, g, all, 5, 1) == 0);
    /* The smallest payload of the group's ANs: 4096 (l2 allows more). */
    CHECK_EQ_INT(g->payload, 4096);
    /* Members on one leaf: a one-AN group. */
    CHECK(place_group_create(pl, two, 2, NULL, &g, why, sizeof(why)) ==
          INCOLL_OK);
    CHECK_EQ_INT(g->nans, 1);
    CHECK_EQ_INT(g->ans[0].sw, topo_find_switch(&topo, "l1"));
    CHECK(check_group(&topo, g, two, 2, 1) == 0);
    /* One member on l0, one on l2: only a spine, both leaves pruned. */
    CHECK(place_group_create(pl, lone, 2, NULL, &g, why, sizeof(why)) ==
          INCOLL_OK);
    CHECK_EQ_INT(g->nans, 1);
    CHECK_EQ_INT(topo.sw[g->ans[0].sw].level, 2);
    /* Too few members, unknown hosts. */
    CHECK(place_group_create(pl, lone, 1, NULL, &g, why, sizeof(why)) ==
          INCOLL_ERR_INVALID_ARG);
    lone[1] = 99;
    CHECK(place_group_create(pl, lone, 2, NULL, &g, why, sizeof(why)) ==
          INCOLL_ERR_INVALID_ARG);
    CHECK(strstr(why, "unknown host") != NULL);
    place_destroy(pl);
    topo_free(&topo);
    return TEST_PASSED;
}

TEST(mgr_place_least_loaded, TEST_UNIT)
{
    topo_t topo;
    place_t *pl;
    place_group_t *g;
    char why[256];
    int hosts[2] = {0, 2}; /* l0 and l1: every group needs a spine */
    int roots[2] = {0, 0}, last = -1;

    CHECK(topo_fat_tree(4, 2, 0, NULL, &topo) == INCOLL_OK);
    pl = new_place(&topo, 1);
    /* Equal groups alternate between the spines. */
    for (int i = 0; i < 8; i++) {
        int r;
        CHECK(place_group_create(pl, hosts, 2, NULL, &g, why, sizeof(why)) ==
              INCOLL_OK);
        CHECK_EQ_INT(g->nans, 1);
        r = g->ans[0].sw - 4;
        CHECK(r == 0 || r == 1);
        CHECK(r != last);
        last = r;
        roots[r]++;
    }
    CHECK_EQ_INT(roots[0], 4);
    CHECK_EQ_INT(roots[1], 4);
    place_destroy(pl);

    /* The same with two members on each leaf: the shared leaves are the
     * most loaded ANs of both trees, and the spines still decide. */
    pl = new_place(&topo, 1);
    last = -1;
    for (int i = 0; i < 8; i++) {
        int four[4] = {0, 1, 2, 3}, r;
        CHECK(place_group_create(pl, four, 4, NULL, &g, why, sizeof(why)) ==
              INCOLL_OK);
        CHECK_EQ_INT(g->nans, 3);
        r = g->ans[0].sw - 4;
        CHECK(r != last);
        last = r;
    }
    place_destroy(pl);

    /* A big group on s0 first: the next small ones go to s1 until the load
     * evens out. */
    pl = new_place(&topo, 1);
    {
        place_req_t big = {.slots = 512, .min_slots = 4, .payload = 0};
        CHECK(place_group_create(pl, hosts, 2, &big, &g, why, sizeof(why)) ==
              INCOLL_OK);
        CHECK_EQ_INT(g->ans[0].sw, 4);
        for (int i = 0; i < 3; i++) {
            CHECK(place_group_create(pl, hosts, 2, NULL, &g, why,
                                     sizeof(why)) == INCOLL_OK);
            CHECK_EQ_INT(g->ans[0].sw, 5);
        }
    }
    place_destroy(pl);
    topo_free(&topo);
    return TEST_PASSED;
}

TEST(mgr_place_exhaustion, TEST_UNIT)
{
    topo_t topo;
    topo_caps_t caps;
    place_t *pl;
    place_group_t *g;
    char why[256];
    int across[4] = {0, 1, 2, 3}, inside[2] = {0, 1};
    uint32_t ids[64];
    int n = 0;

    /* Quota of groups: 3 per AN; groups of two hosts on l0 and two on l1
     * each take a group on both leaves, so the leaves run out after 3. */
    topo_caps_default(&caps);
    caps.max_groups = 3;
    CHECK(topo_fat_tree(4, 2, 0, &caps, &topo) == INCOLL_OK);
    pl = new_place(&topo, 1);
    while (place_group_create(pl, across, 4, NULL, &g, why, sizeof(why)) ==
           INCOLL_OK) {
        CHECK_EQ_INT(g->nans, 3);
        ids[n++] = g->id;
    }
    CHECK_EQ_INT(n, 3);
    CHECK_MSG(strstr(why, "no free group (3 of 3 in use)") != NULL, "%s", why);
    CHECK(strstr(why, "an l0") != NULL);
    /* l2 and l3 still have room. */
    {
        int other[4] = {4, 5, 6, 7};
        CHECK(place_group_create(pl, other, 4, NULL, &g, why, sizeof(why)) ==
              INCOLL_OK);
    }
    /* Release one: it fits again, exactly once more. */
    CHECK(place_group_release(pl, ids[1]) == INCOLL_OK);
    CHECK(place_group_release(pl, ids[1]) == INCOLL_ERR_NOT_FOUND);
    CHECK(place_group_create(pl, across, 4, NULL, &g, why, sizeof(why)) ==
          INCOLL_OK);
    CHECK(place_group_create(pl, across, 4, NULL, &g, why, sizeof(why)) ==
          INCOLL_ERR_NO_RESOURCE);
    place_destroy(pl);
    topo_free(&topo);

    /* Quota of slots: 100 per AN, 64 wanted, at least 4: a group gets 64,
     * the next 36, then none. */
    topo_caps_default(&caps);
    caps.slots = 100;
    CHECK(topo_fat_tree(4, 2, 0, &caps, &topo) == INCOLL_OK);
    pl = new_place(&topo, 1);
    CHECK(place_group_create(pl, inside, 2, NULL, &g, why, sizeof(why)) ==
          INCOLL_OK);
    CHECK_EQ_INT(g->slots, 64);
    CHECK(place_group_create(pl, inside, 2, NULL, &g, why, sizeof(why)) ==
          INCOLL_OK);
    CHECK_EQ_INT(g->slots, 36);
    CHECK(place_group_create(pl, inside, 2, NULL, &g, why, sizeof(why)) ==
          INCOLL_ERR_NO_RESOURCE);
    CHECK_MSG(strstr(why, "0 free slots of 100") != NULL, "%s", why);
    place_destroy(pl);
    topo_free(&topo);

    /* Quota of buffer bytes: 1 MiB per AN, payload 8192, 2 children:
     * 32768 bytes a slot, so 32 slots in all. */
    topo_caps_default(&caps);
    caps.buffer_bytes = 1 << 20;
    CHECK(topo_fat_tree(4, 2, 0, &caps, &topo) == INCOLL_OK);
    pl = new_place(&topo, 1);
    n = 0;
    {
        place_req_t req = {.slots = 10, .min_slots = 4, .payload = 0};
        uint32_t got = 0;
        place_an_load_t l;
        while (place_group_create(pl, inside, 2, &req, &g, why, sizeof(why)) ==
               INCOLL_OK) {
            got += g->slots;
            ids[n++] = g->id;
        }
        /* 10 + 10 + 10, then room for 2 slots only, below the 4 a group
         * needs. */
        CHECK_EQ_INT(got, 30);
        CHECK_EQ_INT(n, 3);
        CHECK_MSG(strstr(why, "free buffer bytes") != NULL, "%s", why);
        /* Asking for at least 2 gets the 2 that fit. */
        req.min_slots = 2;
        CHECK(place_group_create(pl, inside, 2, &req, &g, why, sizeof(why)) ==
              INCOLL_OK);
        CHECK_EQ_INT(g->slots, 2);
        ids[n++] = g->id;
        place_an_load(pl, 0, &l);
        CHECK(l.buffer_bytes == 32ull * 32768);
        for (int i = 0; i < n; i++)
            CHECK(place_group_release(pl, ids[i]) == INCOLL_OK);
        place_an_load(pl, 0, &l);
        CHECK(l.buffer_bytes == 0 && l.slots == 0 && l.groups == 0);
    }
    place_destroy(pl);
    topo_free(&topo);
    return TEST_PASSED;
}

TEST(mgr_place_many_groups, TEST_UNIT)
{
    topo_t topo;
    topo_caps_t caps;
    place_t *pl;
    place_group_t *g;
    char why[256];
    int hosts[40], made = 0, released = 0;
    uint32_t live[4096];
    int nlive = 0;

    /* Random groups on a 3-level fabric until exhaustion, releasing some
     * on the way; the load always equals the sum over live groups. */
    topo_caps_default(&caps);
    caps.max_groups = 16;
    caps.slots = 256;
    CHECK(topo_fat_tree(4, 3, 0, &caps, &topo) == INCOLL_OK);
    pl = new_place(&topo, 1);
    for (int iter = 0; iter < 2000; iter++) {
        int n = random_members(&topo, hosts, 16);
        place_req_t req = {.slots = 16, .min_slots = 4, .payload = 0};
        incoll_status_t status =
            place_group_create(pl, hosts, n, &req, &g, why, sizeof(why));
        if (status == INCOLL_OK) {
            CHECK(check_group(&topo, g, hosts, n, 1) == 0);
            live[nlive++] = g->id;
            made++;
        } else {
            CHECK_MSG(status == INCOLL_ERR_NO_RESOURCE, "%s", why);
            CHECK(why[0] != '\0');
        }
        if (nlive > 0 && (rnd(3) == 0 || status != INCOLL_OK)) {
            int k = (int)rnd((uint32_t)nlive);
            CHECK(place_group_release(pl, live[k]) == INCOLL_OK);
            live[k] = live[--nlive];
            released++;
        }
        CHECK(nlive < 4096);
        for (int sw = 0; sw < topo.nswitches; sw++) {
            place_an_load_t l;
            uint64_t groups = 0, slots = 0, bytes = 0;
            place_an_load(pl, sw, &l);
            for (int i = 0; i < place_group_count(pl); i++) {
                const place_group_t *x = place_group_at(pl, i);
                for (int a = 0; a < x->nans; a++)
                    if (x->ans[a].sw == sw) {
                        groups++;
                        slots += x->slots;
                        bytes += x->ans[a].buffer_bytes;
                    }
            }
            CHECK(l.groups == groups && l.slots == slots &&
                  l.buffer_bytes == bytes);
            CHECK(l.groups <= caps.max_groups && l.slots <= caps.slots);
        }
    }
    CHECK(made > 100 && released > 50);
    CHECK_EQ_INT(place_group_count(pl), nlive);
    /* Distinct ids. */
    for (int i = 0; i < nlive; i++)
        for (int j = i + 1; j < nlive; j++)
            CHECK(live[i] != live[j]);
    place_destroy(pl);
    topo_free(&topo);
    return TEST_PASSED;
}

TEST(mgr_place_caps_and_down, TEST_UNIT)
{
    topo_t topo;
    place_t *pl;
    place_group_t *g;
    char err[256], why[256];
    int across[2] = {0, 1}; /* l0 and l1 */
    topo_caps_t rep;
    place_req_t req = {.slots = 16, .min_slots = 4, .payload = 0};

    CHECK(topo_parse(good_topo, "t", &topo, err, sizeof(err)) == INCOLL_OK);
    pl = new_place(&topo, 1);
    /* Groups spread over s0 and s1; the one on s1 only has what s1 has. */
    for (int i = 0; i < 2; i++) {
        CHECK(place_group_create(pl, across, 2, &req, &g, why, sizeof(why)) ==
              INCOLL_OK);
        if (g->ans[0].sw == topo_find_switch(&topo, "s1")) {
            CHECK_EQ_INT(g->ops, (1u << INCOLL_OP_SUM) | (1u << INCOLL_OP_MAX));
            CHECK_EQ_INT(g->dtypes,
                         (1u << INCOLL_FLOAT32) | (1u << INCOLL_INT32));
        } else {
            CHECK_EQ_INT(g->ops, TOPO_OPS_ALL);
            CHECK_EQ_INT(g->dtypes, TOPO_DTYPES_ALL);
        }
    }
    /* s0 goes down: everything goes through s1. */
    place_an_down(pl, topo_find_switch(&topo, "s0"));
    for (int i = 0; i < 3; i++) {
        CHECK(place_group_create(pl, across, 2, &req, &g, why, sizeof(why)) ==
              INCOLL_OK);
        CHECK_EQ_INT(g->ans[0].sw, topo_find_switch(&topo, "s1"));
    }
    /* Both down: no tree can host a group across leaves... */
    place_an_down(pl, topo_find_switch(&topo, "s1"));
    CHECK(place_group_create(pl, across, 2, &req, &g, why, sizeof(why)) ==
          INCOLL_ERR_NO_RESOURCE);
    CHECK_MSG(strstr(why, "is down") != NULL, "%s", why);
    /* ...but one inside a leaf still fits. */
    {
        int inside[2] = {1, 2};
        CHECK(place_group_create(pl, inside, 2, &req, &g, why, sizeof(why)) ==
              INCOLL_OK);
    }
    /* s0 comes back reporting a smaller payload and fewer ops. */
    topo_caps_default(&rep);
    rep.max_payload = 1024;
    rep.ops = 1u << INCOLL_OP_SUM;
    place_an_up(pl, topo_find_switch(&topo, "s0"), &rep);
    CHECK(place_group_create(pl, across, 2, &req, &g, why, sizeof(why)) ==
          INCOLL_OK);
    CHECK_EQ_INT(g->ans[0].sw, topo_find_switch(&topo, "s0"));
    CHECK_EQ_INT(g->payload, 1024);
    CHECK_EQ_INT(g->ops, 1u << INCOLL_OP_SUM);
    place_destroy(pl);
    topo_free(&topo);
    return TEST_PASSED;
}

TEST(mgr_place_unreachable, TEST_UNIT)
{
    static const char two_islands[] =
        "switch a level=2\nswitch b level=2\n"
        "switch la level=1\nswitch lb level=1\n"
        "link la a\nlink lb b\n"
        "host x leaf=la\nhost y leaf=lb\nhost z leaf=lb\n";
    topo_t topo;
    place_t *pl;
    place_group_t *g;
    char err[256], why[256];
    int xy[2] = {0, 1}, yz[2] = {2, 1};

    CHECK(topo_parse(two_islands, "t", &topo, err, sizeof(err)) == INCOLL_OK);
    CHECK_EQ_INT(topo.ntrees, 2);
    pl = new_place(&topo, 1);
    CHECK(place_group_create(pl, xy, 2, NULL, &g, why, sizeof(why)) ==
          INCOLL_ERR_NO_RESOURCE);
    CHECK_MSG(strstr(why, "no tree reaches all 2 members") != NULL, "%s", why);
    CHECK(place_group_create(pl, yz, 2, NULL, &g, why, sizeof(why)) ==
          INCOLL_OK);
    CHECK_EQ_INT(g->nans, 1);
    CHECK(strcmp(topo.sw[g->ans[0].sw].name, "lb") == 0);
    place_destroy(pl);
    topo_free(&topo);
    return TEST_PASSED;
}

TEST(mgr_place_adopt, TEST_UNIT)
{
    topo_t topo;
    place_t *pl, *pl2;
    place_group_t *g, *g2;
    char why[256];
    int hosts[6] = {9, 1, 14, 2, 3, 8};
    place_req_t req = {.slots = 32, .min_slots = 4, .payload = 4096};

    CHECK(topo_fat_tree(4, 3, 0, NULL, &topo) == INCOLL_OK);
    pl = new_place(&topo, 1);
    CHECK(place_group_create(pl, hosts, 6, &req, &g, why, sizeof(why)) ==
          INCOLL_OK);
    CHECK_EQ_INT(g->payload, 4096);
    /* A new manager adopts it from what the ANs report, before they are
     * all up again. */
    {
        place_params_t pp;
        place_params_default(&pp);
        pl2 = place_create(&topo, &pp);
    }
    CHECK(place_group_adopt(pl2, g->id, g->key, g->tree, g->slots, g->payload,
                            hosts, 6, &g2, why, sizeof(why)) == INCOLL_OK);
    CHECK(g2->id == g->id && g2->key == g->key);
    CHECK_EQ_INT(g2->nans, g->nans);
    for (int i = 0; i < g->nans; i++) {
        CHECK_EQ_INT(g2->ans[i].sw, g->ans[i].sw);
        CHECK_EQ_INT(g2->ans[i].parent, g->ans[i].parent);
        CHECK_EQ_INT(g2->ans[i].nchildren, g->ans[i].nchildren);
        CHECK(memcmp(g2->ans[i].child, g->ans[i].child,
                     (size_t)g->ans[i].nchildren * sizeof(int)) == 0);
    }
    for (int m = 0; m < 6; m++)
        CHECK_EQ_INT(g2->member_child[m], g->member_child[m]);
    CHECK(place_group_adopt(pl2, g->id, g->key, g->tree, g->slots, g->payload,
                            hosts, 6, &g2, why,
                            sizeof(why)) == INCOLL_ERR_BUSY);
    /* New ids never collide with adopted ones. */
    {
        place_params_t pp;
        place_params_default(&pp);
        pp.start_up = 1;
        pp.first_id = g->id;
        place_destroy(pl2);
        pl2 = place_create(&topo, &pp);
        CHECK(place_group_adopt(pl2, g->id, g->key, g->tree, g->slots,
                                g->payload, hosts, 6, &g2, why,
                                sizeof(why)) == INCOLL_OK);
        CHECK(place_group_create(pl2, hosts, 6, NULL, &g2, why, sizeof(why)) ==
              INCOLL_OK);
        CHECK(g2->id != g->id);
    }
    place_destroy(pl2);
    place_destroy(pl);
    topo_free(&topo);
    return TEST_PASSED;
}

/* Groups of two members on one leaf that fit before admission refuses,
 * each asking for slots. */
static int groups_that_fit(uint32_t slots, place_an_load_t *load_p)
{
    topo_t topo;
    topo_caps_t caps;
    place_t *pl;
    place_group_t *g;
    char why[256];
    int inside[2] = {0, 1}, n = 0;
    place_req_t req = {.slots = slots, .min_slots = 0, .payload = 0};

    topo_caps_default(&caps);
    if (topo_fat_tree(4, 2, 0, &caps, &topo) != INCOLL_OK)
        return -1;
    pl = new_place(&topo, 1);
    while (n < 100000 && place_group_create(pl, inside, 2, &req, &g, why,
                                            sizeof(why)) == INCOLL_OK) {
        if (g->slots != slots)
            break; /* a smaller share than asked: not a full group */
        n++;
    }
    place_an_load(pl, 0, load_p);
    place_destroy(pl);
    topo_free(&topo);
    return n;
}

/* A communicator asks for INCOLL_STREAM_SLOTS (64), the most its window
 * grows to; with the default AN quotas (4096 slots) as many groups of that
 * share fit on one AN as of the earlier 8-slot share: the group quota
 * (64), not the slots, binds (docs/streaming.md has the numbers). */
TEST(mgr_place_default_share_fits_group_quota, TEST_UNIT)
{
    place_an_load_t big_load, small_load;
    int share = (int)setting_default(SETTING_STREAM_SLOTS).i;
    int big = groups_that_fit((uint32_t)share, &big_load);
    int small = groups_that_fit(8, &small_load);
    topo_caps_t caps;

    topo_caps_default(&caps);
    fprintf(stderr,
            "    groups per AN: %d with %d slots each (slots %" PRIu64
            ", buffer %" PRIu64 "), %d with 8 (slots %" PRIu64
            ", buffer %" PRIu64 ")\n",
            big, share, big_load.slots, big_load.buffer_bytes, small,
            small_load.slots, small_load.buffer_bytes);
    CHECK_EQ_INT(share, 64);
    CHECK_EQ_INT(big, (int)caps.max_groups);
    CHECK_EQ_INT(small, (int)caps.max_groups);
    return TEST_PASSED;
}
