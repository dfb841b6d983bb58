# Build identity for ncclscope_build_info: version from project(), revision from git when available
# (or given: -DNCCLSCOPE_REVISION=..., as the image build does, whose build context has no .git).
set(NCCLSCOPE_REVISION "" CACHE STRING "Revision the agent reports (default: git HEAD)")
if(NCCLSCOPE_REVISION)
  set(_ncclscope_revision ${NCCLSCOPE_REVISION})
else()
  execute_process(COMMAND git rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE _ncclscope_revision
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT _ncclscope_revision)
    set(_ncclscope_revision "unknown")
  endif()
endif()
# A normal variable shadows the (empty) cache entry, for agent/exporter/build_info.cc.in.
set(NCCLSCOPE_REVISION ${_ncclscope_revision})
