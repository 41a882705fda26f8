! f_gathers: MPI_Allgather, MPI_Gather, MPI_Scatter, MPI_Reduce_scatter_block
! and MPI_Reduce_scatter (equal counts), in place and not, from Fortran
! through `use mpi`, whose Open MPI binding calls PMPI_ directly: only
! libincoll_mpi's Fortran wrappers can offload these. Integers only, every
! buffer passed as its first element (see f_allreduce.f90). Prints
! "f_gathers: ok" at rank 0.
program f_gathers
  use mpi
  implicit none
  integer, parameter :: n = 300, maxp = 16
  integer :: ierr, rank, nprocs, i, q, bad, root
  integer :: a(n), b(n * maxp), c(n * maxp), counts(maxp)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  bad = 0
  root = nprocs - 1
  do i = 1, n
    a(i) = rank * 1000 + i
  end do

  b = -1
  call MPI_Allgather(a(1), n, MPI_INTEGER, b(1), n, MPI_INTEGER, &
                     MPI_COMM_WORLD, ierr)
  do q = 0, nprocs - 1
    do i = 1, n
      if (b(q * n + i) /= q * 1000 + i) bad = ior(bad, 1)
    end do
  end do

  b = -1
  b(rank * n + 1:rank * n + n) = a
  call MPI_Allgather(MPI_IN_PLACE, n, MPI_INTEGER, b(1), n, MPI_INTEGER, &
                     MPI_COMM_WORLD, ierr)
  do q = 0, nprocs - 1
    do i = 1, n
      if (b(q * n + i) /= q * 1000 + i) bad = ior(bad, 2)
    end do
  end do

  b = -1
  call MPI_Gather(a(1), n, MPI_INTEGER, b(1), n, MPI_INTEGER, root, &
                  MPI_COMM_WORLD, ierr)
  if (rank == root) then
    do q = 0, nprocs - 1
      do i = 1, n
        if (b(q * n + i) /= q * 1000 + i) bad = ior(bad, 4)
      end do
    end do
  end if

  do q = 0, nprocs - 1
    do i = 1, n
      c(q * n + i) = q * 7 + i
    end do
  end do
  b = -1
  call MPI_Scatter(c(1), n, MPI_INTEGER, b(1), n, MPI_INTEGER, 0, &
                   MPI_COMM_WORLD, ierr)
  do i = 1, n
    if (b(i) /= rank * 7 + i) bad = ior(bad, 8)
  end do

  do i = 1, n * nprocs
    c(i) = rank + i
  end do
  b = -1
  call MPI_Reduce_scatter_block(c(1), b(1), n, MPI_INTEGER, MPI_SUM, &
                                MPI_COMM_WORLD, ierr)
  do i = 1, n
    if (b(i) /= nprocs * (nprocs - 1) / 2 + nprocs * (rank * n + i)) &
      bad = ior(bad, 16)
  end do

  counts = n
  b(1:n * nprocs) = c(1:n * nprocs)
  call MPI_Reduce_scatter(MPI_IN_PLACE, b(1), counts, MPI_INTEGER, &
                          MPI_SUM, MPI_COMM_WORLD, ierr)
  do i = 1, n
    if (b(i) /= nprocs * (nprocs - 1) / 2 + nprocs * (rank * n + i)) &
      bad = ior(bad, 32)
  end do

  call MPI_Allreduce(MPI_IN_PLACE, bad, 1, MPI_INTEGER, MPI_BOR, &
                     MPI_COMM_WORLD, ierr)
  if (bad /= 0) then
    if (rank == 0) print '(a,i0)', 'f_gathers: MISMATCH ', bad
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  if (rank == 0) print '(a)', 'f_gathers: ok'
  call MPI_Finalize(ierr)
end program f_gathers
