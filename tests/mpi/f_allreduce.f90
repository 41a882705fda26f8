! f_allreduce: MPI_Allreduce (in place and not), MPI_Reduce, MPI_Bcast and
! MPI_Barrier from Fortran through `use mpi`, whose Open MPI binding calls
! PMPI_ directly: only libincoll_mpi's Fortran wrappers can offload these.
! Integers only, and every buffer passed as its first element, so that
! compilers without explicit interfaces (MPICH's `use mpi`) see one type
! and rank for every choice argument. Prints "f_allreduce: ok" at rank 0.
program f_allreduce
  use mpi
  implicit none
  integer, parameter :: n = 600
  integer :: ierr, rank, nprocs, i, bad
  integer :: a(n), b(n), expect(n)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  bad = 0
  do i = 1, n
    a(i) = rank * 3 + i
    expect(i) = 3 * nprocs * (nprocs - 1) / 2 + nprocs * i
  end do

  b = -1
  call MPI_Allreduce(a(1), b(1), n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (ierr /= MPI_SUCCESS .or. any(b /= expect)) bad = bad + 1

  b = a
  call MPI_Allreduce(MPI_IN_PLACE, b(1), n, MPI_INTEGER, MPI_SUM, &
                     MPI_COMM_WORLD, ierr)
  if (ierr /= MPI_SUCCESS .or. any(b /= expect)) bad = bad + 2

  b = a
  call MPI_Allreduce(MPI_IN_PLACE, b(1), n, MPI_INTEGER, MPI_MAX, &
                     MPI_COMM_WORLD, ierr)
  if (any(b /= a + 3 * (nprocs - 1 - rank))) bad = bad + 4

  b = -1
  call MPI_Reduce(a(1), b(1), n, MPI_INTEGER, MPI_SUM, nprocs - 1, &
                  MPI_COMM_WORLD, ierr)
  if (rank == nprocs - 1 .and. any(b /= expect)) bad = bad + 8
  if (rank /= nprocs - 1 .and. any(b /= -1)) bad = bad + 16

  b = a
  if (rank == 0) then
    call MPI_Reduce(MPI_IN_PLACE, b(1), n, MPI_INTEGER, MPI_SUM, 0, &
                    MPI_COMM_WORLD, ierr)
    if (any(b /= expect)) bad = bad + 32
  else
    call MPI_Reduce(a(1), b(1), n, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  end if

  b = a
  call MPI_Bcast(b(1), n, MPI_INTEGER, 1, MPI_COMM_WORLD, ierr)
  do i = 1, n
    if (b(i) /= 3 + i) bad = bad + 64
  end do
  call MPI_Barrier(MPI_COMM_WORLD, ierr)

  call MPI_Allreduce(MPI_IN_PLACE, bad, 1, MPI_INTEGER, MPI_MAX, &
                     MPI_COMM_WORLD, ierr)
  if (bad /= 0) then
    if (rank == 0) print '(a,i0)', 'f_allreduce: MISMATCH ', bad
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  if (rank == 0) print '(a)', 'f_allreduce: ok'
  call MPI_Finalize(ierr)
end program f_allreduce
