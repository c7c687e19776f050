#include "base/ids.h"

#include <array>
#include <random>

namespace dsh {
namespace {

constexpr char kCrockford[] = "0123456789abcdefghjkmnpqrstvwxyz";

uint64_t RandomWord() {
  thread_local std::mt19937_64 engine{[] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }()};
  return engine();
}

}  // namespace

std::string NewId(std::string_view prefix, const Clock& clock) {
  uint64_t ms = static_cast<uint64_t>(ToUnixMillis(clock.Now())) & ((uint64_t{1} << 48) - 1);
  uint64_t r1 = RandomWord();
  uint64_t r2 = RandomWord() & 0xffff;  // 64 + 16 = 80 random bits
  std::string out(prefix);
  out.reserve(prefix.size() + 26);
  // 10 characters of timestamp (50 bits, top 2 always zero), 16 of randomness.
  for (int i = 9; i >= 0; --i) out.push_back(kCrockford[(ms >> (5 * i)) & 31]);
  for (int i = 0; i < 12; ++i) out.push_back(kCrockford[(r1 >> (5 * i)) & 31]);
  uint64_t rest = (r1 >> 60) | (r2 << 4);  // 4 + 16 = 20 bits
  for (int i = 0; i < 4; ++i) out.push_back(kCrockford[(rest >> (5 * i)) & 31]);
  return out;
}

std::string RandomHex(size_t n) {
  std::random_device rd;  // /dev/urandom on Linux
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    auto b = static_cast<unsigned>(rd() & 0xff);
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

}  // namespace dsh
