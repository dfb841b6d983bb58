#pragma once

// Growable arrays of trivially copyable values over malloc/realloc, for code that may not throw
// (platform/README.md): growth returns false when memory is short, and the contents stay as they
// were. Not for hot paths: growth copies.

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace ncclscope::platform {

template <typename T>
class PodVector {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  PodVector() = default;
  PodVector(const PodVector&) = delete;
  PodVector& operator=(const PodVector&) = delete;
  ~PodVector() { std::free(data_); }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }

  // Grows or shrinks to `n` elements; new ones are zero bytes (value-initialized for the
  // integer and pointer structs this holds).
  bool Resize(std::size_t n) {
    if (n > capacity_ && !Reserve(n > 2 * capacity_ ? n : 2 * capacity_)) return false;
    if (n > size_) std::memset(static_cast<void*>(data_ + size_), 0, (n - size_) * kElement);
    size_ = n;
    return true;
  }
  bool PushBack(const T& value) {
    if (size_ == capacity_ && !Reserve(capacity_ == 0 ? 16 : 2 * capacity_)) return false;
    data_[size_++] = value;
    return true;
  }
  void Clear() { size_ = 0; }
  // Drops the first `n` elements.
  void EraseFront(std::size_t n) {
    if (n >= size_) {
      size_ = 0;
      return;
    }
    std::memmove(static_cast<void*>(data_), data_ + n, (size_ - n) * kElement);
    size_ -= n;
  }

 private:
  // kElement: T is the element type, a pointer for PodVector<X*>, which bugprone-sizeof-expression
  // takes for a mistake.
  static constexpr std::size_t kElement = sizeof(T);  // NOLINT(bugprone-sizeof-expression)
  bool Reserve(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / kElement) return false;
    void* grown = std::realloc(data_, n * kElement);
    if (grown == nullptr) return false;
    data_ = static_cast<T*>(grown);
    capacity_ = n;
    return true;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

// First in, first out, over a PodVector: Pop takes from a moving head, and the consumed front is
// dropped once it is half the storage.
template <typename T>
class PodQueue {
 public:
  bool empty() const { return head_ == items_.size(); }
  std::size_t size() const { return items_.size() - head_; }
  bool Push(const T& value) { return items_.PushBack(value); }
  // The oldest element, not taken; the queue must not be empty.
  const T& Front() const { return items_[head_]; }
  // The oldest element; the queue must not be empty.
  T Pop() {
    const T value = items_[head_++];
    if (head_ == items_.size()) {
      items_.Clear();
      head_ = 0;
    } else if (head_ >= 64 && head_ * 2 >= items_.size()) {
      items_.EraseFront(head_);
      head_ = 0;
    }
    return value;
  }
  void Clear() {
    items_.Clear();
    head_ = 0;
  }

 private:
  PodVector<T> items_;
  std::size_t head_ = 0;
};

}  // namespace ncclscope::platform
