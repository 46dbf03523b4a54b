#include "handshake.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#if CLUMP_HAVE_SODIUM
#include <sodium.h>
#endif

namespace clumprun::handshake {

bool available() noexcept {
#if CLUMP_HAVE_SODIUM
  return sodium_init() >= 0;
#else
  return false;
#endif
}

bool random(unsigned char* out, size_t n) noexcept {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::getrandom(out + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

proof prove(const secret& key, char role, int node, const nonce& received, const nonce& sent) noexcept {
  proof out{};
#if CLUMP_HAVE_SODIUM
  const char* label = role == 'A' ? "clumprun agent" : "clumprun head";
  crypto_auth_hmacsha512256_state st;
  crypto_auth_hmacsha512256_init(&st, key.data(), key.size());
  crypto_auth_hmacsha512256_update(&st, reinterpret_cast<const unsigned char*>(label), std::strlen(label) + 1);
  const int32_t n = node;
  crypto_auth_hmacsha512256_update(&st, reinterpret_cast<const unsigned char*>(&n), sizeof n);
  crypto_auth_hmacsha512256_update(&st, received.data(), received.size());
  crypto_auth_hmacsha512256_update(&st, sent.data(), sent.size());
  crypto_auth_hmacsha512256_final(&st, out.data());
#else
  (void)key, (void)role, (void)node, (void)received, (void)sent;
#endif
  return out;
}

bool verify(const secret& key, char role, int node, const nonce& received, const nonce& sent,
            const proof& p) noexcept {
#if CLUMP_HAVE_SODIUM
  const proof want = prove(key, role, node, received, sent);
  return crypto_verify_32(want.data(), p.data()) == 0;
#else
  (void)key, (void)role, (void)node, (void)received, (void)sent, (void)p;
  return false;
#endif
}

std::string to_hex(const unsigned char* p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s.push_back(digits[p[i] >> 4]);
    s.push_back(digits[p[i] & 15]);
  }
  return s;
}

bool from_hex(const std::string& text, unsigned char* out, size_t n) {
  if (text.size() != 2 * n) return false;
  auto value = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < n; ++i) {
    const int hi = value(text[2 * i]), lo = value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return true;
}

}  // namespace clumprun::handshake
