# Build identity for ncclscope_build_info: version from project(), revision from git when available.
execute_process(COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE NCCLSCOPE_REVISION
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT NCCLSCOPE_REVISION)
  set(NCCLSCOPE_REVISION "unknown")
endif()
