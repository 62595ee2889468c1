# The Python interpreter of the extension, and the rule "one libtorch per process": when that
# interpreter imports a torch that ships its CMake package (PyPI torch), quantkit links that
# torch's libtorch (QUANTKIT_TORCH_PYTHON, cmake/Dependencies.cmake), so the extension and
# `import torch` share a single libtorch. Debian's python3-torch ships none: it uses
# libtorch-dev's libtorch, the one found by default. (docs/python.md, "Which libtorch";
# python/quantkit/_torchcheck.py checks the torch at import time.)
if(NOT DEFINED Python_EXECUTABLE)
  if(QUANTKIT_TORCH_PYTHON)
    set(Python_EXECUTABLE ${QUANTKIT_TORCH_PYTHON})  # the GPU route's venv: its torch is the one linked
  elseif(EXISTS ${PROJECT_SOURCE_DIR}/.venv/bin/python)
    set(Python_EXECUTABLE ${PROJECT_SOURCE_DIR}/.venv/bin/python)
  endif()
endif()
find_package(Python 3.9 REQUIRED COMPONENTS Interpreter Development.Module)
if(NOT QUANTKIT_TORCH_PYTHON)
  execute_process(
    COMMAND ${Python_EXECUTABLE} -c
      "import os, torch.utils; p = torch.utils.cmake_prefix_path; print(p if os.path.isdir(os.path.join(p, 'Torch')) else '')"
    OUTPUT_VARIABLE QUANTKIT_PYTHON_TORCH_PREFIX OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET)
  if(QUANTKIT_PYTHON_TORCH_PREFIX)
    message(STATUS "quantkit: linking the libtorch of ${Python_EXECUTABLE}'s torch (${QUANTKIT_PYTHON_TORCH_PREFIX})")
    set(QUANTKIT_TORCH_PYTHON ${Python_EXECUTABLE})
  endif()
endif()

# Builds outside the presets (pip install ., scripts/build_wheel.sh) use ccache when there is one,
# with the presets' settings, so that they share objects with each other and with `make build`.
if(NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(QUANTKIT_CCACHE ccache)
  if(QUANTKIT_CCACHE)
    set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}
        CCACHE_NOHASHDIR=1 ${QUANTKIT_CCACHE})
  endif()
endif()
