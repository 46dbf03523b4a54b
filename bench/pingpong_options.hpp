#pragma once
// pingpong's command line.

#include <algorithm>
#include <string>
#include <vector>

namespace pingpong {

/// What to measure and how (see `usage`).
struct options {
  bool quick = false;
  std::string json = "bench-pingpong.json";
  int reps = 0;           // 0: 7, or 3 with --quick
  double sample_ms = 30;  // length of one timed loop
  int slots = 2;          // long streaming: rotating area of this many message sizes
  std::vector<std::string> only;  // empty: every measure
  std::string udp = "auto";       // raw UDP limits: auto (when rank 1 is over the network), on, off
  bool help = false;

  bool wants(const std::string& id) const {
    return only.empty() || std::find(only.begin(), only.end(), id) != only.end();
  }
};

/// The help text.
extern const char* const usage;

/// Reads the command line into `o`; false with `err` set on a mistake.
bool parse(int argc, char** argv, options& o, std::string& err);

}  // namespace pingpong
