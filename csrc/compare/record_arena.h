#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace graphprobe::compare {

// A record's sizes ([8, 4096]), held by its dump's RecordArena: a view, as
// a span is, with the comparisons a shape needs.
class Shape {
 public:
  Shape() = default;
  Shape(const int64_t* data, size_t size) : data_(data), size_(static_cast<uint32_t>(size)) {}
  const int64_t* begin() const { return data_; }
  const int64_t* end() const { return data_ + size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t operator[](size_t i) const { return data_[i]; }
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }
  friend bool operator==(const Shape& a, const Shape& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  const int64_t* data_ = nullptr;
  uint32_t size_ = 0;
};

// The text of a dump's row names ("{entry}.output.0") and its records'
// sizes, kept for as long as the dump's records: records hold views into
// it. One allocation per block instead of two per record -- a 100 MB dump
// has ~330k records, each a name and a shape malloc'd when read and freed
// when the compare is done (benchmarks/results/compare.md).
class RecordArena {
 public:
  RecordArena() = default;
  RecordArena(const RecordArena&) = delete;
  RecordArena& operator=(const RecordArena&) = delete;

  // A view of a copy of `text` that lives as long as the arena.
  std::string_view keep(std::string_view text) {
    if (text.empty()) return {};
    char* at = static_cast<char*>(take(text.size(), 1));
    std::memcpy(at, text.data(), text.size());
    return {at, text.size()};
  }

  Shape keep(const int64_t* sizes, size_t n) {
    if (n == 0) return {};
    auto* at = static_cast<int64_t*>(take(n * sizeof(int64_t), alignof(int64_t)));
    std::memcpy(at, sizes, n * sizeof(int64_t));
    return {at, n};
  }
  Shape keep(const std::vector<int64_t>& sizes) { return keep(sizes.data(), sizes.size()); }

 private:
  void* take(size_t bytes, size_t align) {
    size_t pad = (align - reinterpret_cast<uintptr_t>(next_) % align) % align;
    if (bytes + pad > left_) {
      // More than a block gets a block of its own; the current block keeps
      // serving what comes after it.
      const size_t size = std::max(kBlock, bytes);
      blocks_.push_back(std::make_unique<std::max_align_t[]>((size + sizeof(std::max_align_t) - 1) /
                                                             sizeof(std::max_align_t)));
      char* block = reinterpret_cast<char*>(blocks_.back().get());
      if (size > kBlock) return block;
      next_ = block;
      left_ = size;
      pad = 0;
    }
    char* at = next_ + pad;
    next_ = at + bytes;
    left_ -= bytes + pad;
    return at;
  }

  static constexpr size_t kBlock = size_t{1} << 18;
  std::vector<std::unique_ptr<std::max_align_t[]>> blocks_;
  char* next_ = nullptr;
  size_t left_ = 0;
};

}  // namespace graphprobe::compare
