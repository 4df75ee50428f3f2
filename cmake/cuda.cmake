# The CUDA backend plugin (engine/cuda/, kernels/cuda/), built when nvcc is found.
#
# nvcc comes from NVIDIA's toolkit in /usr/local/cuda (not a Debian package), so that is
# tried when nothing else names a compiler. The plugin links the CUDA runtime statically
# (cudart_static) and keeps its symbols to itself: the daemon loads it with dlopen and runs
# on hosts without CUDA, where the probe says why the backend is unusable. Also built: the
# GPU benchmark, fpgalz4fs-cudabench (tools/cuda-bench/).
option(FPGALZ4FS_CUDA "Build the CUDA backend plugin when nvcc is found" ON)

if(FPGALZ4FS_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
endif()

if(FPGALZ4FS_CUDA AND CMAKE_CUDA_COMPILER)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # H100/H200 machine code, plus PTX the driver compiles for any GPU from Ampere on.
    set(CMAKE_CUDA_ARCHITECTURES 90-real 80-virtual)
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "nvcc found (${CMAKE_CUDA_COMPILER}): building fpgalz4fs-cuda.so")
  set(FPGALZ4FS_HAVE_CUDA ON)

  # The kernel, shared by the plugin and the benchmark. The project's warning and sanitizer
  # options are the host compiler's: they stay off nvcc's command line.
  add_library(fpgalz4fs_cuda_kernel OBJECT kernels/cuda/krn_lz4_cuda.cu
    kernels/cuda/krn_check_cuda.cu)
  set_target_properties(fpgalz4fs_cuda_kernel PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    COMPILE_OPTIONS "")
  target_compile_options(fpgalz4fs_cuda_kernel PRIVATE --Werror all-warnings
    -Xcompiler=-Wall,-Wextra,-fvisibility=hidden)
  target_include_directories(fpgalz4fs_cuda_kernel PUBLIC kernels/cuda)

  add_library(fpgalz4fs-cuda MODULE engine/cuda/eng_cuda.c)
  set_target_properties(fpgalz4fs-cuda PROPERTIES
    PREFIX ""
    C_VISIBILITY_PRESET hidden
    OUTPUT_NAME fpgalz4fs-cuda
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  target_include_directories(fpgalz4fs-cuda PRIVATE engine kernels/cuda)
  target_include_directories(fpgalz4fs-cuda SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  # nodelete: the static runtime registers exit handlers, so the plugin must outlive a
  # dlclose (the daemon probes, unloads, then opens it). exclude-libs: cudart's symbols stay
  # private, so a host program with its own CUDA runtime cannot clash with them.
  target_link_options(fpgalz4fs-cuda PRIVATE -Wl,-z,nodelete -Wl,--exclude-libs,ALL)
  target_link_libraries(fpgalz4fs-cuda PRIVATE fpgalz4fs_cuda_kernel CUDA::cudart_static
    Threads::Threads)

  # The benchmark: the kernel alone, the engine with transfers, liblz4 on every core.
  add_executable(fpgalz4fs-cudabench tools/cuda-bench/fpgalz4fs-cudabench.c)
  target_include_directories(fpgalz4fs-cudabench SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(fpgalz4fs-cudabench PRIVATE fpgalz4fs_core fpgalz4fs_cuda_kernel
    CUDA::cudart_static)
else()
  message(STATUS "nvcc not found: the cuda backend is not built")
  set(FPGALZ4FS_HAVE_CUDA OFF)
endif()
