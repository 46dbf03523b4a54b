#pragma once
// Running real commands from multi-process tests: start a command in its own
// process group with stdout and stderr captured through one pipe, watch its
// output while it runs, wait for it with a deadline, and kill the whole group
// if the deadline passes. Nothing here sleeps to synchronise: every wait is a
// poll() on the output pipe with a deadline.
//
//   auto r = run_cmd({CLUMPRUN, "-n", "2", BOOT_PROBE, "hello"}, std::chrono::seconds(20));
//   EXPECT_EQ(r.exit_code, 0) << r.output;
//
//   child_process job({CLUMPRUN, "-n", "3", BOOT_PROBE, "hang"});
//   ASSERT_TRUE(job.wait_for_output("ready", 3, std::chrono::seconds(20))) << job.output();
//   ::kill(job.pid(), SIGINT);
//   auto r = job.wait(std::chrono::seconds(20));

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace clump::test {

/// How a command ended and what it printed.
struct cmd_result {
  int exit_code = -1;      ///< the exit code, or -1 when killed by a signal
  int signal = 0;          ///< the signal that killed it, or 0
  bool timed_out = false;  ///< the deadline passed and the test killed it
  std::string output;      ///< stdout and stderr, interleaved as written
  std::chrono::steady_clock::time_point ended{};  ///< when the command was seen to end (within ~20 ms)
};

/// A command running in its own process group.
class child_process {
 public:
  /// Starts `argv` (argv[0] searched in PATH). `env` entries "NAME=value" set
  /// a variable, "NAME" removes it; the rest of the environment is inherited.
  /// Standard input is /dev/null.
  explicit child_process(const std::vector<std::string>& argv, const std::vector<std::string>& env = {}) {
    std::vector<std::string> vars;
    for (char** e = environ; *e; ++e) {
      std::string entry = *e;
      std::string name = entry.substr(0, entry.find('='));
      bool replaced = false;
      for (const auto& o : env) replaced |= o.substr(0, o.find('=')) == name;
      if (!replaced) vars.push_back(entry);
    }
    for (const auto& o : env)
      if (o.find('=') != std::string::npos) vars.push_back(o);
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (auto& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);

    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      output_ = std::string("pipe2: ") + std::strerror(errno);
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      int null_fd = ::open("/dev/null", O_RDONLY);
      ::dup2(null_fd, STDIN_FILENO);
      ::dup2(p[1], STDOUT_FILENO);
      ::dup2(p[1], STDERR_FILENO);
      ::execvpe(args[0], args.data(), envp.data());
      ::dprintf(STDERR_FILENO, "run_cmd: cannot run %s: %s\n", args[0], std::strerror(errno));
      ::_exit(127);
    }
    ::close(p[1]);
    if (pid_ < 0) {
      ::close(p[0]);
      output_ = std::string("fork: ") + std::strerror(errno);
      return;
    }
    ::setpgid(pid_, pid_);
    fd_ = p[0];
    ::fcntl(fd_, F_SETFL, O_NONBLOCK);
  }

  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// Kills the process group if the command is still running, and reaps it.
  ~child_process() {
    if (pid_ > 0 && !reaped_) {
      ::kill(-pid_, SIGKILL);
      int st;
      ::waitpid(pid_, &st, 0);
    }
    if (fd_ >= 0) ::close(fd_);
  }

  /// The command's pid (and process group id); -1 when it could not start.
  pid_t pid() const { return pid_; }

  /// Everything read so far.
  const std::string& output() const { return output_; }

  /// Reads output until `text` has appeared `times` times or `timeout` passes.
  bool wait_for_output(const std::string& text, int times, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (count(text) >= times) return true;
      auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::milliseconds(0) || fd_ < 0) return count(text) >= times;
      read_some(static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count()));
    }
  }

  /// Waits for the command to end, reading its output. Past `timeout` kills
  /// its process group and reports timed_out. After the command exits, output
  /// is read until end of file or for at most `drain` more (descendants may
  /// hold the pipe).
  cmd_result wait(std::chrono::milliseconds timeout,
                  std::chrono::milliseconds drain = std::chrono::milliseconds(2000)) {
    cmd_result r;
    if (pid_ <= 0) {
      r.output = output_;
      return r;
    }
    auto deadline = std::chrono::steady_clock::now() + timeout;
    int st = 0;
    while (!reaped_) {
      pid_t w = ::waitpid(pid_, &st, WNOHANG);
      if (w == pid_) {
        reaped_ = true;
        r.ended = std::chrono::steady_clock::now();
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        r.timed_out = true;
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, &st, 0);
        reaped_ = true;
        r.ended = std::chrono::steady_clock::now();
        break;
      }
      // The pipe wakes us when output arrives or the last writer exits; the
      // short timeout bounds how late we notice an exit while a descendant
      // still holds the pipe.
      read_some(fd_ >= 0 ? 20 : 0);
      if (fd_ < 0) {
        pollfd none{};
        ::poll(&none, 0, 10);
      }
    }
    auto drain_until = std::chrono::steady_clock::now() + drain;
    while (fd_ >= 0 && std::chrono::steady_clock::now() < drain_until) read_some(20);
    if (WIFEXITED(st)) r.exit_code = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) r.signal = WTERMSIG(st);
    r.output = output_;
    return r;
  }

 private:
  int count(const std::string& text) const {
    int n = 0;
    for (size_t at = output_.find(text); at != std::string::npos; at = output_.find(text, at + text.size())) ++n;
    return n;
  }

  // Waits up to timeout_ms for the pipe, then reads what it holds.
  void read_some(int timeout_ms) {
    if (fd_ < 0) return;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n > 0) {
        output_.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 || errno != EAGAIN) {
        ::close(fd_);
        fd_ = -1;
      }
      return;
    }
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  bool reaped_ = false;
  std::string output_;
};

/// Runs `argv` to its end (see child_process) and returns how it ended.
inline cmd_result run_cmd(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          const std::vector<std::string>& env = {}) {
  child_process c(argv, env);
  return c.wait(timeout);
}

}  // namespace clump::test
