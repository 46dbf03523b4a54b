#pragma once
// clumprun's view of a running job, shared by launcher.cpp (processes,
// signals, the poll loop, how a job ends) and rendezvous.cpp (the boot
// protocol: hello, job, collectives, getenv, exit; see src/boot/wire.hpp).
// Private to clumprun.

#include <poll.h>
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "boot/channel.hpp"
#include "handshake.hpp"
#include "boot/wire.hpp"
#include "launcher.hpp"
#include "output.hpp"

namespace clumprun {

namespace wire = clump::boot::wire;
using clump::boot::frame;
using clump::boot::frame_reader;
using clump::boot::frame_writer;
using steady = std::chrono::steady_clock;

/// One rank: its process, its end of the boot socket, where it is in the
/// protocol, and (with --label) its output pipes.
struct rank_proc {
  int rank = 0;
  pid_t pid = -1;  // -1: never started
  int sock = -1;   // clumprun's end of the boot socket; -1 once closed
  frame_reader in;
  frame_writer out;
  steady::time_point retry_at{};  // sending paused until then (ETOOMANYREFS)
  bool said_hello = false;
  int hello_pid = 0;
  wire::net_address_slot address{};  // from the hello, checked
  int region_fd = -1;           // until handed out to every rank
  bool arrived = false;         // in the current collective
  bool exit_requested = false;  // sent exit: it ends itself
  bool exited = false;          // reaped
  bool draining = false;        // its socket broke while sending: reading what is left before closing it
  bool remote = false;          // on another host: started by its agent; pid is the agent's report
  std::unique_ptr<line_forwarder> out_fwd, err_fwd;

  ~rank_proc();
};

/// A framed stream to another clumprun (an agent, or the head), over TCP.
struct connection {
  int fd = -1;
  frame_reader in;
  frame_writer out;
  // Head, before the agent has proved itself: the challenge it must answer, and by when.
  handshake::nonce challenge{};
  steady::time_point prove_by{};
  ~connection();
};

/// One host of a remote job, seen from the head: its agent process (the
/// spawn template running clumprun --agent) and the agent's connection.
struct host_link {
  int node = 0;
  pid_t agent_pid = -1;
  bool agent_exited = false;
  bool connected = false;            // the agent did connect (conn may be gone since)
  std::unique_ptr<connection> conn;  // null until the agent connected and said hello
};

/// The head's end of a remote rank's boot socket: what the head's boot code
/// writes to the rank goes to its agent, and what the agent relays from the
/// rank is written here for the boot code to read.
struct relay_end {
  int fd = -1;
  frame_reader in;
  frame_writer out;
  ~relay_end();
};

/// The job from start to end; see launcher.hpp. Single-threaded: every
/// member runs inside loop() or before it.
class job_runner {
 public:
  explicit job_runner(const launch_options& o) : o_(o), n_(o.nranks) {}
  job_runner(const job_runner&) = delete;
  job_runner& operator=(const job_runner&) = delete;
  ~job_runner();
  int run();

 private:
  // ---- processes, signals and the loop (launcher.cpp) ----------------------
  bool setup_signals();
  std::vector<std::string> make_base_env() const;
  void spawn(rank_proc& rp);
  // In the child, between fork and exec. clumprun has one thread, so any call
// is safe here, but nothing may flush clumprun's stdio buffers (they would
// come out twice): messages go through dprintf, and the way out is _exit.
  [[noreturn]] void exec_child(int rank, pid_t parent, int sock, int out_w, int err_w, char** argv, char** envp);
  void start_failed(rank_proc& rp, const char* step, int e);
  void send_signal(const rank_proc& rp, int sig);
  void signal_all(int sig);
  // Ends the job (first call wins): `code` becomes clumprun's exit code, the
  // ranks get SIGTERM and, after the grace period, SIGKILL. `politely`: they
  // first get an `end` message and end_grace_ms to exit on their own.
  void end_job(int code, const std::string& message, bool politely = false);
  void on_signal(int sig);
  void kill_all();
  /// How long ranks get to end after SIGTERM (or a forwarded signal) before SIGKILL.
  steady::duration grace() const {
    return std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(o_.kill_grace_seconds));
  }
  void reap();
  void on_rank_exit(rank_proc& rp, int st);
  // "rank 3" or "ranks 0, 2, 5": the ranks that satisfy `pred`, at most 8 named.
  std::string rank_list(const std::function<bool(const rank_proc&)>& pred) const;
  /// For a rank that died of wait status `st`: ", memory ran out ..." when it
  /// was SIGKILL and the kernel's OOM killer has killed since the job began.
  std::string oom_note(int st) const;
  // A rank that has exited cannot contribute any more: if others wait for it
  // (at the rendezvous or in a collective), they would wait forever.
  void check_stuck();
  void rank_failed(int code, const std::string& what);
  void read_signals();
  // Acts on the deadlines that have passed; returns false when clumprun
  // should stop waiting for its ranks.
  bool handle_deadlines(steady::time_point now);
  int poll_timeout_ms(steady::time_point now) const;
  void loop();

  // ---- jobs across hosts (remote.cpp) --------------------------------------
  // The head: listen, start one agent per host, relay between the ranks'
  // boot sockets and the agents.
  bool start_remote();
  void spawn_agent(host_link& h);
  void on_accept();
  void on_pending(size_t i);
  void on_link(host_link& h, short revents);
  void on_relay_end(int rank, short revents);
  void link_lost(host_link& h, const std::string& why);
  void on_agent_exit(host_link& h, int st);
  void check_links(steady::time_point now);
  void signal_remote(const rank_proc& rp, int sig);
  // The agent: connect to the head, start this host's ranks, relay.
  bool start_agent();
  void agent_started(const rank_proc& rp);
  void agent_relay_from_rank(rank_proc& rp, frame& f);
  void on_head(short revents);
  void agent_rank_exited(rank_proc& rp, int st);
  void flush_head();
  // Both: the descriptors the loop polls for them, and what to do when one is ready.
  void remote_fds(std::vector<pollfd>& fds, std::vector<std::function<void(short)>>& handlers);

  // ---- the boot protocol (rendezvous.cpp) ----------------------------------
  void close_socket(rank_proc& rp);
  void read_socket(rank_proc& rp);
  void send_pending(rank_proc& rp);
  void process_frames(rank_proc& rp);
  // The rank broke the protocol: tell it (it throws or exits with the text)
  // and end the job.
  void protocol_error(rank_proc& rp, const std::string& why);
  void handle_frame(rank_proc& rp, frame& f);
  void on_hello(rank_proc& rp, frame& f);
  // Everybody said hello: hand out the job and every rank's region.
  void start_job();
  static std::string describe(const wire::collective_body& b);
  void on_collective(rank_proc& rp, frame& f);
  void complete_collective();
  void on_getenv(rank_proc& rp, frame& f);
  void on_exit_request(rank_proc& rp, frame& f);

  const launch_options& o_;
  const int n_;
  int sfd_ = -1;  // signalfd
  sigset_t orig_mask_{};
  bool stdin_is_tty_ = false;
  std::vector<std::string> base_env_;
  std::vector<std::unique_ptr<rank_proc>> ranks_;
  int live_ = 0;  // started and not yet reaped

  int hellos_ = 0;
  bool started_ = false;  // job and regions handed out
  int arrived_ = 0;       // ranks in the current collective
  int first_rank_ = 0;    // the first of them
  wire::collective_body current_{};
  std::shared_ptr<std::vector<std::byte>> result_;

  bool ending_ = false;
  bool termed_ = false;  // SIGTERM (or the forwarded signal) sent
  bool killed_ = false;  // SIGKILL sent
  int exit_code_ = 0;
  int64_t oom_kills_at_start_ = -1;  // /proc/vmstat oom_kill when the job began (-1: unknown)
  std::optional<steady::time_point> timeout_at_;
  steady::time_point term_at_{};
  steady::time_point kill_at_{};
  steady::time_point give_up_at_{};

  // Remote jobs (remote.cpp).
  bool agent_ = false;       // this clumprun is an agent
  handshake::secret secret_{};  // the job's secret: head and agents prove to each other they share it
  std::array<unsigned char, 32> agent_net_key_{};  // agent: the datagram key, from the head through ssh
  uint64_t agent_job_id_ = 0;                      // agent: the job's id, from the head once it proved itself
  int listen_fd_ = -1;       // head: where agents connect
  std::string listen_text_;  // head: "a.b.c.d:port"
  std::vector<host_link> hosts_;
  std::vector<std::unique_ptr<connection>> pending_;  // head: accepted, no hello yet
  std::vector<std::unique_ptr<relay_end>> relays_;    // head: per rank
  steady::time_point connect_by_{};                   // head: every agent connected by then
  std::unique_ptr<connection> head_;                  // agent: the head
  int placeholder_fd_ = -1;  // stands for the region of a rank on another host
};

}  // namespace clumprun
