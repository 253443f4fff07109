// Content hashes for cache keys and integrity checks.
//
// SHA-256 (FIPS 180-4) is used wherever a digest names or guards a file on disk: binary-cache
// keys (source + architecture + toolkit + flags) and the checksum that detects a corrupt or
// truncated cache entry. Digests are printed as 64 lowercase hex digits.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata {

/// Incremental SHA-256. Feed bytes with update(), then read the digest once with finish().
class Sha256 {
 public:
  Sha256();
  /// Appends bytes to the message.
  void update(std::string_view bytes);
  /// Pads the message and returns the 32-byte digest. The object must not be updated after.
  std::array<uint8_t, 32> finish();
  /// Like finish(), as 64 lowercase hex digits.
  std::string finish_hex();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

/// SHA-256 of `bytes` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);

}  // namespace strata
