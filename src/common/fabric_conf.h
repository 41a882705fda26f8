/*
 * fabric.conf: the description of a running fabric, written by
 * `incoll fabric up` and read by the daemons and the host library. See
 * docs/fabric-conf.md. One record per line, "kind key=value ...", '#'
 * starts a comment:
 *
 *   fabric hosts=16 radix=4 levels=2 admin_key=0x...
 *   an name=s0 level=2 addr=127.0.0.1:41000 parent=-
 *   an name=l0 level=1 addr=127.0.0.1:41001 parent=s0
 *   host rank=0 leaf=l0 addr=127.0.0.1:42000   (":port" optional)
 *   group id=1 key=0x... slots=64 payload=8192
 *
 * Optional, for an emulated fabric (`incoll fabric up --emulate`,
 * src/fabric/emu.c): `netns=NAME` on an and host records names the Linux
 * network namespace the AN daemon or the rank runs in. Without it, the
 * process runs in the caller's namespace.
 *
 * An AN's children, in their fixed order, are first the ANs whose parent it
 * is (in file order), then the hosts under it (in rank order). The group
 * record is the world group: every host, over the whole tree.
 */
#ifndef INCOLL_FABRIC_CONF_H
#define INCOLL_FABRIC_CONF_H

#include "common/wire.h"

#include <stddef.h>
#include <stdint.h>

#define FABRIC_NAME_MAX 32
#define AGG_RADIX_MAX 1024  /* children per AN, as AGG_MAX_CHILDREN */
#define FABRIC_NETNS_MAX 48 /* network namespace name, with its NUL */

typedef struct {
    char name[FABRIC_NAME_MAX];
    int level;                    /* 1 = leaf switch */
    incoll_ep_t addr;             /* the AN's UDP endpoint */
    int parent;                   /* index into ans, -1 at the root */
    char netns[FABRIC_NETNS_MAX]; /* "" = the caller's namespace */
} fabric_an_t;

typedef struct {
    int leaf;      /* index into ans */
    uint32_t ip;   /* the host's IPv4 address (host order) */
    uint16_t port; /* its UDP port; 0 = any (then ANs learn it) */
    char netns[FABRIC_NETNS_MAX]; /* "" = the caller's namespace */
} fabric_host_t;

typedef struct {
    int nhosts;
    int radix;
    int levels;
    uint64_t admin_key;
    int nans;
    fabric_an_t *ans;
    fabric_host_t *hosts; /* nhosts entries, indexed by rank */
    uint32_t group_id;
    uint64_t group_key;
    uint32_t slots;
    uint32_t payload;
} fabric_conf_t;

/*
 * Reads and checks path. On error returns INCOLL_ERR_CONFIG and writes
 * "path:line: cause" into err. The caller frees conf with fabric_conf_free.
 */
incoll_status_t fabric_conf_load(const char *path, fabric_conf_t *conf,
                                 char *err, size_t errlen);
/* Writes conf to path atomically (temporary file, then rename). */
incoll_status_t fabric_conf_save(const fabric_conf_t *conf, const char *path);
void fabric_conf_free(fabric_conf_t *conf);

/*
 * Builds the tree for nhosts hosts on switches of radix children each:
 * leaves of up to radix hosts, then levels of up to radix switches until
 * one root remains. Names are "l<i>" for leaves, "s<level>-<i>" above and
 * the root is "root" when levels > 1. Addresses are left 0; keys random.
 */
incoll_status_t fabric_conf_generate(int nhosts, int radix,
                                     fabric_conf_t *conf);

/* Index of the AN named name, or -1. */
int fabric_conf_find_an(const fabric_conf_t *conf, const char *name);

/*
 * Children of AN an in their fixed order. Writes up to max endpoints
 * into eps: an AN child's address, or a host's endpoint (INCOLL_EP_NONE
 * when it has no fixed port: the AN learns it from its packets); if kinds is
 * not NULL, kinds[i] is the AN index of child i or -(rank + 1) for host rank. A
 * host child's endpoint is its addr:port, or INCOLL_EP_NONE when its port is 0.
 * Returns the number of children.
 */
int fabric_conf_children(const fabric_conf_t *conf, int an, incoll_ep_t *eps,
                         int *kinds, int max);

/* UDP endpoint of host rank, or INCOLL_EP_NONE when its port is 0. */
incoll_ep_t fabric_conf_host_ep(const fabric_conf_t *conf, int rank);

/* Child index of host rank at its leaf AN. */
int fabric_conf_host_child(const fabric_conf_t *conf, int rank);

/* 64 random bits from the kernel (getrandom), for keys. */
uint64_t fabric_random64(void);

#endif
