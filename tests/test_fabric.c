/*
 * The fabric lifecycle module (src/fabric/fabric.h) without daemons: spec
 * checks and their messages, and plans. A loopback plan of a tree (hosts,
 * radix) and of a fat-tree (radix, levels) is checked for its ANs, hosts,
 * addresses and ports, its tree and the files it writes; missing binaries
 * and bad specs fail with a message naming the cause. The plan of an
 * emulated fabric (network namespaces, needs root and iproute2) is checked
 * for its namespaces and addresses and is taken apart again. Fabrics that
 * run are the integration tests' (tests/integ.c, test_fabric_up).
 */
#include "test.h"

#include "integ.h"

#include "common/fabric_conf.h"
#include "fabric/emu.h"
#include "fabric/fabric.h"
#include "mgr/topo.h"

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

/* Runs fn(arg) with stderr going to a file; returns fn's value and the
 * text written (caller frees) in *text_p. */
static int with_stderr(int (*fn)(void *), void *arg, char **text_p)
{
    char path[PATH_MAX];
    int saved, fd, ret;

    snprintf(path, sizeof(path), "%.4000s/stderr.txt", test_tmpdir());
    fflush(stderr);
    saved = dup(2);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (saved < 0 || fd < 0) {
        *text_p = NULL;
        return -99;
    }
    dup2(fd, 2);
    close(fd);
    ret = fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    *text_p = slurp(path);
    return ret;
}

/* A directory with stand-ins for incoll-agg and incoll-mgr: a plan only
 * checks that they are there. */
static const char *fake_bindir(int with_mgr)
{
    static char dir[PATH_MAX];
    char path[PATH_MAX + 32];
    const char *names[2] = {"incoll-agg", "incoll-mgr"};

    snprintf(dir, sizeof(dir), "%.4000s/bin%d", test_tmpdir(), with_mgr);
    mkdir(dir, 0755);
    for (int i = 0; i < 1 + with_mgr; i++) {
        int fd;
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);
        if (fd >= 0)
            close(fd);
    }
    return dir;
}

static int check_spec(fabric_spec_t *s, const char *want)
{
    char err[512];
    if (fabric_spec_check(s, err, sizeof(err)) != -1)
        return 0;
    return strstr(err, want) != NULL;
}

TEST(fabric_spec_errors, TEST_UNIT)
{
    fabric_spec_t s;
    char err[512];

    fabric_spec_default(&s);
    CHECK(check_spec(&s, "need --dir DIR"));
    s.dir = "/tmp/x";
    CHECK_EQ_INT(fabric_spec_check(&s, err, sizeof(err)), 0);
    s.hosts = 0;
    CHECK(check_spec(&s, "--hosts N>=1"));
    s.hosts = 4;
    s.radix = 1;
    CHECK(check_spec(&s, "--radix K in 2.."));
    s.radix = 4;
    s.levels = 4;
    CHECK(check_spec(&s, "--levels L"));
    s.levels = 2;
    s.radix = 5; /* a fat-tree's radix is even */
    CHECK(check_spec(&s, "even"));
    s.radix = 4;
    s.hosts = 0;
    CHECK_EQ_INT(fabric_spec_check(&s, err, sizeof(err)), 0);
    s.emulate = 1;
    CHECK(check_spec(&s, "do not go with --emulate"));
    s.emulate = 0;
    s.managed = 0;
    CHECK(check_spec(&s, "need the manager"));
    s.levels = 0;
    s.hosts = 4;
    s.keep = 1;
    CHECK(check_spec(&s, "--keep keeps the manager up"));
    s.keep = 0;
    s.managed = 1;
    s.topology = "t.topo";
    CHECK(check_spec(&s, "--topology FILE"));
    s.hosts = 0;
    s.radix = 0;
    CHECK_EQ_INT(fabric_spec_check(&s, err, sizeof(err)), 0);
    s.topology = NULL;
    s.hosts = 4;
    s.radix = 2;
    s.slots = 70000;
    CHECK(check_spec(&s, "need --dir"));
    s.slots = 0;
    s.payload = 4;
    CHECK(check_spec(&s, "need --dir"));
    return TEST_PASSED;
}

typedef struct {
    fabric_spec_t spec;
    fabric_t *fab;
} plan_arg_t;

static int do_plan(void *arg)
{
    plan_arg_t *a = arg;
    a->fab = NULL;
    return fabric_plan(&a->spec, &a->fab);
}

/* A default spec of a fabric in <tmp>/name, the shape given, the
 * stand-in binaries (with the manager's). */
static void spec_in(plan_arg_t *a, const char *name, int hosts, int radix,
                    int levels)
{
    static char dirs[4][PATH_MAX];
    static int k;
    char *dir = dirs[k++ % 4];

    snprintf(dir, PATH_MAX, "%.4000s/%s", test_tmpdir(), name);
    fabric_spec_default(&a->spec);
    a->spec.dir = dir;
    a->spec.bindir = fake_bindir(1);
    a->spec.hosts = hosts;
    a->spec.radix = radix;
    a->spec.levels = levels;
}

/* Plans a->spec with its messages kept back; fabric_plan()'s value, the
 * messages (caller frees) in *text_p, or dropped when text_p is NULL. */
static int plan(plan_arg_t *a, char **text_p)
{
    char *text;
    int ret = with_stderr(do_plan, a, &text);
    if (text_p)
        *text_p = text;
    else
        free(text);
    return ret;
}

/* Every AN on 127.0.0.1 with its own port, every host with a port of its
 * own (host_ports), all distinct. */
static int check_ports(const fabric_conf_t *c)
{
    for (int i = 0; i < c->nans; i++) {
        CHECK_MSG((c->ans[i].addr >> 16) == 0x7f000001u &&
                      (c->ans[i].addr & 0xffff) != 0,
                  "an %s", c->ans[i].name);
        CHECK(c->ans[i].netns[0] == '\0');
        for (int j = 0; j < i; j++)
            CHECK((c->ans[i].addr & 0xffff) != (c->ans[j].addr & 0xffff));
    }
    for (int r = 0; r < c->nhosts; r++) {
        CHECK(c->hosts[r].ip == 0x7f000001u && c->hosts[r].port != 0);
        for (int i = 0; i < c->nans; i++)
            CHECK(c->hosts[r].port != (c->ans[i].addr & 0xffff));
        for (int q = 0; q < r; q++)
            CHECK(c->hosts[r].port != c->hosts[q].port);
    }
    return 0;
}

TEST(fabric_plan_loopback, TEST_UNIT)
{
    plan_arg_t a;
    char path[PATH_MAX + 32], err[512];
    const char *dir;
    const fabric_conf_t *c;
    fabric_conf_t back;
    topo_t topo;

    /* A tree of 5 hosts, radix 2: leaves l0..l2, s2-0 and s2-1, root. */
    spec_in(&a, "tree", 5, 2, 0);
    a.spec.slots = 16;
    dir = a.spec.dir;
    CHECK_EQ_INT(plan(&a, NULL), 0);
    c = fabric_plan_conf(a.fab);
    CHECK_EQ_INT(c->nhosts, 5);
    CHECK_EQ_INT(c->nans, 6);
    CHECK_EQ_INT(c->levels, 3);
    CHECK_EQ_INT((int)c->slots, 16);
    CHECK_EQ_INT(c->hosts[4].leaf, fabric_conf_find_an(c, "l2"));
    CHECK_EQ_INT(c->ans[fabric_conf_find_an(c, "l2")].parent,
                 fabric_conf_find_an(c, "s2-1"));
    CHECK_EQ_INT(c->ans[fabric_conf_find_an(c, "s2-1")].parent,
                 fabric_conf_find_an(c, "root"));
    if (check_ports(c) != 0)
        return TEST_FAILED;
    /* fabric.conf on disk is the plan; the manager's topology has the same
     * switches and hosts. */
    snprintf(path, sizeof(path), "%s/fabric.conf", dir);
    CHECK_MSG(fabric_conf_load(path, &back, err, sizeof(err)) == INCOLL_OK,
              "%s", err);
    CHECK_EQ_INT(back.nans, 6);
    CHECK(back.ans[2].addr == c->ans[2].addr);
    CHECK(back.hosts[3].port == c->hosts[3].port);
    fabric_conf_free(&back);
    snprintf(path, sizeof(path), "%s/topology", dir);
    CHECK_MSG(topo_load(path, &topo, err, sizeof(err)) == INCOLL_OK, "%s", err);
    CHECK_EQ_INT(topo.nswitches, 6);
    CHECK_EQ_INT(topo.nhosts, 5);
    CHECK_EQ_INT(topo.ntrees, 1);
    topo_free(&topo);
    fabric_free(a.fab);
    CHECK_EQ_INT(fabric_stop(dir, 1), 0);

    /* A leaf-spine of radix 4 (the manager's own topology): 4 leaves of 2
     * hosts and 2 spines, so 2 trees; fabric.conf takes one of them. */
    spec_in(&a, "fat", 0, 4, 2);
    dir = a.spec.dir;
    CHECK_EQ_INT(plan(&a, NULL), 0);
    c = fabric_plan_conf(a.fab);
    CHECK_EQ_INT(c->nhosts, 8);
    CHECK_EQ_INT(c->nans, 5);
    if (check_ports(c) != 0)
        return TEST_FAILED;
    snprintf(path, sizeof(path), "%s/topology", dir);
    CHECK_MSG(topo_load(path, &topo, err, sizeof(err)) == INCOLL_OK, "%s", err);
    CHECK_EQ_INT(topo.nswitches, 6);
    CHECK_EQ_INT(topo.ntrees, 2);
    CHECK_EQ_INT(topo.nhosts, 8);
    topo_free(&topo);
    fabric_free(a.fab);
    CHECK_EQ_INT(fabric_stop(dir, 1), 0);
    return TEST_PASSED;
}

/* A plan that cannot be made says why, on stderr, and leaves no plan. */
TEST(fabric_plan_errors, TEST_UNIT)
{
    plan_arg_t a;
    char topo_path[PATH_MAX + 32], *text;
    FILE *f;

    spec_in(&a, "err", 0, 2, 0);
    CHECK_EQ_INT(plan(&a, &text), -1);
    CHECK(a.fab == NULL);
    CHECK_MSG(text && strstr(text, "incoll fabric up: need --dir DIR"), "%s",
              text);
    free(text);

    /* The manager's binary is missing: named, with the way out. */
    a.spec.hosts = 2;
    a.spec.bindir = fake_bindir(0);
    CHECK_EQ_INT(plan(&a, &text), -1);
    CHECK_MSG(text && strstr(text, "/incoll-mgr: No such file") &&
                  strstr(text, "--no-mgr runs without it"),
              "%s", text);
    free(text);
    /* Without a manager it is not needed. */
    a.spec.managed = 0;
    CHECK_EQ_INT(plan(&a, NULL), 0);
    CHECK_EQ_INT(fabric_plan_conf(a.fab)->nhosts, 2);
    fabric_free(a.fab);

    /* A bad topology file: its file:line. */
    snprintf(topo_path, sizeof(topo_path), "%s/bad.topo", test_tmpdir());
    f = fopen(topo_path, "w");
    CHECK(f != NULL);
    fputs("switch s0 level=1\nswitch s1 level=x\n", f);
    fclose(f);
    spec_in(&a, "err", 0, 0, 0);
    a.spec.topology = topo_path;
    CHECK_EQ_INT(plan(&a, &text), -1);
    CHECK_MSG(text && strstr(text, "bad.topo:2: switch s1: level 'x'"), "%s",
              text);
    free(text);
    /* An odd radix of a fat-tree gets past the spec check only with a
     * topology: the generator's limits are named too. */
    a.spec.topology = NULL;
    a.spec.radix = 4;
    a.spec.levels = 2;
    a.spec.hosts = 9;
    CHECK_EQ_INT(plan(&a, &text), -1);
    CHECK_MSG(text && strstr(text, "cannot build a fat-tree of radix 4"), "%s",
              text);
    free(text);
    fabric_stop(a.spec.dir, 1);
    return TEST_PASSED;
}

/* The checks of an emulated plan (its prefix into prefix). */
static int emulated_checks(const char *dir, const fabric_conf_t *c,
                           char *prefix, size_t len)
{
    emu_state_t st;

    CHECK_EQ_INT(c->nhosts, 4);
    CHECK_EQ_INT(c->nans, 3);
    CHECK(emu_present(dir));
    CHECK(emu_state_load(dir, &st) == INCOLL_OK);
    snprintf(prefix, len, "%s", st.prefix);
    CHECK_EQ_INT(st.nnetns, 7);
    emu_state_free(&st);
    CHECK_EQ_INT(emu_count_netns(prefix), 7);
    for (int i = 0; i < c->nans; i++) {
        CHECK(strncmp(c->ans[i].netns, prefix, strlen(prefix)) == 0);
        CHECK(((c->ans[i].addr >> 16) & 0xffff0000u) == 0x0a4d0000u);
    }
    for (int r = 0; r < c->nhosts; r++) {
        CHECK(strncmp(c->hosts[r].netns, prefix, strlen(prefix)) == 0);
        CHECK((c->hosts[r].ip & 0xffff0000u) == 0x0a4d0000u);
    }
    CHECK_EQ_INT(emu_mgr_an(c), fabric_conf_find_an(c, "root"));
    return TEST_PASSED;
}

/* An emulated plan: one namespace per host and switch, addresses in
 * 10.77/16, the manager's AN is the root; abort takes it all away. */
TEST(fabric_plan_emulated, TEST_INTEG)
{
    plan_arg_t a;
    char why[256], prefix[32] = "";
    int ret;

    if (geteuid() != 0)
        return test_skip("not root: emulated fabrics need network namespaces");
    if (emu_usable(why, sizeof(why)) != 0)
        return test_skip("%s", why);
    spec_in(&a, "emu", 4, 2, 0);
    a.spec.emulate = 1;
    CHECK_EQ_INT(plan(&a, NULL), 0);
    ret = emulated_checks(a.spec.dir, fabric_plan_conf(a.fab), prefix,
                          sizeof(prefix));
    fabric_abort(a.fab);
    fabric_free(a.fab);
    if (ret != TEST_PASSED)
        return ret;
    CHECK(!emu_present(a.spec.dir));
    CHECK(prefix[0] != '\0');
    CHECK_EQ_INT(emu_count_netns(prefix), 0);
    return TEST_PASSED;
}
