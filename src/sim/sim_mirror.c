/*
 * Mirroring of identical subtrees (--mirror, docs/simulator.md "Mirrored
 * subtrees"). With switch ANs, whose links are all alike, without loss,
 * every host starting at once, two sibling subtrees of the same shape
 * behave alike packet for packet: their ANs emit the same packets at the
 * same times, with only the child index in the header (and so the MAC)
 * told apart, because their parent sends each result on all its ports at
 * once. (A server AN's one NIC sends it to one child after another, so
 * its children are not alike: no mirrors then.) So of the AN children of a
 * simulated AN, the first one and every sibling of another shape are simulated;
 * a sibling of the first one's shape is a mirror: nothing below it runs, and
 * whenever the first one sends a packet to the parent, the mirror sends the
 * same packet, with its own child index and MAC, from its own switch over its
 * own links at the same instant (sim_run.c). The parent is a real agg_t
 * receiving every child's packet over the network; results it sends to a mirror
 * go no further.
 */
#include "sim/sim.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const fabric_conf_t *conf;
    int *nkids;
    int **kids; /* per AN, as fabric_conf_children(): AN >= 0, host -(r+1) */
} tree_t;

static int same_shape(const tree_t *t, int a, int b)
{
    if (t->nkids[a] != t->nkids[b])
        return 0;
    for (int i = 0; i < t->nkids[a]; i++) {
        int x = t->kids[a][i], y = t->kids[b][i];
        if ((x < 0) != (y < 0))
            return 0;
        if (x >= 0 && !same_shape(t, x, y))
            return 0;
    }
    return 1;
}

/* Sum of the input factors of the hosts below an AN, each mirror counted
 * as the AN it mirrors. */
static long factor_sum(const tree_t *t, const sim_mirror_t *m, int a)
{
    long s = 0;
    for (int i = 0; i < t->nkids[a]; i++) {
        int k = t->kids[a][i];
        if (k < 0)
            s += sim_input_factor(-k - 1);
        else
            s += factor_sum(t, m,
                            m->state[k] == SIM_MIRROR_COPY ? m->rep[k] : k);
    }
    return s;
}

/* Marks a and everything below it as inside a mirror. */
static void mark_inside(const tree_t *t, sim_mirror_t *m, int a)
{
    for (int i = 0; i < t->nkids[a]; i++) {
        int k = t->kids[a][i];
        if (k >= 0) {
            m->state[k] = SIM_MIRROR_INSIDE;
            mark_inside(t, m, k);
        }
    }
}

static void plan_below(const tree_t *t, sim_mirror_t *m, int a, int on)
{
    int first = -1;
    for (int i = 0; i < t->nkids[a]; i++) {
        int k = t->kids[a][i];
        if (k < 0)
            continue;
        m->index[k] = i;
        if (on && first >= 0 && same_shape(t, first, k)) {
            m->state[k] = SIM_MIRROR_COPY;
            m->rep[k] = first;
            m->next[k] = m->first[first];
            m->first[first] = k;
            m->mirrors++;
            mark_inside(t, m, k);
            continue;
        }
        if (first < 0)
            first = k;
        m->state[k] = SIM_MIRROR_REAL;
        plan_below(t, m, k, on);
    }
}

void sim_mirror_free(sim_mirror_t *m)
{
    free(m->state);
    free(m->rep);
    free(m->first);
    free(m->next);
    free(m->index);
    memset(m, 0, sizeof(*m));
}

int sim_mirror_plan(const fabric_conf_t *conf, int on, sim_mirror_t *m)
{
    int na = conf->nans, root = -1, ret = -1;
    tree_t t = {conf, calloc((size_t)na, sizeof(int)),
                calloc((size_t)na, sizeof(int *))};
    int *fill = calloc((size_t)na, sizeof(int));

    memset(m, 0, sizeof(*m));
    m->state = calloc((size_t)na, sizeof(int));
    m->rep = malloc((size_t)na * sizeof(int));
    m->first = malloc((size_t)na * sizeof(int));
    m->next = malloc((size_t)na * sizeof(int));
    m->index = calloc((size_t)na, sizeof(int));
    if (t.nkids == NULL || t.kids == NULL || fill == NULL || m->state == NULL ||
        m->rep == NULL || m->first == NULL || m->next == NULL ||
        m->index == NULL)
        goto out;
    /* Children in fabric_conf_children()'s order: ANs, then hosts, each
     * in index order. */
    for (int a = 0; a < na; a++) {
        m->rep[a] = m->first[a] = m->next[a] = -1;
        if (conf->ans[a].parent >= 0)
            t.nkids[conf->ans[a].parent]++;
        else
            root = a;
    }
    for (int r = 0; r < conf->nhosts; r++)
        t.nkids[conf->hosts[r].leaf]++;
    for (int a = 0; a < na; a++)
        if ((t.kids[a] = malloc((size_t)(t.nkids[a] + 1) * sizeof(int))) ==
            NULL)
            goto out;
    for (int a = 0; a < na; a++)
        if (conf->ans[a].parent >= 0)
            t.kids[conf->ans[a].parent][fill[conf->ans[a].parent]++] = a;
    for (int r = 0; r < conf->nhosts; r++)
        t.kids[conf->hosts[r].leaf][fill[conf->hosts[r].leaf]++] = -(r + 1);
    if (root < 0)
        goto out;
    m->state[root] = SIM_MIRROR_REAL;
    plan_below(&t, m, root, on);
    for (int r = 0; r < conf->nhosts; r++)
        m->hosts += m->state[conf->hosts[r].leaf] == SIM_MIRROR_REAL;
    m->suma = factor_sum(&t, m, root);
    ret = 0;
out:
    for (int a = 0; t.kids && a < na; a++)
        free(t.kids[a]);
    free(t.kids);
    free(t.nkids);
    free(fill);
    if (ret != 0)
        sim_mirror_free(m);
    return ret;
}
