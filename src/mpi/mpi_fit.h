/*
 * A fabric.conf fabric whose host count differs from the job's rank
 * count, as both MPI front ends (the PMPI layer, coll/incoll) handle it
 * when no manager is given: the fabric's own manager (its fabric.env)
 * when it has one, ranks sharing the hosts when there are more ranks than
 * hosts, and otherwise offload off with the reason and the fix.
 */
#ifndef INCOLL_MPI_FIT_H
#define INCOLL_MPI_FIT_H

#include "incoll.h"

#include <limits.h>
#include <stddef.h>

/* What mpi_fit_fabric() hands libincoll: kept until incoll_init. */
typedef struct {
    char mgr[256];
    char secret[PATH_MAX];
    char hosts[8192];
} mpi_fit_adopted_t;

/*
 * The fabric in directory fab (no manager given) for a job of size ranks.
 * own_hosts: INCOLL_HOSTS when the job sets it (then fabric.env's is not
 * taken); host_map: the ranks' fabric hosts ("h0,h1,...") when the front
 * end placed them, NULL for libincoll's default (rank r on host r * hosts
 * / ranks); map_why: why the ranks cannot be placed ("" or NULL: they
 * can). Returns 0 with params set (the manager adopted into adopted, or
 * the host map) and note, a line for rank 0 at info level ("" for none);
 * -1 when the world cannot be offloaded, with why and fix.
 */
int mpi_fit_fabric(const char *fab, int size, const char *own_hosts,
                   const char *host_map, const char *map_why,
                   incoll_init_params_t *params, mpi_fit_adopted_t *adopted,
                   char *why, size_t why_len, char *fix, size_t fix_len,
                   char *note, size_t note_len);

#endif
