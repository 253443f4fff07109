// Output buffers of one launch (docs/gpu-runtime.md, "Packed outputs"): where each output of a
// compiled graph lies in one caller allocation — packed as its library declares (outputs that
// are views of one tensor share that tensor's allocation: the fast path) or each alone, dense
// (the library then copies: the fallback) — and reading an output back through its strides.
// Host arithmetic only: the profiler (profiler.h), the Python package and the tests use it
// on device and host memory alike.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/gpu/runtime_api.h"
#include "strata/util/status.h"

namespace strata {

/// Byte offsets of one launch's outputs in one allocation of `bytes` bytes.
struct OutputBuffers {
  std::vector<int64_t> pointer;  ///< per output: bytes from the allocation's start to its pointer
  int64_t bytes = 0;             ///< the allocation's size: a multiple of the alignment
  bool packed = false;           ///< laid out as the library declares (else every output alone)
};

/// Whether `outputs`' placement is one a library may declare: every base an output that is its
/// own base with a dense-or-larger allocation, offsets ≥ 0, strides ≥ 0 of the output's rank,
/// every element of every output inside its base's allocation, and an output inside another's
/// allocating nothing itself. The error names the output.
Status check_placement(const std::vector<TensorSignature>& outputs);

/// Lays out `outputs` in one allocation, each allocation starting at a multiple of `align`
/// bytes (a power of two): packed = true, as declared (an allocation of alloc_bytes() per output
/// that has one, the others at their base's pointer + offset); packed = false, every output
/// alone and dense. The placement must pass check_placement.
Result<OutputBuffers> place_outputs(const std::vector<TensorSignature>& outputs, int64_t align,
                                    bool packed = true);

/// The host bytes of `s` in row-major order, gathered from `at`, the bytes at its pointer:
/// element (i0..ik) is at at + Σ i_d·stride_d elements when `packed`, dense row-major
/// otherwise. The caller guarantees every such element lies in memory it owns.
std::vector<uint8_t> gather_output(const TensorSignature& s, const uint8_t* at, bool packed);

}  // namespace strata
