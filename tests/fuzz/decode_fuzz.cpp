// libFuzzer target on clump::net::decode(), the one function that reads
// bytes from the network before anything is trusted.
//
// Beyond "no crash, no read outside the input" (ASan sees the input as an
// exact-size allocation), every input is checked against properties:
//
//  - decode() refuses exactly what the rules of wire.hpp refuse, with the
//    same reason: `model()` below restates those rules from the byte offsets,
//    independently of the structs, so that a change of the rules or of the
//    layout (which is a wire-version change) shows up here first;
//  - what it returns does not depend on what `out` held before;
//  - an accepted datagram: ack is exactly a header; data has nargs <= 20,
//    its payload lies inside the input and ends where the input ends, its
//    payload_bytes agree with the header lengths (the fragment lies inside
//    the message), and encoding the decoded headers, arguments and payload
//    again gives back the input byte for byte.
//
// Each input is decoded as seen by rank 0 of a job of 2 with job id
// fuzz_job (the seeds are made for that view), and again as seen by the rank
// it is addressed to, so that inputs with other ranks reach the deep checks.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "datagrams.hpp"
#include "net/wire.hpp"

namespace {

using namespace clump::net;

[[noreturn]] void fail(const char* what, size_t n, uint32_t me, uint32_t size) {
  std::fprintf(stderr, "decode_fuzz: property violated: %s (input of %zu bytes, decoded at rank %u of %u)\n", what, n,
               me, size);
  std::abort();
}

#define FUZZ_CHECK(cond) \
  do {                   \
    if (!(cond)) fail(#cond, n, me, size); \
  } while (0)

uint32_t u32(const uint8_t* b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b + at, 4);
  return v;
}
uint64_t u64(const uint8_t* b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b + at, 8);
  return v;
}

// Byte offsets of the fields the rules read (wire.hpp); the structs must agree.
constexpr size_t at_magic = 0, at_version = 4, at_type = 5, at_channel = 6, at_flags = 7, at_job = 8,
                 at_src = 16, at_dst = 20, at_records = 44;
constexpr size_t dh = 64;  // datagram header bytes
constexpr size_t at_kind = dh + 0, at_nargs = dh + 2, at_length = dh + 12, at_frag = dh + 48;
constexpr size_t at_m_how = dh + 5, at_m_lent = dh + 6, at_m_reserved = dh + 7, at_m_reserved2 = dh + 52;
constexpr size_t data_headers = dh + 72;
static_assert(offsetof(datagram_header, version) == at_version && offsetof(datagram_header, type) == at_type &&
              offsetof(datagram_header, channel) == at_channel && offsetof(datagram_header, flags) == at_flags &&
              offsetof(datagram_header, job) == at_job && offsetof(datagram_header, src_rank) == at_src &&
              offsetof(datagram_header, dst_rank) == at_dst && offsetof(datagram_header, records) == at_records &&
              sizeof(datagram_header) == dh);
static_assert(offsetof(message_header, how) == at_m_how - dh && offsetof(message_header, lent) == at_m_lent - dh &&
              offsetof(message_header, reserved) == at_m_reserved - dh &&
              offsetof(message_header, reserved2) == at_m_reserved2 - dh);
static_assert(offsetof(message_header, nargs) == at_nargs - dh && offsetof(message_header, length) == at_length - dh &&
              offsetof(message_header, frag_offset) == at_frag - dh && data_header_bytes == data_headers);

bool request_kind(uint8_t k) { return k == 1 || k == 2 || k == 3 || k == 5; }
bool payload_kind(uint8_t k) { return k == 2 || k == 3 || k == 7 || k == 8; }
bool known_kind(uint8_t k) { return request_kind(k) || k == 6 || k == 7 || k == 8 || k == 10; }

/// The rules of wire.hpp, in the order they are documented to apply.
refusal model(const uint8_t* b, size_t n, uint64_t job, uint32_t me, uint32_t size, uint8_t flags) {
  const bool magic = n >= 4 && u32(b, at_magic) == wire_magic;
  if (n < dh) return magic ? refusal::truncated : refusal::not_clump;
  if (!magic) return refusal::not_clump;
  if (b[at_version] != wire_version) return refusal::wrong_version;
  if (u64(b, at_job) != job) return refusal::other_job;
  const uint32_t src = u32(b, at_src), dst = u32(b, at_dst);
  if (src >= size || dst != me || src == me) return refusal::bad_rank;
  // The flags a job expects: 0, or flag_auth with or without flag_gcm (a
  // wrong one in an authenticated job is a datagram from outside it).
  if (flags == 0 && b[at_flags] != 0) return refusal::malformed;
  if (flags != 0 && b[at_flags] != flag_auth && b[at_flags] != (flag_auth | flag_gcm)) return refusal::unauthenticated;
  const uint32_t records = u32(b, at_records);
  // An ack or a ping is its header alone, with no records.
  if (b[at_type] == 2 || b[at_type] == 3) return n == dh && records == 0 ? refusal::none : refusal::malformed;
  if (b[at_type] != 1 || b[at_channel] > 1 || records == 0) return refusal::malformed;
  if (records > 1) {
    // Packed: whole messages in a row, each header, arguments and its whole
    // payload (none for a short or a get), the last ending with the datagram.
    size_t at = dh;
    for (uint32_t i = 0; i < records; ++i) {
      if (n - at < 72) return refusal::truncated;
      const uint8_t kind = b[at], nargs = b[at + 2];
      if (!known_kind(kind) || nargs > 20) return refusal::malformed;
      if (b[at + 6] > 1 || b[at + 7] || u32(b, at + 52)) return refusal::malformed;
      if ((b[at_channel] == 0) != request_kind(kind)) return refusal::malformed;
      if (n - at < 72 + 4u * nargs) return refusal::truncated;
      // Not by a read, not a fragment, not lent.
      if (b[at + 5] != 0 || u32(b, at + 48) != 0 || b[at + 6] != 0) return refusal::malformed;
      const size_t payload = payload_kind(kind) ? u32(b, at + 12) : 0;
      if (n - at - 72 - 4u * nargs < payload) return refusal::truncated;
      at += 72 + 4u * nargs + payload;
    }
    return at == n ? refusal::none : refusal::malformed;
  }
  if (n < data_headers) return refusal::truncated;
  const uint8_t kind = b[at_kind], nargs = b[at_nargs];
  if (!known_kind(kind) || nargs > 20) return refusal::malformed;
  if (b[at_m_lent] > 1 || b[at_m_reserved] || u32(b, at_m_reserved2))
    return refusal::malformed;  // lent is 0 or 1; reserved fields are zero
  if ((b[at_channel] == 0) != request_kind(kind)) return refusal::malformed;  // requests on channel 0 only
  if (n < data_headers + 4u * nargs) return refusal::truncated;
  const uint64_t fragment = n - data_headers - 4u * nargs;
  const uint64_t length = u32(b, at_length), frag = u32(b, at_frag);
  // A medium or long message by a read: one datagram holding where to read it (16 bytes).
  if (b[at_m_how] != 0)
    return b[at_m_how] == how_read && payload_kind(kind) && frag == 0 && fragment == 16 && length >= 16
               ? refusal::none
               : refusal::malformed;
  if (!payload_kind(kind)) return fragment == 0 && frag == 0 ? refusal::none : refusal::malformed;
  if (frag + fragment > length) return refusal::malformed;   // the fragment lies inside the message
  if (fragment == 0 && length != 0) return refusal::malformed;  // only an empty message has an empty fragment
  return refusal::none;
}

void check(const uint8_t* data, size_t n, uint64_t job, uint32_t me, uint32_t size, uint8_t flags) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  decoded a, b;
  std::memset(&a, 0x00, sizeof a);
  std::memset(&b, 0xa5, sizeof b);
  const refusal r = decode(bytes, n, job, me, size, a, flags);
  FUZZ_CHECK(decode(bytes, n, job, me, size, b, flags) == r);  // same answer whatever `out` held
  FUZZ_CHECK(r == model(data, n, job, me, size, flags));
  FUZZ_CHECK(static_cast<unsigned>(r) < refusal_count);
  FUZZ_CHECK(to_string(r) != nullptr);
  if (r != refusal::none) return;

  FUZZ_CHECK(std::memcmp(&a.h, &b.h, sizeof a.h) == 0);
  FUZZ_CHECK(std::memcmp(&a.h, data, sizeof a.h) == 0);
  FUZZ_CHECK(a.h.job == job && a.h.dst_rank == me && a.h.src_rank < size && a.h.src_rank != me);
  if (a.h.type == static_cast<uint8_t>(datagram_type::ack) || a.h.type == static_cast<uint8_t>(datagram_type::ping)) {
    FUZZ_CHECK(n == sizeof(datagram_header));
    return;
  }
  FUZZ_CHECK(a.h.type == static_cast<uint8_t>(datagram_type::data));
  FUZZ_CHECK(a.size == n && a.at == sizeof(datagram_header));
  if (a.h.records > 1) {
    // Every record lies inside the input, whole, one after another, and
    // encoding each again gives back its bytes; the last ends the input.
    decoded r = a;
    for (uint32_t i = 0;; ++i) {
      FUZZ_CHECK(i < a.h.records);
      FUZZ_CHECK(r.m.nargs <= max_args && is_valid_kind(r.m.kind) && r.m.frag_offset == 0 && r.m.how == 0 &&
                 r.m.lent == 0);
      const size_t headers = sizeof(message_header) + 4u * r.m.nargs;
      FUZZ_CHECK(r.next > r.at && r.next <= n && r.next - r.at == record_bytes(r.m));
      FUZZ_CHECK(r.payload == bytes + r.at + headers && r.payload_bytes == r.next - r.at - headers);
      unsigned char again[sizeof(message_header) + 4 * max_args];
      std::memcpy(again, &r.m, sizeof r.m);
      std::memcpy(again + sizeof r.m, r.args, 4u * r.m.nargs);
      FUZZ_CHECK(std::memcmp(again, data + r.at, headers) == 0);
      if (r.last_record()) {
        FUZZ_CHECK(i + 1 == a.h.records);
        break;
      }
      next_record(bytes, r);
    }
    return;
  }
  const message_header& m = a.m;
  FUZZ_CHECK(std::memcmp(&a.m, &b.m, sizeof a.m) == 0);
  FUZZ_CHECK(is_valid_kind(m.kind));
  FUZZ_CHECK(m.nargs <= max_args);
  FUZZ_CHECK(a.h.channel == static_cast<uint8_t>(is_request(static_cast<msg_kind>(m.kind)) ? channel::request
                                                                                            : channel::reply));
  // The payload lies inside the input and runs to its end.
  const size_t headers = data_header_bytes + 4u * m.nargs;
  FUZZ_CHECK(headers <= n);
  FUZZ_CHECK(a.payload == bytes + headers && b.payload == a.payload);
  FUZZ_CHECK(a.payload_bytes == n - headers && b.payload_bytes == a.payload_bytes);
  FUZZ_CHECK(a.payload + a.payload_bytes == bytes + n);
  FUZZ_CHECK(std::memcmp(a.args, b.args, 4u * m.nargs) == 0);
  // The fragment agrees with the message's lengths.
  if (carries_payload(static_cast<msg_kind>(m.kind))) {
    FUZZ_CHECK(uint64_t{m.frag_offset} + a.payload_bytes <= m.length);
    FUZZ_CHECK(a.payload_bytes > 0 || m.length == 0);
  } else {
    FUZZ_CHECK(a.payload_bytes == 0 && m.frag_offset == 0);
  }
  // Encoding what was decoded gives back the datagram.
  unsigned char again[data_header_bytes + 4 * max_args];
  std::memcpy(again, &a.h, sizeof a.h);
  std::memcpy(again + sizeof a.h, &a.m, sizeof a.m);
  std::memcpy(again + data_header_bytes, a.args, 4u * m.nargs);
  FUZZ_CHECK(std::memcmp(again, data, headers) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t n) {
  // In a job that does not authenticate its datagrams, and in one that does.
  for (uint8_t flags : {uint8_t{0}, flag_auth}) {
    check(data, n, clump::fuzz::fuzz_job, 0, 2, flags);
    if (n >= 24) {
      // As the rank it is addressed to, in a job just large enough for its source.
      const uint32_t dst = u32(data, at_dst), src = u32(data, at_src);
      const uint32_t size = src > dst ? src + (src < 0xffffffffu) : dst + (dst < 0xffffffffu);
      check(data, n, clump::fuzz::fuzz_job, dst, size, flags);
    }
  }
  return 0;
}
