! An unmodified Fortran OpenMP program (only -fopenmp and the layer's link line): a common
! block shared by every thread of every process, single, a dynamic loop, critical, the
! omp_lib queries.
program probe
  use omp_lib
  implicit none
  integer, parameter :: n = 5000
  integer :: hits(n), nt, total
  common /shared/ hits, nt, total
  integer :: i
  hits = 0
  total = 0
  !$omp parallel
  !$omp single
  nt = omp_get_num_threads()
  !$omp end single
  !$omp do schedule(dynamic, 7)
  do i = 1, n
    hits(i) = hits(i) + 1
  end do
  !$omp end do
  !$omp critical
  total = total + omp_get_thread_num() + 1
  !$omp end critical
  !$omp end parallel
  if (nt /= omp_get_max_threads()) then
    print '(a,i0,a,i0)', 'fortran probe FAILED: team of ', nt, ', expected ', omp_get_max_threads()
    stop 1
  end if
  if (any(hits /= 1)) then
    print '(a)', 'fortran probe FAILED: an iteration ran other than once'
    stop 1
  end if
  if (total /= nt * (nt + 1) / 2) then
    print '(a,i0,a,i0)', 'fortran probe FAILED: critical total ', total, ', expected ', nt * (nt + 1) / 2
    stop 1
  end if
  print '(a,i0,a)', 'fortran probe OK: ', nt, ' threads'
end program probe
