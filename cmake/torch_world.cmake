# Finds LibTorch and fmt the way this build of ptopt uses them; included by
# the top-level CMakeLists.txt and, installed, by ptoptConfig.cmake, so that
# a project linking ptopt::api gets the same LibTorch and the same fmt.
#
# In: PTOPT_TORCH_WHEEL_DIR, the torch folder of a pip wheel (it carries
# share/cmake/Torch and its own lib/, include/), or "" for find_package's
# own search (Debian's libtorch-dev).
# Out: Torch found (TORCH_LIBRARIES, torch_cuda when it has CUDA), fmt::fmt.
if(PTOPT_TORCH_WHEEL_DIR)
  # The wheel's lib/ first on the prefix path: TorchConfig looks its
  # libraries up with find_library, which would otherwise find /usr/lib's.
  list(PREPEND CMAKE_PREFIX_PATH "${PTOPT_TORCH_WHEEL_DIR}" "${PTOPT_TORCH_WHEEL_DIR}/share/cmake")
  # A CUDA wheel's runtime libraries come in nvidia-* packages beside it:
  # link and run with those, not /usr/local/cuda's (another CUDA release,
  # whose NCCL lacks symbols libtorch_cuda needs). rpath-link lets ld
  # resolve libtorch_cuda's own dependencies there too.
  file(GLOB PTOPT_WHEEL_CUDA_LIB_DIRS LIST_DIRECTORIES true "${PTOPT_TORCH_WHEEL_DIR}/../nvidia/*/lib")
  if(PTOPT_WHEEL_CUDA_LIB_DIRS)
    find_library(CUDA_cudart_LIBRARY NAMES libcudart.so.13 libcudart.so.12 cudart
                 PATHS ${PTOPT_WHEEL_CUDA_LIB_DIRS} NO_DEFAULT_PATH)
    find_library(CUDA_nvrtc_LIBRARY NAMES libnvrtc.so.13 libnvrtc.so.12 nvrtc
                 PATHS ${PTOPT_WHEEL_CUDA_LIB_DIRS} NO_DEFAULT_PATH)
    string(REPLACE ";" ":" ptopt_rpath_link "${PTOPT_WHEEL_CUDA_LIB_DIRS}")
    foreach(kind EXE SHARED MODULE)
      if(NOT CMAKE_${kind}_LINKER_FLAGS MATCHES "rpath-link")
        set(CMAKE_${kind}_LINKER_FLAGS "${CMAKE_${kind}_LINKER_FLAGS} -Wl,-rpath-link,${ptopt_rpath_link}")
      endif()
    endforeach()
  endif()
endif()
# A CUDA LibTorch's CMake config looks for nvcc; the toolkit lives here.
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc AND NOT DEFINED ENV{CUDACXX})
  set(CUDA_TOOLKIT_ROOT_DIR /usr/local/cuda CACHE PATH "")
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "")
endif()
# Only host code calls CUDA (through ATen), no kernels of ptopt's own: one
# architecture keeps torch's CUDA checks quiet.
if(NOT TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "9.0" CACHE STRING "")
endif()
find_package(Torch REQUIRED)

# fmt: Debian's package; on the CUDA machine (scripts/gpu-check.sh) only its
# headers are bundled (no CMake config), used header-only. A PyPI LibTorch
# carries its own fmt headers (fmt 12 in torch 2.15) in the include folder
# every target searches first: those, header-only, or the headers of one fmt
# would meet the library of another (Debian's fmt 9).
if(NOT TARGET fmt::fmt)
  if(EXISTS "${TORCH_INSTALL_PREFIX}/include/fmt/format.h")
    add_library(fmt::fmt INTERFACE IMPORTED)
    target_include_directories(fmt::fmt SYSTEM INTERFACE "${TORCH_INSTALL_PREFIX}/include")
    target_compile_definitions(fmt::fmt INTERFACE FMT_HEADER_ONLY=1)
    message(STATUS "fmt: header-only, LibTorch's own (${TORCH_INSTALL_PREFIX}/include/fmt)")
  else()
    find_package(fmt QUIET)
  endif()
endif()
if(NOT TARGET fmt::fmt)
  find_path(PTOPT_FMT_INCLUDE_DIR fmt/format.h REQUIRED)
  add_library(fmt::fmt INTERFACE IMPORTED)
  target_include_directories(fmt::fmt INTERFACE ${PTOPT_FMT_INCLUDE_DIR})
  target_compile_definitions(fmt::fmt INTERFACE FMT_HEADER_ONLY=1)
  message(STATUS "fmt: header-only from ${PTOPT_FMT_INCLUDE_DIR}")
endif()
