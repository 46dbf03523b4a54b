// Jobs across hosts: with --hosts and an ssh template (or --remote), the
// clumprun the user runs (the head) starts one clumprun per host (an agent)
// through the spawn template, e.g. `ssh HOST clumprun --agent ...`. The agent
// connects back to the head over TCP; the two prove to each other that they
// share the job's secret (which the head gave the agent on its standard
// input, not on the command line: see handshake.hpp); the agent then
// receives the job's id and the user's CLUMP_* settings, and starts that
// host's ranks as a local clumprun would: boot socketpairs, core binding,
// --label. It then relays.
//
// Relaying keeps the boot protocol of src/boot/wire.hpp untouched, on both
// ends: every frame a rank sends to its agent goes to the head wrapped in a
// `relay` frame, and the head writes it, unwrapped, into one end of a
// socketpair whose other end is that rank's "boot socket" in the head's
// job_runner, so the rendezvous, the collectives, getenv and exit run exactly
// as for local ranks. The way back is the same. Descriptors cannot cross
// hosts: a rank's region descriptor stays with its agent, and the agent gives
// each rank the regions of its own host's ranks and a placeholder (never
// mapped: the rank reaches other hosts over the network) for the others.
//
// Processes stay with the agent (it reaps its ranks and reports each exit
// status; the head judges it as for a local rank); signals go the other way
// in `signal` frames. A lost connection ends the job: the head treats that
// host's ranks as failed, and the agent ends its ranks when the head is gone.
//
// Conversation on the TCP stream (frames as in wire.hpp, without descriptors):
//   H -> A  challenge {version, nonce_h}          (at once; see handshake.hpp)
//   A -> H  hello {version, node, nonce_a, proof_a}
//   H -> A  welcome {proof_h, job id}
//   H -> A  agent_env  "NAME=VALUE\0"...   (the head's CLUMP_* variables)
//   A -> H  started {rank, pid}            (for each rank it started)
//   A <-> H relay {rank, type, nfds} + the frame's payload
//   H -> A  signal {rank or -1, signal}
//   A -> H  exited {rank, wait status}

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "job_runner.hpp"

extern char** environ;

namespace clumprun {

namespace {

namespace agent_wire {
// Frame types of the head-agent stream (beyond the boot protocol's).
constexpr auto hello = static_cast<wire::msg>(100);
constexpr auto env = static_cast<wire::msg>(101);
constexpr auto relay = static_cast<wire::msg>(102);
constexpr auto started = static_cast<wire::msg>(103);
constexpr auto exited = static_cast<wire::msg>(104);
constexpr auto signal = static_cast<wire::msg>(105);
constexpr auto challenge = static_cast<wire::msg>(106);
constexpr auto welcome = static_cast<wire::msg>(107);

struct challenge_body {
  uint32_t version;  // wire::protocol_version
  uint32_t reserved;
  handshake::nonce nonce;
};
struct hello_body {
  uint32_t version;  // wire::protocol_version
  int32_t node;
  handshake::nonce nonce;
  handshake::proof proof;
};
struct welcome_body {
  handshake::proof proof;
  uint64_t job_id;
};
// What a connection may send before it has proved itself, and how long it has.
constexpr uint64_t unproven_payload = 256;
constexpr auto prove_within = std::chrono::seconds(10);
struct relay_body {
  int32_t rank;
  uint16_t type;  // the relayed frame's
  uint16_t nfds;  // descriptors it carried (the other side supplies its own)
};
struct rank_body {
  int32_t rank;   // -1: every rank of the host (signal)
  int32_t value;  // pid, wait status or signal number
};
}  // namespace agent_wire

// How long an agent may take to connect back (ssh may ask a slow DNS, load
// keys, start a shell), and how long an agent waits for the head's answers.
constexpr auto connect_within = std::chrono::seconds(30);
constexpr int agent_wait_ms = 30'000;

std::string errno_text() { return std::strerror(errno); }

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

/// The first IPv4 address of an interface that is up and not loopback, else 127.0.0.1.
std::string own_address() {
  ifaddrs* list = nullptr;
  std::string found = "127.0.0.1";
  if (::getifaddrs(&list) != 0) return found;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    char text[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    found = text;
    break;
  }
  ::freeifaddrs(list);
  return found;
}

/// 'word' for a POSIX shell (ssh hands its command to the remote user's shell).
std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// Sends everything queued on `c`, waiting at most `ms` (for the last words
/// of a process that is about to exit).
void drain(connection& c, int ms) {
  const auto until = steady::now() + std::chrono::milliseconds(ms);
  while (c.fd >= 0 && !c.out.empty() && steady::now() < until) {
    if (c.out.flush(c.fd) < 0) return;
    pollfd p{c.fd, POLLOUT, 0};
    ::poll(&p, 1, 100);
  }
}

/// Waits for and returns the next frame on `c`; false on EOF, error, a bad
/// stream or after `ms`.
bool next_frame(connection& c, frame& f, int ms, std::string& why) {
  const auto until = steady::now() + std::chrono::milliseconds(ms);
  for (;;) {
    auto r = c.in.next(f, why);
    if (r == frame_reader::result::frame) return true;
    if (r == frame_reader::result::bad) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - steady::now()).count();
    if (left <= 0) {
      why = "no answer";
      return false;
    }
    pollfd p{c.fd, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left));
    ssize_t n = c.in.fill(c.fd);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      why = n == 0 ? "the connection closed" : errno_text();
      return false;
    }
  }
}

/// Wraps boot frame `f` of `rank` in a relay frame on `c` (its descriptors
/// stay behind; the frame says how many there were) and sends what it can.
void relay(connection& c, int rank, frame& f) {
  agent_wire::relay_body rb{rank, static_cast<uint16_t>(f.type), static_cast<uint16_t>(f.fds.size())};
  auto payload = std::make_shared<std::vector<std::byte>>(std::move(f.payload));
  c.out.push_body(agent_wire::relay, rb, *payload, {}, payload);
  c.out.flush(c.fd);
}

}  // namespace

connection::~connection() {
  if (fd >= 0) ::close(fd);
}

relay_end::~relay_end() {
  if (fd >= 0) ::close(fd);
}

// ---- the head ----------------------------------------------------------------

bool job_runner::start_remote() {
  std::string address = o_.boot_address == "auto" || o_.boot_address.empty() ? own_address() : o_.boot_address;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1) {
    end_job(1, fmt::format("--boot-address {}: not an IPv4 address of this machine", address));
    return false;
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  socklen_t len = sizeof a;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 64) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    end_job(1, fmt::format("cannot listen for the hosts' agents on {}: {} (set --boot-address to an address of "
                           "this machine that the hosts can reach)",
                           address, errno_text()));
    return false;
  }
  listen_text_ = fmt::format("{}:{}", address, ntohs(a.sin_port));
  if (!handshake::available()) {
    end_job(1, "jobs across hosts need a clumprun built with libsodium (its agents and the head prove to each other "
               "that they belong to the job, and the ranks authenticate their datagrams): install libsodium-dev "
               "and rebuild clump");
    return false;
  }
  if (!handshake::random(secret_.data(), secret_.size())) {
    end_job(1, fmt::format("getrandom failed: {}", errno_text()));
    return false;
  }
  placeholder_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  // Each rank's boot socket is a socketpair whose other end is the relay.
  for (auto& rp : ranks_) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      end_job(1, fmt::format("socketpair failed: {}", errno_text()));
      return false;
    }
    rp->remote = true;
    rp->sock = sv[0];
    set_nonblocking(sv[0]);
    set_nonblocking(sv[1]);
    relays_.push_back(std::make_unique<relay_end>());
    relays_.back()->fd = sv[1];
    ++live_;
  }
  hosts_.resize(static_cast<size_t>(o_.nodes.node_count));
  connect_by_ = steady::now() + connect_within;
  for (int k = 0; k < o_.nodes.node_count && !ending_; ++k) {
    hosts_[static_cast<size_t>(k)].node = k;
    spawn_agent(hosts_[static_cast<size_t>(k)]);
  }
  if (o_.verbose) say(fmt::format("agents connect to {}", listen_text_));
  return !ending_;
}

void job_runner::spawn_agent(host_link& h) {
  const std::string& host = o_.nodes.hosts[static_cast<size_t>(h.node)];
  std::vector<std::string> words = spawn_words(o_.nodes, h.node);
  // No job id or secret on the command line: every user of the host can read it.
  std::vector<std::string> agent = {o_.self, "--agent", listen_text_, "--agent-node", std::to_string(h.node)};
  agent.insert(agent.end(), o_.own_arguments.begin(), o_.own_arguments.end());
  for (auto& w : agent) words.push_back(o_.quote_for_shell ? shell_quote(w) : w);
  // The secret and the datagram key go in through a pipe on the agent's
  // standard input (ssh carries it encrypted): never on a command line,
  // which every user of the host can read.
  int key_pipe[2];
  if (::pipe2(key_pipe, O_CLOEXEC) != 0)
    return end_job(1, fmt::format("could not start the agent for host {}: pipe: {}", host, errno_text()));
  const std::string line = handshake::to_hex(secret_.data(), secret_.size()) + "\n" +
                           handshake::to_hex(o_.net_key.data(), o_.net_key.size()) + "\n";
  [[maybe_unused]] ssize_t w = ::write(key_pipe[1], line.data(), line.size());
  ::close(key_pipe[1]);
  std::vector<char*> argv;
  for (auto& a : words) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    ::sigprocmask(SIG_SETMASK, &orig_mask_, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(key_pipe[0], STDIN_FILENO);
    ::execve(o_.program.c_str(), argv.data(), environ);
    ::dprintf(STDERR_FILENO, "clumprun: cannot run '%s' for host %s: %s\n", o_.program.c_str(), host.c_str(),
              std::strerror(errno));
    ::_exit(127);
  }
  int e = errno;
  ::close(key_pipe[0]);
  if (pid < 0) return end_job(1, fmt::format("could not start the agent for host {}: fork: {}", host, std::strerror(e)));
  ::setpgid(pid, pid);
  h.agent_pid = pid;
  ++live_;
  if (o_.verbose >= 2) {
    std::string text;
    for (auto& word : words) text += (text.empty() ? "" : " ") + word;
    say(fmt::format("host {}: {}", host, text));
  }
}

void job_runner::on_accept() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<connection>();
    c->fd = fd;
    // Until it proves itself: a small frame at most, a few seconds, and the challenge now.
    c->in.limit(agent_wire::unproven_payload);
    c->prove_by = steady::now() + agent_wire::prove_within;
    if (!handshake::random(c->challenge.data(), c->challenge.size())) continue;
    c->out.push_body(agent_wire::challenge, agent_wire::challenge_body{wire::protocol_version, 0, c->challenge});
    c->out.flush(c->fd);
    pending_.push_back(std::move(c));
  }
}

// A connection that has not proved it belongs to the job: the first frame
// must be a hello that answers its challenge; anything else is dropped.
void job_runner::on_pending(size_t i) {
  connection& c = *pending_[i];
  ssize_t n = c.in.fill(c.fd);
  frame f;
  std::string why;
  auto drop = [&](const char* what) {
    if (o_.verbose) say(fmt::format("refused a connection to {}: {}", listen_text_, what));
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
  };
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return drop("it closed");
  auto r = c.in.next(f, why);
  if (r == frame_reader::result::need_more) return;
  agent_wire::hello_body h{};
  if (r == frame_reader::result::bad || f.type != agent_wire::hello || f.payload.size() != sizeof h)
    return drop("it sent something other than a hello");
  std::memcpy(&h, f.payload.data(), sizeof h);
  if (h.node < 0 || h.node >= static_cast<int>(hosts_.size()) ||
      !handshake::verify(secret_, 'A', h.node, c.challenge, h.nonce, h.proof))
    return drop("it did not prove it knows this job's secret");
  host_link& link = hosts_[static_cast<size_t>(h.node)];
  if (h.version != wire::protocol_version || link.conn) {
    return end_job(1, fmt::format("host {}: {}; ending the job", o_.nodes.hosts[static_cast<size_t>(h.node)],
                                  link.conn ? "a second agent connected"
                                            : fmt::format("its clumprun speaks boot protocol version {}, this one "
                                                          "version {}: install the same clump on every host",
                                                          h.version, wire::protocol_version)));
  }
  link.conn = std::move(pending_[i]);
  link.connected = true;
  pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
  link.conn->in.limit(wire::max_payload);
  // Our half: the answer to its challenge, and the job's id.
  link.conn->out.push_body(agent_wire::welcome,
                           agent_wire::welcome_body{handshake::prove(secret_, 'H', h.node, h.nonce, link.conn->challenge),
                                                    o_.job_id});
  // The user's settings: ssh does not carry the environment.
  std::string env;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "CLUMP_", 6) == 0) env.append(*e).push_back('\0');
  auto text = std::make_shared<std::string>(std::move(env));
  link.conn->out.push(agent_wire::env, std::as_bytes(std::span(text->data(), text->size())), {}, {}, text);
  link.conn->out.flush(link.conn->fd);
  if (o_.verbose) say(fmt::format("host {}: agent connected", o_.nodes.hosts[static_cast<size_t>(h.node)]));
  // Every agent has joined: nobody else may connect.
  if (std::all_of(hosts_.begin(), hosts_.end(), [](const host_link& l) { return l.connected; })) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    pending_.clear();
  }
}

void job_runner::on_link(host_link& h, short revents) {
  connection& c = *h.conn;
  if (revents & POLLOUT) c.out.flush(c.fd);
  if (!(revents & (POLLIN | POLLHUP | POLLERR))) return;
  ssize_t n = c.in.fill(c.fd);
  frame f;
  std::string why;
  while (h.conn) {
    auto r = c.in.next(f, why);
    if (r == frame_reader::result::need_more) break;
    if (r == frame_reader::result::bad) return link_lost(h, why);
    agent_wire::relay_body rb{};
    agent_wire::rank_body b{};
    const bool relayed = f.type == agent_wire::relay && wire::read_body(f.payload.data(), f.payload.size(), rb);
    const bool about_rank = !relayed && wire::read_body(f.payload.data(), f.payload.size(), b);
    const int rank = relayed ? rb.rank : b.rank;
    if ((!relayed && !about_rank) || rank < 0 || rank >= n_ ||
        o_.nodes.node_of[static_cast<size_t>(rank)] != h.node || rb.nfds > wire::max_fds_per_frame)
      return link_lost(h, "its agent sent a malformed frame");
    rank_proc& rp = *ranks_[static_cast<size_t>(rank)];
    relay_end& re = *relays_[static_cast<size_t>(rank)];
    if (relayed) {
      // Into the rank's boot socket, with stand-in descriptors (a hello
      // announces one: the region stays on the rank's host).
      std::vector<int> fds(rb.nfds, placeholder_fd_);
      auto payload = std::make_shared<std::vector<std::byte>>(f.payload.begin() + sizeof rb, f.payload.end());
      re.out.push(static_cast<wire::msg>(rb.type), {}, *payload, fds, payload);
      if (re.fd >= 0) re.out.flush(re.fd);
      read_socket(rp);
    } else if (f.type == agent_wire::started) {
      rp.pid = b.value;
      if (o_.verbose) say(fmt::format("rank {}: pid {} on {}", rank, b.value, o_.nodes.hosts[static_cast<size_t>(h.node)]));
    } else if (f.type == agent_wire::exited && !rp.exited) {
      // What the rank said before it died comes first, as for a local rank.
      if (re.fd >= 0) re.out.flush(re.fd);
      if (rp.sock >= 0) read_socket(rp);
      on_rank_exit(rp, b.value);
    }
  }
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
    link_lost(h, n == 0 ? "the connection to its agent closed" : "the connection to its agent failed: " + errno_text());
}

// What the head's boot code sent to a remote rank: on to its agent.
void job_runner::on_relay_end(int rank, short revents) {
  relay_end& re = *relays_[static_cast<size_t>(rank)];
  if (revents & POLLOUT) re.out.flush(re.fd);
  if (!(revents & (POLLIN | POLLHUP | POLLERR))) return;
  ssize_t n = re.in.fill(re.fd);
  frame f;
  std::string why;
  host_link& h = hosts_[static_cast<size_t>(o_.nodes.node_of[static_cast<size_t>(rank)])];
  while (re.in.next(f, why) == frame_reader::result::frame) {
    for (int fd : f.fds) ::close(fd);  // the regions of this host: they cannot travel
    if (!h.conn) continue;             // the agent is gone: the rank is (or will be) counted as lost
    relay(*h.conn, rank, f);
  }
  if (n == 0) {
    ::close(re.fd);
    re.fd = -1;
  }
}

// The connection to a host is gone: its ranks that have not been reported
// as ended are lost.
void job_runner::link_lost(host_link& h, const std::string& why) {
  h.conn.reset();
  const std::string& host = o_.nodes.hosts[static_cast<size_t>(h.node)];
  for (auto& rp : ranks_) {
    if (rp->exited || o_.nodes.node_of[static_cast<size_t>(rp->rank)] != h.node) continue;
    rp->exited = true;
    --live_;
    close_socket(*rp);
    rank_failed(1, fmt::format("host {}: {}; rank {} is lost", host, why, rp->rank));
  }
}

void job_runner::on_agent_exit(host_link& h, int st) {
  h.agent_exited = true;
  --live_;
  std::string how = WIFEXITED(st) ? fmt::format("exited with code {}", WEXITSTATUS(st))
                                  : fmt::format("was killed by signal {}", WTERMSIG(st));
  if (h.conn) on_link(h, POLLIN);  // its last frames (the exits it reported) may still be in the socket
  bool running = false;
  for (auto& rp : ranks_) running |= !rp->exited && o_.nodes.node_of[static_cast<size_t>(rp->rank)] == h.node;
  if (!running) {
    h.conn.reset();
  } else if (h.connected) {
    link_lost(h, fmt::format("its agent {}", how));
  } else {
    // It never connected: the template or the host is at fault.
    link_lost(h, fmt::format("the command that starts clumprun there {} before it connected back to {} (can this "
                             "machine run '{}' there, is clumprun at {} there, and can the host reach {}? "
                             "--boot-address picks the address)",
                             how, listen_text_, fmt::join(spawn_words(o_.nodes, h.node), " "), o_.self,
                             listen_text_));
  }
}

void job_runner::check_links(steady::time_point now) {
  // Connections that have not proved themselves in time are dropped.
  std::erase_if(pending_, [&](const std::unique_ptr<connection>& c) { return now >= c->prove_by; });
  if (ending_ || now < connect_by_) return;
  for (auto& h : hosts_)
    if (!h.conn && !h.agent_exited && h.agent_pid > 0) {
      bool waiting = false;
      for (auto& rp : ranks_) waiting |= !rp->exited && o_.nodes.node_of[static_cast<size_t>(rp->rank)] == h.node;
      if (waiting)
        return end_job(1, fmt::format("host {}: clumprun there did not connect back to {} within {} s (can the "
                                      "host reach that address? --boot-address picks it); ending the job",
                                      o_.nodes.hosts[static_cast<size_t>(h.node)], listen_text_,
                                      std::chrono::duration_cast<std::chrono::seconds>(connect_within).count()));
    }
}

void job_runner::signal_remote(const rank_proc& rp, int sig) {
  host_link& h = hosts_[static_cast<size_t>(o_.nodes.node_of[static_cast<size_t>(rp.rank)])];
  if (h.conn) {
    h.conn->out.push_body(agent_wire::signal, agent_wire::rank_body{rp.rank, sig});
    h.conn->out.flush(h.conn->fd);
  }
}

// ---- the agent ---------------------------------------------------------------

bool job_runner::start_agent() {
  agent_ = true;
  // The secret and the datagram key: the first two lines of standard input.
  char buf[256];
  size_t got = 0;
  for (int lines = 0; got < sizeof buf && lines < 2;) {
    ssize_t n = ::read(STDIN_FILENO, buf + got, sizeof buf - got);
    if (n <= 0) break;
    for (ssize_t k = 0; k < n; ++k) lines += buf[got + static_cast<size_t>(k)] == '\n';
    got += static_cast<size_t>(n);
  }
  const std::string text(buf, got);
  const size_t nl = text.find('\n');
  if (nl == std::string::npos || !handshake::from_hex(text.substr(0, nl), secret_.data(), secret_.size()) ||
      !handshake::from_hex(text.substr(nl + 1, text.find('\n', nl + 1) - nl - 1), agent_net_key_.data(),
                           agent_net_key_.size())) {
    say("--agent is clumprun's own: the head starts it with the job's secret on standard input");
    exit_code_ = 1;
    return false;
  }
  if (!handshake::available()) {
    say("this clumprun was built without libsodium: it cannot prove to the head that it belongs to the job; "
        "install libsodium-dev and rebuild clump on this host");
    exit_code_ = 1;
    return false;
  }
  // Connect to the head.
  const size_t colon = o_.head.rfind(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (colon == std::string::npos || ::inet_pton(AF_INET, o_.head.substr(0, colon).c_str(), &a.sin_addr) != 1) {
    say(fmt::format("--agent {}: give the head's address as a.b.c.d:port", o_.head));
    exit_code_ = 1;
    return false;
  }
  a.sin_port = htons(static_cast<uint16_t>(std::atoi(o_.head.c_str() + colon + 1)));
  head_ = std::make_unique<connection>();
  head_->fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{agent_wait_ms / 1000, 0};
  ::setsockopt(head_->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (head_->fd < 0 || ::connect(head_->fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    say(fmt::format("cannot connect to clumprun at {}: {} (is that address reachable from here? clumprun "
                    "--boot-address picks it)",
                    o_.head, errno_text()));
    exit_code_ = 1;
    return false;
  }
  set_nonblocking(head_->fd);
  int one = 1;
  ::setsockopt(head_->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // The head proves itself before we trust a byte of it: small frames until then.
  head_->in.limit(agent_wire::unproven_payload);
  frame f;
  std::string why;
  agent_wire::challenge_body ch{};
  if (!next_frame(*head_, f, agent_wait_ms, why) || f.type != agent_wire::challenge ||
      !wire::read_body(f.payload.data(), f.payload.size(), ch) || ch.version != wire::protocol_version) {
    say(fmt::format("clumprun at {} did not challenge this host as a clumprun of this version does: {}", o_.head,
                    why.empty() ? "another program, or another version" : why));
    exit_code_ = 1;
    return false;
  }
  agent_wire::hello_body h{wire::protocol_version, o_.agent_node, {}, {}};
  if (!handshake::random(h.nonce.data(), h.nonce.size())) {
    say(fmt::format("getrandom failed: {}", errno_text()));
    exit_code_ = 1;
    return false;
  }
  h.proof = handshake::prove(secret_, 'A', o_.agent_node, ch.nonce, h.nonce);
  head_->out.push_body(agent_wire::hello, h);
  drain(*head_, agent_wait_ms);
  agent_wire::welcome_body w{};
  if (!next_frame(*head_, f, agent_wait_ms, why) || f.type != agent_wire::welcome ||
      !wire::read_body(f.payload.data(), f.payload.size(), w) ||
      !handshake::verify(secret_, 'H', o_.agent_node, h.nonce, ch.nonce, w.proof)) {
    say(fmt::format("clumprun at {} did not prove it runs this job{}; refusing it", o_.head,
                    why.empty() ? "" : ": " + why));
    exit_code_ = 1;
    return false;
  }
  agent_job_id_ = w.job_id;
  head_->in.limit(wire::max_payload);
  if (!next_frame(*head_, f, agent_wait_ms, why) || f.type != agent_wire::env) {
    say(fmt::format("clumprun at {} did not accept this host: {}", o_.head, why.empty() ? "refused" : why));
    exit_code_ = 1;
    return false;
  }
  // The head's settings win over this host's.
  for (size_t at = 0; at < f.payload.size();) {
    const char* text = reinterpret_cast<const char*>(f.payload.data() + at);
    const size_t len = ::strnlen(text, f.payload.size() - at);
    std::string entry(text, len);
    at += len + 1;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::erase_if(base_env_, [&](const std::string& e) { return e.compare(0, eq + 1, entry, 0, eq + 1) == 0; });
    base_env_.push_back(entry);
  }
  placeholder_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  return true;
}

void job_runner::agent_started(const rank_proc& rp) {
  head_->out.push_body(agent_wire::started, agent_wire::rank_body{rp.rank, rp.pid});
  head_->out.flush(head_->fd);
}

void job_runner::agent_relay_from_rank(rank_proc& rp, frame& f) {
  if (f.type == wire::msg::hello && f.fds.size() == 1 && rp.region_fd < 0)
    rp.region_fd = std::exchange(f.fds[0], -1);  // stays here, for this host's ranks
  relay(*head_, rp.rank, f);
}

void job_runner::on_head(short revents) {
  if (!head_ || head_->fd < 0) return;
  if (revents & POLLOUT) head_->out.flush(head_->fd);
  if (!(revents & (POLLIN | POLLHUP | POLLERR))) return;
  ssize_t n = head_->in.fill(head_->fd);
  frame f;
  std::string why;
  for (;;) {
    auto r = head_->in.next(f, why);
    if (r == frame_reader::result::need_more) break;
    if (r == frame_reader::result::bad) {
      n = 0;
      break;
    }
    agent_wire::relay_body rb{};
    agent_wire::rank_body b{};
    if (f.type == agent_wire::signal && wire::read_body(f.payload.data(), f.payload.size(), b)) {
      for (auto& rp : ranks_)
        if ((b.rank < 0 || b.rank == rp->rank) && rp->pid > 0) send_signal(*rp, b.value);
      continue;
    }
    if (f.type != agent_wire::relay || !wire::read_body(f.payload.data(), f.payload.size(), rb) || rb.rank < 0 ||
        rb.rank >= n_ || o_.nodes.node_of[static_cast<size_t>(rb.rank)] != o_.agent_node)
      continue;
    rank_proc& rp = *ranks_[static_cast<size_t>(rb.rank)];
    if (rp.sock < 0) continue;
    std::span<const std::byte> payload(f.payload.data() + sizeof rb, f.payload.size() - sizeof rb);
    std::vector<int> fds;
    wire::region_fds_body rf{};
    if (static_cast<wire::msg>(rb.type) == wire::msg::region_fds && wire::read_body(payload.data(), payload.size(), rf) &&
        rf.first_rank >= 0 && rf.count >= 0 && rf.first_rank + rf.count <= n_) {
      // This host's regions, and a stand-in for every other host's.
      for (int r = rf.first_rank; r < rf.first_rank + rf.count; ++r) {
        const rank_proc& q = *ranks_[static_cast<size_t>(r)];
        fds.push_back(q.region_fd >= 0 ? q.region_fd : placeholder_fd_);
      }
    }
    auto copy = std::make_shared<std::vector<std::byte>>(payload.begin(), payload.end());
    // The datagram key never crossed the network: the head left it out of
    // the job message of this host's ranks, and this agent puts it in.
    wire::job_body jb{};
    if (static_cast<wire::msg>(rb.type) == wire::msg::job && wire::read_body(copy->data(), copy->size(), jb) &&
        (jb.flags & wire::job_authenticated)) {
      std::memcpy(jb.net_key, agent_net_key_.data(), sizeof jb.net_key);
      std::memcpy(copy->data(), &jb, sizeof jb);
    }
    rp.out.push(static_cast<wire::msg>(rb.type), {}, *copy, fds, copy);
    send_pending(rp);
  }
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
    head_->fd >= 0 ? (void)::close(head_->fd) : (void)0;
    head_->fd = -1;
    if (live_ > 0) end_job(1, fmt::format("lost the connection to clumprun at {}; ending this host's ranks", o_.head));
  }
}

void job_runner::agent_rank_exited(rank_proc& rp, int st) {
  rp.exited = true;
  --live_;
  if (rp.sock >= 0) close_socket(rp);
  // Only this host can tell that its memory ran out: say so here (the head says how the rank died).
  if (const std::string note = oom_note(st); !note.empty())
    say(fmt::format("rank {} (pid {}) was killed{}", rp.rank, rp.pid, note));
  if (!head_ || head_->fd < 0) return;
  head_->out.push_body(agent_wire::exited, agent_wire::rank_body{rp.rank, st});
  head_->out.flush(head_->fd);
}

void job_runner::flush_head() {
  if (head_) drain(*head_, 5000);
}

void job_runner::remote_fds(std::vector<pollfd>& fds, std::vector<std::function<void(short)>>& handlers) {
  auto add = [&](int fd, bool out, std::function<void(short)> f) {
    fds.push_back({fd, static_cast<short>(POLLIN | (out ? POLLOUT : 0)), 0});
    handlers.push_back(std::move(f));
  };
  if (agent_) {
    if (head_ && head_->fd >= 0) add(head_->fd, !head_->out.empty(), [this](short ev) { on_head(ev); });
    return;
  }
  if (listen_fd_ >= 0) add(listen_fd_, false, [this](short) { on_accept(); });
  // Back to front: on_pending may drop the entry it handles.
  for (size_t i = pending_.size(); i-- > 0;) add(pending_[i]->fd, false, [this, i](short) { on_pending(i); });
  for (auto& h : hosts_)
    if (h.conn) add(h.conn->fd, !h.conn->out.empty(), [this, &h](short ev) {
        if (h.conn) on_link(h, ev);
      });
  for (size_t r = 0; r < relays_.size(); ++r)
    if (relays_[r]->fd >= 0)
      add(relays_[r]->fd, !relays_[r]->out.empty(), [this, r](short ev) { on_relay_end(static_cast<int>(r), ev); });
}

}  // namespace clumprun
