/*
 * The C entry points of libincoll_mpi. Each does its MPI_ job through the
 * PMPI_ twin and, where the layer has something to add, calls into
 * mpi_layer.c: start after MPI_Init, notice new communicators, and try the
 * fabric for the collectives. Anything the layer declines goes to the
 * PMPI_ function with the caller's arguments untouched.
 */
#include "mpi/mpi_layer.h"

MPI_LAYER_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int ret = PMPI_Init(argc, argv);
    if (ret == MPI_SUCCESS)
        mpi_layer_bootstrap(1);
    return ret;
}

MPI_LAYER_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required,
                                     int *provided)
{
    int ret = PMPI_Init_thread(argc, argv, required, provided);
    if (ret == MPI_SUCCESS)
        mpi_layer_bootstrap(1);
    return ret;
}

/* Cleanup runs inside PMPI_Finalize, from the deletion of MPI_COMM_SELF's
 * attributes (mpi_layer.c), so that it also happens when a binding calls
 * PMPI_Finalize directly. */
MPI_LAYER_EXPORT int MPI_Finalize(void)
{
    mpi_nb_finalize();
    return PMPI_Finalize();
}

MPI_LAYER_EXPORT int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    int ret = PMPI_Comm_dup(comm, newcomm);
    if (ret == MPI_SUCCESS)
        mpi_layer_comm_created(*newcomm, "dup");
    return ret;
}

MPI_LAYER_EXPORT int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info,
                                            MPI_Comm *newcomm)
{
    int ret = PMPI_Comm_dup_with_info(comm, info, newcomm);
    if (ret == MPI_SUCCESS)
        mpi_layer_comm_created(*newcomm, "dup");
    return ret;
}

MPI_LAYER_EXPORT int MPI_Comm_split(MPI_Comm comm, int color, int key,
                                    MPI_Comm *newcomm)
{
    int ret = PMPI_Comm_split(comm, color, key, newcomm);
    if (ret == MPI_SUCCESS)
        mpi_layer_comm_created(*newcomm, "split");
    return ret;
}

MPI_LAYER_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key,
                                         MPI_Info info, MPI_Comm *newcomm)
{
    int ret = PMPI_Comm_split_type(comm, split_type, key, info, newcomm);
    if (ret == MPI_SUCCESS)
        mpi_layer_comm_created(*newcomm, "split_type");
    return ret;
}

MPI_LAYER_EXPORT int MPI_Comm_create(MPI_Comm comm, MPI_Group group,
                                     MPI_Comm *newcomm)
{
    int ret = PMPI_Comm_create(comm, group, newcomm);
    if (ret == MPI_SUCCESS)
        mpi_layer_comm_created(*newcomm, "create");
    return ret;
}

MPI_LAYER_EXPORT int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group,
                                           int tag, MPI_Comm *newcomm)
{
    int ret = PMPI_Comm_create_group(comm, group, tag, newcomm);
    if (ret == MPI_SUCCESS)
        mpi_layer_comm_created(*newcomm, "create_group");
    return ret;
}

/* The communicator's fabric group goes with its attribute: MPI calls the
 * layer's delete callback inside PMPI_Comm_free. */
MPI_LAYER_EXPORT int MPI_Comm_free(MPI_Comm *comm)
{
    return PMPI_Comm_free(comm);
}

MPI_LAYER_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf,
                                   int count, MPI_Datatype datatype, MPI_Op op,
                                   MPI_Comm comm)
{
    int ret;
    if (MPI_LAYER_CALL(mpi_layer_allreduce(sendbuf, recvbuf, count, datatype,
                                           op, comm, &ret)))
        return ret;
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

MPI_LAYER_EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count,
                                MPI_Datatype datatype, MPI_Op op, int root,
                                MPI_Comm comm)
{
    int ret;
    if (MPI_LAYER_CALL(mpi_layer_reduce(sendbuf, recvbuf, count, datatype, op,
                                        root, comm, &ret)))
        return ret;
    return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
}

MPI_LAYER_EXPORT int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype,
                               int root, MPI_Comm comm)
{
    int ret;
    if (MPI_LAYER_CALL(
            mpi_layer_bcast(buffer, count, datatype, root, comm, &ret)))
        return ret;
    return PMPI_Bcast(buffer, count, datatype, root, comm);
}

MPI_LAYER_EXPORT int MPI_Barrier(MPI_Comm comm)
{
    int ret;
    if (MPI_LAYER_CALL(mpi_layer_barrier(comm, &ret)))
        return ret;
    return PMPI_Barrier(comm);
}

MPI_LAYER_EXPORT int MPI_Allgather(const void *sendbuf, int sendcount,
                                   MPI_Datatype sendtype, void *recvbuf,
                                   int recvcount, MPI_Datatype recvtype,
                                   MPI_Comm comm)
{
    int ret;
    if (MPI_LAYER_CALL(mpi_layer_allgather(sendbuf, sendcount, sendtype,
                                           recvbuf, recvcount, recvtype, comm,
                                           &ret)))
        return ret;
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                          recvtype, comm);
}

MPI_LAYER_EXPORT int MPI_Gather(const void *sendbuf, int sendcount,
                                MPI_Datatype sendtype, void *recvbuf,
                                int recvcount, MPI_Datatype recvtype, int root,
                                MPI_Comm comm)
{
    int ret;
    if (MPI_LAYER_CALL(mpi_layer_gather(sendbuf, sendcount, sendtype, recvbuf,
                                        recvcount, recvtype, root, comm, &ret)))
        return ret;
    return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                       recvtype, root, comm);
}

MPI_LAYER_EXPORT int MPI_Scatter(const void *sendbuf, int sendcount,
                                 MPI_Datatype sendtype, void *recvbuf,
                                 int recvcount, MPI_Datatype recvtype, int root,
                                 MPI_Comm comm)
{
    int ret;
    if (MPI_LAYER_CALL(mpi_layer_scatter(sendbuf, sendcount, sendtype, recvbuf,
                                         recvcount, recvtype, root, comm,
                                         &ret)))
        return ret;
    return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                        recvtype, root, comm);
}

MPI_LAYER_EXPORT int MPI_Reduce_scatter_block(const void *sendbuf,
                                              void *recvbuf, int recvcount,
                                              MPI_Datatype datatype, MPI_Op op,
                                              MPI_Comm comm)
{
    int ret;
    if (MPI_LAYER_CALL(mpi_layer_reduce_scatter_block(
            sendbuf, recvbuf, recvcount, datatype, op, comm, &ret)))
        return ret;
    return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op,
                                     comm);
}

MPI_LAYER_EXPORT int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf,
                                        const int recvcounts[],
                                        MPI_Datatype datatype, MPI_Op op,
                                        MPI_Comm comm)
{
    int ret;
    if (MPI_LAYER_CALL(mpi_layer_reduce_scatter(sendbuf, recvbuf, recvcounts,
                                                datatype, op, comm, &ret)))
        return ret;
    return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op,
                               comm);
}
