# Every third-party dependency of quantkit, found from Debian packages (see scripts/setup.sh).
# Minimum versions are those of Debian 12 (bookworm).
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(CLI11 2.1 REQUIRED)
find_package(Protobuf 3.21 REQUIRED)
find_package(ONNX REQUIRED)           # libonnx-dev: targets onnx, onnx_proto (ONNX_NAMESPACE=onnx, ONNX_ML=1)
find_package(OpenMP REQUIRED)         # collectors' scans (libgomp, the runtime Debian's libtorch uses)
find_package(ZLIB REQUIRED)           # gzip-compressed IDX files
# .npz archives (libzip-dev). Through pkg-config: Debian's libzip CMake config references the
# zipcmp/zipmerge/ziptool binaries of other packages and fails without them.
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)
find_package(OpenSSL REQUIRED)        # SHA-256 for model/data provenance
# IEEE float16 conversions outside the runtime (ir/float16.h): libfp16-dev's header-only fp16.h,
# the conversion library PyTorch's c10::Half and XNNPACK use.
find_path(QUANTKIT_FP16_INCLUDE_DIR fp16.h)
if(NOT QUANTKIT_FP16_INCLUDE_DIR)
  message(FATAL_ERROR "quantkit: fp16.h not found (install libfp16-dev: scripts/setup.sh)")
endif()
# libtorch: Debian's libtorch-dev (CPU), or the libtorch inside a Python environment's PyPI torch
# (the GPU route, docs/gpu.md): QUANTKIT_TORCH_PYTHON names that environment's interpreter and
# torch.utils.cmake_prefix_path is added to the search path. -DCMAKE_PREFIX_PATH works as well.
set(QUANTKIT_TORCH_PYTHON "" CACHE FILEPATH "python whose PyPI torch to build against (empty: Debian's libtorch)")
# The Python extension's interpreter; when it imports a PyPI torch, that torch is the one to link
# (QuantkitPython sets QUANTKIT_TORCH_PYTHON).
if(QUANTKIT_PYTHON)
  include(QuantkitPython)
endif()
if(QUANTKIT_TORCH_PYTHON)
  execute_process(
    COMMAND ${QUANTKIT_TORCH_PYTHON} -c
            "import os, torch.utils; print(torch.utils.cmake_prefix_path + ';' + os.path.dirname(torch.__file__))"
    OUTPUT_VARIABLE quantkit_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_VARIABLE quantkit_torch_error RESULT_VARIABLE quantkit_torch_rc)
  if(NOT quantkit_torch_rc EQUAL 0)
    message(FATAL_ERROR "QUANTKIT_TORCH_PYTHON=${QUANTKIT_TORCH_PYTHON} cannot import torch "
                        "(run scripts/setup_torch.sh): ${quantkit_torch_error}")
  endif()
  list(GET quantkit_torch_prefix 0 quantkit_torch_cmake_dir)
  list(GET quantkit_torch_prefix 1 quantkit_torch_root)
  list(PREPEND CMAKE_PREFIX_PATH ${quantkit_torch_cmake_dir})
  # TorchConfig looks its libraries up with find_library(... PATHS <torch>/lib), which comes after
  # the system directories: with Debian's libtorch-dev installed it would mix Debian's libtorch.so
  # with PyPI's headers. CMAKE_LIBRARY_PATH is searched first.
  list(PREPEND CMAKE_LIBRARY_PATH ${quantkit_torch_root}/lib)
  # A CUDA wheel's libtorch_cuda.so finds the NCCL, cuDNN, ... of the wheel's nvidia/* packages
  # through its RUNPATH at run time, but at link time ld resolves those dependencies itself and
  # takes a system copy first (the CUDA toolkit's older libnccl.so.2: undefined ncclCommGrow, ...).
  file(GLOB quantkit_nvidia_lib_dirs LIST_DIRECTORIES true "${quantkit_torch_root}/../nvidia/*/lib")
  foreach(dir IN LISTS quantkit_nvidia_lib_dirs)
    add_link_options("LINKER:-rpath-link,${dir}")
  endforeach()
endif()
find_package(Torch REQUIRED)
message(STATUS "quantkit: libtorch ${Torch_VERSION} from ${TORCH_INSTALL_PREFIX}")

# libstdc++.so.6 first in every binary's DT_NEEDED list (issue 26). PyPI's libtorch_cpu.so / libtorch.so
# embed and export copies of parts of libstdc++ (std::filesystem, exception_ptr, ...: the manylinux
# toolchain links them statically), and the dynamic linker binds every reference in the process,
# libstdc++'s own internal ones included, to the first definition in load order. Measured on the
# lent H200 (Ubuntu 24.04, g++ 13.3 in /opt/gcc, torch 2.11): that g++ finds no libstdc++.so in its
# own directories, so neither its -lstdc++ nor ours put libstdc++.so.6 into quantkit's DT_NEEDED at
# all; std::filesystem references resolved into libtorch at link time and at run time (236
# bindings, the remove_all segfault of the cuda tests). The library itself, by path and with
# --no-as-needed, ahead of every object and library, made it the first DT_NEEDED entry there with 0
# bindings into torch. tests/link/std_bindings_test.py checks both (the order, and the bindings of
# the built binaries). Sanitizer and fuzzer runtimes must stay first, so those builds leave it out.
set(QUANTKIT_STDCXX_FIRST OFF)
if(NOT QUANTKIT_SANITIZE AND NOT QUANTKIT_FUZZ AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so.6
                  OUTPUT_VARIABLE quantkit_stdcxx_guess OUTPUT_STRIP_TRAILING_WHITESPACE)
  get_filename_component(quantkit_stdcxx_dir "${quantkit_stdcxx_guess}" DIRECTORY)
  find_library(QUANTKIT_LIBSTDCXX NAMES libstdc++.so.6
               HINTS ${quantkit_stdcxx_dir} ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES}
               PATHS /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64 NO_CACHE)
  if(QUANTKIT_LIBSTDCXX)
    add_link_options("LINKER:--push-state,--no-as-needed" "${QUANTKIT_LIBSTDCXX}" "LINKER:--pop-state")
    set(QUANTKIT_STDCXX_FIRST ON)
    message(STATUS "quantkit: ${QUANTKIT_LIBSTDCXX} linked ahead of every library (libtorch's std:: copies)")
  else()
    message(WARNING "quantkit: libstdc++.so.6 not found next to ${CMAKE_CXX_COMPILER}: a PyPI libtorch "
                    "may then serve std:: symbols (tests/link/std_bindings_test.py)")
  endif()
endif()

# oneDNN's sgemm for float MatMul/Gemm (runtime/ops/float_gemm.h): the libdnnl.so.2 that Debian's
# libtorch itself links, so one copy and one OpenMP runtime in the process (libdnnl-dev adds the
# header). A PyPI torch bundles its own oneDNN and libgomp: no second copy is loaded beside them,
# and MatMul/Gemm use ATen's at::mm there.
set(QUANTKIT_DNNL OFF)
if(NOT QUANTKIT_TORCH_PYTHON AND Torch_DIR MATCHES "^/usr/")
  find_path(QUANTKIT_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.h)
  find_library(QUANTKIT_DNNL_LIB NAMES dnnl)
  if(NOT QUANTKIT_DNNL_INCLUDE_DIR OR NOT QUANTKIT_DNNL_LIB)
    message(FATAL_ERROR "quantkit: oneDNN's dnnl.h / libdnnl not found (install libdnnl-dev: scripts/setup.sh)")
  endif()
  set(QUANTKIT_DNNL ON)
  message(STATUS "quantkit: float MatMul/Gemm through oneDNN's sgemm (${QUANTKIT_DNNL_LIB})")
endif()

# fmt, one copy for every translation unit. PyPI torch ships fmt 12 headers in its include
# directory and no libfmt; Debian ships fmt 9 (headers + libfmt.so.9). Mixing them is the clash
# seen on the first CUDA build (ATen's include path shadows Debian's headers, then fmt::v12
# symbols are missing from libfmt.so.9). Rule: when the libtorch bundles fmt, every target uses
# that fmt header-only (from a directory holding only fmt/, so non-runtime layers do not see
# the ATen headers); otherwise Debian's fmt. Targets link quantkit::fmt, never fmt::fmt.
add_library(quantkit_fmt INTERFACE)
add_library(quantkit::fmt ALIAS quantkit_fmt)
if(EXISTS "${TORCH_INSTALL_PREFIX}/include/fmt/base.h")
  set(quantkit_fmt_dir ${CMAKE_BINARY_DIR}/torch-fmt)
  file(MAKE_DIRECTORY ${quantkit_fmt_dir})
  file(CREATE_LINK ${TORCH_INSTALL_PREFIX}/include/fmt ${quantkit_fmt_dir}/fmt SYMBOLIC)
  target_include_directories(quantkit_fmt SYSTEM BEFORE INTERFACE ${quantkit_fmt_dir})
  target_compile_definitions(quantkit_fmt INTERFACE FMT_HEADER_ONLY=1)
  message(STATUS "quantkit: fmt header-only from ${TORCH_INSTALL_PREFIX}/include/fmt")
else()
  find_package(fmt 9 REQUIRED)
  target_link_libraries(quantkit_fmt INTERFACE fmt::fmt)
endif()
if(QUANTKIT_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(QUANTKIT_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
