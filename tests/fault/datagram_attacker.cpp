// datagram_attacker: attacks a job that authenticates its datagrams
// (CLUMP_NET_AUTH=on; trust_test.cpp runs both), as a process of the same
// user on the same host could:
//
//   datagram_attacker --to IP:PORT --report FILE [--capture-ms MS] [--attack-ms MS]
//   datagram_attacker --garbage udp|tcp --to IP:PORT --report FILE [--attack-ms MS]
//
// It first captures the job's datagrams to IP:PORT off the wire (an
// AF_PACKET socket: root only; exits 77 without it), then, from a socket
// bound with SO_REUSEPORT to the very address and port they came from (the
// sending rank's own: the kernel lets a process of the same user share it),
// sends them back: as they were (replays), cut short (truncated), and with
// a byte changed outside their tag (forged), over and over. Nothing of it
// may be delivered; the job counts it all and goes on. The report holds
// "key value" lines: captured, replayed, truncated, forged.
//
// With --garbage it sends random bytes instead, as any process that can
// reach the port could (no root needed): udp, datagrams of 1 byte to 64 KB;
// tcp (a libfabric tcp provider's listening port), connections that each
// write a few chunks of random bytes, sometimes wait for an answer, and
// close. The report holds "datagrams N" or "connections N", and "bytes N".

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

using steady = std::chrono::steady_clock;

struct captured {
  sockaddr_in from;
  std::vector<unsigned char> bytes;
};

int usage() {
  std::fprintf(stderr,
               "usage: datagram_attacker --to IP:PORT --report FILE [--capture-ms MS] [--attack-ms MS]\n"
               "       datagram_attacker --garbage udp|tcp --to IP:PORT --report FILE [--attack-ms MS]\n");
  return 2;
}

uint64_t random_word() {
  static uint64_t r = 0x9e3779b97f4a7c15ull;
  r ^= r << 13;
  r ^= r >> 7;
  r ^= r << 17;
  return r;
}

std::vector<unsigned char> random_bytes(size_t n) {
  std::vector<unsigned char> b(n);
  for (auto& c : b) c = static_cast<unsigned char>(random_word());
  return b;
}

/// Random bytes into the port for `ms`: datagrams, or connections.
int send_garbage(bool tcp, const sockaddr_in& target, int ms, const std::string& report) {
  const size_t sizes[] = {1, 2, 7, 8, 16, 40, 64, 200, 1300, 1500, 9000, 65000};
  uint64_t sent = 0, bytes = 0, refused = 0;
  const auto until = steady::now() + std::chrono::milliseconds(ms);
  const int udp = tcp ? -1 : ::socket(AF_INET, SOCK_DGRAM, 0);
  while (steady::now() < until) {
    if (!tcp) {
      const auto b = random_bytes(sizes[random_word() % std::size(sizes)]);
      if (::sendto(udp, b.data(), b.size(), 0, reinterpret_cast<const sockaddr*>(&target), sizeof target) > 0)
        ++sent, bytes += b.size();
      if (sent % 64 == 63) ::usleep(1000);  // a pace the receiver's socket can take
      continue;
    }
    const int c = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(c, reinterpret_cast<const sockaddr*>(&target), sizeof target) != 0) {
      ++refused;
      ::close(c);
      ::usleep(1000);
      continue;
    }
    ++sent;
    for (uint64_t chunks = random_word() % 5; chunks > 0; --chunks) {
      const auto b = random_bytes(sizes[random_word() % std::size(sizes)]);
      const ssize_t n = ::send(c, b.data(), b.size(), MSG_NOSIGNAL);
      if (n <= 0) break;
      bytes += static_cast<uint64_t>(n);
    }
    if (random_word() % 2) {  // wait a little for whatever the provider answers
      pollfd p{c, POLLIN, 0};
      unsigned char answer[256];
      if (::poll(&p, 1, 20) > 0) (void)::recv(c, answer, sizeof answer, MSG_DONTWAIT);
    }
    ::close(c);
  }
  if (udp >= 0) ::close(udp);
  std::ofstream out(report);
  out << (tcp ? "connections " : "datagrams ") << sent << "\nbytes " << bytes << "\nrefused " << refused << "\n";
  std::printf("datagram_attacker: %llu %s of random bytes (%llu bytes) to port %u; %llu connections refused\n",
              static_cast<unsigned long long>(sent), tcp ? "connections" : "datagrams",
              static_cast<unsigned long long>(bytes), ntohs(target.sin_port), static_cast<unsigned long long>(refused));
  return sent > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string to, report, garbage;
  int capture_ms = 500, attack_ms = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--to") to = v;
    else if (k == "--report") report = v;
    else if (k == "--capture-ms") capture_ms = std::atoi(v.c_str());
    else if (k == "--attack-ms") attack_ms = std::atoi(v.c_str());
    else if (k == "--garbage" && (v == "udp" || v == "tcp")) garbage = v;
    else return usage();
  }
  const size_t colon = to.rfind(':');
  sockaddr_in target{};
  target.sin_family = AF_INET;
  if (to.empty() || report.empty() || colon == std::string::npos ||
      ::inet_pton(AF_INET, to.substr(0, colon).c_str(), &target.sin_addr) != 1)
    return usage();
  target.sin_port = htons(static_cast<uint16_t>(std::atoi(to.c_str() + colon + 1)));
  if (!garbage.empty()) return send_garbage(garbage == "tcp", target, attack_ms, report);

  // Capture: every IPv4 packet this host sees, the job's kept.
  const int sniff = ::socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_IP));
  if (sniff < 0) {
    std::fprintf(stderr, "datagram_attacker: skipped: an AF_PACKET socket needs root (%s)\n", std::strerror(errno));
    return 77;
  }
  std::vector<captured> caught;
  const auto capture_until = steady::now() + std::chrono::milliseconds(capture_ms);
  std::vector<unsigned char> buf(70000);
  while (steady::now() < capture_until && caught.size() < 400) {
    pollfd p{sniff, POLLIN, 0};
    if (::poll(&p, 1, 10) <= 0) continue;
    const ssize_t n = ::recv(sniff, buf.data(), buf.size(), 0);
    if (n < static_cast<ssize_t>(sizeof(iphdr) + sizeof(udphdr))) continue;
    iphdr ip;
    std::memcpy(&ip, buf.data(), sizeof ip);
    const size_t ihl = ip.ihl * 4u;
    if (ip.version != 4 || ip.protocol != IPPROTO_UDP || static_cast<size_t>(n) < ihl + sizeof(udphdr)) continue;
    udphdr udp;
    std::memcpy(&udp, buf.data() + ihl, sizeof udp);
    if (ip.daddr != target.sin_addr.s_addr || udp.dest != target.sin_port) continue;
    captured c;
    c.from.sin_family = AF_INET;
    c.from.sin_addr.s_addr = ip.saddr;
    c.from.sin_port = udp.source;
    const size_t payload = ntohs(udp.len) - sizeof udp;
    if (ihl + sizeof udp + payload > static_cast<size_t>(n)) continue;
    c.bytes.assign(buf.data() + ihl + sizeof udp, buf.data() + ihl + sizeof udp + payload);
    caught.push_back(std::move(c));
  }
  ::close(sniff);
  if (caught.empty()) {
    std::fprintf(stderr, "datagram_attacker: captured nothing to %s in %d ms\n", to.c_str(), capture_ms);
    return 1;
  }

  // Attack from the senders' own address and port (SO_REUSEPORT, as they
  // bound it), else from the same address on another port.
  auto socket_as = [](const sockaddr_in& a) {
    const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    const int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (::bind(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      sockaddr_in any = a;
      any.sin_port = 0;
      ::bind(s, reinterpret_cast<const sockaddr*>(&any), sizeof any);
    }
    return s;
  };
  const int as_sender = socket_as(caught.front().from);
  uint64_t replayed = 0, truncated = 0, forged = 0;
  auto next = random_word;
  auto send = [&](const std::vector<unsigned char>& b, size_t n) {
    while (::sendto(as_sender, b.data(), n, 0, reinterpret_cast<const sockaddr*>(&target), sizeof target) < 0 &&
           errno == EAGAIN) {
      pollfd p{as_sender, POLLOUT, 0};
      ::poll(&p, 1, 10);
    }
  };
  const auto attack_until = steady::now() + std::chrono::milliseconds(attack_ms);
  for (size_t i = 0; steady::now() < attack_until; ++i) {
    const captured& c = caught[i % caught.size()];
    switch (i % 3) {
      case 0:  // as it was
        send(c.bytes, c.bytes.size());
        ++replayed;
        break;
      case 1:  // cut short
        send(c.bytes, next() % c.bytes.size());
        ++truncated;
        break;
      case 2: {  // a byte changed, before its trailer (its 24 last bytes)
        std::vector<unsigned char> b = c.bytes;
        if (b.size() > 24) b[next() % (b.size() - 24)] ^= static_cast<unsigned char>(1 + next() % 255);
        send(b, b.size());
        ++forged;
        break;
      }
    }
    if (i % 64 == 63) {
      pollfd none{};
      ::poll(&none, 0, 1);  // a pace the receiver's socket can take
    }
  }
  ::close(as_sender);
  std::ofstream out(report);
  out << "captured " << caught.size() << "\nreplayed " << replayed << "\ntruncated " << truncated << "\nforged "
      << forged << "\n";
  std::printf("datagram_attacker: captured %zu datagrams to %s; sent %llu replayed, %llu truncated, %llu forged\n",
              caught.size(), to.c_str(), static_cast<unsigned long long>(replayed),
              static_cast<unsigned long long>(truncated), static_cast<unsigned long long>(forged));
  return 0;
}
