#include "net/wire.hpp"

namespace clump::net {

const char* to_string(refusal r) noexcept {
  switch (r) {
    case refusal::none: return "accepted";
    case refusal::truncated: return "truncated";
    case refusal::not_clump: return "not a clump datagram";
    case refusal::wrong_version: return "another wire-format version";
    case refusal::other_job: return "from another job";
    case refusal::bad_rank: return "source or destination rank not in this job";
    case refusal::malformed: return "malformed";
    case refusal::wrong_source: return "not from the address of the rank it names";
    case refusal::unauthenticated: return "not authenticated (no or a wrong tag: not from this job)";
    case refusal::replayed: return "replayed (authentic, but seen before)";
  }
  return "unknown";
}

namespace {

/// Takes apart the record at `at` of a data datagram of `n` bytes on channel
/// `channel` into `out` (message, arguments, payload); a record of a packed
/// datagram (`packed`) is a whole message in the datagram, whose payload is
/// its length; the one record of a datagram of one is the rest of it.
refusal take_record(const std::byte* bytes, size_t n, size_t at, uint8_t channel, bool packed,
                    decoded& out) noexcept {
  if (n - at < sizeof(message_header)) return refusal::truncated;
  std::memcpy(&out.m, bytes + at, sizeof out.m);
  const message_header& m = out.m;
  if (!is_valid_kind(m.kind) || m.nargs > max_args) return refusal::malformed;
  if (m.lent > 1 || m.reserved || m.reserved2) return refusal::malformed;
  const auto kind = static_cast<msg_kind>(m.kind);
  // Requests travel on the request channel, everything else on the reply channel.
  if ((channel == static_cast<uint8_t>(channel::request)) != is_request(kind)) return refusal::malformed;
  const size_t arg_bytes = 4u * m.nargs;
  const size_t headers = sizeof(message_header) + arg_bytes;
  if (n - at < headers) return refusal::truncated;
  std::memcpy(out.args, bytes + at + sizeof(message_header), arg_bytes);
  out.at = at;
  out.payload = bytes + at + headers;
  if (packed) {
    // Whole, in the datagram, copied.
    if (m.how || m.frag_offset || m.lent) return refusal::malformed;
    out.payload_bytes = carries_payload(kind) ? m.length : 0;
    if (n - at - headers < out.payload_bytes) return refusal::truncated;
    out.next = at + headers + out.payload_bytes;
    return refusal::none;
  }
  out.payload_bytes = n - at - headers;
  out.next = n;
  if (m.how) {
    // A long message by a read: one datagram, which says where the payload is.
    if (m.how != how_read || !carries_payload(kind) || m.frag_offset != 0 || out.payload_bytes != sizeof(read_source) ||
        m.length < sizeof(read_source))
      return refusal::malformed;
    return refusal::none;
  }
  if (!carries_payload(kind)) {
    if (out.payload_bytes != 0 || m.frag_offset != 0) return refusal::malformed;
    return refusal::none;
  }
  // The fragment lies inside the message, and only an empty message has an empty fragment.
  if (m.frag_offset > m.length || out.payload_bytes > m.length - m.frag_offset) return refusal::malformed;
  if (out.payload_bytes == 0 && m.length != 0) return refusal::malformed;
  return refusal::none;
}

}  // namespace

refusal decode(const std::byte* bytes, size_t n, uint64_t job, uint32_t me, uint32_t size, decoded& out,
               uint8_t flags) noexcept {
  if (n < sizeof(datagram_header)) {
    // Too short for a header; still tell a foreign datagram from a short clump one.
    return n >= 4 && std::memcmp(bytes, &wire_magic, 4) == 0 ? refusal::truncated : refusal::not_clump;
  }
  std::memcpy(&out.h, bytes, sizeof out.h);
  const datagram_header& h = out.h;
  out.size = n;
  if (h.magic != wire_magic) return refusal::not_clump;
  if (h.version != wire_version) return refusal::wrong_version;
  if (h.job != job) return refusal::other_job;
  if (h.src_rank >= size || h.dst_rank != me || h.src_rank == me) return refusal::bad_rank;
  if ((h.flags & ~(flags ? flag_gcm : 0)) != flags) return flags ? refusal::unauthenticated : refusal::malformed;
  if (h.type == static_cast<uint8_t>(datagram_type::ack) || h.type == static_cast<uint8_t>(datagram_type::ping))
    return n == sizeof h && h.records == 0 ? refusal::none : refusal::malformed;
  if (h.type != static_cast<uint8_t>(datagram_type::data) || h.channel >= channel_count || h.records == 0)
    return refusal::malformed;
  const bool packed = h.records > 1;
  // Every record is checked before any is used; `out` is left at the first.
  decoded walk;
  size_t at = sizeof h;
  for (uint32_t i = 0; i < h.records; ++i) {
    const refusal r = take_record(bytes, n, at, h.channel, packed, i == 0 ? out : walk);
    if (r != refusal::none) return r;
    at = i == 0 ? out.next : walk.next;
  }
  return at == n ? refusal::none : refusal::malformed;  // bytes after the last record
}

void next_record(const std::byte* bytes, decoded& d) noexcept {
  take_record(bytes, d.size, d.next, d.h.channel, true, d);
}

}  // namespace clump::net
