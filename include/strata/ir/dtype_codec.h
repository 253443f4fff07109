// Host-side conversion between doubles and the device element types (DType).
//
// The runtime moves data between the float64 reference interpreter and device buffers of
// f16, bf16 or f32. Conversions round to nearest, ties to even; values beyond the target's
// range become ±infinity; NaN stays NaN. Everything here is plain C++ (no CUDA headers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "strata/ir/shape.h"

namespace strata {

/// IEEE binary16 bits of `x` (round to nearest even; overflow → ±inf; subnormals kept).
uint16_t float_to_half_bits(float x);
/// The value of binary16 bits.
float half_bits_to_float(uint16_t h);
/// bfloat16 bits of `x` (round to nearest even).
uint16_t float_to_bf16_bits(float x);
/// The value of bfloat16 bits.
float bf16_bits_to_float(uint16_t h);

/// Encodes `values` as a packed array of `dtype` elements (dtype_size(dtype) bytes each).
std::vector<uint8_t> encode_elements(DType dtype, const std::vector<double>& values);
/// Decodes `count` packed elements of `dtype` starting at `bytes`.
std::vector<double> decode_elements(DType dtype, const void* bytes, size_t count);
/// Rounds every value to the nearest `dtype` value (what a device buffer would hold).
std::vector<double> round_to_dtype(DType dtype, const std::vector<double>& values);

}  // namespace strata
