#include "ofi/link.hpp"

#include <clump/status.hpp>

#include "net/udp.hpp"
#include "ofi/fabric.hpp"

#if defined(CLUMP_HAVE_OFI)

#include <arpa/inet.h>
#include <sys/stat.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

#include "core/log.hpp"
#include "ofi/library.hpp"

namespace clump::ofi {

namespace {

constexpr const char* opening = "opening the libfabric endpoint (CLUMP_NET=ofi)";
constexpr size_t first_receives = 32;          // before any peer is known
constexpr size_t control_datagrams = 16;       // a peer's acks, probes and keep-alives beyond its windows
constexpr size_t receive_memory = size_t{64} << 20;  // the most the posted receives may take

/// libfabric's socket emulations: present on every Linux machine, so they
/// say nothing about a fabric being there (CLUMP_NET=auto).
bool emulation(const std::string& provider) {
  const std::string core = provider.substr(0, provider.find(';'));
  return core == "tcp" || core == "udp" || core == "sockets" || core == "net" || core == "shm";
}

std::string fi_text(const library_calls& l, int rc) { return l.strerror(rc < 0 ? -rc : rc); }

/// A buffer that a posted operation owns until its completion; the context
/// libfabric hands back is the buffer itself.
struct buffer {
  fi_context2 context{};  // first: op_context points here
  bool receive = false;
  bool read = false;           // a read (link::read): no bytes of its own
  uint64_t read_id = 0;
  int rank = -1;               // a send's destination
  uint64_t ticket = 0;         // a send's number (link::last_queued)
  bool first_contact = false;  // sent before any send to that rank completed
  size_t length = 0;           // bytes in use (a send's datagram, a receive's arrival)
  net::clock::time_point since{};  // a send waiting in the backlog: when it was first refused
  // Not zero-filled: a receive of CLUMP_OFI_MTU bytes makes resident only
  // the pages its datagrams reach (most are acks of 64 bytes).
  std::unique_ptr<std::byte[]> bytes;
  size_t capacity = 0;
  bool reserve(size_t n) noexcept {
    if (n <= capacity) return true;
    try {
      bytes = std::make_unique_for_overwrite<std::byte[]>(n);
    } catch (...) {
      return false;
    }
    capacity = n;
    return true;
  }
};

class ofi_link final : public net::link {
 public:
  explicit ofi_link(const core::config& cfg);
  ~ofi_link() override;

  std::string kind() const override { return "ofi " + provider_; }
  // A receive is posted for max_datagram_ bytes: a larger datagram would be
  // cut short (and lost for good), so every process must send no larger ones.
  std::string agreement() const override { return kind() + " " + std::to_string(max_datagram_); }
  size_t max_datagram() const noexcept override { return max_datagram_; }
  std::vector<std::byte> address() const override { return name_; }
  std::string address_text() const override { return text_of(name_) + " (" + domain_ + ")"; }
  bool add_peer(int rank, std::span<const std::byte> address) override;
  // A provider's source addresses cannot be trusted (udp;ofi_rxd gives 0 for
  // every sender): the network goes by authentication (origin has no addr).
  bool sent_by(int, const net::origin&) const noexcept override { return true; }
  std::string peer_text(int rank) const override {
    return rank >= 0 && static_cast<size_t>(rank) < peers_.size() ? text_of(peers_[rank].name) : "?";
  }
  std::string origin_text(const net::origin&) const override { return provider_ + " (sender unknown)"; }
  void queue(int rank, const std::byte* data, size_t n, const std::byte* body, size_t body_n, const std::byte* tail,
             size_t tail_n) noexcept override;
  void flush(net::clock::time_point now) noexcept override;
  uint64_t flushes() const noexcept override { return flushes_; }
  bool holding() const noexcept override { return !arrived_.empty() || !backlog_.empty() || !reads_ended_.empty(); }
  unsigned receive(net::clock::time_point now, on_datagram f, void* context) noexcept override;
  int wait_fd() const noexcept override { return fd_; }
  net::clock::duration sleep_limit() noexcept override;
  bool needs_progress() const noexcept override {
    return waiting_.load(std::memory_order_relaxed) || first_contacts_.load(std::memory_order_relaxed) != 0;
  }
  // (Exposed memory too: a peer reads it only while this process reads the queue.)
  bool unfinished() const noexcept override {
    return sends_in_flight_.load(std::memory_order_relaxed) != 0 || exposed_count_.load(std::memory_order_relaxed) != 0 ||
           reads_in_flight_.load(std::memory_order_relaxed) != 0;
  }
  // A provider makes connections (tcp;ofi_rxm accepts them) and runs its
  // timers (udp;ofi_rxd's retransmissions) only inside reads of the queue,
  // and the wait set does not show a peer that asks to connect: a process
  // whose program computes must still be polled, or its peers find it dead.
  bool overdue(net::clock::time_point now) const noexcept override {
    return now.time_since_epoch().count() - progressed_.load(std::memory_order_relaxed) >
           std::chrono::duration_cast<net::clock::duration>(std::chrono::milliseconds(10)).count();
  }
  bool reliable() const noexcept override { return true; }
  uint64_t last_queued() const noexcept override { return queued_; }
  bool carrying(int rank, uint64_t ticket) const noexcept override {
    if (rank < 0 || static_cast<size_t>(rank) >= peers_.size()) return false;
    const std::vector<uint64_t>& c = peers_[static_cast<size_t>(rank)].carrying;
    return std::binary_search(c.begin(), c.end(), ticket);
  }
  net::clock::time_point delivered(int rank) const noexcept override {
    return rank < 0 || static_cast<size_t>(rank) >= peers_.size() ? net::clock::time_point{}
                                                                   : peers_[static_cast<size_t>(rank)].delivered;
  }
  const net::link_counters& counters() const noexcept override { return counters_; }

  size_t max_read() const noexcept override { return max_read_; }
  // udp;ofi_rxd moves a read as its own packets over UDP: ping-pongs took as
  // long as with datagrams, and streams of 1-4 MiB had 0.85x their bandwidth.
  bool reads_pay() const noexcept override { return provider_.find("ofi_rxd") == std::string::npos; }
  bool expose(const std::byte* p, size_t n, exposure& e) noexcept override;
  void conceal(exposure& e) noexcept override;
  status read(int rank, std::byte* to, size_t n, uint64_t addr, uint64_t key, uint64_t id) noexcept override;
  unsigned reads_done(on_read f, void* context) noexcept override;

 private:
  struct peer {
    fi_addr_t at = FI_ADDR_UNSPEC;
    bool reached = false;  // a send to it has completed: its connection is made
    std::vector<uint64_t> carrying;      // the numbers of its datagrams in the backlog or posted, ascending
    net::clock::time_point delivered{};  // when a send to it last completed or was dropped
    std::vector<std::byte> name;
  };
  void sent(buffer& b, bool ok) noexcept;  // a send's completion
  void let_go(const buffer& b) noexcept;  // a send's datagram leaves the link's hands (completed or dropped)
  void read_ended(buffer& b, bool ok) noexcept;  // a read's completion
  void fail(const char* call, int rc);  // closes what is open, throws
  void close_all() noexcept;
  std::string text_of(const std::vector<std::byte>& name) const;
  bool add_receives(size_t wanted);        // posts receives until `wanted` are made
  bool post_receive(buffer& b) noexcept;  // false: the provider refuses it (now)
  void repost(buffer& b) noexcept;        // posts it, or keeps it in unposted_
  void repost_refused() noexcept;
  bool post_send(buffer& b) noexcept;  // false: the provider said try again
  void progress() noexcept;            // reads the completion queue
  void retry_backlog(net::clock::time_point now) noexcept;
  buffer* take_send_buffer() noexcept;

  const library_calls& lib_;
  std::string provider_, domain_;
  size_t max_datagram_;
  size_t per_peer_receives_;  // what one peer may have in flight to us: both windows, and its control datagrams
  size_t max_receives_ = first_receives;  // under receive_memory, and what the provider takes
  size_t remote_peers_ = 0;
  bool receives_told_ = false;  // receive() has said whether the receives cover the peers
  void tell_receives() noexcept;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_fid_ = nullptr;
  fid_wait* wait_set_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid* wait_fid_ = nullptr;  // what fi_trywait looks at: the wait set or the queue
  int fd_ = -1;
  std::vector<std::byte> name_;
  std::vector<peer> peers_;
  std::vector<std::unique_ptr<buffer>> receives_;
  std::vector<std::unique_ptr<buffer>> sends_;  // every send buffer made
  std::vector<buffer*> free_sends_;
  size_t sends_posted_ = 0, send_limit_ = 0;
  bool posted_since_progress_ = false;
  std::deque<buffer*> backlog_;  // refused for now (a connection being made): posted at the next flush
  std::deque<buffer*> arrived_;  // completed receives not yet handed to the network
  std::vector<buffer*> unposted_;  // receives the provider refused to take back: posted again later
  // The atomics below are hints for the service thread, read without the
  // network's lock, all relaxed: a stale value costs one needless poll or
  // one nap of at most 10 ms, never a lost datagram (the queue keeps it).
  std::atomic<size_t> unposted_count_{0};
  std::atomic<size_t> arrived_count_{0};  // arrived_.size(), for sleep_limit() without the lock
  std::atomic<net::clock::rep> progressed_{0};  // when the queue was last read
  std::atomic<bool> found_{false};         // a read of the queue found a completion (since sleep_limit() looked)
  std::atomic<unsigned> fruitless_{0};     // sleep_limit()'s "poll again" answers since found_
  std::atomic<bool> waiting_{false};      // !backlog_.empty(), likewise
  std::atomic<size_t> first_contacts_{0};   // sends in flight with first_contact
  std::atomic<size_t> sends_in_flight_{0};  // sends_posted_, likewise
  // Reads (FI_RMA): what peers may read of ours, and what we read of theirs.
  size_t max_read_ = 0;  // 0: the provider offers no RMA
  bool virtual_addresses_ = false;  // FI_MR_VIRT_ADDR: a read names the address, else the offset in the region
  uint64_t next_key_ = 1;           // without FI_MR_PROV_KEY, clump chooses the keys
  std::vector<fid_mr*> exposed_;    // regions open (closed before the domain)
  std::atomic<size_t> exposed_count_{0};  // exposed_.size(), for unfinished() without the lock
  std::vector<std::unique_ptr<buffer>> reads_;  // every read's context made
  std::vector<buffer*> free_reads_;
  std::vector<std::pair<uint64_t, bool>> reads_ended_;  // (id, ok) not yet reported
  std::atomic<size_t> reads_in_flight_{0};
  std::atomic<size_t> reads_unreported_{0};  // reads_ended_.size(), for sleep_limit() without the lock
  uint64_t flushes_ = 0;
  uint64_t queued_ = 0;  // queue() calls (link::last_queued)
  net::link_counters counters_;
};

ofi_link::ofi_link(const core::config& cfg)
    : lib_(calls()),
      max_datagram_(cfg.ofi_mtu),
      per_peer_receives_(2 * size_t{cfg.net_window} + control_datagrams) {
  if (!lib_.handle) throw error(status::not_init, opening, lib_.why + " (install libfabric1, or use CLUMP_NET=udp)");
  fi_info* hints = lib_.dupinfo(nullptr);
  if (!hints) throw error(status::resource, opening, "fi_allocinfo failed");
  hints->ep_attr->type = FI_EP_RDM;
  // Reads of a peer's memory too where the provider offers them (long
  // messages by reads), else messages alone.
  hints->caps = FI_MSG | FI_RMA | FI_READ | FI_REMOTE_READ;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;  // every operation has a live fi_context2
  hints->domain_attr->threading = FI_THREAD_SAFE;  // the service thread waits while a program thread polls
  // Buffers are not registered: no FI_MR_LOCAL.
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  // The domain: named, or the one with this host's address (interface names
  // and fabric names are ignored as hints by the socket providers: the list
  // is walked instead).
  std::string node;
  if (cfg.ofi_domain.empty()) {
    const in_addr a = net::local_address(cfg.net_address);
    char text[INET_ADDRSTRLEN] = "";
    ::inet_ntop(AF_INET, &a, text, sizeof text);
    node = text;
  }
  fi_info* list = nullptr;
  auto ask = [&] {
    int r = lib_.getinfo(FI_VERSION(1, 9), node.empty() ? nullptr : node.c_str(), nullptr,
                         node.empty() ? 0 : FI_SOURCE, hints, &list);
    if (r == -FI_ENODATA && !node.empty()) {
      // A provider that is not addressed by IP (efa, cxi, psm2): its first domain.
      const std::string at = node;
      node.clear();
      r = lib_.getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &list);
      if (r == -FI_ENODATA) node = at;
    }
    return r;
  };
  int rc = ask();
  if (rc == -FI_ENODATA) {
    hints->caps = FI_MSG;
    rc = ask();
  }
  lib_.freeinfo(hints);
  const char* wanted = std::getenv("FI_PROVIDER");
  const std::string asked = wanted ? std::string(" FI_PROVIDER=") + wanted : std::string();
  if (rc != 0)
    throw error(status::resource, opening,
                "no libfabric provider offers reliable datagram endpoints" + (asked.empty() ? "" : " with" + asked) +
                    (node.empty() ? "" : " at " + node) + " (fi_getinfo: " + fi_text(lib_, rc) +
                    "); `fi_info -t FI_EP_RDM` lists them, or use CLUMP_NET=udp");
  const fi_info* chosen = nullptr;
  for (const fi_info* i = list; i && !chosen; i = i->next) {
    const std::string prov = i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "";
    const std::string dom = i->domain_attr->name ? i->domain_attr->name : "";
    if (prov.substr(0, prov.find(';')) == "shm") continue;  // one host only: clump has its own
    if (!cfg.ofi_domain.empty() && dom != cfg.ofi_domain) continue;
    if (!node.empty() && i->addr_format != FI_SOCKADDR_IN) continue;
    chosen = i;
  }
  if (!chosen) {
    std::string seen;
    for (const fi_info* i = list; i; i = i->next) {
      const std::string d = std::string(i->fabric_attr->prov_name) + " " + i->domain_attr->name;
      if (seen.find(d) == std::string::npos) seen += (seen.empty() ? "" : ", ") + d;
    }
    lib_.freeinfo(list);
    if (cfg.ofi_domain.empty())
      throw error(status::resource, opening,
                  "only shm, which stays on one host, offers reliable datagram endpoints" +
                      (asked.empty() ? "" : " with" + asked) +
                      ": clump reaches its own host through shared memory; name a provider that crosses hosts "
                      "(`fi_info -t FI_EP_RDM` lists them), or use CLUMP_NET=udp");
    throw error(status::bad_arg, opening,
                "no domain " + cfg.ofi_domain + " among the reliable datagram endpoints" +
                    (asked.empty() ? "" : " with" + asked) + " (" + seen +
                    "): set CLUMP_OFI_DOMAIN to one of those domains, or use CLUMP_NET=udp");
  }
  info_ = lib_.dupinfo(chosen);
  lib_.freeinfo(list);
  if (!info_) throw error(status::resource, opening, "fi_dupinfo failed");
  provider_ = info_->fabric_attr->prov_name;
  if (provider_.find("ofi_rxd") != std::string::npos) {
    // rxd takes 0 or text silently as a window of none and then sends
    // nothing (every peer would look dead), and a negative number as no
    // limit at all (the bursts that broke it). clump sets 32 unless the user did.
    const char* unacked = std::getenv("FI_OFI_RXD_MAX_UNACKED");
    char* end = nullptr;
    const long n = unacked ? std::strtol(unacked, &end, 10) : 32;
    if (unacked && (end == unacked || *end != 0 || n < 1 || n > 1 << 20)) {
      const std::string v = unacked;
      close_all();
      throw error(status::bad_arg, opening,
                  "FI_OFI_RXD_MAX_UNACKED=" + v +
                      " must be a number of packets from 1 to 1048576 (udp;ofi_rxd takes 0 or text as no window "
                      "and sends nothing, a negative number as no limit); unset it for clump's 32");
    }
  }
  domain_ = info_->domain_attr->name;
  if ((info_->caps & (FI_RMA | FI_READ | FI_REMOTE_READ)) == (FI_RMA | FI_READ | FI_REMOTE_READ)) {
    // A long message's length is 32 bits.
    max_read_ = std::min<size_t>(info_->ep_attr && info_->ep_attr->max_msg_size ? info_->ep_attr->max_msg_size
                                                                                   : UINT32_MAX,
                                 UINT32_MAX);
    virtual_addresses_ = (info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  }
  // rxd cuts a datagram into UDP packets of its own and was slower with
  // large ones (256 KiB messages: 0.30x fi_pingpong's bandwidth with 256 KiB
  // datagrams, 0.91x with 65000 B): UDP's size there, unless the user chose.
  if (provider_.find("ofi_rxd") != std::string::npos && !cfg.ofi_mtu_chosen) max_datagram_ = cfg.net_mtu;
  if (info_->ep_attr && info_->ep_attr->max_msg_size && info_->ep_attr->max_msg_size < max_datagram_) {
    const size_t most = info_->ep_attr->max_msg_size;
    close_all();
    throw error(status::bad_arg, opening,
                "CLUMP_OFI_MTU=" + std::to_string(max_datagram_) + " is more than " + provider_ +
                    " sends in one message (" + std::to_string(most) + " bytes): set it to that or less");
  }
  // Sends are copied into buffers of our own: a datagram's bytes need only
  // last until the network's flush, an operation's until its completion.
  send_limit_ = std::clamp<size_t>(info_->tx_attr ? info_->tx_attr->size : 256, 16, 1024);
  max_receives_ = std::clamp<size_t>(receive_memory / max_datagram_, first_receives,
                                     std::max(first_receives, info_->rx_attr ? info_->rx_attr->size : 0));

  if ((rc = lib_.fabric(info_->fabric_attr, &fabric_, nullptr)) != 0) fail("fi_fabric", rc);
  if ((rc = fi_domain(fabric_, info_, &domain_fid_, nullptr)) != 0) fail("fi_domain", rc);
  // Blocking: a wait set with a file descriptor works with both providers
  // here (udp;ofi_rxd's queue alone gives no descriptor); else the queue's own.
  fi_wait_attr wait_attr{};
  wait_attr.wait_obj = FI_WAIT_FD;
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_MSG;
  cq_attr.size = send_limit_ + max_receives_ + 64;  // room for every operation's completion
  if (fi_wait_open(fabric_, &wait_attr, &wait_set_) == 0) {
    cq_attr.wait_obj = FI_WAIT_SET;
    cq_attr.wait_set = wait_set_;
    wait_fid_ = &wait_set_->fid;
  } else {
    wait_set_ = nullptr;
    cq_attr.wait_obj = FI_WAIT_FD;
  }
  if ((rc = fi_cq_open(domain_fid_, &cq_attr, &cq_, nullptr)) != 0) fail("fi_cq_open", rc);
  if (!wait_set_) wait_fid_ = &cq_->fid;
  if ((rc = fi_control(wait_fid_, FI_GETWAIT, &fd_)) != 0) fail("fi_control(FI_GETWAIT)", rc);
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  if ((rc = fi_av_open(domain_fid_, &av_attr, &av_, nullptr)) != 0) fail("fi_av_open", rc);
  if ((rc = fi_endpoint(domain_fid_, info_, &ep_, nullptr)) != 0) fail("fi_endpoint", rc);
  if ((rc = fi_ep_bind(ep_, &av_->fid, 0)) != 0) fail("fi_ep_bind(av)", rc);
  if ((rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV)) != 0) fail("fi_ep_bind(cq)", rc);
  if ((rc = fi_enable(ep_)) != 0) fail("fi_enable", rc);
  size_t len = 0;
  fi_getname(&ep_->fid, nullptr, &len);
  name_.resize(len);
  if ((rc = fi_getname(&ep_->fid, name_.data(), &len)) != 0) fail("fi_getname", rc);
  name_.resize(len);
  if (!add_receives(first_receives)) fail("fi_recv", -FI_EAGAIN);
}

bool ofi_link::add_receives(size_t wanted) {
  while (receives_.size() < wanted) {
    auto b = std::make_unique<buffer>();
    b->receive = true;
    if (!b->reserve(max_datagram_)) return false;
    if (!post_receive(*b)) return false;
    receives_.push_back(std::move(b));
  }
  return true;
}

ofi_link::~ofi_link() { close_all(); }

void ofi_link::fail(const char* call, int rc) {
  const std::string what = std::string(call) + " failed for " + provider_ + " on " + domain_ + ": " + fi_text(lib_, rc);
  close_all();
  throw error(status::resource, opening, what + "; use CLUMP_NET=udp");
}

void ofi_link::close_all() noexcept {
  // The endpoint first: nothing completes into the buffers after it.
  if (ep_) fi_close(&ep_->fid);
  for (fid_mr* mr : exposed_) fi_close(&mr->fid);
  exposed_.clear();
  if (av_) fi_close(&av_->fid);
  if (cq_) fi_close(&cq_->fid);
  if (wait_set_) fi_close(&wait_set_->fid);
  if (domain_fid_) fi_close(&domain_fid_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  if (info_) lib_.freeinfo(info_);
  ep_ = nullptr, av_ = nullptr, cq_ = nullptr, wait_set_ = nullptr, domain_fid_ = nullptr, fabric_ = nullptr;
  info_ = nullptr;
}

std::string ofi_link::text_of(const std::vector<std::byte>& name) const {
  char text[128] = "?";
  size_t n = sizeof text;
  if (av_ && !name.empty()) fi_av_straddr(av_, name.data(), text, &n);
  text[sizeof text - 1] = 0;
  return text;
}

bool ofi_link::add_peer(int rank, std::span<const std::byte> address) {
  if (rank < 0 || address.empty() || address.size() > 64) return false;
  if (peers_.size() <= static_cast<size_t>(rank)) peers_.resize(static_cast<size_t>(rank) + 1);
  peer& p = peers_[static_cast<size_t>(rank)];
  p.name.assign(address.begin(), address.end());
  const bool known = p.at != FI_ADDR_UNSPEC;
  const int n = fi_av_insert(av_, p.name.data(), 1, &p.at, 0, nullptr);
  if (n != 1) return false;
  // A receive posted for every datagram the peers may have in flight to us
  // (the protocol's windows bound them), up to receive_memory: a message
  // that finds no receive posted is one the provider must hold itself
  // (udp;ofi_rxd has it sent again, later).
  if (!known) ++remote_peers_;
  const size_t wanted = std::min(max_receives_, std::max(first_receives, remote_peers_ * per_peer_receives_));
  add_receives(wanted);
  return true;
}

bool ofi_link::post_receive(buffer& b) noexcept {
  for (int tries = 0; tries < 16; ++tries) {
    const ssize_t rc = fi_recv(ep_, b.bytes.get(), b.capacity, nullptr, FI_ADDR_UNSPEC, &b.context);
    if (rc == 0) return true;
    if (rc != -FI_EAGAIN) break;
    progress();
  }
  return false;
}

void ofi_link::repost(buffer& b) noexcept {
  // Never lose a receive: one the provider refuses now is posted again
  // later (with every receive lost, nothing would ever arrive again).
  if (!post_receive(b)) {
    counters_.send_errors++;
    unposted_.push_back(&b);
    unposted_count_.store(unposted_.size(), std::memory_order_relaxed);
  }
}

void ofi_link::repost_refused() noexcept {
  while (!unposted_.empty() && post_receive(*unposted_.back())) unposted_.pop_back();
  unposted_count_.store(unposted_.size(), std::memory_order_relaxed);
}

bool ofi_link::post_send(buffer& b) noexcept {
  const ssize_t rc = fi_send(ep_, b.bytes.get(), b.length, nullptr, peers_[static_cast<size_t>(b.rank)].at, &b.context);
  if (rc == 0) {
    ++sends_posted_;
    posted_since_progress_ = true;
    sends_in_flight_.store(sends_posted_, std::memory_order_relaxed);
    // Until a send to it completes, the provider may still be making the
    // connection, which needs progress whatever the program does.
    b.first_contact = !peers_[static_cast<size_t>(b.rank)].reached;
    if (b.first_contact) first_contacts_.fetch_add(1, std::memory_order_relaxed);
    counters_.datagrams_sent++;
    counters_.bytes_sent += b.length;
    return true;
  }
  if (rc == -FI_EAGAIN) return false;
  // Refused for good: as if lost (the protocol sends it again).
  counters_.send_errors++;
  let_go(b);
  free_sends_.push_back(&b);
  return true;
}

buffer* ofi_link::take_send_buffer() noexcept {
  if (free_sends_.empty() && sends_.size() < send_limit_) {
    auto b = std::unique_ptr<buffer>(new (std::nothrow) buffer);
    if (b) {
      free_sends_.push_back(b.get());
      sends_.push_back(std::move(b));
    }
  }
  if (free_sends_.empty()) progress();
  if (free_sends_.empty()) return nullptr;
  buffer* b = free_sends_.back();
  free_sends_.pop_back();
  return b;
}

void ofi_link::queue(int rank, const std::byte* data, size_t n, const std::byte* body, size_t body_n,
                     const std::byte* tail, size_t tail_n) noexcept {
  ++queued_;  // (its number, taken or not)
  if (rank < 0 || static_cast<size_t>(rank) >= peers_.size() || peers_[rank].at == FI_ADDR_UNSPEC) {
    counters_.send_errors++;
    return;
  }
  buffer* b = take_send_buffer();
  if (!b) {  // every buffer in flight: as if lost
    counters_.send_errors++;
    return;
  }
  b->rank = rank;
  b->length = n + body_n + tail_n;
  if (!b->reserve(b->length)) {
    counters_.send_errors++;
    free_sends_.push_back(b);
    return;
  }
  std::memcpy(b->bytes.get(), data, n);
  if (body_n) std::memcpy(b->bytes.get() + n, body, body_n);
  if (tail_n) std::memcpy(b->bytes.get() + n + body_n, tail, tail_n);
  b->ticket = queued_;
  // (Numbers only grow, so the list stays in order; it holds at most the send buffers.)
  std::vector<uint64_t>& carrying = peers_[static_cast<size_t>(rank)].carrying;
  try {
    carrying.push_back(queued_);
  } catch (...) {
    counters_.send_errors++;
    free_sends_.push_back(b);
    return;
  }
  // Behind what waits already, to keep the order datagrams were queued in.
  if (backlog_.empty()) {
    // Refused while the provider makes the connection (the first datagram
    // to a peer: tcp;ofi_rxm refuses for a few ms): it needs progress.
    for (int tries = 0; tries < 64; ++tries) {
      if (post_send(*b)) return;
      progress();
    }
  }
  b->since = net::clock::now();
  backlog_.push_back(b);
  waiting_.store(true, std::memory_order_relaxed);
}

void ofi_link::retry_backlog(net::clock::time_point now) noexcept {
  while (!backlog_.empty()) {
    buffer* b = backlog_.front();
    if (!post_send(*b)) {
      // A provider that keeps refusing (a connection that cannot be made):
      // drop what waited long; the protocol sends it again, or finds the
      // peer unreachable.
      if (now - b->since < std::chrono::milliseconds(200)) return;
      counters_.send_errors++;
      let_go(*b);
      free_sends_.push_back(b);
    }
    backlog_.pop_front();
  }
  waiting_.store(false, std::memory_order_relaxed);
}

void ofi_link::progress() noexcept {
  posted_since_progress_ = false;
  progressed_.store(net::clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  fi_cq_msg_entry done[16];
  for (;;) {
    const ssize_t n = fi_cq_read(cq_, done, std::size(done));
    if (n == -FI_EAGAIN) return;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry e{};
      if (fi_cq_readerr(cq_, &e, 0) <= 0 || !e.op_context) return;
      auto* b = static_cast<buffer*>(e.op_context);
      if (b->read) {
        read_ended(*b, false);
      } else if (b->receive) {
        // Truncated or broken: dropped, as UDP would (the sender's copy is sent again).
        counters_.send_errors++;
        repost(*b);
      } else {
        sent(*b, false);
      }
      continue;
    }
    if (n < 0) return;
    found_.store(true, std::memory_order_relaxed);
    for (ssize_t i = 0; i < n; ++i) {
      auto* b = static_cast<buffer*>(done[i].op_context);
      if (!b) continue;
      if (b->read) {
        read_ended(*b, true);
      } else if (b->receive) {
        b->length = done[i].len;
        arrived_.push_back(b);
      } else {
        sent(*b, true);
      }
    }
    arrived_count_.store(arrived_.size(), std::memory_order_relaxed);
    if (n < static_cast<ssize_t>(std::size(done))) return;
  }
}

void ofi_link::sent(buffer& b, bool ok) noexcept {
  if (!ok) counters_.send_errors++;
  --sends_posted_;
  sends_in_flight_.store(sends_posted_, std::memory_order_relaxed);
  if (b.first_contact) {
    b.first_contact = false;
    first_contacts_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (ok) peers_[static_cast<size_t>(b.rank)].reached = true;
  let_go(b);
  free_sends_.push_back(&b);
}

void ofi_link::let_go(const buffer& b) noexcept {
  peer& p = peers_[static_cast<size_t>(b.rank)];
  const auto at = std::lower_bound(p.carrying.begin(), p.carrying.end(), b.ticket);
  if (at != p.carrying.end() && *at == b.ticket) p.carrying.erase(at);
  p.delivered = net::clock::now();
}

void ofi_link::read_ended(buffer& b, bool ok) noexcept {
  if (!ok) counters_.send_errors++;
  reads_ended_.emplace_back(b.read_id, ok);
  reads_unreported_.store(reads_ended_.size(), std::memory_order_relaxed);
  free_reads_.push_back(&b);
  reads_in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

bool ofi_link::expose(const std::byte* p, size_t n, exposure& e) noexcept {
  if (!max_read_ || n > max_read_) return false;
  try {
    exposed_.reserve(exposed_.size() + 1);
  } catch (...) {
    return false;
  }
  fid_mr* mr = nullptr;
  const uint64_t key = next_key_++;
  if (fi_mr_reg(domain_fid_, p, n, FI_REMOTE_READ, 0, key, 0, &mr, nullptr) != 0) return false;
  e.handle = mr;
  e.key = fi_mr_key(mr);
  e.addr = virtual_addresses_ ? reinterpret_cast<uint64_t>(p) : 0;
  exposed_.push_back(mr);
  exposed_count_.store(exposed_.size(), std::memory_order_relaxed);
  return true;
}

void ofi_link::conceal(exposure& e) noexcept {
  auto* mr = static_cast<fid_mr*>(e.handle);
  e.handle = nullptr;
  auto it = std::find(exposed_.begin(), exposed_.end(), mr);
  if (it == exposed_.end()) return;
  fi_close(&mr->fid);
  exposed_.erase(it);
  exposed_count_.store(exposed_.size(), std::memory_order_relaxed);
}

status ofi_link::read(int rank, std::byte* to, size_t n, uint64_t addr, uint64_t key, uint64_t id) noexcept {
  if (!max_read_ || n > max_read_ || rank < 0 || static_cast<size_t>(rank) >= peers_.size() ||
      peers_[rank].at == FI_ADDR_UNSPEC)
    return status::resource;
  if (free_reads_.empty()) {
    auto b = std::unique_ptr<buffer>(new (std::nothrow) buffer);
    if (!b) return status::in_use;
    b->read = true;
    free_reads_.push_back(b.get());
    try {
      reads_.push_back(std::move(b));
      reads_ended_.reserve(reads_.size());
    } catch (...) {
      free_reads_.pop_back();
      return status::in_use;
    }
  }
  buffer* b = free_reads_.back();
  b->read_id = id;
  const ssize_t rc = fi_read(ep_, to, n, nullptr, peers_[rank].at, addr, key, &b->context);
  if (rc == -FI_EAGAIN) {
    progress();
    return status::in_use;
  }
  if (rc != 0) {
    counters_.send_errors++;
    return status::resource;
  }
  free_reads_.pop_back();
  reads_in_flight_.fetch_add(1, std::memory_order_relaxed);
  posted_since_progress_ = true;
  return status::ok;
}

unsigned ofi_link::reads_done(on_read f, void* context) noexcept {
  // By index, and each one copied first: f may start the next read, and a
  // read the provider refuses for now reads the queue, which may end more.
  unsigned n = 0;
  for (size_t i = 0; i < reads_ended_.size(); ++i, ++n) {
    const auto [id, ok] = reads_ended_[i];
    f(context, id, ok);
  }
  reads_ended_.clear();
  reads_unreported_.store(0, std::memory_order_relaxed);
  return n;
}

void ofi_link::flush(net::clock::time_point now) noexcept {
  ++flushes_;
  retry_backlog(now);
  // Providers progress only when their queue is read (manual progress):
  // what was just posted leaves now. (Only then: a read of tcp;ofi_rxm's
  // queue costs several system calls.)
  if (posted_since_progress_) progress();
}

void ofi_link::tell_receives() noexcept {
  receives_told_ = true;
  const size_t wanted = remote_peers_ * per_peer_receives_;
  if (receives_.size() < wanted)
    core::log_info("ofi: %zu receives posted (%zu MiB), fewer than the %zu that %zu peers may have in flight: %s holds "
                   "the rest itself",
                   receives_.size(), receives_.size() * max_datagram_ >> 20, wanted, remote_peers_, provider_.c_str());
}

unsigned ofi_link::receive(net::clock::time_point now, on_datagram f, void* context) noexcept {
  if (!receives_told_) [[unlikely]] tell_receives();
  progress();
  retry_backlog(now);
  unsigned count = 0;
  while (!arrived_.empty() && count < 32) {
    buffer* b = arrived_.front();
    arrived_.pop_front();
    counters_.datagrams_received++;
    counters_.bytes_received += b->length;
    f(context, b->bytes.get(), b->length, net::origin{});
    ++count;
    repost(*b);
  }
  if (!unposted_.empty()) repost_refused();
  arrived_count_.store(arrived_.size(), std::memory_order_relaxed);
  return count;
}

net::clock::duration ofi_link::sleep_limit() noexcept {
  // A backlog wants retrying until the connection is made: no fd says when.
  if (arrived_count_.load(std::memory_order_relaxed) != 0 || waiting_.load(std::memory_order_relaxed) ||
      reads_unreported_.load(std::memory_order_relaxed) != 0)
    return net::clock::duration::zero();
  if (unposted_count_.load(std::memory_order_relaxed) != 0) return std::chrono::milliseconds(1);
  fid* f = wait_fid_;
  if (fi_trywait(fabric_, &f, 1) == FI_SUCCESS) {
    fruitless_.store(0, std::memory_order_relaxed);
    // Providers with manual progress run their own timers (udp;ofi_rxd's
    // acknowledgements and retransmissions) only inside reads of the
    // queue: a sleeping process reads it at least every 10 ms.
    return std::chrono::milliseconds(10);
  }
  // Events inside the provider: poll again now. But tcp;ofi_rxm also says so
  // for its connection bookkeeping, which it does only every
  // FI_OFI_RXM_CM_PROGRESS_INTERVAL (10 ms) whatever the polls: when polls
  // keep finding nothing, nap a millisecond rather than spin.
  if (found_.exchange(false, std::memory_order_relaxed)) fruitless_.store(0, std::memory_order_relaxed);
  if (fruitless_.fetch_add(1, std::memory_order_relaxed) < 32) return net::clock::duration::zero();
  return std::chrono::milliseconds(1);
}

}  // namespace

std::unique_ptr<net::link> open_link(const core::config& cfg) { return std::make_unique<ofi_link>(cfg); }

bool fabric_present() {
  // Loading Debian's libfabric takes 0.2 s (a library it pulls in reads
  // /proc/kallsyms) and asking it for providers 0.16 s more: every process
  // of every job would pay that. So only a machine with a fabric device
  // asks: RDMA devices (InfiniBand, RoCE, EFA, Omni-Path: /sys/class/infiniband),
  // Slingshot (cxi), Omni-Path's own (hfi1).
  const char* devices[] = {"/sys/class/infiniband", "/sys/class/cxi", "/dev/cxi0", "/dev/hfi1_0"};
  bool any = false;
  for (const char* d : devices) {
    struct stat st;
    any = any || ::stat(d, &st) == 0;
  }
  if (!any) return false;
  std::string why;
  for (const std::string& p : rdm_providers(why))
    if (!emulation(p)) return true;
  return false;
}

}  // namespace clump::ofi

#else

namespace clump::ofi {

std::unique_ptr<net::link> open_link(const core::config&) {
  throw error(status::not_init, "opening the libfabric endpoint (CLUMP_NET=ofi)",
              "this clump was built without libfabric: install libfabric-dev and rebuild, or use CLUMP_NET=udp");
}

bool fabric_present() { return false; }

}  // namespace clump::ofi

#endif

namespace clump::ofi {
namespace {
// CLUMP_NET=ofi (net/link.hpp): registered with the net protocol before main.
[[maybe_unused]] const bool registered = net::link_maker::add({"ofi", open_link, fabric_present});
}  // namespace
}  // namespace clump::ofi
