#pragma once
// The shared-memory packet: one 64-byte cache line, plus a second line for
// messages with more than 8 argument words or with offsets (long messages,
// gets, returned messages), plus a third for more than 18 words.
//
// Invariants (see queue.hpp for who writes what and when):
// - `seq` is the first word of every line. The first line's is written last,
//   with release, by the sender; it holds (absolute slot index + 1) as a
//   32-bit number. The receiver reads it with acquire and compares it with the
//   value it expects at its head; a stale value is always that of an earlier
//   lap, so it can never match. Every further line's `seq` holds its own
//   index + 1 too (written before the first line's release), so the receiver
//   can tell that the lines a packet says it has are really its own.
// - Offsets, never pointers: a packet is read in another address space.
// - Nothing here is trusted: another process wrote it. The receiver checks
//   every field (kind, counts, lengths, offsets, flags, line seqs) before it
//   uses it (dispatch.cpp, validate()).
// - The payload ring's use is not in the packet: sender and receiver both
//   compute it from the ring position and the payload length (ring_span),
//   so a corrupt packet cannot make the receiver read outside the ring.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace clump::shm {

inline constexpr size_t cache_line = 64;

/// What a packet carries. Requests go to the request queue, everything else
/// (replies, returned messages) to the reply queue.
enum class packet_kind : uint8_t {
  short_request = 1,
  medium_request,
  long_request,      // payload is already in the destination segment (or staged: see flags)
  long_piece,        // a non-final piece of a staged long message (no handler runs)
  get_request,       // internal: pull from the destination segment, answered by a long reply
  short_reply,
  medium_reply,
  long_reply,
  long_piece_reply,
  returned,          // a message that could not be delivered, coming back to its sender
  cancelled,         // claimed for an endpoint that was freed meanwhile: skipped (the sender returned it itself)
};

inline constexpr bool is_request(packet_kind k) noexcept {
  return k == packet_kind::short_request || k == packet_kind::medium_request || k == packet_kind::long_request ||
         k == packet_kind::long_piece || k == packet_kind::get_request;
}
inline constexpr bool is_long(packet_kind k) noexcept {
  return k == packet_kind::long_request || k == packet_kind::long_reply || k == packet_kind::long_piece ||
         k == packet_kind::long_piece_reply;
}
/// Kinds whose offsets ride in the second line.
inline constexpr bool has_offsets(packet_kind k) noexcept {
  return is_long(k) || k == packet_kind::get_request || k == packet_kind::returned;
}

/// Flag bits.
inline constexpr uint8_t flag_two_lines = 1;    // a packet_tail line follows
inline constexpr uint8_t flag_ring = 2;         // payload is in the ring (medium; staged long pieces)
inline constexpr uint8_t flag_staged = 4;       // long payload travelled through the ring (private segment)
inline constexpr uint8_t flag_three_lines = 8;  // a packet_extra line follows the tail
inline constexpr uint8_t flag_shared_copy = 16; // long request into a private segment, copied by both sides (below)
inline constexpr uint8_t known_flags = flag_two_lines | flag_ring | flag_staged | flag_three_lines | flag_shared_copy;

/// A shared copy (flag_shared_copy): a long request into a segment in its
/// owner's private memory, which sender and receiver copy at once, each with
/// one cross-memory call, on two cores. The packet has three lines; tail.piece
/// is the front's size, tail.aux the payload's address in the sender's memory
/// (handed only to the kernel). The third line's `shared` word is where the
/// two meet, each setting bits with an atomic or (both processes):
/// - the sender publishes the packet and writes the front into the segment;
/// - the receiver, on reading the packet, claims the rest (shared_claimed);
/// - the sender, its front written, sets shared_front_written together with
///   shared_taken: whichever of the two ors comes first decides who copies
///   the rest. A receiver that claimed first pulls it from the sender's
///   memory (shared_pulled; shared_refused when the kernel will not let it:
///   the sender then writes it); else the sender writes it (shared_all_written).
///   So a sender never waits for a receiver that is not polling.
/// - the receiver runs the handler once the whole payload is in place; the
///   sender returns once its buffer is no longer read.
/// The receiver frees the lines only after the sender's last bit (it waits
/// for it, also when it refuses the message), so no bit of the sender's lands
/// in lines a later packet reuses.
inline constexpr uint32_t shared_front_written = 1;  // sender: the front is in place
inline constexpr uint32_t shared_pulled = 2;         // receiver: the rest is in place
inline constexpr uint32_t shared_refused = 4;        // receiver: the kernel would not let it pull; the sender writes it
inline constexpr uint32_t shared_all_written = 8;    // sender: the rest is in place too
inline constexpr uint32_t shared_failed = 16;        // sender: a write failed; the message goes back
inline constexpr uint32_t shared_claimed = 32;       // receiver: the rest is mine to pull, unless already taken
inline constexpr uint32_t shared_taken = 64;         // sender: the rest is mine to write, unless already claimed

inline constexpr unsigned args_in_first_line = 8;
inline constexpr unsigned args_in_second_line = 10;
inline constexpr unsigned args_in_third_line = 14;
/// Argument words one message can carry (AM-2 asks for at least 16).
inline constexpr unsigned max_args = 20;
static_assert(max_args <= args_in_first_line + args_in_second_line + args_in_third_line);

/// The lines a packet of `kind` with `nargs` words takes, and its line flags
/// (a shared copy always takes three).
inline constexpr uint8_t line_flags(packet_kind kind, unsigned nargs, bool shared_copy = false) noexcept {
  if (shared_copy || nargs > args_in_first_line + args_in_second_line) return flag_two_lines | flag_three_lines;
  return nargs > args_in_first_line || has_offsets(kind) ? flag_two_lines : 0;
}
inline constexpr uint32_t lines_of(uint8_t flags) noexcept {
  return 1u + ((flags & flag_two_lines) ? 1u : 0u) + ((flags & flag_three_lines) ? 1u : 0u);
}

struct alignas(cache_line) packet {
  std::atomic<uint32_t> seq;  // publication word, see above
  packet_kind kind;
  uint8_t handler;            // handler index at the destination
  uint8_t nargs;              // argument words in this message
  uint8_t flags;
  uint32_t source;            // sending endpoint: rank << 8 | slot
  uint32_t length;            // payload bytes (medium, long, get)
  uint32_t dst_gen;           // low 32 bits of the destination endpoint's generation
  uint32_t src_gen;           // low 32 bits of the sending endpoint's generation (replies go back to it)
  uint64_t tag;               // the destination tag the message was sent with
  uint32_t args[args_in_first_line];
};
static_assert(sizeof(packet) == cache_line);

/// The second line of a packet.
struct alignas(cache_line) packet_tail {
  std::atomic<uint32_t> seq;  // its own index + 1 (see above)
  uint32_t piece;             // staged long: payload bytes in this packet's ring piece
  uint64_t offset;            // long: destination segment offset; get: source offset; returned: the original's
  uint64_t aux;               // get: destination offset at the requester; returned: reason | op << 8
  uint32_t args[args_in_second_line];
};
static_assert(sizeof(packet_tail) == cache_line);

/// The third line: argument words 19 and on.
struct alignas(cache_line) packet_extra {
  std::atomic<uint32_t> seq;  // its own index + 1
  std::atomic<uint32_t> shared;  // a shared copy's progress (shared_* bits above); else 0
  uint32_t args[args_in_third_line];
};
static_assert(sizeof(packet_extra) == cache_line);

}  // namespace clump::shm
