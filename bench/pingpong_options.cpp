#include "pingpong_options.hpp"

#include <cstdlib>

#include <fmt/core.h>

namespace pingpong {

namespace {

const char* const measures[] = {"short", "medium_echo", "long", "long_stream", "medium_stream", "short_stream"};

}  // namespace

const char* const usage =
    "usage: clumprun -n 2 --bind core pingpong [--quick] [--json FILE] [--reps R] [--sample-ms MS] [--slots S]\n"
    "                                          [--only LIST] [--udp auto|on|off]\n"
    "  --quick         fewer sizes and 3 repetitions (a few seconds)\n"
    "  --json FILE     where to write every sample (default bench-pingpong.json)\n"
    "  --reps R        samples per figure; the median is reported (default 7, --quick 3)\n"
    "  --sample-ms MS  length of one timed loop (default 30, at least 20)\n"
    "  --slots S       long streaming writes into a rotating area of S message sizes (default 2)\n"
    "  --only LIST     only these measures (comma-separated): short, medium_echo, long, long_stream,\n"
    "                  medium_stream, short_stream; the physical limits always run\n"
    "  --udp WHEN      raw UDP limits (ping-pong, streaming) between the two ranks: auto (default: when\n"
    "                  rank 1 is reached through clump's network), on, off\n";

bool parse(int argc, char** argv, options& o, std::string& err) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        err = a + " needs " + what;
        return nullptr;
      }
      return argv[++i];
    };
    auto number = [&](const char* what, double lo, double hi, double& out) {
      const char* v = value(what);
      if (!v) return false;
      char* end = nullptr;
      out = std::strtod(v, &end);
      if (end == v || *end || out < lo || out > hi) {
        err = fmt::format("{} {}: expected {} from {} to {}", a, v, what, lo, hi);
        return false;
      }
      return true;
    };
    double x = 0;
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--json") {
      const char* v = value("a file name");
      if (!v) return false;
      o.json = v;
    } else if (a == "--reps") {
      if (!number("a count", 1, 1000, x)) return false;
      o.reps = static_cast<int>(x);
    } else if (a == "--sample-ms") {
      if (!number("milliseconds", 20, 10000, x)) return false;
      o.sample_ms = x;
    } else if (a == "--slots") {
      if (!number("a count", 1, 8, x)) return false;
      o.slots = static_cast<int>(x);
    } else if (a == "--only") {
      const char* v = value("a list of measures");
      if (!v) return false;
      const std::string list = v;
      for (size_t start = 0; start <= list.size();) {
        const size_t comma = std::min(list.find(',', start), list.size());
        const std::string id = list.substr(start, comma - start);
        if (std::none_of(std::begin(measures), std::end(measures), [&](const char* m) { return id == m; })) {
          err = "--only: unknown measure '" + id + "'";
          return false;
        }
        o.only.push_back(id);
        start = comma + 1;
      }
    } else if (a == "--udp") {
      const char* v = value("auto, on or off");
      if (!v) return false;
      o.udp = v;
      if (o.udp != "auto" && o.udp != "on" && o.udp != "off") {
        err = "--udp " + o.udp + ": expected auto, on or off";
        return false;
      }
    } else if (a == "-h" || a == "--help") {
      o.help = true;
    } else {
      err = "unknown option " + a;
      return false;
    }
  }
  if (o.reps == 0) o.reps = o.quick ? 3 : 7;
  return true;
}

}  // namespace pingpong
