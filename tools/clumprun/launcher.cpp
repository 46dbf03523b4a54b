#include "launcher.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

#include <fmt/format.h>

#include "job_runner.hpp"

extern char** environ;

namespace clumprun {

namespace {

// How long after SIGKILL clumprun stops waiting for ranks that did not end.
constexpr auto give_up_after_kill = std::chrono::seconds(5);
constexpr int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
// What clumprun sets for each rank; stale values from an enclosing job are dropped.
constexpr const char* rank_variables[] = {"CLUMP_BOOT_FD", "CLUMP_RANK",   "CLUMP_SIZE",      "CLUMP_LOCAL_RANK",
                                          "CLUMP_JOB_ID",  "CLUMP_LAUNCHER_PID", "CLUMP_HOST_RANKS", "CLUMP_HOST_CPUS"};

// Where the network protocol binds its socket; the user's value wins.
constexpr const char* net_address_variable = "CLUMP_NET_ADDRESS";

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : fmt::format("signal {}", sig);
}

}  // namespace

rank_proc::~rank_proc() {
  if (sock >= 0) ::close(sock);
  if (region_fd >= 0) ::close(region_fd);
}

job_runner::~job_runner() {
  if (sfd_ >= 0) ::close(sfd_);
}

namespace {
// How many processes the kernel's out-of-memory killer has ended since boot
// (/proc/vmstat, Linux 4.13 and later; cgroup limits included), or -1.
int64_t oom_kills() {
  std::ifstream in("/proc/vmstat");
  std::string name;
  int64_t value = 0;
  while (in >> name >> value)
    if (name == "oom_kill") return value;
  return -1;
}
}  // namespace

std::string job_runner::oom_note(int st) const {
  if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL || oom_kills_at_start_ < 0) return "";
  const int64_t now = oom_kills();
  if (now <= oom_kills_at_start_) return "";
  return fmt::format(": memory ran out (the kernel's out-of-memory killer ended {} process{} during the job; "
                     "dmesg names them): use fewer ranks per node, a smaller input or more memory",
                     now - oom_kills_at_start_, now - oom_kills_at_start_ == 1 ? "" : "es");
}

int job_runner::run() {
  if (!setup_signals()) return 1;
  oom_kills_at_start_ = oom_kills();
  if (o_.timeout_seconds > 0)
    timeout_at_ = steady::now() + std::chrono::duration_cast<steady::duration>(
                                      std::chrono::duration<double>(o_.timeout_seconds));
  stdin_is_tty_ = ::isatty(STDIN_FILENO) == 1;
  if (stdin_is_tty_ && o_.verbose)
    say("stdin is a terminal, which ranks in their own process groups cannot read: ranks read /dev/null "
        "(give rank 0 input with < file)");
  base_env_ = make_base_env();
  for (int r = 0; r < n_; ++r) {
    ranks_.push_back(std::make_unique<rank_proc>());
    ranks_.back()->rank = r;
  }
  if (o_.remote) {
    // The head of a job across hosts: the agents start the ranks.
    if (!start_remote()) kill_all();
  } else if (!o_.head.empty()) {
    // An agent: this host's ranks only.
    if (!start_agent()) return exit_code_;
    for (auto& rp : ranks_) {
      if (ending_ || o_.nodes.node_of[static_cast<size_t>(rp->rank)] != o_.agent_node) continue;
      spawn(*rp);
      if (rp->pid > 0) agent_started(*rp);
    }
  } else {
    for (int r = 0; r < n_ && !ending_; ++r) spawn(*ranks_[static_cast<size_t>(r)]);
  }
  loop();
  if (agent_) flush_head();
  for (auto& rp : ranks_) {
    if (rp->out_fwd) rp->out_fwd->finish();
    if (rp->err_fwd) rp->err_fwd->finish();
  }
  if (o_.verbose) say(fmt::format("job {:016x} ended; exit code {}", o_.job_id, exit_code_));
  return exit_code_;
}

bool job_runner::setup_signals() {
  sigset_t set;
  ::sigemptyset(&set);
  ::sigaddset(&set, SIGCHLD);
  for (int s : forwarded_signals) ::sigaddset(&set, s);
  // Blocked and read from a signalfd, so that they are handled inside the
  // poll loop, never in the middle of it.
  ::sigprocmask(SIG_BLOCK, &set, &orig_mask_);
  sfd_ = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd_ < 0) {
    say(fmt::format("signalfd failed: {}", std::strerror(errno)));
    return false;
  }
  // A rank's pipe or socket may close at any time; that must not kill us.
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}

std::vector<std::string> job_runner::make_base_env() const {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    bool ours = std::any_of(std::begin(rank_variables), std::end(rank_variables), [&](const char* name) {
      size_t len = std::strlen(name);
      return entry.size() > len && entry.compare(0, len, name) == 0 && entry[len] == '=';
    });
    if (!ours) env.emplace_back(entry);
  }
  // Ranks on one machine reach each other over loopback, which the network
  // protocol binds unless told otherwise. Across --hosts each rank picks the
  // address of its own host's interface, which clumprun cannot know.
  if (o_.nodes.hosts.empty() && !std::getenv(net_address_variable))
    env.push_back(fmt::format("{}=127.0.0.1", net_address_variable));
  return env;
}

void job_runner::spawn(rank_proc& rp) {
  // Everything clumprun keeps is close-on-exec, so that no rank inherits
  // another rank's socket or pipe; the child clears the flag on its own end.
  int sv[2] = {-1, -1}, outp[2] = {-1, -1}, errp[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return start_failed(rp, "socketpair", errno);
  if (o_.label && (::pipe2(outp, O_CLOEXEC) != 0 || ::pipe2(errp, O_CLOEXEC) != 0)) {
    int e = errno;
    for (int fd : {sv[0], sv[1], outp[0], outp[1], errp[0], errp[1]})
      if (fd >= 0) ::close(fd);
    return start_failed(rp, "pipe", e);
  }
  const size_t r = static_cast<size_t>(rp.rank);
  const int node = o_.nodes.node_of[r];
  std::vector<std::string> env = base_env_;
  env.push_back(fmt::format("CLUMP_BOOT_FD={}", sv[1]));
  env.push_back(fmt::format("CLUMP_RANK={}", rp.rank));
  env.push_back(fmt::format("CLUMP_SIZE={}", n_));
  env.push_back(fmt::format("CLUMP_LOCAL_RANK={}", o_.nodes.local_rank[r]));
  // Whether the ranks of this host outnumber its cores (CLUMP_YIELD=auto):
  // every rank of the job is on this machine unless --hosts spread them, and
  // the cores are the ones clumprun itself may run on (taskset, a cgroup).
  const auto on_host = o_.nodes.hosts.empty() ? n_ : std::count(o_.nodes.node_of.begin(), o_.nodes.node_of.end(), node);
  env.push_back(fmt::format("CLUMP_HOST_RANKS={}", on_host));
  static const int cpus = [] {  // clumprun's own affinity: asked once, not per rank
    cpu_set_t set;
    CPU_ZERO(&set);
    return ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  }();
  if (cpus > 0) env.push_back(fmt::format("CLUMP_HOST_CPUS={}", cpus));
  // Not the job's id: the environment of a process is no place for what ties
  // datagrams to the job (see docs/guide.md, security). The launcher's pid
  // tells tools which processes are this job's.
  env.push_back(fmt::format("CLUMP_LAUNCHER_PID={}", ::getpid()));
  // With --hosts the words of the spawn template come first; the wrapper must
  // keep the environment and the boot socket (ip netns exec and env do).
  std::vector<std::string> words = spawn_words(o_.nodes, node);
  words.insert(words.end(), o_.argv.begin(), o_.argv.end());
  std::vector<char*> envp, argv;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (auto& a : words) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) exec_child(rp.rank, parent, sv[1], outp[1], errp[1], argv.data(), envp.data());
  int fork_errno = errno;
  for (int fd : {sv[1], outp[1], errp[1]})
    if (fd >= 0) ::close(fd);
  if (pid < 0) {
    for (int fd : {sv[0], outp[0], errp[0]})
      if (fd >= 0) ::close(fd);
    start_failed(rp, "fork", fork_errno);
    return;
  }
  // The child does the same; whichever runs first, the group exists before
  // we may signal it.
  ::setpgid(pid, pid);
  rp.pid = pid;
  rp.sock = sv[0];
  ::fcntl(rp.sock, F_SETFL, ::fcntl(rp.sock, F_GETFL) | O_NONBLOCK);
  if (o_.label) {
    rp.out_fwd = std::make_unique<line_forwarder>(outp[0], STDOUT_FILENO, fmt::format("[{}] ", rp.rank));
    rp.err_fwd = std::make_unique<line_forwarder>(errp[0], STDERR_FILENO, fmt::format("[{}] ", rp.rank));
  }
  ++live_;
  if (o_.verbose)
    say(fmt::format("rank {}: pid {}, node {}{}{}", rp.rank, pid, node,
                    o_.nodes.hosts.empty() ? std::string() : " (" + o_.nodes.hosts[static_cast<size_t>(node)] + ")",
                    o_.cpu_sets.empty() ? std::string() : ", bound to " + o_.bind_descriptions[r]));
}

// In the child, between fork and exec. clumprun has one thread, so any call
// is safe here, but nothing may flush clumprun's stdio buffers (they would
// come out twice): messages go through dprintf, and the way out is _exit.
void job_runner::exec_child(int rank, pid_t parent, int sock, int out_w, int err_w, char** argv, char** envp) {
  ::setpgid(0, 0);  // signals to the group reach whatever the rank starts
  // If clumprun dies (even by SIGKILL), so does the rank. The check after
  // covers a clumprun that died before the prctl.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  ::sigprocmask(SIG_SETMASK, &orig_mask_, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  // Only rank 0 reads clumprun's input, and only when it is not a terminal:
  // a process outside the terminal's foreground group that reads it stops.
  if (rank != 0 || stdin_is_tty_ || agent_) {
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0 && null_fd != STDIN_FILENO) {
      ::dup2(null_fd, STDIN_FILENO);
      ::close(null_fd);
    }
  }
  if (out_w >= 0) {
    ::dup2(out_w, STDOUT_FILENO);
    ::dup2(err_w, STDERR_FILENO);
  }
  ::fcntl(sock, F_SETFD, 0);  // the one descriptor that must survive exec
  if (!o_.cpu_sets.empty()) {
    const cpu_set_t& set = o_.cpu_sets[static_cast<size_t>(rank)];
    if (::sched_setaffinity(0, sizeof set, &set) != 0)
      ::dprintf(STDERR_FILENO, "clumprun: rank %d: could not bind to %s: %s; running unbound\n", rank,
                o_.bind_descriptions[static_cast<size_t>(rank)].c_str(), std::strerror(errno));
  }
  ::execve(o_.program.c_str(), argv, envp);
  int e = errno;
  ::dprintf(STDERR_FILENO, "clumprun: rank %d: cannot run '%s': %s\n", rank, o_.program.c_str(), std::strerror(e));
  ::_exit(e == ENOENT ? 127 : 126);
}

void job_runner::start_failed(rank_proc& rp, const char* step, int e) {
  std::string hint;
  if (e == EAGAIN) hint = " (too many processes: see ulimit -u, or run fewer ranks)";
  if (e == EMFILE || e == ENFILE) hint = " (too many open files: raise ulimit -n, or run fewer ranks)";
  if (e == ENOMEM) hint = " (out of memory)";
  end_job(1, fmt::format("could not start rank {} of {}: {}: {}{}; ending the job", rp.rank, n_, step,
                         std::strerror(e), hint));
}

void job_runner::send_signal(const rank_proc& rp, int sig) {
  if (rp.remote) return rp.exited ? void() : signal_remote(rp, sig);
  if (rp.pid <= 0 || rp.exited) return;  // never signal a reaped pid: it may be reused
  if (::kill(-rp.pid, sig) != 0) ::kill(rp.pid, sig);
}

void job_runner::signal_all(int sig) {
  for (auto& rp : ranks_)
    if (!(rp->exit_requested && sig == SIGTERM)) send_signal(*rp, sig);
}

// Ends the job (first call wins): `code` becomes clumprun's exit code, the
// ranks get SIGTERM and, after the grace period, SIGKILL. `politely`: they
// first get an `end` message and end_grace_ms to exit on their own.
void job_runner::end_job(int code, const std::string& message, bool politely) {
  if (ending_) return;
  ending_ = true;
  if (exit_code_ == 0) exit_code_ = code;  // --keep-going may have recorded an earlier failure
  if (!message.empty()) say(message);
  auto now = steady::now();
  if (politely) {
    wire::exit_body b{code, 0};
    for (auto& rp : ranks_) {
      if (rp->exited || rp->exit_requested || rp->sock < 0) continue;
      rp->out.push_body(wire::msg::end, b);
      send_pending(*rp);
    }
    term_at_ = now + std::chrono::milliseconds(wire::end_grace_ms);
    return;
  }
  signal_all(SIGTERM);
  termed_ = true;
  kill_at_ = now + grace();
}

void job_runner::on_signal(int sig) {
  if (!ending_) {
    ending_ = true;
    exit_code_ = 128 + sig;
    if (o_.verbose) say(fmt::format("received {}; forwarding it to the ranks", signal_name(sig)));
    signal_all(sig);
    termed_ = true;
    kill_at_ = steady::now() + grace();
  } else if (!termed_) {
    signal_all(sig);  // cut the polite wait after an exit request short
    termed_ = true;
    kill_at_ = steady::now() + grace();
  } else if (!killed_) {
    say(fmt::format("received {} while ending the job; killing the ranks now", signal_name(sig)));
    kill_all();
  }
}

void job_runner::kill_all() {
  signal_all(SIGKILL);
  // And the hosts' agents (their ssh), which ends what is left over there.
  for (auto& h : hosts_)
    if (h.agent_pid > 0 && !h.agent_exited) ::kill(-h.agent_pid, SIGKILL);
  killed_ = true;
  give_up_at_ = steady::now() + give_up_after_kill;
}

void job_runner::reap() {
  for (;;) {
    int st = 0;
    pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid <= 0) return;
    auto agent = std::find_if(hosts_.begin(), hosts_.end(), [&](auto& h) { return h.agent_pid == pid; });
    if (agent != hosts_.end()) {
      on_agent_exit(*agent, st);
      continue;
    }
    auto it = std::find_if(ranks_.begin(), ranks_.end(),
                           [&](auto& rp) { return !rp->remote && rp->pid == pid && !rp->exited; });
    if (it == ranks_.end()) continue;
    rank_proc& rp = **it;
    // What the rank said and printed before it died comes first: an exit
    // request changes how its death is reported.
    if (rp.sock >= 0) read_socket(rp);
    if (rp.out_fwd) rp.out_fwd->finish();
    if (rp.err_fwd) rp.err_fwd->finish();
    on_rank_exit(rp, st);
  }
}

void job_runner::on_rank_exit(rank_proc& rp, int st) {
  if (agent_) return agent_rank_exited(rp, st);  // the head judges
  rp.exited = true;
  --live_;
  if (rp.sock >= 0) close_socket(rp);
  // Its peers hear of it at once (a thread of theirs reads these): they stop
  // waiting for it and send it nothing more, whatever they are doing.
  if (started_ && !ending_) {
    const wire::peer_exited_body b{rp.rank, st};
    for (auto& q : ranks_) {
      if (q->exited || q->sock < 0) continue;
      q->out.push_body(wire::msg::peer_exited, b);
      send_pending(*q);
    }
  }
  std::string who = fmt::format("rank {} (pid {})", rp.rank, rp.pid);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    if (o_.verbose) say(who + " exited with code 0");
    check_stuck();
  } else if (WIFEXITED(st)) {
    if (ending_ && o_.verbose) say(fmt::format("{} exited with code {}", who, WEXITSTATUS(st)));
    rank_failed(WEXITSTATUS(st), fmt::format("{} exited with code {}", who, WEXITSTATUS(st)));
  } else if (WIFSIGNALED(st)) {
    int sig = WTERMSIG(st);
    std::string how = fmt::format("{} was killed by signal {} ({}){}{}", who, sig, ::strsignal(sig),
                                  WCOREDUMP(st) ? ", core dumped" : "", rp.remote ? "" : oom_note(st));
    if (ending_ && o_.verbose) say(how);
    rank_failed(128 + sig, how);
  }
}

// A rank failed: end the job, or with --keep-going let the others go on
// (they find it unreachable) and report the first failure's code at the end.
void job_runner::rank_failed(int code, const std::string& what) {
  if (!o_.keep_going || ending_) return end_job(code, what + "; ending the job");
  say(what + "; the other ranks go on (--keep-going)");
  if (exit_code_ == 0) exit_code_ = code;
  check_stuck();
}

// "rank 3" or "ranks 0, 2, 5": the ranks that satisfy `pred`, at most 8 named.
std::string job_runner::rank_list(const std::function<bool(const rank_proc&)>& pred) const {
  std::string list;
  int shown = 0, more = 0;
  for (auto& rp : ranks_) {
    if (!pred(*rp)) continue;
    if (shown < 8) {
      if (shown++) list += ", ";
      list += std::to_string(rp->rank);
    }
    else ++more;
  }
  if (more) list += fmt::format(" and {} more", more);
  return (shown + more == 1 ? "rank " : "ranks ") + list;
}

// A rank that has exited cannot contribute any more: if others wait for it
// (at the rendezvous or in a collective), they would wait forever.
void job_runner::check_stuck() {
  if (ending_) return;
  bool waiting = started_ ? arrived_ > 0 : hellos_ > 0;
  if (!waiting) return;
  for (auto& rp : ranks_) {
    bool missing = started_ ? !rp->arrived : !rp->said_hello;
    if (!rp->exited || !missing) continue;
    auto waiting_rank = [&](const rank_proc& q) { return started_ ? q.arrived : q.said_hello; };
    auto waiters = rank_list(waiting_rank);
    const char* verb = (started_ ? arrived_ : hellos_) == 1 ? "waits" : "wait";
    end_job(1, started_ ? fmt::format("rank {} (pid {}) exited while {} {} for it in {}; ending the job", rp->rank,
                                      rp->pid, waiters, verb, describe(current_))
                        : fmt::format("rank {} (pid {}) exited without joining the job while {} {} for it at the "
                                      "start; ending the job",
                                      rp->rank, rp->pid, waiters, verb));
    return;
  }
}

void job_runner::read_signals() {
  bool child = false;
  signalfd_siginfo si;
  while (::read(sfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
    if (si.ssi_signo == SIGCHLD) child = true;
    else on_signal(static_cast<int>(si.ssi_signo));
  }
  if (child) reap();
}

// Acts on the deadlines that have passed; returns false when clumprun
// should stop waiting for its ranks.
bool job_runner::handle_deadlines(steady::time_point now) {
  if (!ending_ && timeout_at_ && now >= *timeout_at_)
    end_job(124, fmt::format("the job did not finish within --timeout {} s; ending it", o_.timeout_seconds));
  if (o_.remote) check_links(now);
  auto running = [](const rank_proc& rp) { return rp.pid > 0 && !rp.exited; };
  if (ending_ && !termed_ && now >= term_at_) {
    signal_all(SIGTERM);
    termed_ = true;
    kill_at_ = now + grace();
  }
  if (termed_ && !killed_ && now >= kill_at_) {
    say(fmt::format("{} did not end within {} s of SIGTERM (--kill-grace); sending SIGKILL", rank_list(running),
                    o_.kill_grace_seconds));
    kill_all();
  }
  if (killed_ && now >= give_up_at_) {
    say(fmt::format("{} did not end even after SIGKILL (stuck in the kernel?); giving up on them",
                    rank_list(running)));
    return false;
  }
  return true;
}

int job_runner::poll_timeout_ms(steady::time_point now) const {
  std::optional<steady::time_point> next;
  auto consider = [&](steady::time_point t) { next = next ? std::min(*next, t) : t; };
  if (!ending_ && timeout_at_) consider(*timeout_at_);
  if (ending_ && !termed_) consider(term_at_);
  if (termed_ && !killed_) consider(kill_at_);
  if (killed_) consider(give_up_at_);
  if (o_.remote && !ending_ && now < connect_by_) consider(connect_by_);
  for (auto& rp : ranks_)
    if (rp->sock >= 0 && !rp->out.empty() && rp->retry_at > now) consider(rp->retry_at);
  if (!next) return -1;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, 60'000));
}

void job_runner::loop() {
  enum class kind { sock, out, err, remote };
  std::vector<pollfd> fds;
  struct source {
    kind k;
    rank_proc* rp;  // sock, out, err
    size_t index;   // remote: into remote_handlers
  };
  std::vector<source> who;
  std::vector<std::function<void(short)>> remote_handlers;
  while (live_ > 0) {
    auto now = steady::now();
    if (!handle_deadlines(now)) return;
    fds.assign(1, pollfd{sfd_, POLLIN, 0});
    who.clear();
    for (auto& rp : ranks_) {
      if (rp->sock >= 0) {
        short ev = POLLIN;
        if (!rp->out.empty() && rp->retry_at <= now) ev |= POLLOUT;
        fds.push_back({rp->sock, ev, 0});
        who.push_back({kind::sock, rp.get(), 0});
      }
      if (rp->out_fwd && rp->out_fwd->fd() >= 0) {
        fds.push_back({rp->out_fwd->fd(), POLLIN, 0});
        who.push_back({kind::out, rp.get(), 0});
      }
      if (rp->err_fwd && rp->err_fwd->fd() >= 0) {
        fds.push_back({rp->err_fwd->fd(), POLLIN, 0});
        who.push_back({kind::err, rp.get(), 0});
      }
    }
    remote_handlers.clear();
    remote_fds(fds, remote_handlers);
    for (size_t i = 0; i < remote_handlers.size(); ++i) who.push_back({kind::remote, nullptr, i});
    int n = ::poll(fds.data(), fds.size(), poll_timeout_ms(now));
    if (n < 0 && errno != EINTR) {
      say(fmt::format("poll failed: {}", std::strerror(errno)));
      end_job(1, "");
      kill_all();
      return;
    }
    if (n <= 0) continue;
    // Sockets and pipes before signals, so that a rank's last words and
    // output are taken before its death is judged.
    for (size_t i = 1; i < fds.size(); ++i) {
      short rev = fds[i].revents;
      if (!rev) continue;
      auto [k, rp, index] = who[i - 1];
      if (k == kind::remote) {
        remote_handlers[index](rev);
      } else if (k == kind::sock) {
        if (rp->sock < 0) continue;
        if (rev & (POLLIN | POLLHUP | POLLERR)) read_socket(*rp);
        if (rev & POLLOUT) send_pending(*rp);
      } else {
        (k == kind::out ? rp->out_fwd : rp->err_fwd)->on_readable();
      }
    }
    if (fds[0].revents) read_signals();
  }
}

namespace {
std::string say_prefix = "clumprun: ";
}

void say(const std::string& text) { write_all(STDERR_FILENO, say_prefix + text + "\n"); }

void set_say_prefix(const std::string& prefix) { say_prefix = prefix; }

int run_job(const launch_options& options) { return job_runner(options).run(); }

}  // namespace clumprun
