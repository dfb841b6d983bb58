# `cmake --build --preset default --target format-check` fails on any file clang-format would change;
# `--target format` rewrites them. CI runs format-check as a test (tests/CMakeLists.txt).
find_program(CLANG_FORMAT clang-format)
if(CLANG_FORMAT)
  file(GLOB_RECURSE NCCLSCOPE_FORMAT_SOURCES CONFIGURE_DEPENDS
    ${CMAKE_SOURCE_DIR}/agent/*.cc ${CMAKE_SOURCE_DIR}/agent/*.h
    ${CMAKE_SOURCE_DIR}/platform/*.cc ${CMAKE_SOURCE_DIR}/platform/*.h
    ${CMAKE_SOURCE_DIR}/plugin/*.cc ${CMAKE_SOURCE_DIR}/plugin/*.h
    ${CMAKE_SOURCE_DIR}/rdma/*.cc ${CMAKE_SOURCE_DIR}/rdma/*.h
    ${CMAKE_SOURCE_DIR}/bpf/*.h
    ${CMAKE_SOURCE_DIR}/tests/*.cc ${CMAKE_SOURCE_DIR}/tests/*.h ${CMAKE_SOURCE_DIR}/tests/*.c
    ${CMAKE_SOURCE_DIR}/bench/*.cc ${CMAKE_SOURCE_DIR}/bench/*.h
    ${CMAKE_SOURCE_DIR}/tools/*.cc ${CMAKE_SOURCE_DIR}/tools/*.h)
  add_custom_target(format-check
    COMMAND ${CLANG_FORMAT} --dry-run -Werror ${NCCLSCOPE_FORMAT_SOURCES}
    COMMENT "Checking formatting" VERBATIM)
  add_custom_target(format
    COMMAND ${CLANG_FORMAT} -i ${NCCLSCOPE_FORMAT_SOURCES} VERBATIM)
endif()

# `cmake --build --preset default --target tidy` runs clang-tidy (.clang-tidy) over every C++
# source of ours in the compilation database; any finding fails it.
find_program(RUN_CLANG_TIDY NAMES run-clang-tidy run-clang-tidy-14)
if(RUN_CLANG_TIDY)
  add_custom_target(tidy
    COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_BINARY_DIR}/compile_commands.json
            -DOUT=${CMAKE_BINARY_DIR}/tidy-db/compile_commands.json
            -P ${CMAKE_SOURCE_DIR}/cmake/tidy-db.cmake
    COMMAND ${RUN_CLANG_TIDY} -quiet -j 2 -p ${CMAKE_BINARY_DIR}/tidy-db
            "^${CMAKE_SOURCE_DIR}/(agent|platform|plugin|rdma|tests|bench|tools)/.*\\.(cc|c)$"
    COMMENT "Running clang-tidy" VERBATIM)
endif()
