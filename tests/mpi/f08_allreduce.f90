! f08_allreduce: the same checks as f_allreduce through `use mpi_f08`
! (Open MPI: mpi_allreduce_f08_ and friends, which call PMPI_ directly),
! with double precision and integer arrays, optional ierror left out.
! Prints "f08_allreduce: ok" at rank 0.
program f08_allreduce
  use mpi_f08
  implicit none
  integer, parameter :: n = 700
  integer :: rank, nprocs, i, bad, ierr
  integer :: a(n), b(n), expect(n)
  double precision :: x(n), y(n), xexpect(n)

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  bad = 0
  do i = 1, n
    a(i) = rank * 5 + i
    expect(i) = 5 * nprocs * (nprocs - 1) / 2 + nprocs * i
    x(i) = dble(mod(rank + i, 7) - 3)
  end do
  call PMPI_Allreduce(x, xexpect, n, MPI_DOUBLE_PRECISION, MPI_SUM, &
                      MPI_COMM_WORLD)

  b = -1
  call MPI_Allreduce(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (ierr /= MPI_SUCCESS .or. any(b /= expect)) bad = bad + 1

  b = a
  call MPI_Allreduce(MPI_IN_PLACE, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (any(b /= expect)) bad = bad + 2

  y = 0
  call MPI_Allreduce(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  if (any(y /= xexpect)) bad = bad + 4

  y = x
  call MPI_Allreduce(MPI_IN_PLACE, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, &
                     MPI_COMM_WORLD)
  if (any(y /= xexpect)) bad = bad + 8

  b = -1
  call MPI_Reduce(a, b, n, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD)
  if (rank == 0 .and. any(b /= expect)) bad = bad + 16

  y = x
  call MPI_Bcast(y, n, MPI_DOUBLE_PRECISION, nprocs - 1, MPI_COMM_WORLD)
  do i = 1, n
    if (y(i) /= dble(mod(nprocs - 1 + i, 7) - 3)) bad = bad + 32
  end do
  call MPI_Barrier(MPI_COMM_WORLD)

  call MPI_Allreduce(MPI_IN_PLACE, bad, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD)
  if (bad /= 0) then
    if (rank == 0) print '(a,i0)', 'f08_allreduce: MISMATCH ', bad
    call MPI_Abort(MPI_COMM_WORLD, 1)
  end if
  if (rank == 0) print '(a)', 'f08_allreduce: ok'
  call MPI_Finalize()
end program f08_allreduce
