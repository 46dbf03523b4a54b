#pragma once
// How the head (the clumprun the user runs) and its agents (one clumprun per
// host, started over ssh) prove to each other that they belong to one job,
// before either trusts a byte from the other. The head makes a random job
// secret and gives it to each agent on the agent's standard input (through
// ssh: never on a command line, never in clear on the network). Then, on the
// TCP connection the agent opens back to the head:
//
//   H -> A  challenge {version, nonce_h}                (as soon as it connects)
//   A -> H  hello     {version, node, nonce_a, proof_a}
//   H -> A  welcome   {proof_h, job id}
//
// proof_a = HMAC(secret, "agent" | node | nonce_h | nonce_a) and proof_h =
// HMAC(secret, "head" | node | nonce_a | nonce_h) (HMAC-SHA-512-256,
// libsodium's crypto_auth, checked in constant time): each side answers the
// other's fresh challenge, so neither a recorded conversation nor a guess
// passes, and a side that lacks the secret learns nothing it could use. The
// head reads at most a small frame from a connection that has not proved
// itself, gives it a few seconds, and stops listening once every agent has
// joined. What follows on the connection (relayed boot frames) is not
// authenticated per frame: the path between the hosts must not be one an
// attacker can write into (a cluster's own network, or a VPN).
//
// The datagram key (CLUMP_NET_AUTH) travels the same way as the secret, on
// the agent's standard input, and reaches the ranks in their job message
// over their local boot socket.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace clumprun::handshake {

inline constexpr size_t secret_bytes = 32;
inline constexpr size_t nonce_bytes = 32;
inline constexpr size_t proof_bytes = 32;
using secret = std::array<unsigned char, secret_bytes>;
using nonce = std::array<unsigned char, nonce_bytes>;
using proof = std::array<unsigned char, proof_bytes>;

/// True when this clumprun can (built with libsodium).
bool available() noexcept;
/// Fills `out` with random bytes (getrandom).
bool random(unsigned char* out, size_t n) noexcept;

/// The agent's proof (role 'A') or the head's ('H') for host `node`, over
/// the challenge received first and the one sent second.
proof prove(const secret& key, char role, int node, const nonce& received, const nonce& sent) noexcept;
/// Checks a proof in constant time.
bool verify(const secret& key, char role, int node, const nonce& received, const nonce& sent,
            const proof& p) noexcept;

std::string to_hex(const unsigned char* p, size_t n);
/// False unless `text` is exactly 2 * n hex digits.
bool from_hex(const std::string& text, unsigned char* out, size_t n);

}  // namespace clumprun::handshake
