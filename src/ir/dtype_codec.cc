#include "strata/ir/dtype_codec.h"

#include <bit>
#include <cstring>

namespace strata {

uint16_t float_to_half_bits(float x) {
  uint32_t f = std::bit_cast<uint32_t>(x);
  uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000u);
  uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf or NaN (keep NaN quiet and non-zero)
    return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to ≥ 65520: overflow
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: value = abs_val / 2^-24 rounded to an integer.
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
    uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(exp);  // 113 - exp + 13
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return sign | static_cast<uint16_t>(q);
  }
  // Normal: rebias the exponent and round the mantissa from 23 to 10 bits.
  uint32_t r = abs - 0x38000000u;  // exponent bias 127 → 15
  uint32_t q = r >> 13;
  uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1))) ++q;  // may carry into the exponent
  return sign | static_cast<uint16_t>(q);
}

float half_bits_to_float(uint16_t h) {
  uint32_t sign = uint32_t{h & 0x8000u} << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t f;
  if (exp == 0x1f) {
    f = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);
    float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  } else {
    f = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(f);
}

uint16_t float_to_bf16_bits(float x) {
  uint32_t f = std::bit_cast<uint32_t>(x);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);  // NaN
  uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
  return static_cast<uint16_t>((f + rounding) >> 16);
}

float bf16_bits_to_float(uint16_t h) {
  return std::bit_cast<float>(uint32_t{h} << 16);
}

std::vector<uint8_t> encode_elements(DType dtype, const std::vector<double>& values) {
  std::vector<uint8_t> out(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    float v = static_cast<float>(values[i]);
    switch (dtype) {
      case DType::f16: {
        uint16_t b = float_to_half_bits(v);
        std::memcpy(&out[2 * i], &b, 2);
        break;
      }
      case DType::bf16: {
        uint16_t b = float_to_bf16_bits(v);
        std::memcpy(&out[2 * i], &b, 2);
        break;
      }
      case DType::f32:
        std::memcpy(&out[4 * i], &v, 4);
        break;
    }
  }
  return out;
}

std::vector<double> decode_elements(DType dtype, const void* bytes, size_t count) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  std::vector<double> out(count);
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
      case DType::f16: {
        uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = half_bits_to_float(b);
        break;
      }
      case DType::bf16: {
        uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = bf16_bits_to_float(b);
        break;
      }
      case DType::f32: {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        out[i] = v;
        break;
      }
    }
  }
  return out;
}

std::vector<double> round_to_dtype(DType dtype, const std::vector<double>& values) {
  std::vector<uint8_t> bytes = encode_elements(dtype, values);
  return decode_elements(dtype, bytes.data(), values.size());
}

}  // namespace strata
