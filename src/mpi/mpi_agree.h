/*
 * The agreement after a blocking call, shared by both MPI front ends (the
 * PMPI layer with INCOLL_MPI_AGREE=1, coll/incoll with coll_incoll_agree)
 * for fabrics without a manager, where libincoll cannot recover from a
 * failed AN by itself: the ranks agree, with one MPI_MIN allreduce of an
 * int that each front end makes its own way (PMPI_Allreduce, the module
 * below's allreduce), whether libincoll delivered on every rank; when it
 * did not, every rank redoes the call with MPI's own and the communicator
 * leaves the network. Written against include/incoll.h only.
 */
#ifndef INCOLL_MPI_AGREE_H
#define INCOLL_MPI_AGREE_H

#include "incoll.h"

#include <stddef.h>

/* *v becomes the minimum of the communicator's ranks' *v (collective
 * over it); MPI's return code (0: MPI_SUCCESS). */
typedef int (*mpi_agree_min_t)(void *arg, int *v);

typedef enum {
    MPI_AGREED_DELIVERED = 0, /* libincoll delivered on every rank */
    MPI_AGREED_FAILED,        /* it failed on some rank: every rank redoes
                                 the call with MPI's own */
    MPI_AGREED_BROKEN         /* the agreement itself failed: *rc_p */
} mpi_agreed_t;

/*
 * After a libincoll call of icomm that ended with status on this rank:
 * the ranks' agreement through min(arg). On MPI_AGREED_FAILED the call is
 * counted in icomm's usage counts as recovered elsewhere (the redo) and
 * why says what happened ("the fabric failed during a call (on another
 * rank)" or with this rank's status). When min itself fails (*rc_p its
 * code): MPI_AGREED_FAILED as well with broken_fails (the front end
 * redoes the call), else MPI_AGREED_BROKEN (it returns MPI's error).
 */
mpi_agreed_t mpi_agree(incoll_comm_h icomm, incoll_status_t status,
                       mpi_agree_min_t min, void *arg, int broken_fails,
                       int *rc_p, char *why, size_t why_len);

/* Where an agreed failure came from, for messages: "on another rank" when
 * this rank's call succeeded, else its status's text. */
const char *mpi_agree_cause(incoll_status_t status);

#endif
