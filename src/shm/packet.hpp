#pragma once
// The shared-memory packet: one 64-byte cache line, plus a second line for
// messages with more than 8 argument words or with internal extra fields.
//
// Invariants (see queue.hpp for who writes what and when):
// - `seq` is the first word of every line and is written last, with release,
//   by the sender of the first line; it holds (absolute slot index + 1) as a
//   32-bit number. The receiver reads it with acquire and compares it with the
//   value it expects at its head; a stale value is always that of the previous
//   lap, so it can never match.
// - Offsets, never pointers: a packet is read in another address space.

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
};

inline constexpr bool is_request(packet_kind k) noexcept {
  return k == packet_kind::short_request || k == packet_kind::medium_request || k == packet_kind::long_request ||
         k == packet_kind::long_piece || k == packet_kind::get_request;
}

/// Flag bits.
inline constexpr uint8_t flag_two_lines = 1;  // a packet_tail line follows
inline constexpr uint8_t flag_ring = 2;       // payload is in the ring; `offset` holds the ring lines used
inline constexpr uint8_t flag_staged = 4;     // long payload travelled through the ring (private segment)

inline constexpr unsigned args_in_first_line = 8;
inline constexpr unsigned args_in_second_line = 12;
/// Argument words one message can carry (AM-2 asks for at least 16).
inline constexpr unsigned max_args = args_in_first_line + args_in_second_line;

struct alignas(cache_line) packet {
  std::atomic<uint32_t> seq;  // publication word, see above
  packet_kind kind;
  uint8_t handler;            // handler index at the destination
  uint8_t nargs;              // argument words in this message
  uint8_t flags;
  uint32_t source;            // sending endpoint: rank << 8 | slot
  uint32_t length;            // payload bytes (medium, long)
  uint64_t tag;               // the destination tag the message was sent with
  uint64_t offset;            // long: destination segment offset; medium and staged: ring lines consumed
  uint32_t args[args_in_first_line];
};
static_assert(sizeof(packet) == cache_line);

/// The second line of a two-line packet.
struct alignas(cache_line) packet_tail {
  std::atomic<uint32_t> seq;  // written (relaxed) so that a stale value never matches a later lap
  uint32_t piece;             // staged long: payload bytes in this packet's ring piece
  uint64_t aux;               // staged long: segment offset; get: destination offset; returned: reason
  uint32_t args[args_in_second_line];
};
static_assert(sizeof(packet_tail) == cache_line);

}  // namespace clump::shm
