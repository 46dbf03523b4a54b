#include "net/auth.hpp"

#include <cstring>
#include <string>

#include "net/wire.hpp"

#if CLUMP_HAVE_SODIUM
#include <sodium.h>
#endif

namespace clump::net {

namespace {

/// The 12-byte nonce of a datagram: the sender's rank, then its counter.
void nonce_of(uint32_t sender, uint64_t counter, unsigned char out[12]) noexcept {
  std::memcpy(out, &sender, 4);
  std::memcpy(out + 4, &counter, 8);
}

}  // namespace

#if CLUMP_HAVE_SODIUM
struct authenticator::gcm_state {
  crypto_aead_aes256gcm_state st;  // the expanded key (aligned as libsodium asks)
};
#else
struct authenticator::gcm_state {};
#endif

authenticator::authenticator(std::span<const std::byte, auth_key_bytes> key, uint32_t me, uint32_t ranks, bool gcm)
    : me_(me), windows_(ranks) {
  std::memcpy(key_.data(), key.data(), auth_key_bytes);
#if CLUMP_HAVE_SODIUM
  // gcm_available() runs sodium_init() once, which every libsodium call needs first.
  if (gcm_available() && gcm) {
    gcm_ = std::make_unique<gcm_state>();
    crypto_aead_aes256gcm_beforenm(&gcm_->st, reinterpret_cast<const unsigned char*>(key_.data()));
  }
#endif
}

authenticator::~authenticator() {
#if CLUMP_HAVE_SODIUM
  sodium_memzero(key_.data(), key_.size());
  if (gcm_) sodium_memzero(gcm_.get(), sizeof *gcm_);
#endif
}

bool authenticator::available() noexcept {
#if CLUMP_HAVE_SODIUM
  return true;
#else
  return false;
#endif
}

bool authenticator::gcm_available() noexcept {
#if CLUMP_HAVE_SODIUM
  static const bool can = [] {
    [[maybe_unused]] int ok = sodium_init();  // 0, or 1 when already done; idempotent and thread-safe
    return crypto_aead_aes256gcm_is_available() != 0;
  }();
  return can;
#else
  return false;
#endif
}

const char* authenticator::library() noexcept {
#if CLUMP_HAVE_SODIUM
  static const std::string text = [] {
    return std::string("libsodium ") + sodium_version_string() +
           (gcm_available() ? " (AES-256-GCM on this CPU, ChaCha20-Poly1305 for lent payloads)"
                                                 : " (ChaCha20-Poly1305: this CPU has no AES instructions)");
  }();
  return text.c_str();
#else
  return "";
#endif
}

uint8_t authenticator::flags(bool contiguous) const noexcept {
  return static_cast<uint8_t>(flag_auth | (gcm_ && contiguous ? flag_gcm : 0));
}

void authenticator::chacha_tag(uint32_t sender, uint64_t counter, std::span<const std::byte> a,
                               std::span<const std::byte> b, uint8_t out[16]) const noexcept {
#if CLUMP_HAVE_SODIUM
  unsigned char nonce[crypto_stream_chacha20_ietf_NONCEBYTES];
  nonce_of(sender, counter, nonce);
  unsigned char one_time[crypto_onetimeauth_poly1305_KEYBYTES];
  crypto_stream_chacha20_ietf(one_time, sizeof one_time, nonce, reinterpret_cast<const unsigned char*>(key_.data()));
  crypto_onetimeauth_poly1305_state st;
  crypto_onetimeauth_poly1305_init(&st, one_time);
  crypto_onetimeauth_poly1305_update(&st, reinterpret_cast<const unsigned char*>(a.data()), a.size());
  crypto_onetimeauth_poly1305_update(&st, reinterpret_cast<const unsigned char*>(b.data()), b.size());
  // The length too, and the counter (it is in the trailer, outside the bytes above).
  const uint64_t tail[2] = {a.size() + b.size(), counter};
  crypto_onetimeauth_poly1305_update(&st, reinterpret_cast<const unsigned char*>(tail), sizeof tail);
  crypto_onetimeauth_poly1305_final(&st, out);
  sodium_memzero(one_time, sizeof one_time);
#else
  (void)sender, (void)counter, (void)a, (void)b;
  std::memset(out, 0, 16);
#endif
}

void authenticator::sign(std::span<const std::byte> head, std::span<const std::byte> body, auth_trailer& out) noexcept {
  out.counter = next_++;
#if CLUMP_HAVE_SODIUM
  if (gcm_ && body.empty()) {
    unsigned char nonce[crypto_aead_aes256gcm_NPUBBYTES];
    nonce_of(me_, out.counter, nonce);
    unsigned long long tag_bytes = 0;
    unsigned char none[1];  // no ciphertext: the whole datagram is associated data
    crypto_aead_aes256gcm_encrypt_detached_afternm(none, out.tag, &tag_bytes, nullptr, 0,
                                                   reinterpret_cast<const unsigned char*>(head.data()), head.size(),
                                                   nullptr, nonce, &gcm_->st);
    return;
  }
#endif
  chacha_tag(me_, out.counter, head, body, out.tag);
}

authenticator::verdict authenticator::check(uint32_t from, uint8_t header_flags,
                                            std::span<const std::byte> bytes) noexcept {
#if CLUMP_HAVE_SODIUM
  if (bytes.size() < sizeof(auth_trailer) || from >= windows_.size()) return verdict::forged;
  auth_trailer t;
  std::memcpy(&t, bytes.data() + bytes.size() - sizeof t, sizeof t);
  const std::span<const std::byte> signed_bytes = bytes.first(bytes.size() - sizeof t);
  if (header_flags & flag_gcm) {
    if (!gcm_) return verdict::cannot;
    unsigned char nonce[crypto_aead_aes256gcm_NPUBBYTES];
    nonce_of(from, t.counter, nonce);
    unsigned char none[1] = {};
    if (crypto_aead_aes256gcm_decrypt_detached_afternm(
            none, nullptr, none, 0, t.tag, reinterpret_cast<const unsigned char*>(signed_bytes.data()),
            signed_bytes.size(), nonce, &gcm_->st) != 0)
      return verdict::forged;
  } else {
    uint8_t want[16];
    chacha_tag(from, t.counter, signed_bytes, {}, want);
    if (crypto_verify_16(want, t.tag) != 0) return verdict::forged;  // constant time
  }
  // Only now, authentic: is it new? (`highest` is the newest counter
  // accepted + 1; the bitmap remembers the replay_window counters below it.)
  window& w = windows_[from];
  const uint64_t c = t.counter;
  if (w.highest == 0 || c >= w.highest) {
    // The window moves up to c: the counters it takes in are not seen yet.
    const uint64_t first = w.highest == 0 ? c : w.highest;
    if (c - first >= replay_window)
      w.seen.fill(0);
    else
      for (uint64_t k = first; k != c + 1; ++k) w.clear(k);
    w.set(c);
    w.highest = c + 1;
    return verdict::ok;
  }
  if (w.highest - c > replay_window || w.test(c)) return verdict::replayed;  // too old to tell, or seen
  w.set(c);
  return verdict::ok;
#else
  (void)from, (void)header_flags, (void)bytes;
  return verdict::forged;
#endif
}

}  // namespace clump::net
