// What the header-only parts of the standard library call on misuse, defined here because the
// plugin links no C++ run time (platform/README.md; plugin/CMakeLists.txt). Only
// std::string_view::substr reaches one (with a position past the end), and every substr in the
// plugin takes its position from a find() in the same view or a bound it checked: reaching this is
// a bug in the plugin, and it stops the process as the exception it stands for would have,
// uncaught.

namespace std {  // NOLINT(cert-dcl58-cpp): the run time's own definition, which is absent here

[[noreturn]] void __throw_out_of_range_fmt(const char* /*format*/, ...) { __builtin_trap(); }

}  // namespace std
