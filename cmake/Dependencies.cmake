# Every third-party dependency of quantkit, found from Debian packages (see scripts/setup.sh).
# Minimum versions are those of Debian 12 (bookworm).
find_package(Threads REQUIRED)
find_package(fmt 9 REQUIRED)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(CLI11 2.1 REQUIRED)
find_package(Protobuf 3.21 REQUIRED)
find_package(ONNX REQUIRED)           # libonnx-dev: targets onnx, onnx_proto (ONNX_NAMESPACE=onnx, ONNX_ML=1)
find_package(ZLIB REQUIRED)           # gzip-compressed IDX files
# .npz archives (libzip-dev). Through pkg-config: Debian's libzip CMake config references the
# zipcmp/zipmerge/ziptool binaries of other packages and fails without them.
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)
find_package(OpenSSL REQUIRED)        # SHA-256 for model/data provenance
# libtorch: Debian's libtorch-dev (CPU) or an official/pip libtorch via -DCMAKE_PREFIX_PATH (CUDA builds).
if(QUANTKIT_PYTHON)
  include(QuantkitPython)  # may point find_package(Torch) at the Python torch's libtorch
endif()
find_package(Torch REQUIRED)
if(QUANTKIT_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(QUANTKIT_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
