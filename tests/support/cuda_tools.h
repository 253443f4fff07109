// Test support: locating the CUDA toolkit, running compilers, and host-side f16/bf16 bits.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace strata::testing {

/// The nvcc to use: $NVCC, else `nvcc` on PATH, else /usr/local/cuda/bin/nvcc; "" if none.
inline std::string find_nvcc() {
  if (const char* e = std::getenv("NVCC"); e && *e && std::filesystem::exists(e)) return e;
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    size_t start = 0;
    while (start <= p.size()) {
      size_t end = p.find(':', start);
      if (end == std::string::npos) end = p.size();
      std::filesystem::path cand = std::filesystem::path(p.substr(start, end - start)) / "nvcc";
      if (std::filesystem::exists(cand)) return cand.string();
      start = end + 1;
    }
  }
  if (std::filesystem::exists("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  return "";
}

/// The CUDA include directory next to nvcc (holds cuda_fp16.h); "" if not found.
inline std::string cuda_include_dir(const std::string& nvcc) {
  if (nvcc.empty()) return "";
  std::filesystem::path inc =
      std::filesystem::canonical(nvcc).parent_path().parent_path() / "include";
  if (std::filesystem::exists(inc / "cuda_fp16.h")) return inc.string();
  if (std::filesystem::exists("/usr/local/cuda/include/cuda_fp16.h"))
    return "/usr/local/cuda/include";
  return "";
}

/// Runs a shell command; returns its exit status and captures stdout+stderr.
inline int run_command(const std::string& cmd, std::string& output) {
  output.clear();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) output.append(buf.data(), n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// A fresh directory under the system temp dir, removed by the destructor.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / ("strata_" + tag + "_XXXXXX")).string();
    char* made = mkdtemp(tmpl.data());
    path = made ? made : tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!std::getenv("STRATA_KEEP_TEST_FILES")) std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// IEEE binary16 bits of a float, round to nearest even.
inline unsigned short f32_to_f16_bits(float f) {
  unsigned int x;
  std::memcpy(&x, &f, 4);
  unsigned int sign = (x >> 16) & 0x8000u;
  int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  unsigned int mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff)
    return static_cast<unsigned short>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<unsigned short>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<unsigned short>(sign);
    mant |= 0x800000u;
    int shift = 14 - exp;
    unsigned int half = mant >> shift;
    unsigned int rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<unsigned short>(sign | half);
  }
  unsigned int half = sign | (static_cast<unsigned int>(exp) << 10) | (mant >> 13);
  unsigned int rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<unsigned short>(half);
}

inline float f16_bits_to_f32(unsigned short h) {
  unsigned int sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  }
  unsigned int x = exp == 31 ? (sign | 0x7f800000u | (mant << 13))
                             : (sign | ((exp - 15 + 127) << 23) | (mant << 13));
  std::memcpy(&f, &x, 4);
  return f;
}

inline unsigned short f32_to_bf16_bits(float f) {
  unsigned int x;
  std::memcpy(&x, &f, 4);
  unsigned int rounding = 0x7fffu + ((x >> 16) & 1);
  return static_cast<unsigned short>((x + rounding) >> 16);
}

inline float bf16_bits_to_f32(unsigned short h) {
  unsigned int x = static_cast<unsigned int>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace strata::testing
