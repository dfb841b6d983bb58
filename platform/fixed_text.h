#pragma once

// A NUL-terminated string in a fixed buffer: for paths, names and messages in code that may not
// allocate or throw (the plugin; platform/README.md). Appending past the capacity truncates and
// sets truncated(), never writes out of bounds.

#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace ncclscope::platform {

template <std::size_t N>
class FixedText {
  static_assert(N >= 2, "room for one character and the terminator");

 public:
  FixedText() = default;
  explicit FixedText(std::string_view text) { Append(text); }

  const char* c_str() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  static constexpr std::size_t capacity() { return N - 1; }
  // Whether an Append or Appendf lost characters since the last Clear.
  bool truncated() const { return truncated_; }
  std::string_view view() const { return {data_, size_}; }
  operator std::string_view() const { return view(); }  // NOLINT(google-explicit-constructor)

  void Clear() {
    size_ = 0;
    data_[0] = '\0';
    truncated_ = false;
  }
  FixedText& Assign(std::string_view text) {
    Clear();
    return Append(text);
  }
  FixedText& Append(std::string_view text) {
    std::size_t n = text.size();
    if (n > capacity() - size_) {
      n = capacity() - size_;
      truncated_ = true;
    }
    if (n != 0) std::memcpy(data_ + size_, text.data(), n);
    size_ += n;
    data_[size_] = '\0';
    return *this;
  }
  FixedText& Appendf(const char* format, ...) __attribute__((format(printf, 2, 3))) {
    va_list args;
    va_start(args, format);
    const int wanted = std::vsnprintf(data_ + size_, N - size_, format, args);
    va_end(args);
    if (wanted < 0) {
      data_[size_] = '\0';
      truncated_ = true;
      return *this;
    }
    const std::size_t room = capacity() - size_;
    if (static_cast<std::size_t>(wanted) > room) truncated_ = true;
    size_ += static_cast<std::size_t>(wanted) < room ? static_cast<std::size_t>(wanted) : room;
    return *this;
  }

  bool operator==(std::string_view other) const { return view() == other; }

 private:
  char data_[N] = {};
  std::size_t size_ = 0;
  bool truncated_ = false;
};

// Streams the text (tests, logs): a template, so this header needs no <ostream> and code that
// never streams one instantiates nothing.
template <typename Stream, std::size_t N>
Stream& operator<<(Stream& out, const FixedText<N>& text) {
  out << text.c_str();
  return out;
}

}  // namespace ncclscope::platform
