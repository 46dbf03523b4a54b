#pragma once
// Well-formed net-protocol datagrams, laid out as network::send() and
// network::send_ack() lay them out, for the fuzzers to start from: the seed
// corpus of the libFuzzer target on decode() (make_corpus.cpp) and the bases
// that the datagram fuzzer against a running job mutates
// (tests/fault/datagram_fuzzer.cpp).
//
// Every example has the same (job, src, dst, seq) so that a caller decides
// once whether a datagram could be taken for a real one (the datagram fuzzer
// keeps seq far outside any receive window; see there).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "net/wire.hpp"

namespace clump::fuzz {

using bytes = std::vector<std::byte>;

/// The job id the libFuzzer target decodes for; its seeds carry it.
inline constexpr uint64_t fuzz_job = 0x0123456789abcdefull;

/// Who a datagram claims to be from and for.
struct addressing {
  uint64_t job;
  uint32_t src_rank;
  uint32_t dst_rank;
  uint32_t seq;  ///< of data datagrams
  uint32_t ack[net::channel_count];
  uint64_t held[net::channel_count];
};

inline net::datagram_header header_of(const addressing& a, net::datagram_type type, net::channel ch) {
  net::datagram_header h{};
  h.magic = net::wire_magic;
  h.version = net::wire_version;
  h.type = static_cast<uint8_t>(type);
  h.channel = type == net::datagram_type::data ? static_cast<uint8_t>(ch) : 0;
  h.job = a.job;
  h.src_rank = a.src_rank;
  h.dst_rank = a.dst_rank;
  h.seq = type == net::datagram_type::data ? a.seq : 0;
  h.records = type == net::datagram_type::data ? 1 : 0;
  for (unsigned c = 0; c < net::channel_count; ++c) {
    h.ack[c] = a.ack[c];
    h.held[c] = a.held[c];
  }
  return h;
}

/// An explicit acknowledgement: the header alone.
inline bytes make_ack(const addressing& a) {
  const net::datagram_header h = header_of(a, net::datagram_type::ack, net::channel::request);
  bytes out(sizeof h);
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

/// A data datagram carrying `m` (its nargs words from `args`) and `payload`
/// as the fragment at m.frag_offset; the channel follows from the kind.
inline bytes make_data(const addressing& a, const net::message_header& m, const uint32_t* args,
                       const std::byte* payload, size_t payload_bytes) {
  const auto kind = static_cast<net::msg_kind>(m.kind);
  const net::datagram_header h = header_of(a, net::datagram_type::data,
                                           net::is_request(kind) ? net::channel::request : net::channel::reply);
  bytes out(net::data_header_bytes + 4u * m.nargs + payload_bytes);
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + sizeof h, &m, sizeof m);
  if (m.nargs) std::memcpy(out.data() + net::data_header_bytes, args, 4u * m.nargs);
  if (payload_bytes) std::memcpy(out.data() + net::data_header_bytes + 4u * m.nargs, payload, payload_bytes);
  return out;
}

/// A data datagram packing several whole messages (`ms[i]` with its nargs
/// words from `args` and, for a medium or long, its whole payload from
/// `payload`), all of one channel, as network::send() packs them.
inline bytes make_packed(const addressing& a, const std::vector<net::message_header>& ms, const uint32_t* args,
                         const std::byte* payload) {
  const auto kind = static_cast<net::msg_kind>(ms.front().kind);
  net::datagram_header h = header_of(a, net::datagram_type::data,
                                     net::is_request(kind) ? net::channel::request : net::channel::reply);
  h.records = static_cast<uint32_t>(ms.size());
  bytes out(sizeof h);
  std::memcpy(out.data(), &h, sizeof h);
  for (const net::message_header& m : ms) {
    const size_t at = out.size();
    out.resize(at + net::record_bytes(m));
    std::memcpy(out.data() + at, &m, sizeof m);
    if (m.nargs) std::memcpy(out.data() + at + sizeof m, args, 4u * m.nargs);
    if (const size_t p = net::record_bytes(m) - sizeof m - 4u * m.nargs)
      std::memcpy(out.data() + at + sizeof m + 4u * m.nargs, payload, p);
  }
  return out;
}

struct example {
  std::string name;
  bytes datagram;
};

/// One valid datagram of every kind and shape decode() accepts: an ack; short
/// messages of 0, 1 and 20 argument words; whole mediums (empty, small);
/// the first, a middle and the last fragment of a longer medium and of a
/// long, and a long by a read; a get; the replies; a returned message. `dst_slot` and `handler` go
/// in every message header, `tag` as the tag it is sent with.
inline std::vector<example> valid_examples(const addressing& a, uint8_t dst_slot, uint8_t handler, uint64_t tag) {
  using net::msg_kind;
  uint32_t args[net::max_args];
  for (unsigned i = 0; i < net::max_args; ++i) args[i] = 0x1000u + i;
  std::byte payload[300];
  for (size_t i = 0; i < sizeof payload; ++i) payload[i] = static_cast<std::byte>(i * 7 + 1);

  auto header = [&](msg_kind k, unsigned nargs, uint32_t length, uint32_t frag_offset) {
    net::message_header m{};
    m.kind = static_cast<uint8_t>(k);
    m.handler = handler;
    m.nargs = static_cast<uint8_t>(nargs);
    m.src_slot = 0;
    m.dst_slot = dst_slot;
    m.msg_id = a.seq;
    m.dst_gen = 1;  // the first endpoint of its slot (the runtime's)
    m.src_gen = 1;
    m.tag = tag;
    m.src_tag = tag ^ 0x5555;
    m.length = length;
    m.frag_offset = frag_offset;
    return m;
  };
  std::vector<example> out;
  auto add = [&](std::string name, const net::message_header& m, size_t payload_bytes) {
    out.push_back({std::move(name), make_data(a, m, args, payload, payload_bytes)});
  };
  out.push_back({"ack", make_ack(a)});
  add("short_request_0", header(msg_kind::short_request, 0, 0, 0), 0);
  add("short_request_1", header(msg_kind::short_request, 1, 0, 0), 0);
  add("short_request_20", header(msg_kind::short_request, net::max_args, 0, 0), 0);
  add("medium_request_empty", header(msg_kind::medium_request, 2, 0, 0), 0);
  add("medium_request_whole", header(msg_kind::medium_request, 3, 100, 0), 100);
  add("medium_request_first", header(msg_kind::medium_request, 4, 1000, 0), 300);
  add("medium_request_middle", header(msg_kind::medium_request, 4, 1000, 300), 300);
  add("medium_request_last", header(msg_kind::medium_request, 4, 1000, 900), 100);
  {
    net::message_header m = header(msg_kind::long_request, 5, 600, 0);
    m.offset = 4096;
    add("long_request_first", m, 300);
    m.frag_offset = 300;
    add("long_request_last", m, 300);
    // By a read: the datagram says where the sender's payload is (net::read_source).
    m.frag_offset = 0;
    m.length = 1 << 20;
    m.how = net::how_read;
    add("long_request_by_read", m, sizeof(net::read_source));
  }
  {
    net::message_header m = header(msg_kind::get_request, 1, 65536, 0);
    m.offset = 128;   // where to read at the destination
    m.aux = 8192;     // where the data lands at the requester
    add("get_request", m, 0);
  }
  add("short_reply_2", header(msg_kind::short_reply, 2, 0, 0), 0);
  add("medium_reply_whole", header(msg_kind::medium_reply, 1, 64, 0), 64);
  {
    net::message_header m = header(msg_kind::long_reply, 0, 200, 0);
    m.offset = 64;
    add("long_reply_whole", m, 200);
  }
  {
    net::message_header m = header(msg_kind::returned, 3, 17, 0);
    m.aux = 3 | (1u << 8);  // bad tag, of a short request
    add("returned", m, 0);
  }
  // Packed: shorts, a medium and a long (a store) in one request datagram;
  // replies and a returned message in one reply datagram.
  {
    net::message_header lng = header(msg_kind::long_request, 2, 48, 0);
    lng.offset = 256;
    out.push_back({"packed_requests",
                   make_packed(a,
                               {header(msg_kind::short_request, 0, 0, 0), header(msg_kind::short_request, 3, 0, 0),
                                header(msg_kind::medium_request, 1, 100, 0), lng,
                                header(msg_kind::short_request, net::max_args, 0, 0)},
                               args, payload)});
    out.push_back({"packed_replies",
                   make_packed(a,
                               {header(msg_kind::short_reply, 2, 0, 0), header(msg_kind::medium_reply, 0, 64, 0),
                                header(msg_kind::returned, 1, 9, 0)},
                               args, payload)});
  }
  return out;
}

}  // namespace clump::fuzz
