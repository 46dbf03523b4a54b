// The boot protocol, clumprun's side (src/boot/wire.hpp has the whole
// conversation): reading and writing the ranks' sockets without blocking,
// the rendezvous that hands out the job and every rank's region, the
// collectives, getenv and exit requests.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "job_runner.hpp"

namespace clumprun {

namespace {

// Back-off when the kernel refuses more descriptors in flight (ETOOMANYREFS):
// the ranks are receiving them, so room comes back soon.
constexpr auto fd_retry = std::chrono::milliseconds(5);

// The region descriptors of all ranks while they are being passed on; closed
// when the last frame that carries them has been sent (or dropped), so that
// clumprun does not keep a dead rank's memory alive.
struct shared_fds {
  std::vector<int> fds;
  ~shared_fds() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void job_runner::close_socket(rank_proc& rp) {
  if (rp.sock < 0) return;
  ::close(rp.sock);
  rp.sock = -1;
  rp.out = frame_writer{};
}

void job_runner::read_socket(rank_proc& rp) {
  // Bounded, so that one chatty rank cannot starve the loop.
  for (int i = 0; i < 64 && rp.sock >= 0; ++i) {
    ssize_t n = rp.in.fill(rp.sock);
    if (n > 0) {
      process_frames(rp);
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
      if (o_.verbose >= 2 && !rp.exited && !ending_) say(fmt::format("rank {} closed its boot socket", rp.rank));
      close_socket(rp);
    }
    return;
  }
}

void job_runner::send_pending(rank_proc& rp) {
  if (rp.sock < 0) return;
  if (rp.out.flush(rp.sock) >= 0) return;
  if (errno == ETOOMANYREFS) {
    rp.retry_at = steady::now() + fd_retry;
    return;
  }
  if (errno != EPIPE && errno != ECONNRESET) {
    say(fmt::format("sending to rank {} failed: {}", rp.rank, std::strerror(errno)));
  } else if (!rp.draining) {
    // The rank has gone, but what it said last may still wait in the socket
    // (an exit request, sent just before it ended itself): take that first,
    // it decides how the rank's end is reported.
    rp.draining = true;
    read_socket(rp);
  }
  if (rp.sock >= 0) close_socket(rp);
}

void job_runner::process_frames(rank_proc& rp) {
  frame f;
  std::string why;
  while (rp.sock >= 0) {
    auto res = rp.in.next(f, why);
    if (res == frame_reader::result::need_more) return;
    if (res == frame_reader::result::bad) return protocol_error(rp, why);
    handle_frame(rp, f);
    for (int fd : f.fds)
      if (fd >= 0) ::close(fd);
  }
}

// The rank broke the protocol: tell it (it throws or exits with the text)
// and end the job.
void job_runner::protocol_error(rank_proc& rp, const std::string& why) {
  rp.out.push(wire::msg::refuse, std::as_bytes(std::span(why.data(), why.size())));
  send_pending(rp);
  end_job(1, fmt::format("rank {} (pid {}): {}; ending the job", rp.rank, rp.pid, why));
  close_socket(rp);
}

void job_runner::handle_frame(rank_proc& rp, frame& f) {
  if (ending_) return;  // the ranks are being ended; nothing they ask matters now
  if (agent_) return agent_relay_from_rank(rp, f);  // the head answers
  switch (f.type) {
    case wire::msg::hello: return on_hello(rp, f);
    case wire::msg::collective: return on_collective(rp, f);
    case wire::msg::getenv: return on_getenv(rp, f);
    case wire::msg::exit: return on_exit_request(rp, f);
    default:
      return protocol_error(rp, fmt::format("unexpected message type {} on the boot socket",
                                            static_cast<int>(f.type)));
  }
}

void job_runner::on_hello(rank_proc& rp, frame& f) {
  wire::hello_body h{};
  if (!wire::read_body(f.payload.data(), f.payload.size(), h) || f.fds.size() != 1 || rp.said_hello)
    return protocol_error(rp, "malformed or repeated hello");
  if (h.version != wire::protocol_version)
    return protocol_error(rp, fmt::format("the program speaks boot protocol version {} and this clumprun "
                                          "version {}: build the program and clumprun from the same clump",
                                          h.version, wire::protocol_version));
  // Only now, under the same version, is the rest of the layout known.
  if (f.payload.size() != wire::hello_length)
    return protocol_error(rp, fmt::format("hello of {} bytes, expected {} (a network address slot after the "
                                          "body): build the program and clumprun from the same clump",
                                          f.payload.size(), wire::hello_length));
  std::memcpy(&rp.address, f.payload.data() + sizeof h, sizeof rp.address);
  if (!wire::valid_slot(rp.address))
    return protocol_error(rp, fmt::format("malformed network address in the hello (length {}, at most {} bytes, "
                                          "zeros after it)",
                                          rp.address.length, wire::max_net_address));
  if (h.rank != rp.rank)
    return protocol_error(rp, fmt::format("the process says it is rank {} (CLUMP_RANK changed?)", h.rank));
  rp.said_hello = true;
  rp.hello_pid = h.pid;
  rp.region_fd = std::exchange(f.fds[0], -1);
  if (++hellos_ == n_) start_job();
  else check_stuck();
}

// Everybody said hello: hand out the job and every rank's region.
void job_runner::start_job() {
  size_t n = static_cast<size_t>(n_);
  auto job = std::make_shared<std::vector<std::byte>>(wire::job_length(n));
  wire::job_body jb{wire::protocol_version, n_, o_.job_id, o_.net_auth ? wire::job_authenticated : 0u, 0, {}};
  std::byte* at = job->data();
  auto put = [&](const void* p, size_t len) {
    std::memcpy(at, p, len);
    at += len;
  };
  put(&jb, sizeof jb);
  put(o_.tags.data(), n * sizeof(uint64_t));
  for (size_t r = 0; r < n; ++r) {
    int32_t pid = ranks_[r]->hello_pid;
    put(&pid, sizeof pid);
  }
  for (size_t r = 0; r < n; ++r) {
    int32_t node = o_.nodes.node_of[r];
    put(&node, sizeof node);
  }
  for (size_t r = 0; r < n; ++r) put(&ranks_[r]->address, sizeof(wire::net_address_slot));
  // This host's ranks get the datagram key; those of other hosts a message
  // without it, which their agent completes (the key never crosses the network).
  auto local_job = std::make_shared<std::vector<std::byte>>(*job);
  if (o_.net_auth) {
    std::memcpy(jb.net_key, o_.net_key.data(), sizeof jb.net_key);
    std::memcpy(local_job->data(), &jb, sizeof jb);
  }
  auto regions = std::make_shared<shared_fds>();
  for (auto& rp : ranks_) regions->fds.push_back(std::exchange(rp->region_fd, -1));
  std::span<const int> all(regions->fds);
  for (auto& rp : ranks_) {
    if (rp->sock < 0) continue;
    if (rp->remote)
      rp->out.push(wire::msg::job, {}, *job, {}, job);
    else
      rp->out.push(wire::msg::job, {}, *local_job, {}, local_job);
    for (size_t first = 0; first < n; first += wire::max_fds_per_frame) {
      size_t count = std::min<size_t>(wire::max_fds_per_frame, n - first);
      wire::region_fds_body b{static_cast<int32_t>(first), static_cast<int32_t>(count)};
      rp->out.push_body(wire::msg::region_fds, b, {}, all.subspan(first, count), regions);
    }
    send_pending(*rp);
  }
  started_ = true;
  if (o_.verbose)
    say(fmt::format("all {} ranks joined job {:016x} on {} node(s)", n_, o_.job_id, o_.nodes.node_count));
}

std::string job_runner::describe(const wire::collective_body& b) {
  switch (static_cast<wire::collective_kind>(b.kind)) {
    // Numbered from 1 for people: "the 3rd collective" is collective #3.
    case wire::collective_kind::barrier: return fmt::format("barrier (collective #{})", b.seq + 1);
    case wire::collective_kind::allgather:
      return fmt::format("allgather of {} bytes (collective #{})", b.len, b.seq + 1);
    case wire::collective_kind::broadcast:
      return fmt::format("broadcast of {} bytes from rank {} (collective #{})", b.len, b.root, b.seq + 1);
  }
  return fmt::format("unknown collective {}", b.kind);
}

void job_runner::on_collective(rank_proc& rp, frame& f) {
  wire::collective_body b{};
  if (!started_ || rp.arrived || !wire::read_body(f.payload.data(), f.payload.size(), b))
    return protocol_error(rp, "collective out of turn or malformed");
  size_t data_len = f.payload.size() - sizeof b;
  auto kind = static_cast<wire::collective_kind>(b.kind);
  bool ok = false;
  switch (kind) {
    case wire::collective_kind::barrier: ok = b.len == 0 && data_len == 0; break;
    case wire::collective_kind::allgather: ok = data_len == b.len; break;
    case wire::collective_kind::broadcast:
      ok = b.root >= 0 && b.root < n_ && data_len == (b.root == rp.rank ? b.len : 0);
      break;
  }
  if (!ok) return protocol_error(rp, "malformed collective");
  if (arrived_ == 0) {
    current_ = b;
    first_rank_ = rp.rank;
    if (kind == wire::collective_kind::allgather) {
      if (b.len > (wire::max_payload - sizeof(wire::collective_done_body)) / static_cast<size_t>(n_))
        return protocol_error(rp, fmt::format("allgather of {} x {} bytes is over the limit", n_, b.len));
      result_ = std::make_shared<std::vector<std::byte>>(b.len * static_cast<size_t>(n_));
    } else {
      result_ = std::make_shared<std::vector<std::byte>>();
    }
  } else if (b.kind != current_.kind || b.seq != current_.seq || b.len != current_.len ||
             b.root != current_.root) {
    return end_job(1, fmt::format("ranks disagree about a collective: rank {} called {}, rank {} called {}; every "
                                  "rank must make the same collective calls in the same order; ending the job",
                                  first_rank_, describe(current_), rp.rank, describe(b)));
  }
  const std::byte* data = f.payload.data() + sizeof b;
  if (kind == wire::collective_kind::allgather && b.len)
    std::memcpy(result_->data() + static_cast<size_t>(rp.rank) * b.len, data, b.len);
  if (kind == wire::collective_kind::broadcast && rp.rank == b.root) result_->assign(data, data + b.len);
  rp.arrived = true;
  if (++arrived_ == n_) complete_collective();
  else check_stuck();
}

void job_runner::complete_collective() {
  wire::collective_done_body done{current_.seq};
  auto kind = static_cast<wire::collective_kind>(current_.kind);
  for (auto& rp : ranks_) {
    rp->arrived = false;
    if (rp->sock < 0) continue;
    bool gets_data = kind == wire::collective_kind::allgather ||
                     (kind == wire::collective_kind::broadcast && rp->rank != current_.root);
    rp->out.push_body(wire::msg::collective_done, done,
                      gets_data ? std::span<const std::byte>(*result_) : std::span<const std::byte>(), {}, result_);
    send_pending(*rp);
  }
  arrived_ = 0;
  result_.reset();
}

void job_runner::on_getenv(rank_proc& rp, frame& f) {
  std::string name(reinterpret_cast<const char*>(f.payload.data()), f.payload.size());
  const char* value = std::getenv(name.c_str());
  wire::getenv_reply_body b{value != nullptr, 0};
  auto text = std::make_shared<std::string>(value ? value : "");
  rp.out.push_body(wire::msg::getenv_reply, b, std::as_bytes(std::span(text->data(), text->size())), {}, text);
  send_pending(rp);
}

void job_runner::on_exit_request(rank_proc& rp, frame& f) {
  wire::exit_body b{};
  if (!wire::read_body(f.payload.data(), f.payload.size(), b)) return protocol_error(rp, "malformed exit");
  rp.exit_requested = true;
  int code = b.code & 0xff;  // what the rank's own _exit(code) reports
  end_job(code,
          code != 0 || o_.verbose
              ? fmt::format("rank {} (pid {}) ended the job with exit code {}", rp.rank, rp.pid, code)
              : std::string(),
          /*politely=*/true);
}

}  // namespace clumprun
