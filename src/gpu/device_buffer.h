// Owned device memory and streams for the runtime's own use (private to src/gpu).
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include "cuda_check.h"
#include "strata/util/status.h"

namespace strata::gpu {

/// A device allocation freed on destruction. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> allocate(size_t bytes) {
    DeviceBuffer b;
    if (bytes == 0) return b;
    cudaError_t e = cudaMalloc(&b.ptr_, bytes);
    if (e != cudaSuccess) return cuda_error("cudaMalloc of " + std::to_string(bytes) + " bytes", e);
    b.bytes_ = bytes;
    return b;
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  void* get() const { return ptr_; }
  char* bytes_ptr() const { return static_cast<char*>(ptr_); }
  size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// A non-blocking stream destroyed on destruction. Move-only.
class Stream {
 public:
  static Result<Stream> create() {
    Stream s;
    cudaError_t e = cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking);
    if (e != cudaSuccess) return cuda_error("cudaStreamCreate", e);
    return s;
  }
  Stream() = default;
  Stream(Stream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept {
    std::swap(stream_, o.stream_);
    return *this;
  }
  ~Stream() {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace strata::gpu
