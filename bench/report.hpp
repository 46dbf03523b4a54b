#pragma once
// What a benchmark found: rows of figures (each with all its samples), printed
// as a table and written as JSON together with the machine it ran on.

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "measure.hpp"

namespace bench {

/// One figure: a measure at one size.
struct row {
  std::string section;  ///< table group ("latency, one way", "physical limits", ...)
  std::string id;       ///< stable name for the JSON ("short_latency", "long_bandwidth", ...)
  std::string size;     ///< as printed ("8 B", "2 words")
  uint64_t bytes = 0;   ///< payload bytes (argument bytes for short messages)
  std::string unit;     ///< "us", "GB/s", "M msg/s"
  series data;
  std::optional<double> ratio;  ///< median / the limit's median
  std::string ratio_of;         ///< which limit `ratio` is relative to
  std::string peers;            ///< reference figures quoted for scale (not measured here)
  nlohmann::json extra;         ///< anything else worth keeping with the figure (JSON only; null: nothing)
};

struct report {
  nlohmann::json machine;  ///< from machine_info()
  nlohmann::json job;      ///< ranks, binding, mode
  nlohmann::json config;   ///< the options and clump settings of the run
  std::vector<row> rows;
  std::vector<std::string> notes;  ///< what each measure does exactly
  std::string summary;             ///< the headline figures and ratios, one paragraph
  /// What the ratio and peers columns mean, printed under the table; empty:
  /// the shared-memory legend (cache line, memcpy, OpenMPI shm, GASNet-EX smp).
  std::string legend;
  /// The peers' figures for the JSON; null: the shared-memory ones.
  nlohmann::json peers_reference;

  /// The first row with this id and size, or nullptr.
  const row* find(const std::string& id, uint64_t bytes) const;
  /// The readable table, with notes and the peers legend.
  void print(std::FILE* out) const;
  nlohmann::json to_json() const;
};

/// CPU model, core count, kernel, host, date (UTC), compiler.
nlohmann::json machine_info();

/// "8 B", "64 KiB", "4 MiB".
std::string bytes_text(uint64_t bytes);

/// Every CLUMP_* variable of this process's environment, name to value.
nlohmann::json clump_environment();

/// Writes `j` to `path`, indented, and says so on stdout; false (with a
/// message on stderr) when the file cannot be written.
bool write_json(const nlohmann::json& j, const std::string& path);

/// What a benchmark's main does after parsing its command line: on a mistake
/// or --help, rank 0 prints the mistake and the usage. Returns the exit code
/// (2 for a mistake, 0 for --help), or -1 to go on.
int usage_exit(int rank, const char* program, bool parsed, bool help, const std::string& err, const char* usage);

}  // namespace bench
