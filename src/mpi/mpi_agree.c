/*
 * The agreement after a blocking call that both MPI front ends make
 * (mpi_agree.h).
 */
#include "mpi/mpi_agree.h"

#include <stdio.h>

const char *mpi_agree_cause(incoll_status_t status)
{
    return status == INCOLL_OK ? "on another rank"
                               : incoll_status_string(status);
}

mpi_agreed_t mpi_agree(incoll_comm_h icomm, incoll_status_t status,
                       mpi_agree_min_t min, void *arg, int broken_fails,
                       int *rc_p, char *why, size_t why_len)
{
    int ok = status == INCOLL_OK;
    int rc = min(arg, &ok);

    *rc_p = rc;
    if (rc != 0 && !broken_fails)
        return MPI_AGREED_BROKEN;
    if (rc == 0 && ok)
        return MPI_AGREED_DELIVERED;
    if (icomm != NULL)
        (void)incoll_comm_count_elsewhere(icomm, INCOLL_WHY_RECOVERED);
    snprintf(why, why_len, "the fabric failed during a call (%s)",
             mpi_agree_cause(status));
    return MPI_AGREED_FAILED;
}
