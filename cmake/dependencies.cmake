# Every external dependency is a Debian 12 package installed by scripts/install-deps.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CURL REQUIRED)  # the node page's alerts from Prometheus; the tests' HTTP client
find_package(nlohmann_json REQUIRED)  # container runtime state (eBPF), Prometheus' API answers
find_package(absl REQUIRED)  # flat hash maps on the analytics' hot path
pkg_check_modules(LIBBPF REQUIRED IMPORTED_TARGET libbpf)
pkg_check_modules(LIBELF REQUIRED IMPORTED_TARGET libelf)
pkg_check_modules(IBVERBS REQUIRED IMPORTED_TARGET libibverbs)
# rdma netlink (QP resources), as rdma-core's own util/rdma_nl.c talks to it
pkg_check_modules(LIBNL REQUIRED IMPORTED_TARGET libnl-3.0)

# The HTTP server: event-driven, with per-client connection limits (agent/exporter/http_server.h
# says why not civetweb).
pkg_check_modules(MICROHTTPD REQUIRED IMPORTED_TARGET libmicrohttpd)
# The endpoint's TLS client-certificate check (libmicrohttpd's own TLS is GnuTLS), gzip, and the
# bcrypt hashes of exporter-toolkit's basic_auth_users (libxcrypt's crypt_r).
pkg_check_modules(GNUTLS REQUIRED IMPORTED_TARGET gnutls)
find_package(ZLIB REQUIRED)
find_library(LIBCRYPT crypt REQUIRED)

find_program(BPFTOOL bpftool PATHS /usr/sbin /sbin REQUIRED)
find_program(CLANG clang REQUIRED)

if(NCCLSCOPE_BUILD_TESTS)
  find_package(GTest REQUIRED)
  find_program(PROMTOOL promtool REQUIRED)
  find_program(PROMETHEUS prometheus REQUIRED)
  # Debian's prometheus-alertmanager: the alerting configuration's checks and delivery test.
  find_program(AMTOOL amtool REQUIRED)
  find_program(ALERTMANAGER prometheus-alertmanager alertmanager REQUIRED)
endif()
if(NCCLSCOPE_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
