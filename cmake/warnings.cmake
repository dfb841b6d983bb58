# Project-wide warning flags. CI configures with NCCLSCOPE_WERROR=ON.
add_library(ncclscope_warnings INTERFACE)
target_compile_options(ncclscope_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Wformat=2 -Wimplicit-fallthrough
  $<$<BOOL:${NCCLSCOPE_WERROR}>:-Werror>)
