# nb_py: an mpi4py program with mpi4py's default thread level
# (MPI_THREAD_MULTIPLE): 201 numpy Allreduce calls, then Iallreduce
# requests completed by Waitall together with point-to-point requests.
# Every result is compared with the value computed here. Prints
# "nb_py: ok N checks" at rank 0.
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
if MPI.Query_thread() != MPI.THREAD_MULTIPLE:
    print("nb_py: thread level is not MPI_THREAD_MULTIPLE", file=sys.stderr)
checks = 0
n = 1000
idx = np.arange(n, dtype=np.float64)


def want(k):
    return sum((r + 1) * (idx % 97 + 1) + k for r in range(size))


for k in range(201):
    out = np.empty(n)
    comm.Allreduce((rank + 1) * (idx % 97 + 1) + k, out, op=MPI.SUM)
    if not np.array_equal(out, want(k)):
        print(f"nb_py: rank {rank}: Allreduce {k} wrong", file=sys.stderr)
        comm.Abort(1)
    checks += 1

for rnd in range(5):
    outs = [np.empty(n) for _ in range(4)]
    ins = [(rank + 1) * (idx % 97 + 1) + 300 + 4 * rnd + j for j in range(4)]
    reqs = [comm.Iallreduce(ins[j], outs[j], op=MPI.SUM) for j in range(4)]
    got = np.empty(1, dtype=np.int64)
    reqs.append(comm.Irecv(got, source=(rank - 1) % size, tag=3))
    reqs.append(comm.Isend(np.array([rank], dtype=np.int64),
                           dest=(rank + 1) % size, tag=3))
    MPI.Request.Waitall(reqs)
    for j in range(4):
        if not np.array_equal(outs[j], want(300 + 4 * rnd + j)):
            print(f"nb_py: rank {rank}: Iallreduce {rnd}/{j} wrong",
                  file=sys.stderr)
            comm.Abort(1)
        checks += 1
    if got[0] != (rank - 1) % size:
        comm.Abort(1)

if rank == 0:
    print(f"nb_py: ok {checks} checks", flush=True)
