/*
 * The fabric's topology as the manager sees it: switches (each with an
 * aggregation node, its address and its capabilities), links between
 * switches, and which host sits under which leaf. It comes from a
 * human-editable file (docs/topology.md) or from the k-ary fat-tree
 * generator, and is immutable once built.
 *
 * Trees are derived from it at load time, one rooted at each top-level
 * switch (a switch with no uplink), as SHARP's aggregation manager does: a
 * breadth-first walk down the links from the root, taking links in file
 * order, gives every switch it reaches exactly one parent. A host can use a
 * tree when the tree reaches its leaf.
 */
#ifndef INCOLL_MGR_TOPO_H
#define INCOLL_MGR_TOPO_H

#include "common/wire.h"

#include <stddef.h>
#include <stdint.h>

#define TOPO_NAME_MAX 32
#define TOPO_MAX_SWITCHES 65536
#define TOPO_MAX_HOSTS (1 << 20)
#define TOPO_MAX_LEVELS 8

#define TOPO_OPS_ALL ((1u << INCOLL_OP_COUNT) - 1)
#define TOPO_DTYPES_ALL ((1u << INCOLL_DTYPE_COUNT) - 1)

/*
 * What an aggregation node can do and how much it can hold. The limits are
 * quotas shared by all groups on the AN: a group takes one of max_groups,
 * its slot count of slots, and slots * payload * (2 + children) bytes of
 * buffer_bytes (two result copies per slot plus one contribution per child
 * in flight, as src/core/agg_core.c allocates).
 */
typedef struct {
    uint32_t ops;          /* bit (1u << op) for each incoll_op_t */
    uint32_t dtypes;       /* bit (1u << dtype) for each incoll_dtype_t */
    uint32_t max_payload;  /* largest payload per packet, bytes */
    uint32_t slots;        /* slots shared by all groups */
    uint32_t max_groups;   /* groups at once */
    uint64_t buffer_bytes; /* reduction buffer memory shared by all groups */
} topo_caps_t;

typedef struct {
    char name[TOPO_NAME_MAX];
    int level;        /* 1 = leaf; a link joins two different levels */
    incoll_ep_t addr; /* the AN's UDP endpoint; INCOLL_EP_NONE: learnt when
                         the AN registers */
    topo_caps_t caps;
    int nup; /* higher-level neighbours, in link order */
    int *up;
    int ndown; /* lower-level neighbours, in link order */
    int *down;
} topo_switch_t;

typedef struct {
    char name[TOPO_NAME_MAX];
    int leaf;    /* index of its switch */
    uint32_t ip; /* IPv4 address (host order); 0 = not given */
} topo_host_t;

typedef struct {
    int root;    /* a switch without uplinks */
    int *parent; /* per switch: its parent in this tree, -1 at the
                    root, -2 when the tree does not reach it */
    int height;  /* switches on the longest root-to-leaf path */
} topo_tree_t;

typedef struct {
    int nswitches;
    topo_switch_t *sw;
    int nhosts;
    topo_host_t *hosts;
    int nlinks;
    int (*links)[2]; /* [0] the lower switch, [1] the upper one */
    int ntrees;
    topo_tree_t *trees;
    int levels; /* highest switch level */
} topo_t;

/* Defaults of the AN capabilities when neither the file nor the AN says
 * otherwise: every op and dtype, 8192-byte payload, 1024 slots, 64
 * groups, 256 MiB of buffers. */
void topo_caps_default(topo_caps_t *caps);

/* The capabilities both a and b have: masks intersected, limits the
 * smaller. */
void topo_caps_meet(topo_caps_t *dst, const topo_caps_t *a,
                    const topo_caps_t *b);

/*
 * Reads a topology file (format: docs/topology.md). On error returns
 * INCOLL_ERR_CONFIG and writes "path:line: cause" into err (line 0 for
 * whole-file problems such as a switch no tree reaches). The caller frees
 * topo with topo_free().
 */
incoll_status_t topo_load(const char *path, topo_t *topo, char *err,
                          size_t errlen);

/* The same from text in memory; name is used in error messages. */
incoll_status_t topo_parse(const char *text, const char *name, topo_t *topo,
                           char *err, size_t errlen);

/*
 * Builds a k-ary fat-tree of radix k (even, 2..64) switches:
 *  levels 2 (leaf-spine): k leaves "l<i>" with k/2 host ports and a link to
 *    each of k/2 spines "s<j>";
 *  levels 3: k pods of k/2 edge switches "e<p>-<i>" and k/2 aggregation
 *    switches "a<p>-<j>" (complete bipartite inside the pod), and (k/2)^2
 *    core switches "c<j>-<m>" where core (j, m) links to aggregation
 *    switch j of every pod.
 * nhosts hosts ("h<i>") fill the leaves in order, k/2 per leaf, so a count
 * that is not a multiple of k/2 gives an uneven last leaf; 0 means every
 * port. Switch addresses are INCOLL_EP_NONE, caps are *caps (or the
 * defaults when caps is NULL).
 */
incoll_status_t topo_fat_tree(int radix, int levels, int nhosts,
                              const topo_caps_t *caps, topo_t *topo);

/* Writes topo in the file format (atomically: temporary file, rename). */
incoll_status_t topo_save(const topo_t *topo, const char *path);

/* Index of the switch or host named name, or -1. */
int topo_find_switch(const topo_t *topo, const char *name);
int topo_find_host(const topo_t *topo, const char *name);

/* Frees what topo holds and zeroes it. */
void topo_free(topo_t *topo);

/* Formats ops or dtypes masks as "sum,prod,..." ("all" when every bit is
 * set, "none" when none is) into buf; returns buf. */
const char *topo_ops_str(uint32_t ops, char *buf, size_t len);
const char *topo_dtypes_str(uint32_t dtypes, char *buf, size_t len);

#endif
