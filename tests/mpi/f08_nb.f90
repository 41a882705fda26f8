! f08_nb: nonblocking collectives through `use mpi_f08` (optional ierror
! left out): MPI_Iallreduce, Ibcast and Ireduce_scatter_block with a ring
! of Isend/Irecv, completed by MPI_Waitall, MPI_Wait, an MPI_Test loop and
! an MPI_Testany loop. Both MPIs' f08 wait and test calls go to PMPI_
! directly, so only the layer's wrappers of them complete its requests.
! Closed forms. Prints "f08_nb: ok" at rank 0.
program f08_nb
  use mpi_f08
  implicit none
  integer, parameter :: n = 300, maxp = 16, nr = 5
  integer :: rank, nprocs, i, bad, k, idx
  logical :: flag
  integer, asynchronous :: a(n), ar(n), bc(n), rs(n), c(n * maxp)
  integer, asynchronous :: sendv, recvv
  type(MPI_Request) :: reqs(nr)
  type(MPI_Status) :: st

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  bad = 0
  do k = 1, 8
    do i = 1, n
      a(i) = rank * 100 + i + k
      bc(i) = -1
      if (rank == 0) bc(i) = i + 2 * k
    end do
    do i = 1, n * nprocs
      c(i) = rank + i + k
    end do
    sendv = rank + 10 * k
    recvv = -1
    call MPI_Iallreduce(a, ar, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, &
                        reqs(1))
    call MPI_Irecv(recvv, 1, MPI_INTEGER, mod(rank + nprocs - 1, nprocs), &
                   3, MPI_COMM_WORLD, reqs(2))
    call MPI_Ibcast(bc, n, MPI_INTEGER, 0, MPI_COMM_WORLD, reqs(3))
    call MPI_Ireduce_scatter_block(c, rs, n, MPI_INTEGER, MPI_SUM, &
                                   MPI_COMM_WORLD, reqs(4))
    call MPI_Isend(sendv, 1, MPI_INTEGER, mod(rank + 1, nprocs), 3, &
                   MPI_COMM_WORLD, reqs(5))
    select case (mod(k, 4))
    case (0)
      call MPI_Waitall(nr, reqs, MPI_STATUSES_IGNORE)
    case (1)
      do i = 1, nr
        call MPI_Wait(reqs(i), st)
      end do
    case (2)
      do i = 1, nr
        flag = .false.
        do while (.not. flag)
          call MPI_Test(reqs(i), flag, st)
        end do
      end do
    case default
      do
        call MPI_Testany(nr, reqs, idx, flag, st)
        if (flag .and. idx == MPI_UNDEFINED) exit
      end do
    end select
    do i = 1, n
      if (ar(i) /= nprocs * (nprocs - 1) / 2 * 100 + nprocs * (i + k)) &
        bad = ior(bad, 1)
      if (bc(i) /= i + 2 * k) bad = ior(bad, 2)
      if (rs(i) /= nprocs * (nprocs - 1) / 2 + nprocs * (rank * n + i + k)) &
        bad = ior(bad, 4)
    end do
    if (recvv /= mod(rank + nprocs - 1, nprocs) + 10 * k) bad = ior(bad, 8)
  end do
  call MPI_Allreduce(MPI_IN_PLACE, bad, 1, MPI_INTEGER, MPI_BOR, &
                     MPI_COMM_WORLD)
  if (bad /= 0) then
    if (rank == 0) print '(a,i0)', 'f08_nb: MISMATCH ', bad
    call MPI_Abort(MPI_COMM_WORLD, 1)
  end if
  if (rank == 0) print '(a)', 'f08_nb: ok'
  call MPI_Finalize()
end program f08_nb
