#pragma once
// --label: each rank's stdout and stderr come through pipes, and clumprun
// writes them out line by line with a "[rank] " prefix. clumprun is the only
// writer of its stdout and stderr, and writes whole lines with one write(),
// so lines of different ranks never mix inside a line.

#include <string>

namespace clumprun {

class line_forwarder {
 public:
  /// Takes ownership of `pipe_fd` (made non-blocking); writes to `dest_fd`.
  line_forwarder(int pipe_fd, int dest_fd, std::string prefix);
  line_forwarder(const line_forwarder&) = delete;
  line_forwarder& operator=(const line_forwarder&) = delete;
  ~line_forwarder();

  /// The pipe to poll for POLLIN, or -1 once it is closed.
  int fd() const { return fd_; }
  /// Reads what the pipe holds now and writes out the complete lines. At end
  /// of file, writes the partial last line (with a newline) and closes.
  void on_readable();
  /// Reads everything written so far (the rank has exited, so nothing more
  /// will come unless a child of it keeps the pipe open), writes the partial
  /// last line and closes the pipe.
  void finish();

 private:
  void emit(bool flush_partial);

  int fd_;
  int dest_;
  std::string prefix_;
  std::string pending_;  // bytes read but not written yet: at most a partial line
};

/// write(2) all of `text` to `fd`, retrying short writes and EINTR/EAGAIN;
/// gives up quietly when the reader is gone (EPIPE), since clumprun's exit
/// code must still come out.
void write_all(int fd, const std::string& text);

}  // namespace clumprun
