# `pip install --no-build-isolation .` (pyproject.toml: scikit-build-core
# runs this CMake project with SKBUILD set). ptopt builds against the torch of
# the Python that runs pip, and puts into that Python's site-packages only
# what the package needs:
#   ptopt/            the pure-Python files (pyproject.toml: wheel.packages)
#   ptopt/_C*.so      the pybind11 extension (python/CMakeLists.txt)
#   ptopt/_bin/ptopt  the command line (tools/); ptopt's libraries are static,
#                     linked into both
#   bin/ptopt         the `ptopt` command (python/ptopt-command): runs
#                     ptopt/_bin/ptopt without importing torch
# Both binaries find LibTorch (and a CUDA wheel's nvidia-* libraries) through
# $ORIGIN-relative RPATHs into the same site-packages.
#
# ptopt_pip_check_torch(): before LibTorch is looked for. Refuses, with a
# one-line reason (message(FATAL_ERROR), which pip shows), a torch this build
# cannot use; pip would otherwise fail deep inside TorchConfig.cmake or the
# compiler, or install a package without ptopt._C.
# ptopt_pip_install(): after every target: the install rules above.

set(PTOPT_PIP_MIN_TORCH "2.15" CACHE STRING
    "The oldest torch `pip install .` builds against: the PyPI world's pin (scripts/requirements-torch2.txt); older 2.x releases are untested")

# The reason on one line (a leading space keeps CMake from wrapping it).
function(ptopt_pip_refuse)
  string(JOIN "" reason ${ARGV})
  message(FATAL_ERROR " ptopt: ${reason}")
endfunction()

function(ptopt_pip_check_torch)
  set(py "${PTOPT_PYTHON}")
  execute_process(COMMAND "${py}" -W ignore -c
    "import os, torch; print(torch.__version__); print(os.path.dirname(torch.__file__)); print(torch.version.cuda or '')"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    # The last line of the traceback ("ModuleNotFoundError: No module named 'torch'").
    string(STRIP "${err}" err)
    string(REGEX REPLACE ".*\n" "" err "${err}")
    ptopt_pip_refuse("no torch for ${py} to build against (${err}): install PyTorch first "
                     "(pip install torch), then pip install --no-build-isolation . (without "
                     "--no-build-isolation pip builds in a fresh environment that has no torch)")
  endif()
  string(REPLACE "\n" ";" out "${out}")
  list(GET out 0 version)
  list(GET out 1 torch_dir)
  list(LENGTH out n)
  set(cuda "")
  if(n GREATER 2)
    list(GET out 2 cuda)
  endif()
  string(REGEX REPLACE "[+].*" "" plain_version "${version}")
  if(plain_version VERSION_LESS 2.0)
    ptopt_pip_refuse("torch ${version} (${torch_dir}) is 1.x, and pip install builds against PyTorch 2.x "
                     "(${PTOPT_PIP_MIN_TORCH} or newer). torch 1.13 is the Debian world: build it with "
                     "scripts/build.sh (README)")
  endif()
  if(plain_version VERSION_LESS PTOPT_PIP_MIN_TORCH)
    ptopt_pip_refuse("torch ${version} (${torch_dir}) is older than ${PTOPT_PIP_MIN_TORCH}, the oldest "
                     "torch ptopt is built and tested against (scripts/requirements-torch2.txt): "
                     "pip install torch==${PTOPT_PIP_MIN_TORCH}.*, or try this one with "
                     "--config-settings=cmake.define.PTOPT_PIP_MIN_TORCH=${plain_version} (untested)")
  endif()
  if(NOT EXISTS "${torch_dir}/share/cmake/Torch/TorchConfig.cmake")
    ptopt_pip_refuse("torch ${version} at ${torch_dir} has no LibTorch CMake config "
                     "(share/cmake/Torch/TorchConfig.cmake): ptopt builds against a torch that ships "
                     "LibTorch's headers and CMake files, as the PyPI wheels do")
  endif()
  if(NOT EXISTS "${torch_dir}/include/torch/script.h")
    ptopt_pip_refuse("torch ${version} at ${torch_dir} has no C++ headers (include/torch/script.h): "
                     "ptopt builds against a torch that ships LibTorch's headers, as the PyPI wheels do")
  endif()
  # A CUDA torch's CMake config insists on the CUDA toolkit (its FindCUDA:
  # nvcc, headers); cmake/torch_world.cmake takes /usr/local/cuda's. Refused
  # only where none of the places FindCUDA looks at is set.
  set(cuda_hint FALSE)
  foreach(var CUDACXX CUDA_PATH CUDA_HOME CUDA_BIN_PATH)
    if(DEFINED ENV{${var}})
      set(cuda_hint TRUE)
    endif()
  endforeach()
  if(cuda AND NOT cuda_hint AND NOT CMAKE_CUDA_COMPILER AND NOT CUDA_TOOLKIT_ROOT_DIR
     AND NOT EXISTS /usr/local/cuda/bin/nvcc)
    find_program(ptopt_nvcc nvcc)
    if(NOT ptopt_nvcc)
      ptopt_pip_refuse("torch ${version} is built with CUDA ${cuda}, and LibTorch's CMake config needs the "
                       "CUDA toolkit to build against it (nvcc and its headers, none in /usr/local/cuda, "
                       "CUDACXX or PATH): install the CUDA toolkit ${cuda}")
    endif()
  endif()
  message(STATUS "ptopt: pip install against torch ${version} (${torch_dir})")
endfunction()

function(ptopt_pip_install)
  if(NOT TARGET ptopt_python)
    ptopt_pip_refuse("the Python extension ptopt._C is not configured, and pip install needs it")
  endif()
  # Where the package lands: the site-packages of the Python that builds it
  # (--no-build-isolation: the environment that has torch).
  execute_process(COMMAND "${PTOPT_PYTHON}" -c "import sysconfig; print(sysconfig.get_path('platlib'))"
    OUTPUT_VARIABLE site OUTPUT_STRIP_TRAILING_WHITESPACE)
  get_filename_component(site "${site}" REALPATH)
  # LibTorch's lib/ and, for a CUDA wheel, the nvidia-* folder of libcudart
  # (linked directly; LibTorch finds its own through its RPATH): relative to
  # each binary when they share that site-packages, then their absolute paths
  # (an install elsewhere: pip --target, --user).
  set(lib_dirs "${TORCH_INSTALL_PREFIX}/lib")
  if(PTOPT_WHEEL_CUDA_LIB_DIRS AND CUDA_cudart_LIBRARY)
    get_filename_component(cudart_dir "${CUDA_cudart_LIBRARY}" DIRECTORY)
    list(APPEND lib_dirs "${cudart_dir}")
  endif()
  foreach(pair "ptopt_python;ptopt" "ptopt;ptopt/_bin")
    list(GET pair 0 target)
    list(GET pair 1 dest)
    set(relative "")
    set(absolute "")
    foreach(dir ${lib_dirs})
      get_filename_component(dir "${dir}" REALPATH)
      list(APPEND absolute "${dir}")
      string(FIND "${dir}/" "${site}/" at)
      if(at EQUAL 0)
        file(RELATIVE_PATH rel "${site}/${dest}" "${dir}")
        list(APPEND relative "$ORIGIN/${rel}")
      endif()
    endforeach()
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "${relative};${absolute}")
  endforeach()
  install(TARGETS ptopt_python LIBRARY DESTINATION ptopt)
  install(TARGETS ptopt RUNTIME DESTINATION ptopt/_bin)
  install(PROGRAMS "${PROJECT_SOURCE_DIR}/python/ptopt-command" DESTINATION "${SKBUILD_SCRIPTS_DIR}" RENAME ptopt)
endfunction()
