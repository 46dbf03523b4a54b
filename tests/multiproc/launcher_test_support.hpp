#pragma once
// What the launcher tests share: reading the probe's output, checking that no
// rank outlives its job and nothing is left in /dev/shm (the `launcher`
// fixture), and a fake clumprun to test a rank's side of the boot protocol.
// Included by launcher_test.cpp and launcher_test_nodes.cpp only, which are
// built with CLUMPRUN and BOOT_PROBE defined.

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "boot/channel.hpp"
#include "boot/wire.hpp"
#include "run_cmd.hpp"

namespace clump::test {

using namespace std::chrono_literals;

inline const std::string clumprun = CLUMPRUN;
inline const std::string probe = BOOT_PROBE;
inline constexpr auto job_timeout = 30s;

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// "[3] text" -> {3, "text"}; {-1, line} when the line has no label.
inline std::pair<int, std::string> split_label(const std::string& line) {
  size_t close = line.find("] ");
  if (line.empty() || line[0] != '[' || close == std::string::npos || close == 1 ||
      line.find_first_not_of("0123456789", 1) != close)
    return {-1, line};
  return {std::stoi(line.substr(1, close - 1)), line.substr(close + 2)};
}

// rank -> pid, from the probe's "pid RANK PID" lines (labelled or not).
inline std::map<int, pid_t> rank_pids(const std::string& output) {
  std::map<int, pid_t> pids;
  for (const auto& line : lines_of(output)) {
    int rank = -1, pid = -1;
    char tail = 0;
    if (std::sscanf(split_label(line).second.c_str(), "pid %d %d%c", &rank, &pid, &tail) == 2)
      pids[rank] = static_cast<pid_t>(pid);
  }
  return pids;
}

// A process is gone when /proc has no entry for it, or only a zombie's.
inline bool process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;
  size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && (text[paren + 2] == 'Z' || text[paren + 2] == 'X');
}

// Polls /proc until every pid is gone or the deadline passes; returns the survivors.
inline std::vector<pid_t> survivors(const std::map<int, pid_t>& pids, std::chrono::milliseconds timeout = 5000ms) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::vector<pid_t> alive;
    for (auto [rank, pid] : pids)
      if (!process_gone(pid)) alive.push_back(pid);
    if (alive.empty() || std::chrono::steady_clock::now() >= deadline) return alive;
    ::usleep(10000);  // polling /proc, not synchronising
  }
}

// Processes (of any parentage) whose environment says they were started by
// the clumprun of pid `launcher` (CLUMP_LAUNCHER_PID), found through /proc.
inline std::vector<pid_t> processes_of_job(pid_t launcher) {
  std::vector<pid_t> found;
  const std::string needle = "CLUMP_LAUNCHER_PID=" + std::to_string(launcher);
  if (DIR* d = ::opendir("/proc")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      pid_t pid = static_cast<pid_t>(std::stol(e->d_name));
      std::ifstream env(std::string("/proc/") + e->d_name + "/environ");
      std::string text((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
      for (size_t at = 0; at < text.size();) {
        size_t end = std::min(text.find('\0', at), text.size());
        if (text.compare(at, end - at, needle) == 0) {
          if (!process_gone(pid)) found.push_back(pid);
          break;
        }
        at = end + 1;
      }
    }
    ::closedir(d);
  }
  return found;
}

/// The names in `dir` (only those containing `part`, if given).
inline std::set<std::string> dir_entries(const char* dir, const char* part = nullptr) {
  std::set<std::string> names;
  if (DIR* d = ::opendir(dir)) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != ".." && (!part || name.find(part) != std::string::npos)) names.insert(name);
    }
    ::closedir(d);
  }
  return names;
}

inline std::set<std::string> shm_clump_files() { return dir_entries("/dev/shm", "clump"); }

inline std::vector<std::string> job(int n, std::vector<std::string> probe_args, std::vector<std::string> options = {}) {
  std::vector<std::string> argv{clumprun, "-n", std::to_string(n)};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back(probe);
  argv.insert(argv.end(), probe_args.begin(), probe_args.end());
  return argv;
}

inline int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class launcher : public ::testing::Test {
 protected:
  void SetUp() override { shm_before_ = shm_clump_files(); }

  void TearDown() override {
    for (const auto& name : shm_clump_files())
      EXPECT_TRUE(shm_before_.count(name)) << "left behind in /dev/shm: " << name;
  }

  // Every rank the output names must be gone (clumprun reaps; nothing orphaned).
  static void expect_no_ranks_left(const std::string& output, size_t expected_ranks) {
    auto pids = rank_pids(output);
    EXPECT_EQ(pids.size(), expected_ranks) << output;
    auto alive = survivors(pids);
    EXPECT_TRUE(alive.empty()) << alive.size() << " rank(s) outlived the job, e.g. pid " << alive.front() << "\n"
                               << output;
  }

  std::set<std::string> shm_before_;
};

// Plays clumprun's part for one rank over a socketpair, to test the rank's
// side of the protocol where the real clumprun would never misbehave.
class fake_launcher {
 public:
  fake_launcher() {
    ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv_);
    ::fcntl(sv_[1], F_SETFD, 0);  // the rank's end is inherited
  }
  ~fake_launcher() {
    for (int fd : sv_)
      if (fd >= 0) ::close(fd);
  }

  std::vector<std::string> env(int size) const {
    return {"CLUMP_BOOT_FD=" + std::to_string(sv_[1]), "CLUMP_RANK=0", "CLUMP_SIZE=" + std::to_string(size),
            "CLUMP_JOB_ID", "CLUMP_LAUNCHER_PID"};
  }

  // After the rank has been started: our copy of its end would hide its exit.
  void rank_started() {
    ::close(sv_[1]);
    sv_[1] = -1;
  }

  std::optional<clump::boot::frame> receive(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    clump::boot::frame f;
    std::string why;
    while (std::chrono::steady_clock::now() < deadline) {
      if (in_.next(f, why) == clump::boot::frame_reader::result::frame) return f;
      pollfd p{sv_[0], POLLIN, 0};
      if (::poll(&p, 1, 50) > 0 && in_.fill(sv_[0]) <= 0 && errno != EAGAIN) return std::nullopt;
    }
    return std::nullopt;
  }

  /// A job message for a job of one, as clumprun writes it; tests spoil it
  /// on purpose to see the rank refuse it.
  static std::vector<std::byte> job_message(uint32_t version, uint64_t tag, int32_t pid, int32_t node = 0,
                                            const clump::boot::wire::net_address_slot& address = {}) {
    namespace wire = clump::boot::wire;
    std::vector<std::byte> body(wire::job_length(1));
    wire::job_body jb{version, 1, 0x1234, 0, 0, {}};
    std::byte* at = body.data();
    for (auto [p, len] : {std::pair<const void*, size_t>{&jb, sizeof jb}, {&tag, 8}, {&pid, 4}, {&node, 4},
                          {&address, sizeof address}}) {
      std::memcpy(at, p, len);
      at += len;
    }
    return body;
  }

  /// Sends `job` (see job_message) and the region descriptor of the job of one.
  void send_job(const std::vector<std::byte>& job, int region_fd) {
    namespace wire = clump::boot::wire;
    out_.push(wire::msg::job, job);
    wire::region_fds_body rb{0, 1};
    out_.push_body(wire::msg::region_fds, rb, {}, std::span<const int>(&region_fd, 1));
    while (out_.flush(sv_[0]) == 0) {
      pollfd p{sv_[0], POLLOUT, 0};
      ::poll(&p, 1, 100);
    }
  }

  void send_job(uint32_t version, uint64_t tag, int32_t pid, int region_fd) {
    send_job(job_message(version, tag, pid), region_fd);
  }

  void close_socket() {
    ::close(sv_[0]);
    sv_[0] = -1;
  }

 private:
  int sv_[2] = {-1, -1};
  clump::boot::frame_reader in_;
  clump::boot::frame_writer out_;
};

}  // namespace clump::test
