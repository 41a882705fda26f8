/*
 * SimGrid platform of a tree of switches, as XML (SimGrid 3.32's C API can
 * load a platform but not build one).
 *
 * Every switch X is a Full-routed zone "z-X" holding the host "sx-X", the
 * switch itself as seen by an actor (the switch's own AN in switch mode,
 * its egress port towards the AN server in server mode), "an-X", a server
 * cabled to the switch by "anl-X" (rate R, latency L, full duplex), and
 * the router "sw-X". Seen from its parent, the zone's gateway is sx-X for
 * aggregation traffic (to and from the ANs) and sw-X for host traffic
 * passing through.
 *  - A leaf switch holds its hosts "h<rank>", each on its own link
 *    "l-h<rank>" (R, L, full duplex). Host to switch is that link alone;
 *    host to host (only with p2p routes) is one link up and one down. A
 *    host's route to itself is its "clock" link "c-h<rank>" (1 byte per
 *    ps, no latency, never shared): a message of N bytes to oneself is a
 *    timer of N ps, which the simulator uses to wake a host.
 *  - A higher switch holds its children's zones. "up-C" (latency L, full
 *    duplex) joins child C to X: a bundle of as many links of rate R as C
 *    has hosts, over the oversubscription (1 = full bisection, a
 *    fat-tree), shared as one (ideal ECMP). A single flow is held to R by
 *    the host link or the server link on its route. Packets between ANs
 *    also cross "aup-C" (R, no latency): the one link of the bundle that
 *    the aggregation tree uses.
 *
 * No link is shared by the packets of different hosts on their way to or
 * from a switch AN: that would be wrong (a switch AN has a port per host)
 * and slow (SimGrid's max-min solver re-solves every flow connected
 * through a shared link, which made 1,024 hosts 20 times slower than 256).
 * A message is charged the sum of its route's latencies plus its size over
 * its bandwidth share (CM02). Every link is declared in one zone, "z-links",
 * the root's first child (write_links says why). Routes are listed
 * explicitly, per zone, so
 * each zone only knows its own children; host-to-host routes inside a leaf
 * (k^2/2 per leaf) are written only when host-based algorithms run.
 */
#include "sim/sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    FILE *f;
    const fabric_conf_t *conf;
    int **kids; /* per AN, its child ANs */
    int *nkids;
    int *below; /* per AN, hosts in its subtree */
    int *hosts; /* ranks grouped by leaf: leaf a holds hosts[first[a]..] */
    int *first, *count;
    int links_at_root; /* every link is declared in zone z-links */
    int p2p;
    double link_Bps, oversub;
    char rate[64], lat[64];
} plat_t;

static void ctn(plat_t *p, const char *prefix, const char *name,
                const char *dir)
{
    if (dir)
        fprintf(p->f, "<link_ctn id=\"%s%s\" direction=\"%s\"/>", prefix, name,
                dir);
    else
        fprintf(p->f, "<link_ctn id=\"%s%s\"/>", prefix, name);
}

static void route_begin(plat_t *p, const char *src, const char *dst)
{
    fprintf(p->f, "<route src=\"%s\" dst=\"%s\">", src, dst);
}

static void zroute_begin(plat_t *p, const char *src, const char *dst,
                         const char *gsrc, const char *gdst)
{
    fprintf(p->f,
            "<zoneRoute src=\"%s\" dst=\"%s\" gw_src=\"%s\" gw_dst=\"%s\">",
            src, dst, gsrc, gdst);
}

/* The switch's server and its link; its routes come from the caller. */
static void server_link(plat_t *p, const char *n)
{
    if (p->links_at_root)
        return;
    fprintf(p->f,
            "<link id=\"anl-%s\" bandwidth=\"%s\" latency=\"%s\" "
            "sharing_policy=\"SPLITDUPLEX\"/>\n",
            n, p->rate, p->lat);
}

/* The links of leaf a's hosts: each host's own link and its clock. */
static void host_links(plat_t *p, int a)
{
    for (int i = 0; i < p->count[a]; i++) {
        int r = p->hosts[p->first[a] + i];
        fprintf(p->f,
                "<link id=\"l-h%d\" bandwidth=\"%s\" latency=\"%s\" "
                "sharing_policy=\"SPLITDUPLEX\"/>\n"
                "<link id=\"c-h%d\" bandwidth=\"1TBps\" latency=\"0s\" "
                "sharing_policy=\"FATPIPE\"/>\n",
                r, p->rate, p->lat, r);
    }
}

static void up_links(plat_t *p, int c)
{
    double width = ceil((double)p->below[c] / p->oversub - 1e-9);
    fprintf(p->f,
            "<link id=\"up-%s\" bandwidth=\"%.17gBps\" latency=\"%s\" "
            "sharing_policy=\"SPLITDUPLEX\"/>\n"
            "<link id=\"aup-%s\" bandwidth=\"%s\" latency=\"0s\" "
            "sharing_policy=\"SPLITDUPLEX\"/>\n",
            p->conf->ans[c].name, (width < 1 ? 1 : width) * p->link_Bps, p->lat,
            p->conf->ans[c].name, p->rate);
}

/*
 * Every link of the subtree of a, for the zone "z-links", the root zone's
 * first child. SimGrid 3.32 finds the link of a <link_ctn> by a
 * depth-first search of the zones from the root, so a link declared in a
 * leaf zone costs a walk over every zone declared before it: quadratic,
 * minutes for 65,536 hosts under 1,024 leaves (hours with the host-to-host
 * routes). Declared in the first zone, each is found at the second step.
 * (Declared in the root zone itself they would be found first, but
 * SimGrid's parser rejects a zone after a link.)
 */
static void write_links(plat_t *p, int a)
{
    fprintf(p->f,
            "<link id=\"anl-%s\" bandwidth=\"%s\" latency=\"%s\" "
            "sharing_policy=\"SPLITDUPLEX\"/>\n",
            p->conf->ans[a].name, p->rate, p->lat);
    if (p->conf->ans[a].level == 1) {
        host_links(p, a);
        return;
    }
    for (int i = 0; i < p->nkids[a]; i++) {
        up_links(p, p->kids[a][i]);
        write_links(p, p->kids[a][i]);
    }
}

static void write_leaf(plat_t *p, int a)
{
    const fabric_conf_t *conf = p->conf;
    const char *n = conf->ans[a].name;
    char h[48], h2[48], sx[48], an[48];

    snprintf(sx, sizeof(sx), "sx-%s", n);
    snprintf(an, sizeof(an), "an-%s", n);
    fprintf(p->f, "<zone id=\"z-%s\" routing=\"Full\">\n", n);
    for (int i = 0; i < p->count[a]; i++)
        fprintf(p->f, "<host id=\"h%d\" speed=\"1Gf\"/>\n",
                p->hosts[p->first[a] + i]);
    fprintf(p->f,
            "<host id=\"%s\" speed=\"1Gf\"/>\n<host id=\"%s\" speed=\"1Gf\"/>\n"
            "<router id=\"sw-%s\"/>\n",
            sx, an, n);
    if (!p->links_at_root)
        host_links(p, a);
    server_link(p, n);
    route_begin(p, sx, an);
    ctn(p, "anl-", n, "DOWN");
    fprintf(p->f, "</route>\n");
    for (int i = 0; i < p->count[a]; i++) {
        int r = p->hosts[p->first[a] + i];
        snprintf(h, sizeof(h), "h%d", r);
        snprintf(h2, sizeof(h2), "sw-%s", n);
        route_begin(p, h, h2);
        ctn(p, "l-", h, "UP");
        fprintf(p->f, "</route>\n");
        route_begin(p, h, h);
        ctn(p, "c-", h, NULL);
        fprintf(p->f, "</route>\n");
        route_begin(p, h, sx);
        ctn(p, "l-", h, "UP");
        fprintf(p->f, "</route>\n");
        route_begin(p, h, an);
        ctn(p, "l-", h, "UP");
        ctn(p, "anl-", n, "DOWN");
        fprintf(p->f, "</route>\n");
        if (!p->p2p)
            continue;
        for (int j = i + 1; j < p->count[a]; j++) {
            int s = p->hosts[p->first[a] + j];
            snprintf(h2, sizeof(h2), "h%d", s);
            route_begin(p, h, h2);
            ctn(p, "l-", h, "UP");
            ctn(p, "l-", h2, "DOWN");
            fprintf(p->f, "</route>\n");
        }
    }
    fprintf(p->f, "</zone>\n");
}

static void write_switch(plat_t *p, int a)
{
    const fabric_conf_t *conf = p->conf;
    const char *n = conf->ans[a].name;
    char zsx[48], zan[48], sx[48], an[48], zc[48], sxc[48], zd[48], sxd[48];
    char swc[48], zsw[48], sw[48];

    if (conf->ans[a].level == 1) {
        write_leaf(p, a);
        return;
    }
    snprintf(zsx, sizeof(zsx), "z-sx-%s", n);
    snprintf(zan, sizeof(zan), "z-an-%s", n);
    snprintf(sx, sizeof(sx), "sx-%s", n);
    snprintf(an, sizeof(an), "an-%s", n);
    fprintf(p->f, "<zone id=\"z-%s\" routing=\"Full\">\n", n);
    if (conf->ans[a].parent < 0 && p->links_at_root) {
        fprintf(p->f, "<zone id=\"z-links\" routing=\"None\">\n");
        write_links(p, a);
        fprintf(p->f, "</zone>\n");
    }
    for (int i = 0; i < p->nkids[a]; i++)
        write_switch(p, p->kids[a][i]);
    fprintf(
        p->f,
        "<zone id=\"%s\" routing=\"Full\"><host id=\"%s\" "
        "speed=\"1Gf\"/></zone>\n"
        "<zone id=\"%s\" routing=\"Full\"><host id=\"%s\" "
        "speed=\"1Gf\"/></zone>\n"
        "<zone id=\"z-sw-%s\" routing=\"Full\"><router id=\"sw-%s\"/></zone>\n",
        zsx, sx, zan, an, n, n);
    server_link(p, n);
    for (int i = 0; p->links_at_root == 0 && i < p->nkids[a]; i++)
        up_links(p, p->kids[a][i]);
    zroute_begin(p, zsx, zan, sx, an);
    ctn(p, "anl-", n, "DOWN");
    fprintf(p->f, "</zoneRoute>\n");
    for (int i = 0; i < p->nkids[a]; i++) {
        const char *c = conf->ans[p->kids[a][i]].name;
        snprintf(zc, sizeof(zc), "z-%s", c);
        snprintf(sxc, sizeof(sxc), "sx-%s", c);
        /* Aggregation traffic: child's AN (or server) to this switch. */
        zroute_begin(p, zc, zsx, sxc, sx);
        ctn(p, "up-", c, "UP");
        ctn(p, "aup-", c, "UP");
        fprintf(p->f, "</zoneRoute>\n");
        /* Host traffic leaving X's subtree, through its router. */
        snprintf(swc, sizeof(swc), "sw-%s", c);
        snprintf(zsw, sizeof(zsw), "z-sw-%s", n);
        snprintf(sw, sizeof(sw), "sw-%s", n);
        zroute_begin(p, zc, zsw, swc, sw);
        ctn(p, "up-", c, "UP");
        fprintf(p->f, "</zoneRoute>\n");
        zroute_begin(p, zc, zan, sxc, an);
        ctn(p, "up-", c, "UP");
        ctn(p, "aup-", c, "UP");
        ctn(p, "anl-", n, "DOWN");
        fprintf(p->f, "</zoneRoute>\n");
        if (!p->p2p)
            continue;
        for (int j = i + 1; j < p->nkids[a]; j++) {
            const char *d = conf->ans[p->kids[a][j]].name;
            snprintf(zd, sizeof(zd), "z-%s", d);
            snprintf(sxd, sizeof(sxd), "sw-%s", d);
            zroute_begin(p, zc, zd, swc, sxd);
            ctn(p, "up-", c, "UP");
            ctn(p, "up-", d, "DOWN");
            fprintf(p->f, "</zoneRoute>\n");
        }
    }
    fprintf(p->f, "</zone>\n");
}

int sim_platform_write(FILE *f, const fabric_conf_t *conf, double link_Bps,
                       double link_lat_s, double oversub, int p2p)
{
    plat_t p = {.f = f,
                .conf = conf,
                .link_Bps = link_Bps,
                .p2p = p2p,
                .oversub = oversub < 1 ? 1 : oversub};
    int root = -1, ret = -1;

    p.kids = calloc((size_t)conf->nans, sizeof(*p.kids));
    p.nkids = calloc((size_t)conf->nans, sizeof(*p.nkids));
    p.below = calloc((size_t)conf->nans, sizeof(*p.below));
    p.hosts = calloc((size_t)conf->nhosts + 1, sizeof(*p.hosts));
    p.first = calloc((size_t)conf->nans, sizeof(*p.first));
    p.count = calloc((size_t)conf->nans, sizeof(*p.count));
    if (p.kids == NULL || p.nkids == NULL || p.below == NULL ||
        p.hosts == NULL || p.first == NULL || p.count == NULL)
        goto out;
    for (int r = 0; r < conf->nhosts; r++) {
        if (conf->hosts[r].leaf < 0 || conf->hosts[r].leaf >= conf->nans)
            goto out;
        p.count[conf->hosts[r].leaf]++;
    }
    for (int a = 1; a < conf->nans; a++)
        p.first[a] = p.first[a - 1] + p.count[a - 1];
    for (int a = 0; a < conf->nans; a++)
        p.count[a] = 0;
    for (int r = 0; r < conf->nhosts; r++) {
        int a = conf->hosts[r].leaf;
        p.hosts[p.first[a] + p.count[a]++] = r;
    }
    for (int r = 0; r < conf->nhosts; r++)
        for (int a = conf->hosts[r].leaf, hops = 0;
             a >= 0 && hops <= conf->nans; a = conf->ans[a].parent, hops++)
            p.below[a]++;
    for (int a = 0; a < conf->nans; a++) {
        if (conf->ans[a].parent < 0) {
            if (root >= 0)
                goto out; /* a forest: not a tree */
            root = a;
        } else {
            p.nkids[conf->ans[a].parent]++;
        }
    }
    if (root < 0)
        goto out;
    for (int a = 0; a < conf->nans; a++) {
        p.kids[a] = calloc((size_t)p.nkids[a] + 1, sizeof(int));
        if (p.kids[a] == NULL)
            goto out;
        p.nkids[a] = 0;
    }
    for (int a = 0; a < conf->nans; a++)
        if (conf->ans[a].parent >= 0)
            p.kids[conf->ans[a].parent][p.nkids[conf->ans[a].parent]++] = a;
    for (int r = 0; r < conf->nhosts; r++)
        if (conf->ans[conf->hosts[r].leaf].level != 1)
            goto out; /* hosts under a spine: not this generator's shape */
    for (int a = 0; a < conf->nans; a++)
        if (conf->ans[a].level == 1 && p.nkids[a] > 0)
            goto out;
    p.links_at_root = conf->ans[root].level > 1;
    snprintf(p.rate, sizeof(p.rate), "%.17gBps", link_Bps);
    snprintf(p.lat, sizeof(p.lat), "%.17gs", link_lat_s);

    fprintf(f,
            "<?xml version='1.0'?>\n"
            "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
            "<!-- incoll-sim: %d hosts, radix %d, %d levels; see "
            "docs/simulator.md -->\n"
            "<platform version=\"4.1\">\n",
            conf->nhosts, conf->radix, conf->levels);
    write_switch(&p, root);
    fprintf(f, "</platform>\n");
    ret = ferror(f) ? -1 : 0;
out:
    if (p.kids)
        for (int a = 0; a < conf->nans; a++)
            free(p.kids[a]);
    free(p.kids);
    free(p.nkids);
    free(p.below);
    free(p.hosts);
    free(p.first);
    free(p.count);
    return ret;
}
