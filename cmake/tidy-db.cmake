# Copies the compilation database for clang-tidy without the GCC-only flags clang 14 rejects as
# unknown arguments (the plugin's -mtls-dialect=gnu2, plugin/CMakeLists.txt: TLS descriptors,
# which clang understands only from version 19). Run as: cmake -DIN=... -DOUT=... -P tidy-db.cmake
file(READ "${IN}" db)
string(REPLACE " -mtls-dialect=gnu2" "" db "${db}")
file(WRITE "${OUT}" "${db}")
