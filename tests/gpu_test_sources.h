// Hand-written CUDA sources that follow the generated-library contract of runtime_api.h, for
// the JIT, runtime and profiler tests. Each computes O = A + B (or fails on purpose) on
// A, B, O: f16[4, 256].
#pragma once

#include <string>

#include "strata/ir/kernel_graph.h"

namespace strata::testing {

inline constexpr int kRows = 4, kCols = 256, kElems = kRows * kCols;

/// The graph the sources implement: O = add(A, B).
inline KernelGraph add_graph() {
  KernelGraph g;
  int a = *g.add_input("A", Shape{kRows, kCols}, DType::f16);
  int b = *g.add_input("B", Shape{kRows, kCols}, DType::f16);
  int o = *g.add_op(OpKind::Add, {a, b}, {}, "O");
  (void)g.mark_output(o);
  return g;
}

/// Common prelude: includes, the signature functions, and an elementwise kernel writing
/// `limit` elements.
inline std::string prelude() {
  return R"(#include <cuda_runtime.h>
#include <cuda_fp16.h>
extern "C" int strata_num_inputs(void) { return 2; }
extern "C" int strata_num_outputs(void) { return 1; }
extern "C" const char* strata_input_name(int i) { return i == 0 ? "A" : i == 1 ? "B" : nullptr; }
extern "C" const char* strata_output_name(int i) { return i == 0 ? "O" : nullptr; }
extern "C" int strata_input_rank(int i) { return i >= 0 && i < 2 ? 2 : -1; }
extern "C" int strata_output_rank(int i) { return i == 0 ? 2 : -1; }
extern "C" long long strata_input_dim(int i, int d) { return d == 0 ? 4 : d == 1 ? 256 : -1; }
extern "C" long long strata_output_dim(int i, int d) { return d == 0 ? 4 : d == 1 ? 256 : -1; }
extern "C" int strata_input_dtype(int i) { return 0; }
extern "C" int strata_output_dtype(int i) { return 0; }
__global__ void add_kernel(const __half* a, const __half* b, __half* o, int limit) {
  extern __shared__ char unused_smem[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < limit) o[i] = __float2half(__half2float(a[i]) + __half2float(b[i]));
}
)";
}

/// A correct library with no workspace.
inline std::string add_source() {
  return prelude() + R"(
extern "C" size_t strata_workspace_bytes(void) { return 0; }
extern "C" int strata_launch(const void* const* in, void* const* out, void* ws, cudaStream_t s) {
  add_kernel<<<8, 128, 0, s>>>((const __half*)in[0], (const __half*)in[1], (__half*)out[0], 1024);
  return (int)cudaGetLastError();
}
)";
}

/// A correct library that goes through a float workspace: W = A (as f32), then O = W + B.
inline std::string workspace_source() {
  return R"(#include <cuda_runtime.h>
#include <cuda_fp16.h>
__global__ void widen(const __half* a, float* w) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  w[i] = __half2float(a[i]);
}
__global__ void finish(const float* w, const __half* b, __half* o) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  o[i] = __float2half(w[i] + __half2float(b[i]));
}
extern "C" size_t strata_workspace_bytes(void) { return 1024 * sizeof(float); }
extern "C" int strata_launch(const void* const* in, void* const* out, void* ws, cudaStream_t s) {
  widen<<<8, 128, 0, s>>>((const __half*)in[0], (float*)ws);
  finish<<<8, 128, 0, s>>>((const float*)ws, (const __half*)in[1], (__half*)out[0]);
  return (int)cudaGetLastError();
}
)";
}

/// Writes only the first half of O: the poisoned rest must fail the check.
inline std::string half_written_source() {
  return prelude() + R"(
extern "C" size_t strata_workspace_bytes(void) { return 0; }
extern "C" int strata_launch(const void* const* in, void* const* out, void* ws, cudaStream_t s) {
  add_kernel<<<8, 128, 0, s>>>((const __half*)in[0], (const __half*)in[1], (__half*)out[0], 512);
  return (int)cudaGetLastError();
}
)";
}

/// Launches with 2048 threads per block: an invalid configuration reported by strata_launch.
inline std::string bad_launch_source() {
  return prelude() + R"(
extern "C" size_t strata_workspace_bytes(void) { return 0; }
extern "C" int strata_launch(const void* const* in, void* const* out, void* ws, cudaStream_t s) {
  add_kernel<<<1, 2048, 0, s>>>((const __half*)in[0], (const __half*)in[1], (__half*)out[0], 1024);
  return (int)cudaGetLastError();
}
)";
}

/// Asks for 1 MiB of dynamic shared memory per block and says so in its strata-meta line.
inline std::string big_smem_source() {
  return "// strata-meta: {\"kernels\": [{\"name\": \"add_kernel\", \"smem\": 1048576}]}\n" +
         prelude() + R"(
extern "C" size_t strata_workspace_bytes(void) { return 0; }
extern "C" int strata_launch(const void* const* in, void* const* out, void* ws, cudaStream_t s) {
  add_kernel<<<8, 128, 1 << 20, s>>>((const __half*)in[0], (const __half*)in[1], (__half*)out[0], 1024);
  return (int)cudaGetLastError();
}
)";
}

/// Static shared memory beyond any GPU's limit: ptxas rejects it.
inline std::string static_smem_overflow_source() {
  return R"(#include <cuda_runtime.h>
__global__ void hog(float* o) {
  __shared__ float big[100000];
  big[threadIdx.x] = threadIdx.x;
  __syncthreads();
  o[threadIdx.x] = big[(threadIdx.x * 7) % 100000];
}
extern "C" size_t strata_workspace_bytes(void) { return 0; }
extern "C" int strata_launch(const void* const* in, void* const* out, void* ws, cudaStream_t s) {
  hog<<<1, 128, 0, s>>>((float*)out[0]);
  return (int)cudaGetLastError();
}
)";
}

/// Does not compile (the error is on line 3).
inline std::string syntax_error_source() {
  return "#include <cuda_runtime.h>\n"
         "extern \"C\" size_t strata_workspace_bytes(void) { return 0; }\n"
         "extern \"C\" int strata_launch(const void* const* in) { return undeclared_name; }\n";
}

}  // namespace strata::testing
