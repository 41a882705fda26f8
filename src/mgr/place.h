/*
 * Group placement and admission: pure logic over a topology, no I/O.
 *
 * A group is the part of one tree that a set of members (processes, each
 * on a topology host) needs: the switches on the paths from the members'
 * leaves to the tree's root. With pruning (the default), a switch that
 * would have a single child is skipped, its child talking straight to the
 * next switch up, so a group's root is the members' lowest common ancestor
 * and every AN in it combines at least two children.
 *
 * Placement tries every tree that reaches every member's leaf and whose
 * ANs are up, keeps those that can host the group (capabilities, children
 * per AN, the per-AN quotas of groups, slots and buffer bytes, and the
 * quota of the group's owner when one is given), and picks the one with the
 * most free resources: the largest smallest free fraction over the group's ANs,
 * then over its upper (non-leaf) ANs, then the lowest tree index. The winner
 * gets an id, a random 64-bit key and a slot count (the wanted count, lowered
 * to what every AN of the group can give, never below the minimum), charged on
 * each of its ANs until release.
 */
#ifndef INCOLL_MGR_PLACE_H
#define INCOLL_MGR_PLACE_H

#include "mgr/topo.h"

#include <stddef.h>
#include <stdint.h>

#define PLACE_MAX_CHILDREN 1024 /* AGG_MAX_CHILDREN */
#define PLACE_MAX_MEMBERS (1 << 20)

typedef struct place place_t;

typedef struct {
    uint32_t default_slots; /* slots per group when a request gives none */
    uint32_t min_slots;     /* a group gets at least this many or none */
    int prune;              /* 1: skip ANs that would have one child */
    int start_up;           /* 1: every AN is up at creation (tests); 0: ANs
                               are down until place_an_up() */
    uint32_t first_id;      /* first group id to hand out; 0: 256 */
} place_params_t;

/* Defaults: the settings table's INCOLL_MGR_SLOTS, INCOLL_MGR_MIN_SLOTS and
 * INCOLL_MGR_PRUNE (src/common/settings.h); ANs start down. */
void place_params_default(place_params_t *params);

typedef struct {
    uint32_t slots;     /* wanted; 0 = the default */
    uint32_t min_slots; /* 0 = the default */
    uint32_t payload;   /* bytes per packet wanted; 0 = what all ANs allow */
    /* A quota (the manager's per-job one), or NULL: per switch, how many
     * more groups and slots the group's owner may take on that AN. A tree
     * on one of whose ANs either is used up is not a candidate, and the
     * group's slots are lowered to what every AN's quota leaves (never
     * below min_slots). quota_who names the quota in reasons ("job j1
     * (2 groups and 64 slots per an)"); *quota_hit_p, when given, is set
     * to 1 when the group was refused for the quota on some tree. */
    const uint32_t *quota_groups;
    const uint32_t *quota_slots;
    const char *quota_who;
    int *quota_hit_p;
} place_req_t;

typedef struct {
    int sw;                   /* switch index in the topology */
    int parent;               /* index into the group's ans[]; -1 at root */
    uint16_t index_at_parent; /* our child index at the parent */
    int nchildren;
    int *child;            /* in child order: an index into ans[] (>= 0)
                              or -(member + 1) for a member */
    uint64_t buffer_bytes; /* charged on this AN */
} place_an_t;

typedef struct {
    uint32_t id;
    uint64_t key;
    int tree; /* index into topo->trees */
    uint32_t slots;
    uint32_t payload;
    uint32_t ops; /* capabilities every AN of the group has */
    uint32_t dtypes;
    int nmembers;
    int *member_host;       /* topology host of each member */
    int *member_an;         /* index into ans[] of the AN it sends to */
    uint16_t *member_child; /* its child index at that AN */
    int nans;
    place_an_t *ans; /* ans[0] is the root; parents come before
                        their children */
    void *user;      /* the caller's; place never touches it */
} place_group_t;

/* What one AN holds now. */
typedef struct {
    int up;
    topo_caps_t caps; /* the topology's, met with what it reported */
    uint32_t groups;
    uint64_t slots;
    uint64_t buffer_bytes;
} place_an_load_t;

/*
 * Creates the placement state over topo, which must outlive it. Returns
 * NULL when out of memory. place_destroy() frees it and every group.
 */
place_t *place_create(const topo_t *topo, const place_params_t *params);
void place_destroy(place_t *pl);

/*
 * Marks switch sw's AN up with the capabilities it reported (met with the
 * topology's; NULL keeps the topology's), or down. Groups already placed
 * are not touched: the caller tears down those on a dead AN.
 */
void place_an_up(place_t *pl, int sw, const topo_caps_t *reported);
void place_an_down(place_t *pl, int sw);
void place_an_load(const place_t *pl, int sw, place_an_load_t *load_p);

/*
 * Places a group for nmembers members, member i on topology host hosts[i].
 * On success *group_p points to the group, owned by pl until
 * place_group_release(). Returns INCOLL_ERR_INVALID_ARG for fewer than
 * two members or an unknown host, INCOLL_ERR_NO_RESOURCE when no tree can
 * host the group, INCOLL_ERR_NO_MEMORY; on error writes the reason into
 * why (which may be NULL).
 */
incoll_status_t place_group_create(place_t *pl, const int *hosts, int nmembers,
                                   const place_req_t *req,
                                   place_group_t **group_p, char *why,
                                   size_t whylen);

/*
 * Takes over a group made earlier (by a manager before a restart, as the
 * ANs report it): the same id, key, tree, slots and payload; charges its
 * ANs even beyond their quotas (the group exists already). Fails with
 * INCOLL_ERR_BUSY if the id is in use, INCOLL_ERR_INVALID_ARG if the tree
 * does not reach the members.
 */
incoll_status_t place_group_adopt(place_t *pl, uint32_t id, uint64_t key,
                                  int tree, uint32_t slots, uint32_t payload,
                                  const int *hosts, int nmembers,
                                  place_group_t **group_p, char *why,
                                  size_t whylen);

/* Frees the group and its resources on every AN. INCOLL_ERR_NOT_FOUND if
 * no such group. */
incoll_status_t place_group_release(place_t *pl, uint32_t id);

place_group_t *place_group_find(const place_t *pl, uint32_t id);
/* 1 if the group uses switch sw's AN. */
int place_group_uses(const place_group_t *g, int sw);

/* The groups, for iteration: index 0 .. place_group_count() - 1. Any
 * create, adopt or release changes the order. */
int place_group_count(const place_t *pl);
place_group_t *place_group_at(const place_t *pl, int i);

/* Buffer bytes a group of slots and payload takes on an AN with nchildren
 * children. */
uint64_t place_an_bytes(uint32_t slots, uint32_t payload, int nchildren);

#endif
