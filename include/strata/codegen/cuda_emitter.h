// The CUDA emitter (docs/codegen.md): a μGraph → one self-contained CUDA C++ source.
//
// The source has one extern "C" __global__ function per kernel-graph op (customized kernels
// from their KernelPlan, predefined ops from generated kernels) and an extern "C" host API
// that a JIT loader or a C++ program calls:
//
//   int strata_init(void);       // sets kernel attributes (shared memory > 48 KB); idempotent
//   int strata_launch(const void* const* inputs, void* const* outputs, void* workspace,
//                     cudaStream_t stream);  // enqueues every kernel; returns a cudaError_t
//   unsigned long long strata_workspace_bytes(void);  // device scratch for intermediates
//   int strata_num_inputs(void), strata_num_outputs(void);
//   const char* strata_input_name(int i), *strata_output_name(int i);
//   int strata_input_rank(int i), strata_output_rank(int i);          // -1 if out of range
//   long long strata_input_dim(int i, int d), strata_output_dim(int i, int d);
//   int strata_input_dtype(int i), strata_output_dtype(int i);        // 0 f16, 1 bf16, 2 f32
//   int strata_ranks(void);          // the graph's ranks (docs/tensor-parallel.md), 1 if none
//
// A graph with all_reduce ops (tensor parallelism, docs/tensor-parallel.md) runs one process
// per rank; each all_reduce is an ncclAllReduce (sum, in the tensor's dtype) on the launch
// stream, so the launch stays CUDA-graph capturable. Its source includes <nccl.h>, links with
// NCCL, and adds
//   int strata_nccl_unique_id(void* id);  // ncclGetUniqueId into NCCL_UNIQUE_ID_BYTES bytes
//   int strata_nccl_init(const void* id, int nranks, int rank);  // own communicator
//   int strata_nccl_set_comm(void* comm);  // or the caller's ncclComm_t (not freed here)
//   void* strata_nccl_comm(void);          // the communicator in use (to share it), or null
//   int strata_nccl_finalize(void);        // destroys the communicator strata_nccl_init made
// NCCL failures return 10000 + the ncclResult_t; strata_launch without a communicator returns
// 10000 + ncclInvalidUsage.
//
// A graph whose predefined matmuls run as cuBLAS calls (EmitOptions::library_matmul) includes
// <cublas_v2.h> through strata_rt/blas.cuh and links with -lcublas; strata_init creates the
// device's cuBLAS handle, and cuBLAS failures return 20000 + the cublasStatus_t.
//
// inputs[i] / outputs[i] are device pointers (16-byte aligned, dense row-major) in the order
// of KernelGraph::inputs() / outputs(); workspace holds strata_workspace_bytes() bytes
// (256-byte aligned). The same facts are in a `// strata-meta: {json}` line near the top.
// The file includes "strata_rt/strata_rt.cuh": compile with -I cuda_runtime_include_dir().
// The device part (everything before the host API, which is guarded by
// #ifndef __CUDACC_RTC__) also compiles with NVRTC.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/opt/launch_streams.h"
#include "strata/ir/kernel_graph.h"
#include "strata/opt/kernel_plan.h"
#include "strata/opt/packed_outputs.h"
#include "strata/util/status.h"

namespace strata {

/// True when strata was configured with NCCL's header (CMake found nccl.h; STRATA_NCCL_ROOT
/// names where to look): emitted all_reduce ops compile there.
bool nccl_configured();

/// Which forms of the customized kernels a source holds (docs/codegen.md, "Task entries").
enum class TaskEntryForm {
  Off,     ///< __global__ kernels and the host API (the default)
  Beside,  ///< also, per customized kernel, a __device__ task entry of one block, a __global__
           ///< wrapper launching it with task_threads threads, and a host function
           ///< strata_launch_tasks (strata_launch's signature) launching the wrappers
  Only,    ///< the task entries alone (no kernels, no host API): for a persistent megakernel
};

struct EmitOptions {
  std::string arch = "sm_90a";     ///< target named in the header comment (sm_80 or newer)
  std::string name = "graph";      ///< graph name used in kernel names and comments
  PlanOptions plan;                ///< graph optimizer knobs for every customized kernel
  bool f32_intermediates = false;  ///< store kernel-level intermediates in f32 (default: the
                                   ///< tensor's dtype, like the graph says)
  /// Launch every customized kernel that streams an input — its only input of at least
  /// `l2_streaming_min_bytes`, read by this kernel alone, each byte by one block — with an L2
  /// access-policy window marking that input as streaming, so its lines are evicted first
  /// (strata_rt::host::launch_streaming). A cache hint: the results are the same.
  bool l2_streaming = true;
  /// The smallest input l2_streaming marks. 16 MiB is about a quarter of an H100's or H200's
  /// L2: a smaller stream pushes out little of what the kernel reads again, and the hint is
  /// measured only on the large weights of the skinny matmuls
  /// (bench/results/h200-2026-11-25-evict.md).
  int64_t l2_streaming_min_bytes = int64_t{16} << 20;
  /// Emit all_reduce ops as NCCL calls (docs/tensor-parallel.md). On by default when strata
  /// was configured with NCCL's header (nccl_configured()); off, a graph with an all_reduce
  /// is refused with an error saying so.
  bool nccl = nccl_configured();
  /// Predefined matmuls as cuBLAS calls (docs/codegen.md, "Predefined matmuls through cuBLAS"):
  /// every predefined matmul that library_matmul_supported accepts (f16 or bf16 operands of one
  /// type, the result in that type or f32) is a cublasGemmStridedBatchedEx call with f32
  /// compute on the launch stream; the source then includes strata_rt/blas.cuh, says
  /// "cublas": true in its strata-meta line and links with -lcublas. Off (knob blas=0, `strata
  /// emit --no-library-matmul`), and for the other matmuls and with task entries, predefined
  /// matmuls are generated kernels (the tiled block graph of lower_matmul_to_block_graph, else
  /// the generic kernel).
  bool library_matmul = true;
  /// Concurrent launches (docs/codegen.md, "Concurrent launches"): strata_launch runs launches
  /// that do not depend on each other on up to this many side streams, forked from the
  /// caller's stream and joined back to it through events (plan_launch_streams,
  /// include/strata/opt/launch_streams.h); at most strata_rt::host::kMaxSideStreams (4).
  /// 0 (knob streams=0): every launch on the caller's stream. A graph whose launches form a
  /// chain gets no side streams whatever this is.
  int max_side_streams = 3;
  /// Task entries (TaskEntryForm). With Beside or Only every kernel op must be a customized
  /// kernel or a matmul lowered to one (a generic kernel or an all_reduce is refused), and is
  /// planned with PlanOptions::task_entry and max_threads = task_threads.
  TaskEntryForm task_entry = TaskEntryForm::Off;
  /// Threads of the block that calls the task entries (a multiple of 32; the megakernel's 256).
  int task_threads = 256;
};

/// Per-kernel facts of an emitted source (for reports and tests).
struct EmittedKernel {
  std::string name;  ///< extern "C" function name
  std::string op;    ///< "customized" or the predefined op's name
  bool library = false;  ///< a library call (cuBLAS gemm, NCCL all_reduce), not a kernel
  Dim3 grid;
  int threads = 0;
  int64_t smem_bytes = 0;   ///< dynamic shared memory
  int pipeline_stages = 0;  ///< customized kernels
  int loop_groups = 1;      ///< customized kernels (see PlanOptions::loop_groups)
  std::string plan;         ///< customized kernels: format_plan of the kernel's plan
  int streamed_input = -1;  ///< EmitOptions::l2_streaming: the kernel input (position among
                            ///< its inputs) launched with a streaming L2 window, or -1
  int kernel_op = -1;       ///< the kernel graph op it computes
  /// The kernel graph tensors passed as its parameters, in order: the inputs (for an input read
  /// in place through a predefined layout op, the tensor holding it), then the outputs; and
  /// the type each is stored in.
  std::vector<int> args;
  std::vector<DType> arg_dtypes;
  int num_inputs = 0;      ///< of args
  std::string task_entry;  ///< the task entry's name (EmitOptions::task_entry), or ""
};

struct EmittedSource {
  std::string code;
  std::vector<EmittedKernel> kernels;
  int64_t workspace_bytes = 0;
  /// strata_launch's launches (kernels, cuBLAS calls, all_reduces, in order) as the launch plan
  /// sees them, and the plan it prints (launch_streams.h); empty with TaskEntryForm::Only.
  std::vector<LaunchAccess> launch_accesses;
  LaunchStreamPlan launch_streams;
  /// Every graph output's layout as strata_output_base / _offset / _stride / _alloc report it
  /// (docs/codegen.md, "Packed outputs"): the dense one unless the output is packed.
  std::vector<OutputLayout> output_layouts;
};

/// Emits CUDA for a complete kernel graph. Fails (with the op and the reason) when a
/// customized kernel does not fit PlanOptions::smem_limit or a grid exceeds CUDA's limits.
Result<EmittedSource> emit_cuda_source(const KernelGraph& g, const EmitOptions& options = {});

/// Whether every customized kernel of g plans as emit_cuda_source plans it with `options` —
/// the tensors' storage types (a 16-bit intermediate read in tiles of odd-length rows is
/// stored in f32) and the inputs' views included — without emitting: the first kernel's
/// planning error (shared memory over PlanOptions::smem_limit, …) otherwise.
Status plan_customized_kernels(const KernelGraph& g, const EmitOptions& options = {});

/// emit_cuda_source(...).code.
Result<std::string> emit_cuda(const KernelGraph& g, const EmitOptions& options = {});

/// The directory to pass with -I when compiling emitted code (holds strata_rt/): the one
/// find_runtime_dir() finds (include/strata/codegen/runtime_dir.h), or "" when none holds the
/// headers.
std::string cuda_runtime_include_dir();

}  // namespace strata
