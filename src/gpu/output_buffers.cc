#include "strata/gpu/output_buffers.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace strata {
namespace {

int64_t round_up(int64_t n, int64_t align) {
  return (n + align - 1) / align * align;
}

/// Elements from a tensor's first element to its last, plus one (0 for an empty tensor).
int64_t span(const TensorSignature& s) {
  if (s.shape.numel() == 0) return 0;
  const std::vector<int64_t> strides = s.element_strides();
  int64_t last = 0;
  for (int d = 0; d < s.shape.rank(); ++d) last += (s.shape[d] - 1) * strides[d];
  return last + 1;
}

}  // namespace

std::vector<int64_t> TensorSignature::element_strides() const {
  return strides.empty() ? shape.strides() : strides;
}

bool TensorSignature::dense() const {
  return offset == 0 && (alloc < 0 || alloc == shape.numel()) &&
         element_strides() == shape.strides();
}

Status check_placement(const std::vector<TensorSignature>& outputs) {
  const int n = static_cast<int>(outputs.size());
  auto base_of = [&](int i) { return outputs[i].base < 0 ? i : outputs[i].base; };
  auto alloc_of = [](const TensorSignature& s) { return s.alloc < 0 ? s.shape.numel() : s.alloc; };
  for (int i = 0; i < n; ++i) {
    const TensorSignature& s = outputs[i];
    const std::string at = "output " + std::to_string(i) + " (" + s.name + ")";
    const int b = base_of(i);
    if (b >= n) return make_error(at + ": base " + std::to_string(b) + " is not an output");
    if (base_of(b) != b)
      return make_error(at + ": its base, output " + std::to_string(b) +
                        ", lies in another output's allocation");
    if (b != i && alloc_of(s) != 0)
      return make_error(at + ": lies in output " + std::to_string(b) +
                        "'s allocation but allocates " + std::to_string(alloc_of(s)) +
                        " elements itself");
    if (!s.strides.empty() && static_cast<int>(s.strides.size()) != s.shape.rank())
      return make_error(at + ": " + std::to_string(s.strides.size()) + " strides for rank " +
                        std::to_string(s.shape.rank()));
    for (int64_t st : s.strides)
      if (st < 0) return make_error(at + ": negative stride " + std::to_string(st));
    if (s.offset < 0) return make_error(at + ": negative offset " + std::to_string(s.offset));
    if (outputs[b].dtype != s.dtype)
      return make_error(at + ": its dtype differs from its base's, output " + std::to_string(b));
    const int64_t end = s.offset + span(s);
    if (end > alloc_of(outputs[b]))
      return make_error(at + ": reaches element " + std::to_string(end) + " of output " +
                        std::to_string(b) + "'s allocation of " +
                        std::to_string(alloc_of(outputs[b])));
  }
  return Status::success();
}

Result<OutputBuffers> place_outputs(const std::vector<TensorSignature>& outputs, int64_t align,
                                    bool packed) {
  if (align <= 0 || (align & (align - 1)) != 0)
    return make_error("place_outputs: alignment " + std::to_string(align) +
                      " is not a power of two");
  if (packed) STRATA_RETURN_IF_ERROR(check_placement(outputs));
  OutputBuffers b;
  b.packed = packed;
  b.pointer.assign(outputs.size(), 0);
  std::vector<int64_t> start(outputs.size(), -1);  // of each allocation
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorSignature& s = outputs[i];
    const bool own = !packed || s.base < 0 || s.base == static_cast<int>(i);
    if (!own) continue;
    start[i] = b.bytes;
    b.pointer[i] = b.bytes;
    b.bytes += round_up(packed ? s.alloc_bytes() : s.bytes(), align);
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    if (start[i] < 0)
      b.pointer[i] = start[outputs[i].base] + outputs[i].offset * dtype_size(outputs[i].dtype);
  b.bytes = std::max(b.bytes, align);
  return b;
}

std::vector<uint8_t> gather_output(const TensorSignature& s, const uint8_t* at, bool packed) {
  const int64_t size = dtype_size(s.dtype), numel = s.shape.numel();
  std::vector<uint8_t> out(static_cast<size_t>(numel * size));
  if (!packed || s.strides.empty() || s.element_strides() == s.shape.strides()) {
    if (numel > 0) std::memcpy(out.data(), at, out.size());
    return out;
  }
  const std::vector<int64_t> strides = s.element_strides();
  const int rank = s.shape.rank();
  std::vector<int64_t> index(rank, 0);
  for (int64_t e = 0; e < numel; ++e) {
    int64_t from = 0;
    for (int d = 0; d < rank; ++d) from += index[d] * strides[d];
    std::memcpy(out.data() + e * size, at + from * size, static_cast<size_t>(size));
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < s.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace strata
