#pragma once
// What the OpenMP layer's library exports: the entry points of GCC's libgomp ABI, OpenMP's
// omp_* functions and the process start; everything else in it stays hidden.
#define LOOM_OMP_API extern "C" __attribute__((visibility("default")))
// The same for C++ functions (operator new and delete).
#define LOOM_OMP_CXX_API __attribute__((visibility("default")))
