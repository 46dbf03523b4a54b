#include "report.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <string>

#include <fmt/core.h>

extern char** environ;

namespace bench {

namespace {

/// Three or four significant digits, whatever the magnitude.
std::string number(double v) {
  const double a = std::fabs(v);
  if (a == 0) return "0";
  if (a < 1) return fmt::format("{:.4f}", v);
  if (a < 10) return fmt::format("{:.3f}", v);
  if (a < 100) return fmt::format("{:.2f}", v);
  return fmt::format("{:.1f}", v);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::string bytes_text(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

nlohmann::json machine_info() {
  nlohmann::json m;
  m["cpu_model"] = cpu_model();
  m["cores_online"] = ::sysconf(_SC_NPROCESSORS_ONLN);
  utsname u{};
  if (::uname(&u) == 0) {
    m["kernel"] = std::string(u.sysname) + " " + u.release;
    m["kernel_version"] = u.version;
    m["arch"] = u.machine;
    m["host"] = u.nodename;
  }
  m["transparent_hugepage"] = first_line("/sys/kernel/mm/transparent_hugepage/enabled");
  m["cpu_governor"] = first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  m["date"] = date;
  m["compiler"] = __VERSION__;
#ifdef NDEBUG
  m["build"] = "release (NDEBUG)";
#else
  m["build"] = "debug (assertions on)";
#endif
  return m;
}

const row* report::find(const std::string& id, uint64_t bytes) const {
  for (const row& r : rows)
    if (r.id == id && r.bytes == bytes) return &r;
  return nullptr;
}

void report::print(std::FILE* out) const {
  constexpr const char* head = "{:<22} {:>9} {:>10} {:>10} {:>10} {:<8} {:>7} {:>4}  {}\n";
  fmt::print(out, head, "measure", "size", "median", "min", "max", "unit", "ratio", "cut",
             "peers (reference, not measured here)");
  fmt::print(out, "{}\n", std::string(130, '-'));
  std::string section;
  for (const row& r : rows) {
    if (r.section != section) {
      section = r.section;
      fmt::print(out, "[{}]\n", section);
    }
    const std::string ratio = r.ratio ? fmt::format("{:.2f}x", *r.ratio) : "";
    fmt::print(out, head, "  " + r.id, r.size, number(r.data.median()), number(r.data.min()), number(r.data.max()),
               r.unit, ratio, r.data.cut_short ? std::to_string(r.data.cut_short) : "", r.peers);
  }
  fmt::print(out, "{}\n", std::string(130, '-'));
  if (!legend.empty())
    fmt::print(out, "{}", legend);
  else
    fmt::print(out,
             "ratio: a latency's median / the cache-line one-way median (>= 1; 1 would be the hardware's floor);\n"
             "       a bandwidth's median / the memcpy median at the same size (<= ~1).\n"
             "cut:   samples whose loop hit its deadline (4 x the sample length): the cores were busy; noisy.\n"
             "peers: figures quoted from the issue for scale (OpenMPI shm, GASNet-EX smp, other layers on other\n"
             "       machines); they were NOT measured in this run and are not comparable one to one.\n");
  for (const std::string& n : notes) fmt::print(out, "note: {}\n", n);
  if (!summary.empty()) fmt::print(out, "\nsummary: {}\n", summary);
}

nlohmann::json report::to_json() const {
  nlohmann::json j;
  j["benchmark"] = "pingpong";
  j["format_version"] = 1;
  j["machine"] = machine;
  j["job"] = job;
  j["config"] = config;
  nlohmann::json limits = nlohmann::json::object();
  nlohmann::json list = nlohmann::json::array();
  for (const row& r : rows) {
    nlohmann::json m;
    m["section"] = r.section;
    m["id"] = r.id;
    m["size"] = r.size;
    m["bytes"] = r.bytes;
    m["unit"] = r.unit;
    m["median"] = r.data.median();
    m["min"] = r.data.min();
    m["max"] = r.data.max();
    m["samples"] = r.data.samples;
    m["sample_seconds"] = r.data.seconds;
    m["iterations_per_sample"] = r.data.iterations;
    m["samples_cut_short_by_deadline"] = r.data.cut_short;
    if (r.ratio) {
      m["ratio"] = *r.ratio;
      m["ratio_of"] = r.ratio_of;
    }
    if (!r.peers.empty()) m["peers_reference_not_measured_here"] = r.peers;
    if (!r.extra.is_null()) m["extra"] = r.extra;
    if (r.section == "physical limits") limits[r.id].push_back(m);
    list.push_back(std::move(m));
  }
  j["limits"] = limits;
  j["measurements"] = list;
  if (!peers_reference.is_null())
    j["peers_reference_not_measured_here"] = peers_reference;
  else
    j["peers_reference_not_measured_here"] = {
        {"source", "figures quoted in the issue, for scale only"},
        {"openmpi_shm", {{"one_way_8B_us", 0.26}, {"short_msg_rate_M_per_s", 12.3}}},
        {"gasnet_ex_smp", {{"one_way_8B_us", 0.35}, {"short_msg_rate_M_per_s", 16.4}}},
        {"bandwidth_64KiB_to_1MiB_GB_per_s", {20, 26}},
        {"bandwidth_4MiB_GB_per_s", {10, 16}},
    };
  j["notes"] = notes;
  j["summary"] = summary;
  return j;
}

nlohmann::json clump_environment() {
  nlohmann::json env = nlohmann::json::object();
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (kv.rfind("CLUMP_", 0) == 0 && eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

bool write_json(const nlohmann::json& j, const std::string& path) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  out.close();
  if (!out) {
    std::fprintf(stderr, "could not write %s\n", path.c_str());
    return false;
  }
  std::printf("wrote %s\n", path.c_str());
  return true;
}

int usage_exit(int rank, const char* program, bool parsed, bool help, const std::string& err, const char* usage) {
  if (parsed && !help) return -1;
  if (rank == 0) {
    if (!err.empty()) std::fprintf(stderr, "%s: %s\n", program, err.c_str());
    std::fputs(usage, help ? stdout : stderr);
  }
  return help ? 0 : 2;
}

}  // namespace bench
