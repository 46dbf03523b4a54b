#pragma once
// Datagram authentication (CLUMP_NET_AUTH): a message authentication code on
// every datagram of a job, keyed by a secret that only the job's processes
// hold, so that nobody without it (another user, another host, a process that
// binds a rank's port with SO_REUSEPORT) can inject a datagram, and nobody
// can replay one.
//
// Each datagram gets a trailer: a 64-bit counter, the sender's own (one up
// per datagram sent, retransmissions and acks included, never reused), and a
// 16-byte tag over the whole datagram, under the nonce (sender rank,
// counter), which never repeats under the key. Two constructions, through
// libsodium, marked in the header (flag_gcm) so that a receiver checks
// either:
//   AES-256-GCM with no ciphertext (GMAC), where the CPUs of all the job's
//     processes have AES and carry-less multiply instructions (they say so
//     at start-up) and the datagram is in one piece:
//     about 70 ns for a small datagram here, 5 GB/s for a large one;
//   ChaCha20-Poly1305's construction (RFC 8439, with no ciphertext: Poly1305
//     keyed by the first 32 bytes of the ChaCha20 keystream of the nonce)
//     otherwise, which takes a datagram in two pieces (headers, and a
//     payload the sender lends) piece by piece. With GCM the network copies
//     a lent payload instead (wants_one_piece()): libsodium's GCM has no
//     piece-by-piece form, and copy + GCM is faster than Poly1305.
// The receiver checks the tag (in constant time, libsodium's), then the
// counter against a window of the last 1024 counters from that sender: a
// counter seen before, or older than the window, is a replay (a legitimate
// retransmission has a counter of its own). The header, with its ranks, job
// and acks, is covered; the payload is not encrypted (integrity and origin
// are the point, not confidentiality).
//
// Without libsodium at build time available() is false and a job that
// needs authentication is refused with the reason.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace clump::net {

/// The trailer of an authenticated datagram (datagram_header::flags & flag_auth).
struct auth_trailer {
  uint64_t counter;
  uint8_t tag[16];
};
static_assert(sizeof(auth_trailer) == 24);

inline constexpr size_t auth_key_bytes = 32;

class authenticator {
 public:
  /// `key`: the job's datagram key; `me`: this rank; `ranks`: the job's size;
  /// `gcm`: every process of the job can use AES-256-GCM (gcm_available()).
  authenticator(std::span<const std::byte, auth_key_bytes> key, uint32_t me, uint32_t ranks, bool gcm);
  ~authenticator();

  /// True when this build can authenticate (libsodium); else "" from library().
  static bool available() noexcept;
  /// True when this CPU can compute AES-256-GCM (libsodium needs AES-NI and
  /// PCLMUL); the processes of a job tell each other at start-up.
  static bool gcm_available() noexcept;
  /// The library and its version, and what this CPU uses, for clump-info.
  static const char* library() noexcept;

  /// The header flags of a datagram this process sends (flag_auth, and
  /// flag_gcm when it is `contiguous` and the CPU can): set them in the
  /// header before sign().
  uint8_t flags(bool contiguous) const noexcept;
  /// True when a datagram in one piece is signed much faster (GCM: about
  /// 5 GB/s, against 1 GB/s for Poly1305 over two pieces): copying a lent
  /// payload next to its headers is then the cheaper way.
  bool wants_one_piece() const noexcept { return gcm_ != nullptr; }
  /// The construction this process signs whole datagrams with, for the log.
  const char* construction() const noexcept { return gcm_ ? "AES-256-GCM" : "ChaCha20-Poly1305"; }
  /// Fills `out` for a datagram made of `head` then `body` (body empty: one
  /// piece), whose header holds flags(body.empty()), with the next counter.
  void sign(std::span<const std::byte> head, std::span<const std::byte> body, auth_trailer& out) noexcept;

  enum class verdict { ok, forged, replayed, cannot };
  /// How many of a sender's latest counters the replay check remembers: a
  /// datagram overtaken by more than this many of the same sender's
  /// (to any rank: the counter is per sender) is refused as a replay, and
  /// costs a retransmission.
  static constexpr uint64_t replay_window = 1024;
  /// Checks datagram `bytes` (trailer included, at its end; its header's
  /// flags say the construction) from rank `from` (< ranks: the caller has
  /// checked), and records its counter. `cannot`: a GCM tag where the job
  /// does not use GCM (no process of the job sends one).
  verdict check(uint32_t from, uint8_t header_flags, std::span<const std::byte> bytes) noexcept;

 private:
  struct window {
    uint64_t highest = 0;  // the newest counter accepted + 1 (0: none yet)
    std::array<uint64_t, replay_window / 64> seen{};  // bit c % replay_window: counter c was accepted
    bool test(uint64_t c) const noexcept { return (seen[(c % replay_window) / 64] >> (c % 64)) & 1u; }
    void set(uint64_t c) noexcept { seen[(c % replay_window) / 64] |= uint64_t{1} << (c % 64); }
    void clear(uint64_t c) noexcept { seen[(c % replay_window) / 64] &= ~(uint64_t{1} << (c % 64)); }
  };
  struct gcm_state;
  void chacha_tag(uint32_t sender, uint64_t counter, std::span<const std::byte> a, std::span<const std::byte> b,
                  uint8_t out[16]) const noexcept;

  std::array<std::byte, auth_key_bytes> key_;
  std::unique_ptr<gcm_state> gcm_;  // null where the CPU has no AES
  uint32_t me_;
  uint64_t next_ = 0;
  std::vector<window> windows_;  // by sender rank
};

}  // namespace clump::net
