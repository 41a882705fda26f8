/*
 * oprof: a PMPI profiler of our own (liboprof.so, preloaded), standing in
 * for mpiP, Score-P or TAU: it defines the MPI_ collective entry points
 * (blocking, nonblocking, persistent, and MPI_Start), counts each call and
 * goes on to PMPI_. At MPI_Finalize each rank prints
 * "oprof: rank R calls=N allreduce=A bcast=B start=S".
 * With coll/incoll selected the counts must be those of the same program
 * under Open MPI alone: the component sits below the MPI interface and
 * leaves the PMPI one to the tools.
 */
#include <mpi.h>
#include <mpi-ext.h>

#include <stdio.h>

static long calls, allreduces, bcasts, starts;

#define COUNT(extra) ((void)(calls++, (extra)))

int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype d, MPI_Op o,
                  MPI_Comm c)
{
    COUNT(allreduces++);
    return PMPI_Allreduce(s, r, n, d, o, c);
}
int MPI_Iallreduce(const void *s, void *r, int n, MPI_Datatype d, MPI_Op o,
                   MPI_Comm c, MPI_Request *q)
{
    COUNT(allreduces++);
    return PMPI_Iallreduce(s, r, n, d, o, c, q);
}
int MPIX_Allreduce_init(const void *s, void *r, int n, MPI_Datatype d, MPI_Op o,
                        MPI_Comm c, MPI_Info i, MPI_Request *q)
{
    COUNT(allreduces++);
    return PMPIX_Allreduce_init(s, r, n, d, o, c, i, q);
}
int MPI_Reduce(const void *s, void *r, int n, MPI_Datatype d, MPI_Op o,
               int root, MPI_Comm c)
{
    COUNT(0);
    return PMPI_Reduce(s, r, n, d, o, root, c);
}
int MPI_Ireduce(const void *s, void *r, int n, MPI_Datatype d, MPI_Op o,
                int root, MPI_Comm c, MPI_Request *q)
{
    COUNT(0);
    return PMPI_Ireduce(s, r, n, d, o, root, c, q);
}
int MPI_Bcast(void *b, int n, MPI_Datatype d, int root, MPI_Comm c)
{
    COUNT(bcasts++);
    return PMPI_Bcast(b, n, d, root, c);
}
int MPI_Ibcast(void *b, int n, MPI_Datatype d, int root, MPI_Comm c,
               MPI_Request *q)
{
    COUNT(bcasts++);
    return PMPI_Ibcast(b, n, d, root, c, q);
}
int MPI_Barrier(MPI_Comm c)
{
    COUNT(0);
    return PMPI_Barrier(c);
}
int MPI_Ibarrier(MPI_Comm c, MPI_Request *q)
{
    COUNT(0);
    return PMPI_Ibarrier(c, q);
}
int MPI_Allgather(const void *s, int sn, MPI_Datatype sd, void *r, int rn,
                  MPI_Datatype rd, MPI_Comm c)
{
    COUNT(0);
    return PMPI_Allgather(s, sn, sd, r, rn, rd, c);
}
int MPI_Gather(const void *s, int sn, MPI_Datatype sd, void *r, int rn,
               MPI_Datatype rd, int root, MPI_Comm c)
{
    COUNT(0);
    return PMPI_Gather(s, sn, sd, r, rn, rd, root, c);
}
int MPI_Scatter(const void *s, int sn, MPI_Datatype sd, void *r, int rn,
                MPI_Datatype rd, int root, MPI_Comm c)
{
    COUNT(0);
    return PMPI_Scatter(s, sn, sd, r, rn, rd, root, c);
}
int MPI_Reduce_scatter_block(const void *s, void *r, int n, MPI_Datatype d,
                             MPI_Op o, MPI_Comm c)
{
    COUNT(0);
    return PMPI_Reduce_scatter_block(s, r, n, d, o, c);
}
int MPI_Start(MPI_Request *q)
{
    COUNT(starts++);
    return PMPI_Start(q);
}
int MPI_Finalize(void)
{
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("oprof: rank %d calls=%ld allreduce=%ld bcast=%ld start=%ld\n", rank,
           calls, allreduces, bcasts, starts);
    fflush(stdout);
    return PMPI_Finalize();
}
