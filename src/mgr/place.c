/*
 * Group placement and admission; see place.h.
 */
#include "mgr/place.h"

#include "common/settings.h"

#include "common/fabric_conf.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct place {
    const topo_t *topo;
    place_params_t params;
    place_an_load_t *an; /* per switch */
    place_group_t **groups;
    int ngroups;
    int capgroups;
    uint32_t next_id;
    /* Scratch for one tree evaluation, per switch. */
    uint32_t *stamp; /* == cur: visited in this evaluation */
    uint32_t cur;
    int *nchild;  /* children in the group's part of the tree */
    int *visited; /* the visited switches, nvisited of them */
    int nvisited;
    int *pos; /* a kept switch's index in the group's ans[] */
};

/* What one tree offers a group. */
typedef struct {
    int reached; /* the tree reaches every member's leaf */
    int ok;      /* and can host the group */
    int quota;   /* it cannot for the owner's quota */
    uint32_t slots;
    uint32_t payload;
    uint32_t ops;
    uint32_t dtypes;
    double score_all;   /* smallest free fraction over the group's ANs */
    double score_upper; /* the same over its non-leaf ANs (2 if none) */
    int nkept;
} offer_t;

void place_params_default(place_params_t *params)
{
    memset(params, 0, sizeof(*params));
    params->default_slots = (uint32_t)setting_default(SETTING_MGR_SLOTS).i;
    params->min_slots = (uint32_t)setting_default(SETTING_MGR_MIN_SLOTS).i;
    params->prune = (int)setting_default(SETTING_MGR_PRUNE).i;
    params->start_up = 0;
    params->first_id = 256;
}

uint64_t place_an_bytes(uint32_t slots, uint32_t payload, int nchildren)
{
    return (uint64_t)slots * payload * (uint64_t)(2 + nchildren);
}

place_t *place_create(const topo_t *topo, const place_params_t *params)
{
    place_t *pl = calloc(1, sizeof(*pl));
    size_t n = (size_t)topo->nswitches;

    if (pl == NULL)
        return NULL;
    pl->topo = topo;
    if (params)
        pl->params = *params;
    else
        place_params_default(&pl->params);
    if (pl->params.default_slots == 0)
        pl->params.default_slots =
            (uint32_t)setting_default(SETTING_MGR_SLOTS).i;
    if (pl->params.min_slots == 0)
        pl->params.min_slots = 1;
    if (pl->params.first_id == 0)
        pl->params.first_id = 256;
    pl->next_id = pl->params.first_id;
    pl->an = calloc(n, sizeof(*pl->an));
    pl->stamp = calloc(n, sizeof(*pl->stamp));
    pl->nchild = calloc(n, sizeof(*pl->nchild));
    pl->visited = calloc(n, sizeof(*pl->visited));
    pl->pos = calloc(n, sizeof(*pl->pos));
    if (!pl->an || !pl->stamp || !pl->nchild || !pl->visited || !pl->pos) {
        place_destroy(pl);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        pl->an[i].up = pl->params.start_up;
        pl->an[i].caps = topo->sw[i].caps;
    }
    return pl;
}

static void group_free(place_group_t *g)
{
    if (g == NULL)
        return;
    if (g->ans)
        for (int i = 0; i < g->nans; i++)
            free(g->ans[i].child);
    free(g->ans);
    free(g->member_host);
    free(g->member_an);
    free(g->member_child);
    free(g);
}

void place_destroy(place_t *pl)
{
    if (pl == NULL)
        return;
    for (int i = 0; i < pl->ngroups; i++)
        group_free(pl->groups[i]);
    free(pl->groups);
    free(pl->an);
    free(pl->stamp);
    free(pl->nchild);
    free(pl->visited);
    free(pl->pos);
    free(pl);
}

void place_an_up(place_t *pl, int sw, const topo_caps_t *reported)
{
    if (sw < 0 || sw >= pl->topo->nswitches)
        return;
    pl->an[sw].up = 1;
    if (reported)
        topo_caps_meet(&pl->an[sw].caps, &pl->topo->sw[sw].caps, reported);
    else
        pl->an[sw].caps = pl->topo->sw[sw].caps;
}

void place_an_down(place_t *pl, int sw)
{
    if (sw >= 0 && sw < pl->topo->nswitches)
        pl->an[sw].up = 0;
}

void place_an_load(const place_t *pl, int sw, place_an_load_t *load_p)
{
    *load_p = pl->an[sw];
}

place_group_t *place_group_find(const place_t *pl, uint32_t id)
{
    for (int i = 0; i < pl->ngroups; i++)
        if (pl->groups[i]->id == id)
            return pl->groups[i];
    return NULL;
}

int place_group_uses(const place_group_t *g, int sw)
{
    for (int i = 0; i < g->nans; i++)
        if (g->ans[i].sw == sw)
            return 1;
    return 0;
}

int place_group_count(const place_t *pl)
{
    return pl->ngroups;
}

place_group_t *place_group_at(const place_t *pl, int i)
{
    return i >= 0 && i < pl->ngroups ? pl->groups[i] : NULL;
}

static void say(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    if (why == NULL || whylen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

static int kept(const place_t *pl, int sw)
{
    return !pl->params.prune || pl->nchild[sw] >= 2;
}

/* The nearest kept switch at or above sw in tree t, or -1. */
static int kept_at_or_above(const place_t *pl, const topo_tree_t *t, int sw)
{
    while (sw >= 0 && !kept(pl, sw))
        sw = t->parent[sw];
    return sw;
}

/* Free fraction of an AN's scarcest resource, 0..1. */
static double free_frac(const place_an_load_t *a)
{
    double f = 1.0, x;
    x = a->caps.max_groups
            ? 1.0 - (double)a->groups / (double)a->caps.max_groups
            : 0.0;
    f = x < f ? x : f;
    x = a->caps.slots ? 1.0 - (double)a->slots / (double)a->caps.slots : 0.0;
    f = x < f ? x : f;
    x = a->caps.buffer_bytes
            ? 1.0 - (double)a->buffer_bytes / (double)a->caps.buffer_bytes
            : 0.0;
    f = x < f ? x : f;
    return f < 0 ? 0 : f;
}

/*
 * Marks the part of tree t the members need (pl->visited, pl->nchild).
 * Returns -1 and says why when the tree misses a member's leaf.
 */
static int mark(place_t *pl, int t, const int *hosts, int n, char *why,
                size_t whylen)
{
    const topo_t *topo = pl->topo;
    const topo_tree_t *tree = &topo->trees[t];

    if (++pl->cur == 0) {
        memset(pl->stamp, 0, (size_t)topo->nswitches * sizeof(*pl->stamp));
        pl->cur = 1;
    }
    pl->nvisited = 0;
    for (int m = 0; m < n; m++) {
        int x = topo->hosts[hosts[m]].leaf, fresh;
        if (tree->parent[x] == -2) {
            say(why, whylen, "tree %s does not reach leaf %s of host %s",
                topo->sw[tree->root].name, topo->sw[x].name,
                topo->hosts[hosts[m]].name);
            return -1;
        }
        fresh = pl->stamp[x] != pl->cur;
        if (fresh) {
            pl->stamp[x] = pl->cur;
            pl->nchild[x] = 0;
            pl->visited[pl->nvisited++] = x;
        }
        pl->nchild[x]++;
        while (fresh && tree->parent[x] >= 0) {
            int p = tree->parent[x];
            fresh = pl->stamp[p] != pl->cur;
            if (fresh) {
                pl->stamp[p] = pl->cur;
                pl->nchild[p] = 0;
                pl->visited[pl->nvisited++] = p;
            }
            pl->nchild[p]++;
            x = p;
        }
    }
    return 0;
}

/*
 * Evaluates tree t for the members: marks it, checks the ANs the group
 * would use, and fills *offer. With adopt set, the quotas are not checked
 * and the slots and payload are req's.
 */
static void evaluate(place_t *pl, int t, const int *hosts, int n,
                     const place_req_t *req, int adopt, offer_t *offer,
                     char *why, size_t whylen)
{
    const topo_t *topo = pl->topo;
    uint32_t slots, payload = req->payload ? req->payload : WIRE_MAX_PAYLOAD;
    uint32_t min_slots = req->min_slots ? req->min_slots : pl->params.min_slots;
    char buf[200];

    memset(offer, 0, sizeof(*offer));
    slots = req->slots ? req->slots : pl->params.default_slots;
    if (slots > 65535)
        slots = 65535;
    if (min_slots > slots)
        min_slots = slots;
    if (mark(pl, t, hosts, n, why, whylen) != 0)
        return;
    offer->reached = 1;
    offer->ops = TOPO_OPS_ALL;
    offer->dtypes = TOPO_DTYPES_ALL;
    offer->score_all = 2.0;
    offer->score_upper = 2.0;
    /* Capabilities and structure first: they decide the payload that the
     * buffer quotas depend on. */
    for (int i = 0; i < pl->nvisited; i++) {
        int sw = pl->visited[i];
        const place_an_load_t *a = &pl->an[sw];
        if (!kept(pl, sw))
            continue;
        offer->nkept++;
        if (!a->up && !adopt) {
            say(why, whylen, "an %s is down", topo->sw[sw].name);
            return;
        }
        if (pl->nchild[sw] > PLACE_MAX_CHILDREN) {
            say(why, whylen, "an %s would have %d children (at most %d)",
                topo->sw[sw].name, pl->nchild[sw], PLACE_MAX_CHILDREN);
            return;
        }
        offer->ops &= a->caps.ops;
        offer->dtypes &= a->caps.dtypes;
        if (!adopt && a->caps.max_payload < payload)
            payload = a->caps.max_payload;
    }
    if (payload < 8) {
        say(why, whylen, "payload of %u bytes is below 8", payload);
        return;
    }
    for (int i = 0; i < pl->nvisited && !adopt; i++) {
        int sw = pl->visited[i];
        const place_an_load_t *a = &pl->an[sw];
        uint64_t per_slot, free_bytes, fit;
        uint32_t free_slots;
        double f;
        if (!kept(pl, sw))
            continue;
        if (a->groups >= a->caps.max_groups) {
            say(why, whylen, "an %s has no free group (%u of %u in use)",
                topo->sw[sw].name, a->groups, a->caps.max_groups);
            return;
        }
        free_slots = a->slots >= a->caps.slots
                         ? 0
                         : (uint32_t)(a->caps.slots - a->slots);
        free_bytes = a->buffer_bytes >= a->caps.buffer_bytes
                         ? 0
                         : a->caps.buffer_bytes - a->buffer_bytes;
        per_slot = place_an_bytes(1, payload, pl->nchild[sw]);
        fit = free_bytes / per_slot;
        if (free_slots < min_slots || fit < min_slots) {
            if (free_slots < min_slots)
                snprintf(buf, sizeof(buf), "%u free slots of %u", free_slots,
                         a->caps.slots);
            else
                snprintf(buf, sizeof(buf),
                         "%" PRIu64 " free buffer bytes of %" PRIu64
                         " (a slot needs %" PRIu64 ")",
                         free_bytes, a->caps.buffer_bytes, per_slot);
            say(why, whylen, "an %s has %s, a group needs %u slots",
                topo->sw[sw].name, buf, min_slots);
            return;
        }
        if (req->quota_groups && req->quota_groups[sw] == 0) {
            say(why, whylen, "over %s: no group left on an %s",
                req->quota_who ? req->quota_who : "the quota",
                topo->sw[sw].name);
            offer->quota = 1;
            return;
        }
        if (req->quota_slots && req->quota_slots[sw] < min_slots) {
            say(why, whylen,
                "over %s: %u slots left on an %s, a group needs %u",
                req->quota_who ? req->quota_who : "the quota",
                req->quota_slots[sw], topo->sw[sw].name, min_slots);
            offer->quota = 1;
            return;
        }
        if (req->quota_slots && req->quota_slots[sw] < slots)
            slots = req->quota_slots[sw];
        if (free_slots < slots)
            slots = free_slots;
        if (fit < slots)
            slots = (uint32_t)fit;
        f = free_frac(a);
        if (f < offer->score_all)
            offer->score_all = f;
        if (topo->sw[sw].level > 1 && f < offer->score_upper)
            offer->score_upper = f;
    }
    offer->slots = adopt ? req->slots : slots;
    offer->payload = adopt ? req->payload : payload;
    offer->ok = 1;
}

static int cmp_kept(const void *a, const void *b, void *arg)
{
    const topo_t *topo = arg;
    int x = *(const int *)a, y = *(const int *)b;
    if (topo->sw[x].level != topo->sw[y].level)
        return topo->sw[x].level > topo->sw[y].level ? -1 : 1;
    return x - y;
}

/* Builds the group from the evaluation of tree t that just ran. */
static place_group_t *build(place_t *pl, int t, const int *hosts, int n,
                            const offer_t *offer)
{
    const topo_t *topo = pl->topo;
    const topo_tree_t *tree = &topo->trees[t];
    place_group_t *g = calloc(1, sizeof(*g));
    int *order = NULL, k = 0;

    if (g == NULL)
        return NULL;
    g->tree = t;
    g->slots = offer->slots;
    g->payload = offer->payload;
    g->ops = offer->ops;
    g->dtypes = offer->dtypes;
    g->nmembers = n;
    g->nans = offer->nkept;
    g->member_host = malloc((size_t)n * sizeof(int));
    g->member_an = malloc((size_t)n * sizeof(int));
    g->member_child = malloc((size_t)n * sizeof(uint16_t));
    g->ans = calloc((size_t)g->nans, sizeof(*g->ans));
    order = malloc((size_t)g->nans * sizeof(int));
    if (!g->member_host || !g->member_an || !g->member_child || !g->ans ||
        !order)
        goto err;
    for (int i = 0; i < pl->nvisited; i++)
        if (kept(pl, pl->visited[i]))
            order[k++] = pl->visited[i];
    /* Parents sit on higher levels than their children, so this order puts
     * the root first and every parent before its children. */
    qsort_r(order, (size_t)k, sizeof(int), cmp_kept, (void *)topo);
    for (int i = 0; i < k; i++) {
        place_an_t *a = &g->ans[i];
        pl->pos[order[i]] = i;
        a->sw = order[i];
        a->child = malloc((size_t)pl->nchild[order[i]] * sizeof(int));
        if (a->child == NULL)
            goto err;
    }
    for (int i = 0; i < k; i++) {
        int p = kept_at_or_above(pl, tree, tree->parent[order[i]]);
        place_an_t *a = &g->ans[i];
        a->parent = p < 0 ? -1 : pl->pos[p];
        if (a->parent >= 0) {
            place_an_t *pa = &g->ans[a->parent];
            a->index_at_parent = (uint16_t)pa->nchildren;
            pa->child[pa->nchildren++] = i;
        }
    }
    for (int m = 0; m < n; m++) {
        int sw = kept_at_or_above(pl, tree, topo->hosts[hosts[m]].leaf);
        place_an_t *a = &g->ans[pl->pos[sw]];
        g->member_host[m] = hosts[m];
        g->member_an[m] = pl->pos[sw];
        g->member_child[m] = (uint16_t)a->nchildren;
        a->child[a->nchildren++] = -(m + 1);
    }
    for (int i = 0; i < k; i++)
        g->ans[i].buffer_bytes =
            place_an_bytes(g->slots, g->payload, g->ans[i].nchildren);
    free(order);
    return g;
err:
    free(order);
    group_free(g);
    return NULL;
}

static uint32_t alloc_id(place_t *pl)
{
    for (;;) {
        uint32_t id = pl->next_id++;
        if (pl->next_id >= 0x80000000u || pl->next_id < pl->params.first_id)
            pl->next_id = pl->params.first_id;
        if (place_group_find(pl, id) == NULL)
            return id;
    }
}

static incoll_status_t insert(place_t *pl, place_group_t *g)
{
    if (pl->ngroups == pl->capgroups) {
        int ncap = pl->capgroups ? pl->capgroups * 2 : 64;
        place_group_t **ng = realloc(pl->groups, (size_t)ncap * sizeof(*ng));
        if (ng == NULL)
            return INCOLL_ERR_NO_MEMORY;
        pl->groups = ng;
        pl->capgroups = ncap;
    }
    pl->groups[pl->ngroups++] = g;
    for (int i = 0; i < g->nans; i++) {
        place_an_load_t *a = &pl->an[g->ans[i].sw];
        a->groups++;
        a->slots += g->slots;
        a->buffer_bytes += g->ans[i].buffer_bytes;
    }
    return INCOLL_OK;
}

static incoll_status_t check_members(const place_t *pl, const int *hosts, int n,
                                     char *why, size_t whylen)
{
    if (n < 2 || n > PLACE_MAX_MEMBERS) {
        say(why, whylen, "a group needs 2..%d members, not %d",
            PLACE_MAX_MEMBERS, n);
        return INCOLL_ERR_INVALID_ARG;
    }
    for (int m = 0; m < n; m++) {
        if (hosts[m] < 0 || hosts[m] >= pl->topo->nhosts) {
            say(why, whylen, "member %d is on an unknown host (%d)", m,
                hosts[m]);
            return INCOLL_ERR_INVALID_ARG;
        }
    }
    return INCOLL_OK;
}

incoll_status_t place_group_create(place_t *pl, const int *hosts, int nmembers,
                                   const place_req_t *req,
                                   place_group_t **group_p, char *why,
                                   size_t whylen)
{
    const topo_t *topo = pl->topo;
    place_req_t none = {0};
    offer_t best = {0}, offer;
    int best_tree = -1, reached = 0;
    char first_why[320] = "", reach_why[256] = "", tree_why[256];
    char quota_why[320] = "";
    place_group_t *g;
    incoll_status_t status;

    if (req == NULL)
        req = &none;
    status = check_members(pl, hosts, nmembers, why, whylen);
    if (status != INCOLL_OK)
        return status;
    for (int t = 0; t < topo->ntrees; t++) {
        tree_why[0] = '\0';
        evaluate(pl, t, hosts, nmembers, req, 0, &offer, tree_why,
                 sizeof(tree_why));
        if (!offer.reached) {
            if (reach_why[0] == '\0')
                snprintf(reach_why, sizeof(reach_why), "%s", tree_why);
            continue;
        }
        if (!offer.ok) {
            if (offer.quota && quota_why[0] == '\0')
                snprintf(quota_why, sizeof(quota_why), "%s", tree_why);
            if (first_why[0] == '\0')
                snprintf(first_why, sizeof(first_why), "tree %s: %s",
                         topo->sw[topo->trees[t].root].name, tree_why);
            reached++;
            continue;
        }
        reached++;
        if (best_tree < 0 || offer.score_all > best.score_all + 1e-9 ||
            (offer.score_all > best.score_all - 1e-9 &&
             offer.score_upper > best.score_upper + 1e-9)) {
            best = offer;
            best_tree = t;
        }
    }
    if (best_tree < 0) {
        if (reached == 0)
            say(why, whylen, "no tree reaches all %d members (%s)", nmembers,
                reach_why[0] ? reach_why : "no trees");
        else if (quota_why[0] != '\0')
            say(why, whylen, "%s", quota_why);
        else
            say(why, whylen, "no tree can host the group (%d tried): %s",
                reached, first_why);
        /* A quota is what stopped it when raising it would have helped. */
        if (req->quota_hit_p)
            *req->quota_hit_p = reached > 0 && quota_why[0] != '\0';
        return INCOLL_ERR_NO_RESOURCE;
    }
    /* Evaluate the winner again to refill the scratch, then build it. */
    evaluate(pl, best_tree, hosts, nmembers, req, 0, &offer, NULL, 0);
    g = build(pl, best_tree, hosts, nmembers, &offer);
    if (g == NULL) {
        say(why, whylen, "out of memory");
        return INCOLL_ERR_NO_MEMORY;
    }
    g->id = alloc_id(pl);
    g->key = fabric_random64();
    if (insert(pl, g) != INCOLL_OK) {
        group_free(g);
        say(why, whylen, "out of memory");
        return INCOLL_ERR_NO_MEMORY;
    }
    *group_p = g;
    return INCOLL_OK;
}

incoll_status_t place_group_adopt(place_t *pl, uint32_t id, uint64_t key,
                                  int tree, uint32_t slots, uint32_t payload,
                                  const int *hosts, int nmembers,
                                  place_group_t **group_p, char *why,
                                  size_t whylen)
{
    place_req_t req = {.slots = slots, .min_slots = slots, .payload = payload};
    offer_t offer;
    place_group_t *g;
    incoll_status_t status;
    char tree_why[256] = "";

    status = check_members(pl, hosts, nmembers, why, whylen);
    if (status != INCOLL_OK)
        return status;
    if (tree < 0 || tree >= pl->topo->ntrees || id == 0 || slots < 1 ||
        slots > 65535 || payload < 8 || payload > WIRE_MAX_PAYLOAD) {
        say(why, whylen, "bad tree %d, id %u, slots %u or payload %u", tree, id,
            slots, payload);
        return INCOLL_ERR_INVALID_ARG;
    }
    if (place_group_find(pl, id)) {
        say(why, whylen, "group %u exists", id);
        return INCOLL_ERR_BUSY;
    }
    evaluate(pl, tree, hosts, nmembers, &req, 1, &offer, tree_why,
             sizeof(tree_why));
    if (!offer.ok) {
        say(why, whylen, "%s", tree_why);
        return INCOLL_ERR_INVALID_ARG;
    }
    g = build(pl, tree, hosts, nmembers, &offer);
    if (g == NULL) {
        say(why, whylen, "out of memory");
        return INCOLL_ERR_NO_MEMORY;
    }
    g->id = id;
    g->key = key;
    if (insert(pl, g) != INCOLL_OK) {
        group_free(g);
        say(why, whylen, "out of memory");
        return INCOLL_ERR_NO_MEMORY;
    }
    *group_p = g;
    return INCOLL_OK;
}

incoll_status_t place_group_release(place_t *pl, uint32_t id)
{
    for (int i = 0; i < pl->ngroups; i++) {
        place_group_t *g = pl->groups[i];
        if (g->id != id)
            continue;
        for (int j = 0; j < g->nans; j++) {
            place_an_load_t *a = &pl->an[g->ans[j].sw];
            a->groups--;
            a->slots -= g->slots;
            a->buffer_bytes -= g->ans[j].buffer_bytes;
        }
        pl->groups[i] = pl->groups[--pl->ngroups];
        group_free(g);
        return INCOLL_OK;
    }
    return INCOLL_ERR_NOT_FOUND;
}
