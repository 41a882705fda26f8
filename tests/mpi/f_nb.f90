! f_nb: the nonblocking collectives from Fortran through `use mpi`:
! MPI_Iallreduce, Ireduce, Ibcast, Ibarrier, Iallgather, Igather, Iscatter,
! Ireduce_scatter_block and Ireduce_scatter with a ring of Isend/Irecv,
! completed by MPI_Waitall, by an MPI_Testany loop and by MPI_Wait; then
! persistent point-to-point requests started by MPI_Startall among them.
! Open MPI's Fortran binding calls PMPI_ directly, so only libincoll_mpi's
! Fortran wrappers (of these calls and of the wait and test family) can
! offload them and complete them. Integers only, every buffer passed as
! its first element (see f_allreduce.f90); results against closed forms.
! Prints "f_nb: ok" at rank 0.
program f_nb
  use mpi
  implicit none
  integer, parameter :: n = 500, maxp = 16, nr = 11, rounds = 6
  integer :: ierr, rank, nprocs, i, q, bad, root, how, k, idx, left
  logical :: flag
  integer, asynchronous :: a(n), ar(n), rd(n), bc(n), ag(n * maxp)
  integer, asynchronous :: g(n * maxp), sc(n), rs(n), rv(n), c(n * maxp)
  integer, asynchronous :: sendv, recvv
  integer :: counts(maxp), reqs(nr), pr(2)
  integer :: statuses(MPI_STATUS_SIZE, nr), st(MPI_STATUS_SIZE)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  bad = 0
  counts = n
  do k = 1, rounds
    how = mod(k, 3)
    root = mod(k, nprocs)
    do i = 1, n
      a(i) = rank * 1000 + i + k
      bc(i) = -1
      if (rank == root) bc(i) = i * 3 + k
    end do
    do i = 1, n * nprocs
      c(i) = rank + i + k
    end do
    sendv = rank * 11 + k
    recvv = -1
    call MPI_Iallreduce(a(1), ar(1), n, MPI_INTEGER, MPI_SUM, &
                        MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Irecv(recvv, 1, MPI_INTEGER, mod(rank + nprocs - 1, nprocs), &
                   5, MPI_COMM_WORLD, reqs(2), ierr)
    call MPI_Ireduce(a(1), rd(1), n, MPI_INTEGER, MPI_MAX, root, &
                     MPI_COMM_WORLD, reqs(3), ierr)
    call MPI_Ibcast(bc(1), n, MPI_INTEGER, root, MPI_COMM_WORLD, reqs(4), &
                    ierr)
    call MPI_Ibarrier(MPI_COMM_WORLD, reqs(5), ierr)
    call MPI_Iallgather(a(1), n, MPI_INTEGER, ag(1), n, MPI_INTEGER, &
                        MPI_COMM_WORLD, reqs(6), ierr)
    call MPI_Igather(a(1), n, MPI_INTEGER, g(1), n, MPI_INTEGER, root, &
                     MPI_COMM_WORLD, reqs(7), ierr)
    call MPI_Iscatter(c(1), n, MPI_INTEGER, sc(1), n, MPI_INTEGER, root, &
                      MPI_COMM_WORLD, reqs(8), ierr)
    call MPI_Ireduce_scatter_block(c(1), rs(1), n, MPI_INTEGER, MPI_SUM, &
                                   MPI_COMM_WORLD, reqs(9), ierr)
    call MPI_Ireduce_scatter(c(1), rv(1), counts, MPI_INTEGER, MPI_SUM, &
                             MPI_COMM_WORLD, reqs(10), ierr)
    call MPI_Isend(sendv, 1, MPI_INTEGER, mod(rank + 1, nprocs), 5, &
                   MPI_COMM_WORLD, reqs(11), ierr)
    if (how == 0) then
      call MPI_Waitall(nr, reqs, statuses, ierr)
    else if (how == 1) then
      left = nr
      do while (left > 0)
        call MPI_Testany(nr, reqs, idx, flag, st, ierr)
        if (flag .and. idx == MPI_UNDEFINED) exit
        if (flag) left = left - 1
      end do
    else
      do i = nr, 1, -1
        call MPI_Wait(reqs(i), st, ierr)
      end do
    end if
    do i = 1, nr
      if (reqs(i) /= MPI_REQUEST_NULL) bad = ior(bad, 1)
    end do
    do i = 1, n
      if (ar(i) /= nprocs * (nprocs - 1) / 2 * 1000 + nprocs * (i + k)) &
        bad = ior(bad, 2)
      if (rank == root .and. rd(i) /= (nprocs - 1) * 1000 + i + k) &
        bad = ior(bad, 4)
      if (bc(i) /= i * 3 + k) bad = ior(bad, 8)
      if (sc(i) /= root + rank * n + i + k) bad = ior(bad, 16)
      if (rs(i) /= nprocs * (nprocs - 1) / 2 + nprocs * (rank * n + i + k)) &
        bad = ior(bad, 32)
      if (rv(i) /= rs(i)) bad = ior(bad, 64)
    end do
    do q = 0, nprocs - 1
      do i = 1, n
        if (ag(q * n + i) /= q * 1000 + i + k) bad = ior(bad, 128)
        if (rank == root .and. g(q * n + i) /= q * 1000 + i + k) &
          bad = ior(bad, 256)
      end do
    end do
    if (recvv /= mod(rank + nprocs - 1, nprocs) * 11 + k) bad = ior(bad, 512)
  end do

  ! Persistent point-to-point requests started with a nonblocking
  ! collective, completed together.
  call MPI_Send_init(sendv, 1, MPI_INTEGER, mod(rank + 1, nprocs), 6, &
                     MPI_COMM_WORLD, pr(1), ierr)
  call MPI_Recv_init(recvv, 1, MPI_INTEGER, mod(rank + nprocs - 1, nprocs), &
                     6, MPI_COMM_WORLD, pr(2), ierr)
  do k = 1, 3
    sendv = rank * 7 + k
    recvv = -1
    a = rank + k
    call MPI_Startall(2, pr, ierr)
    call MPI_Iallreduce(MPI_IN_PLACE, a(1), n, MPI_INTEGER, MPI_SUM, &
                        MPI_COMM_WORLD, reqs(1), ierr)
    reqs(2:3) = pr
    call MPI_Waitall(3, reqs, statuses, ierr)
    if (recvv /= mod(rank + nprocs - 1, nprocs) * 7 + k) bad = ior(bad, 1024)
    do i = 1, n
      if (a(i) /= nprocs * (nprocs - 1) / 2 + nprocs * k) bad = ior(bad, 2048)
    end do
  end do
  call MPI_Request_free(pr(1), ierr)
  call MPI_Request_free(pr(2), ierr)

  call MPI_Allreduce(MPI_IN_PLACE, bad, 1, MPI_INTEGER, MPI_BOR, &
                     MPI_COMM_WORLD, ierr)
  if (bad /= 0) then
    if (rank == 0) print '(a,i0)', 'f_nb: MISMATCH ', bad
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  if (rank == 0) print '(a)', 'f_nb: ok'
  call MPI_Finalize(ierr)
end program f_nb
