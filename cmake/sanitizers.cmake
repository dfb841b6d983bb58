# NCCLSCOPE_SANITIZE applies to every target in the tree (the `asan` and `tsan` presets set it).
if(NCCLSCOPE_SANITIZE)
  set(_san_flags -fsanitize=${NCCLSCOPE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options(${_san_flags})
  add_link_options(${_san_flags})
endif()
