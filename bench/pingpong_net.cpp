#include "pingpong_net.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <fmt/core.h>

namespace pingpong {

namespace {

constexpr size_t counter_count = sizeof(clump::network_stats) / sizeof(uint64_t);
static_assert(sizeof(clump::network_stats) == counter_count * sizeof(uint64_t), "network_stats: uint64_t only");

/// A size setting as clump reads it ("65000", "64K", "1M"), or `fallback`.
size_t size_setting(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v, &end, 10);
  if (end == v) return fallback;
  switch (*end) {
    case 0: return x;
    case 'k': case 'K': return x << 10;
    case 'm': case 'M': return x << 20;
    default: return fallback;
  }
}

/// The buffers clump gives its socket (udp.cpp), as getsockopt reports them.
bench::socket_buffers as_clump_sizes_them() {
  const size_t mtu = clump_net_mtu();
  const size_t window = size_setting("CLUMP_NET_WINDOW", 64);
  const size_t want = std::max<size_t>(size_t{4} << 20, 2 * window * mtu);
  const int reported = static_cast<int>(std::min<size_t>(2 * want, INT_MAX));
  return {reported, reported};
}

}  // namespace

size_t clump_net_mtu() { return size_setting("CLUMP_NET_MTU", 65000); }

const char* to_string(path p) noexcept {
  switch (p) {
    case path::self: return "self";
    case path::shared_memory: return "shared memory";
    case path::network: return "network";
  }
  return "?";
}

path probe_path(clump::runtime& rt, state& st, handlers& h) {
  if (rt.size() == 1) return path::self;
  const uint64_t before = clump::network_statistics().messages_sent;
  if (rt.endpoint().request(1, h.ping2, uint64_t{7}) != clump::status::ok) die("the probe request failed");
  while (!st.done) rt.bundle().poll();
  st.done = false;
  return clump::network_statistics().messages_sent > before ? path::network : path::shared_memory;
}

void set_up_udp(clump::runtime& rt, bool open, udp_partner& u) {
  const bool mine = open && rt.rank() <= 1 && rt.size() > 1;
  sockaddr_in self{};
  if (mine) {
    std::string clump_address = clump::network_address();
    // Over libfabric (CLUMP_NET=ofi) the address reads "fi_sockaddr_in://a.b.c.d:port (lo)": the raw
    // sockets take its IP, and sizes of their own (clump has no UDP socket then).
    const bool over_ofi = clump_address.rfind("fi_sockaddr_in://", 0) == 0;
    if (over_ofi) clump_address = clump_address.substr(17, clump_address.find(' ') - 17);
    u.ip = clump_address.empty() ? "127.0.0.1" : clump_address.substr(0, clump_address.rfind(':'));
    const auto found =
        clump_address.empty() || over_ofi ? std::nullopt : bench::buffers_of_socket(clump_address);
    u.wanted = found ? *found : as_clump_sizes_them();
    u.wanted_from_clump = found.has_value();
    u.link = std::make_unique<bench::udp_link>(u.ip, u.wanted);
    self = u.link->address();
  }
  std::vector<sockaddr_in> all(static_cast<size_t>(rt.size()));
  rt.allgather(&self, all.data(), sizeof self);
  if (mine) u.link->connect_to(all[rt.rank() == 0 ? 1 : 0]);
}

nlohmann::json to_json(const clump::network_stats& s) {
  return {{"datagrams_sent", s.datagrams_sent},
          {"datagrams_received", s.datagrams_received},
          {"messages_sent", s.messages_sent},
          {"messages_delivered", s.messages_delivered},
          {"retransmits", s.retransmits},
          {"duplicates", s.duplicates},
          {"out_of_order", s.out_of_order},
          {"acks_sent", s.acks_sent},
          {"stalls", s.stalls},
          {"refused",
           {s.refused_truncated, s.refused_foreign, s.refused_version, s.refused_other_job, s.refused_bad_rank,
            s.refused_malformed}},
          {"fault_dropped", s.fault_dropped},
          {"fault_duplicated", s.fault_duplicated},
          {"fault_reordered", s.fault_reordered},
          {"fault_delayed", s.fault_delayed},
          {"peers_unreachable", s.peers_unreachable}};
}

void add_difference(clump::network_stats& sum, const clump::network_stats& now, const clump::network_stats& before) {
  uint64_t x[counter_count], y[counter_count], z[counter_count];
  std::memcpy(x, &sum, sizeof x);
  std::memcpy(y, &now, sizeof y);
  std::memcpy(z, &before, sizeof z);
  for (size_t i = 0; i < counter_count; ++i) x[i] += y[i] - z[i];
  std::memcpy(&sum, x, sizeof sum);
}

const char* const net_peers_latency =
    "quoted: raw UDP busy-poll 1.85, blocking 5.6; libfabric rxm/udp 4.1; GASNet-EX UDP 2.85; OpenMPI TCP 4.2; "
    "UCX TCP 4.5; MPICH UCX TCP 3.2 us";
const char* const net_peers_bandwidth =
    "quoted (1 MiB): raw 65000 B datagrams 10.6, MTU-sized 0.8; rxm/udp 0.67; GASNet-EX UDP 6.2; OpenMPI TCP 8.3; "
    "UCX TCP 7.9; MPICH UCX TCP 9.9 GB/s";

nlohmann::json net_peers_reference() {
  auto peer = [](double us, double gbps) {
    return nlohmann::json{{"one_way_8B_us", us}, {"bandwidth_1MiB_GB_per_s", gbps}};
  };
  return {{"source", "figures quoted in the issue (other machines), for scale only; not measured here"},
          {"raw_udp_busy_poll", {{"one_way_8B_us", 1.85}}},
          {"raw_udp_blocking", {{"one_way_8B_us", 5.6}}},
          {"raw_udp_65000B_datagrams", {{"bandwidth_1MiB_GB_per_s", 10.6}}},
          {"raw_udp_mtu_datagrams", {{"bandwidth_1MiB_GB_per_s", 0.8}}},
          {"libfabric_rxm_udp", peer(4.1, 0.67)},
          {"gasnet_ex_udp", peer(2.85, 6.2)},
          {"openmpi_tcp", peer(4.2, 8.3)},
          {"ucx_tcp", peer(4.5, 7.9)},
          {"mpich_ucx_tcp", peer(3.2, 9.9)}};
}

void describe_net(bench::report& rep, path to_peer, const udp_partner& u, int ranks) {
  rep.job["path_to_rank_1"] = to_string(to_peer);
  rep.job["network_address_rank_0"] = clump::network_address();
  if (ranks > 2)
    rep.notes.push_back(fmt::format("ranks 2..{} only wait (asleep in wait_until) until the end; their node is "
                                    "reached over the network, so rank 0's process has its network open",
                                    ranks - 1));
  if (!u.link) return;
  const bench::socket_buffers got = u.link->buffers();
  rep.config["raw_udp"] = {{"address", u.ip},
                           {"buffers_wanted", {{"receive", u.wanted.receive}, {"send", u.wanted.send}}},
                           {"buffers_wanted_from", u.wanted_from_clump ? "clump's socket" : "clump's sizing rule"},
                           {"buffers_granted", {{"receive", got.receive}, {"send", got.send}}}};
  rep.notes.push_back(fmt::format(
      "udp_*: raw UDP between the two ranks themselves, on their own cores, each on a socket of its own bound to {} "
      "beside clump's, with receive/send buffers of {}/{} bytes as getsockopt reports them ({}); connected sockets, "
      "send/recv",
      u.ip, got.receive, got.send,
      u.wanted_from_clump ? "the sizes of clump's own socket" : "as clump sizes its socket"));
  rep.notes.push_back("udp_pingpong_busy: an 8-byte datagram echoed back, each side spinning on recv(MSG_DONTWAIT); "
                      "round trip / 2. udp_pingpong_blocking: the same with both sides blocked in recv. "
                      "udp_pingpong_mmsg: busy-polling with the calls clump's socket makes: sendmmsg of one "
                      "datagram with the peer's address (the unconnected path), recvmmsg of up to 32 datagrams of "
                      "64 KiB with MSG_DONTWAIT");
  rep.notes.push_back(fmt::format(
      "udp_echo: a message of the given size in datagrams of at most {} bytes (CLUMP_NET_MTU, a 32-byte head in "
      "each), sent with one sendmmsg and echoed the same way once all of it has arrived, each side spinning on "
      "recvmmsg (32 datagrams of 64 KiB, MSG_DONTWAIT); round trip / 2: the kernel's share of a medium echo of "
      "that size, with no copy in user space",
      pingpong::clump_net_mtu()));
  rep.notes.push_back("udp_stream: datagrams of the given size sent back to back with sendmmsg (batches of 16), no "
                      "flow control; rank 1 drains them with recvmmsg (MSG_DONTWAIT, batches of 16) and counts; a "
                      "flush datagram answered with the count ends each loop; the figure is the bytes that arrived "
                      "(what the full receive buffer dropped is in the JSON's extra)");
  rep.notes.push_back(fmt::format(
      "udp_message_stream: udp_stream's loop with messages of the given size, each cut into datagrams of at most {} "
      "bytes (CLUMP_NET_MTU) with a 32-byte head each, as clump cuts a long message; the figure is the messages' "
      "bytes that arrived",
      pingpong::clump_net_mtu()));
  rep.notes.push_back("udp_rate_small: 8-byte datagrams sent back to back, one send() each, drained and counted as "
                      "udp_stream's; the figure is the datagrams that arrived, a second: the bound for a protocol "
                      "that sends a datagram per message");
  if (to_peer == path::network) {
    rep.notes.push_back("over the network the ratios compare latencies with udp_pingpong_busy (medium echoes above "
                        "8 bytes with udp_echo of their size) and bandwidths with udp_stream of clump's datagram "
                        "size (CLUMP_NET_MTU)");
    rep.legend =
        "ratio: over the network, a latency's median / the raw UDP busy-poll ping-pong's (8 B) median (a\n"
        "       medium echo above 8 B: / the raw echo's of its size, udp_echo), and a\n"
        "       bandwidth's median / the raw UDP stream's median (datagrams of CLUMP_NET_MTU bytes).\n"
        "cut:   samples whose loop hit its deadline (4 x the sample length): the cores were busy; noisy.\n"
        "peers: figures quoted from the issue for scale (raw UDP, libfabric rxm/udp, GASNet-EX UDP, OpenMPI,\n"
        "       UCX and MPICH over TCP, on other machines); NOT measured in this run, not comparable one to one.\n";
    rep.peers_reference = net_peers_reference();
  }
}

}  // namespace pingpong
