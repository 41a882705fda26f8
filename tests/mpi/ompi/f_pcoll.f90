! f_pcoll: Open MPI 4.1's persistent collectives (its MPIX_ extension)
! from Fortran through `use mpi`: MPIX_Allreduce_init (in place too),
! MPIX_Reduce_init, MPIX_Bcast_init, MPIX_Barrier_init,
! MPIX_Allgather_init, MPIX_Gather_init, MPIX_Scatter_init,
! MPIX_Reduce_scatter_block_init and MPIX_Reduce_scatter_init, started
! `rounds` times by MPI_Startall and MPI_Start and completed by
! MPI_Waitall and an MPI_Testany loop; results against closed forms.
! Open MPI only (MPICH 4.0 names them MPI_X_init), so it is not built with
! the other test programs: tests/test_mpi.c compiles it. Prints
! "f_pcoll: ok" at rank 0.
program f_pcoll
  use mpi
  implicit none
  integer, parameter :: n = 400, maxp = 16, nr = 10, rounds = 20
  integer :: ierr, rank, nprocs, i, q, bad, root, k, idx
  logical :: flag
  integer, asynchronous :: a(n), ar(n), ip(n), rd(n), bc(n), ag(n * maxp)
  integer, asynchronous :: g(n * maxp), sc(n), rs(n), rv(n), c(n * maxp)
  integer :: counts(maxp), reqs(nr), st(MPI_STATUS_SIZE)
  integer :: statuses(MPI_STATUS_SIZE, nr)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  bad = 0
  counts = n
  root = nprocs - 1
  call MPIX_Allreduce_init(a(1), ar(1), n, MPI_INTEGER, MPI_SUM, &
                           MPI_COMM_WORLD, MPI_INFO_NULL, reqs(1), ierr)
  call MPIX_Allreduce_init(MPI_IN_PLACE, ip(1), n, MPI_INTEGER, MPI_MIN, &
                           MPI_COMM_WORLD, MPI_INFO_NULL, reqs(2), ierr)
  call MPIX_Reduce_init(a(1), rd(1), n, MPI_INTEGER, MPI_MAX, root, &
                        MPI_COMM_WORLD, MPI_INFO_NULL, reqs(3), ierr)
  call MPIX_Bcast_init(bc(1), n, MPI_INTEGER, root, MPI_COMM_WORLD, &
                       MPI_INFO_NULL, reqs(4), ierr)
  call MPIX_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, reqs(5), ierr)
  call MPIX_Allgather_init(a(1), n, MPI_INTEGER, ag(1), n, MPI_INTEGER, &
                           MPI_COMM_WORLD, MPI_INFO_NULL, reqs(6), ierr)
  call MPIX_Gather_init(a(1), n, MPI_INTEGER, g(1), n, MPI_INTEGER, root, &
                        MPI_COMM_WORLD, MPI_INFO_NULL, reqs(7), ierr)
  call MPIX_Scatter_init(c(1), n, MPI_INTEGER, sc(1), n, MPI_INTEGER, root, &
                         MPI_COMM_WORLD, MPI_INFO_NULL, reqs(8), ierr)
  call MPIX_Reduce_scatter_block_init(c(1), rs(1), n, MPI_INTEGER, MPI_SUM, &
                                      MPI_COMM_WORLD, MPI_INFO_NULL, &
                                      reqs(9), ierr)
  call MPIX_Reduce_scatter_init(c(1), rv(1), counts, MPI_INTEGER, MPI_SUM, &
                                MPI_COMM_WORLD, MPI_INFO_NULL, reqs(10), ierr)
  do k = 1, rounds
    do i = 1, n
      a(i) = rank * 1000 + i + k
      ip(i) = rank * 1000 + i + k
      bc(i) = -1
      if (rank == root) bc(i) = i * 3 + k
    end do
    do i = 1, n * nprocs
      c(i) = rank + i + k
    end do
    if (mod(k, 2) == 0) then
      call MPI_Startall(nr, reqs, ierr)
      call MPI_Waitall(nr, reqs, statuses, ierr)
    else
      do i = 1, nr
        call MPI_Start(reqs(i), ierr)
      end do
      do
        call MPI_Testany(nr, reqs, idx, flag, st, ierr)
        if (flag .and. idx == MPI_UNDEFINED) exit
      end do
    end if
    do i = 1, nr
      if (reqs(i) == MPI_REQUEST_NULL) bad = ior(bad, 1)
    end do
    do i = 1, n
      if (ar(i) /= nprocs * (nprocs - 1) / 2 * 1000 + nprocs * (i + k)) &
        bad = ior(bad, 2)
      if (ip(i) /= i + k) bad = ior(bad, 4)
      if (rank == root .and. rd(i) /= (nprocs - 1) * 1000 + i + k) &
        bad = ior(bad, 8)
      if (bc(i) /= i * 3 + k) bad = ior(bad, 16)
      if (sc(i) /= root + rank * n + i + k) bad = ior(bad, 32)
      if (rs(i) /= nprocs * (nprocs - 1) / 2 + nprocs * (rank * n + i + k)) &
        bad = ior(bad, 64)
      if (rv(i) /= rs(i)) bad = ior(bad, 128)
    end do
    do q = 0, nprocs - 1
      do i = 1, n
        if (ag(q * n + i) /= q * 1000 + i + k) bad = ior(bad, 256)
        if (rank == root .and. g(q * n + i) /= q * 1000 + i + k) &
          bad = ior(bad, 512)
      end do
    end do
  end do
  do i = 1, nr
    call MPI_Request_free(reqs(i), ierr)
    if (reqs(i) /= MPI_REQUEST_NULL) bad = ior(bad, 1024)
  end do

  call MPI_Allreduce(MPI_IN_PLACE, bad, 1, MPI_INTEGER, MPI_BOR, &
                     MPI_COMM_WORLD, ierr)
  if (bad /= 0) then
    if (rank == 0) print '(a,i0)', 'f_pcoll: MISMATCH ', bad
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  if (rank == 0) print '(a)', 'f_pcoll: ok'
  call MPI_Finalize(ierr)
end program f_pcoll
