#pragma once
// The net protocol's datagram format.
//
// Every datagram starts with a datagram_header. A data datagram carries
// `records` messages: one fragment of one message, or several whole messages
// packed while the datagram filled (net/network.hpp). Each record is a
// message_header, the message's argument words, then payload bytes. An ack
// datagram carries only the header.
//
//   datagram_header  64 bytes   who, which job, channel, sequence, acks, records
//   then `records` times:
//     message_header 72 bytes   the AM message (the same for every fragment)
//     args           4 x nargs
//     payload        of one record: the rest of the datagram, bytes
//                    [frag_offset, frag_offset + n) of the payload; of several:
//                    each its whole payload (`length` bytes; none for a short
//                    message or a get), the last ending where the datagram ends
//
// Integers are in the sender's byte order; clump runs on little-endian hosts
// only (x86-64, aarch64), and the version field refuses anything else. Offsets,
// never pointers. decode() checks every length and range before anything is
// used, so a datagram from outside (random bytes, another program, another
// job, a truncated packet) is refused with a reason and never read past its
// end.
//
// Channels: each ordered pair of processes has two one-way streams, one for
// requests and one for replies (and returned messages), each with its own
// sequence numbers, window and acknowledgements. Replies never wait behind
// requests, which is what keeps AM-II's request/reply deadlock freedom over the
// network, as the two queues of an endpoint keep it in shared memory.

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace clump::net {

/// "CLNT" in memory.
inline constexpr uint32_t wire_magic = 0x544e4c43u;
/// Bumped whenever the layout or meaning of a datagram changes.
inline constexpr uint8_t wire_version = 4;

inline constexpr unsigned channel_count = 2;
enum class channel : uint8_t { request = 0, reply = 1 };

/// datagram_header::flags: the datagram ends with an authentication trailer...
inline constexpr uint8_t flag_auth = 1;
/// ...whose tag is AES-256-GCM's (else ChaCha20-Poly1305's): see net/auth.hpp.
inline constexpr uint8_t flag_gcm = 2;

/// data: one fragment of a message; ack: acknowledgements only; ping: a
/// keep-alive that asks for an ack at once (sent by the library itself while
/// a peer is silent, so that a peer that computes is not taken for dead).
enum class datagram_type : uint8_t { data = 1, ack = 2, ping = 3 };

/// The message kinds, numbered as the am layer's packet kinds.
enum class msg_kind : uint8_t {
  short_request = 1,
  medium_request = 2,
  long_request = 3,
  get_request = 5,
  short_reply = 6,
  medium_reply = 7,
  long_reply = 8,
  returned = 10,
};

inline constexpr bool is_valid_kind(uint8_t k) noexcept {
  return (k >= 1 && k <= 3) || (k >= 5 && k <= 8) || k == 10;
}
inline constexpr bool is_request(msg_kind k) noexcept {
  return k == msg_kind::short_request || k == msg_kind::medium_request || k == msg_kind::long_request ||
         k == msg_kind::get_request;
}
/// Kinds whose payload travels in the datagrams (a get carries none: its length is what to fetch).
inline constexpr bool carries_payload(msg_kind k) noexcept {
  return k == msg_kind::medium_request || k == msg_kind::long_request || k == msg_kind::medium_reply ||
         k == msg_kind::long_reply;
}
inline constexpr bool is_long(msg_kind k) noexcept { return k == msg_kind::long_request || k == msg_kind::long_reply; }

struct datagram_header {
  uint32_t magic;
  uint8_t version;
  uint8_t type;      // a datagram_type
  uint8_t channel;   // data: the channel this datagram travels on
  uint8_t flags;     // flag_auth: an auth_trailer ends the datagram (net/auth.hpp); else 0
  uint64_t job;      // the job id: a datagram of another job is dropped
  uint32_t src_rank;
  uint32_t dst_rank;
  uint32_t seq;      // data: sequence number within (src, dst, channel)
  /// For each channel of the reverse direction (dst -> src): every sequence
  /// number below ack[c] has been delivered here...
  uint32_t ack[channel_count];
  /// ...the datagram ack[c] - 1 arrived here this many microseconds before
  /// this datagram left (the receiver's own share of a round trip, as QUIC's
  /// ack delay: the sender keeps it out of its estimate of the path)...
  uint32_t delay_us[channel_count];
  /// data: how many messages the datagram carries (1: one, or one fragment
  /// of one; more: whole messages packed, none by a read); ack, ping: 0.
  uint32_t records;
  /// ...and bit i of held[c] says sequence ack[c] + i is held here, waiting
  /// (selective acknowledgement: the sender need not send it again).
  uint64_t held[channel_count];
};
static_assert(sizeof(datagram_header) == 64);

/// message_header::how: a medium or long message's payload is not in the
/// datagrams: the one datagram carries a read_source, and the receiver reads
/// the payload from the sender's memory (link::read) once it has checked the
/// message.
inline constexpr uint8_t how_read = 1;

/// Where a message sent by a read has its payload (link::exposure).
struct read_source {
  uint64_t addr;
  uint64_t key;
};
static_assert(sizeof(read_source) == 16);

struct message_header {
  uint8_t kind;        // a msg_kind
  uint8_t handler;
  uint8_t nargs;
  uint8_t src_slot;    // sending endpoint
  uint8_t dst_slot;    // receiving endpoint
  uint8_t how;         // 0: the payload travels in the datagrams; how_read: it is read (medium, long)
  uint8_t lent;        // 1: the sender lent its payload and waits to reuse it (ack the last fragment at once); else 0
  uint8_t reserved;
  uint32_t msg_id;     // sequence number of the message's first fragment (reassembly key)
  uint32_t length;     // payload bytes of the whole message
  uint64_t dst_gen;    // the generation of the receiving endpoint the sender means (endpoint_name::generation)
  uint64_t src_gen;    // the sending endpoint's generation (replies and returns go back to it)
  uint64_t tag;        // the tag the message is sent with
  uint64_t src_tag;    // the sending endpoint's own tag (a reply is sent with it)
  uint32_t frag_offset;
  uint32_t reserved2;
  uint64_t offset;     // long: destination segment offset; get: source offset; returned: original offset
  uint64_t aux;        // get: destination offset at the requester; returned: reason | op << 8
};
static_assert(sizeof(message_header) == 72);

/// The header of a message of `kind` back to the sender of `m` (a returned
/// message, a get's answer): slots swapped, to the sender's generation, with
/// m's handler, argument count and length.
inline message_header back_to_sender(const message_header& m, msg_kind kind) noexcept {
  message_header r{};
  r.kind = static_cast<uint8_t>(kind);
  r.handler = m.handler;
  r.nargs = m.nargs;
  r.src_slot = m.dst_slot;
  r.dst_slot = m.src_slot;
  r.dst_gen = m.src_gen;
  r.length = m.length;
  return r;
}

inline constexpr unsigned max_args = 20;
/// Bytes of headers before the arguments of a data datagram.
inline constexpr size_t data_header_bytes = sizeof(datagram_header) + sizeof(message_header);
/// Payload bytes that fit in one datagram of `mtu` bytes carrying `nargs` words.
inline constexpr size_t fragment_room(size_t mtu, unsigned nargs) noexcept {
  return mtu - data_header_bytes - 4 * nargs;
}
/// The bytes of message `m` as a record of a packed datagram: header, arguments, whole payload.
inline constexpr size_t record_bytes(const message_header& m) noexcept {
  return sizeof(message_header) + 4u * m.nargs + (carries_payload(static_cast<msg_kind>(m.kind)) ? m.length : 0);
}

/// Why decode() refused a datagram.
enum class refusal : uint8_t {
  none = 0,
  truncated,      // shorter than its headers, or its declared lengths
  not_clump,      // wrong magic: not a clump datagram at all
  wrong_version,  // a clump datagram of another wire version
  other_job,      // another job's datagram
  bad_rank,       // a source or destination rank outside the job, or not us
  malformed,      // a field out of range
  wrong_source,   // well formed, but not from the address the rank it names has (found by the network, not decode)
  unauthenticated,  // the job authenticates datagrams (CLUMP_NET_AUTH) and this one's tag is missing or wrong
  replayed,         // authentic, but its counter was seen before (or is older than the window): a replay
};
inline constexpr unsigned refusal_count = 10;

const char* to_string(refusal r) noexcept;

/// A datagram taken apart, at one of its records; pointers into the datagram's bytes.
struct decoded {
  datagram_header h;
  message_header m;          // data only: the record's message
  uint32_t args[max_args];   // data only
  const std::byte* payload;  // data only: this fragment's bytes (the whole payload, packed)
  size_t payload_bytes;
  size_t at;    // data only: where the record starts in the datagram
  size_t next;  // data only: where the next record starts (== size after the last)
  size_t size;  // the datagram's bytes, as decoded
  bool last_record() const noexcept { return next == size; }
};

/// Checks and takes apart `n` bytes received from the network for job `job`
/// at rank `me` of `size`; `flags` is what the header's flags must be (0, or
/// flag_auth in a job that authenticates, with flag_gcm or not: `n` then
/// excludes the trailer, which the network checks). Never reads outside
/// [bytes, bytes + n).
refusal decode(const std::byte* bytes, size_t n, uint64_t job, uint32_t me, uint32_t size, decoded& out,
               uint8_t flags = 0) noexcept;

/// Moves `d`, decoded from `bytes` by decode() (which checked every record),
/// to its next record; only when !d.last_record().
void next_record(const std::byte* bytes, decoded& d) noexcept;

/// Signed distance between sequence numbers a - b (wrap-around safe).
inline constexpr int32_t seq_diff(uint32_t a, uint32_t b) noexcept { return static_cast<int32_t>(a - b); }

}  // namespace clump::net
