# Helpers that give every quantkit target the same warnings, sanitizer and include settings.

function(quantkit_target_defaults target)
  target_compile_features(${target} PUBLIC cxx_std_17)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(QUANTKIT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(QUANTKIT_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PUBLIC -fsanitize=address,undefined)
  endif()
  if(QUANTKIT_FUZZ)
    # Coverage instrumentation for libFuzzer plus ASan/UBSan; fuzz targets add -fsanitize=fuzzer.
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link,address,undefined
                                             -fno-omit-frame-pointer)
    target_link_options(${target} PUBLIC -fsanitize=address,undefined)
  endif()
endfunction()

# The internal headers (src/: "<layer>/x.h"): every library, and the targets that test or measure
# the internals (unit tests, benches, fuzzers), name them themselves; a library exports only
# include/ (quantkit/...), so the CLI and the Python bindings see the public headers alone.
function(quantkit_internal_includes target)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src)
endfunction()

# quantkit_add_library(name SOURCES ... DEPS ... [PRIVATE_DEPS ...])
function(quantkit_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include)
  quantkit_internal_includes(${name})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  quantkit_target_defaults(${name})
  if(QUANTKIT_PYTHON)
    # Linked into the Python extension (a shared object). Libraries only: tests and tools keep
    # their flags (and their ccache entries).
    set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  endif()
endfunction()

# quantkit_add_test(name SOURCES ... DEPS ... LABELS ...)
# Registers each gtest case with CTest (gtest_discover_tests); LABELS apply to the directory.
function(quantkit_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  quantkit_internal_includes(${name})
  target_compile_definitions(${name} PRIVATE
    QK_SOURCE_DIR="${PROJECT_SOURCE_DIR}" QK_BINARY_DIR="${PROJECT_BINARY_DIR}"
    QK_TESTVECTORS_DIR="${PROJECT_SOURCE_DIR}/../shared/testvectors")
  quantkit_target_defaults(${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  # Labels go on the directory (CTest applies them to every test defined there): list-valued
  # properties do not survive gtest_discover_tests' code generation. Keep one test kind per dir.
  set_property(DIRECTORY APPEND PROPERTY LABELS ${ARG_LABELS})
  if("unit" IN_LIST ARG_LABELS)
    # `make asan` builds only these (the `unit_tests` target, tests/CMakeLists.txt) and quantkit.
    set_property(GLOBAL APPEND PROPERTY QUANTKIT_UNIT_TEST_TARGETS ${name})
  endif()
  gtest_discover_tests(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} DISCOVERY_TIMEOUT 60)
endfunction()

# quantkit_add_tool(name SOURCES ... DEPS ...): a program over the public headers (include/ only).
function(quantkit_add_tool name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  quantkit_target_defaults(${name})
endfunction()

# quantkit_add_bench(name SOURCES ... DEPS ...): a benchmark program, which measures internals.
function(quantkit_add_bench name)
  quantkit_add_tool(${name} ${ARGN})
  quantkit_internal_includes(${name})
endfunction()
