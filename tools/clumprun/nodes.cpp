#include "nodes.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

namespace clumprun {

namespace {

// Blank-separated words. No quoting on purpose: a wrapper that needs more is
// better written as a script, whose behaviour the user can read.
std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  size_t at = 0;
  for (;;) {
    at = text.find_first_not_of(" \t", at);
    if (at == std::string::npos) return words;
    size_t end = text.find_first_of(" \t", at);
    words.push_back(text.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) return words;
    at = end;
  }
}

std::vector<std::string> split_hosts(const std::string& text) {
  std::vector<std::string> hosts;
  size_t at = 0;
  for (;;) {
    size_t comma = text.find(',', at);
    hosts.push_back(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) return hosts;
    at = comma + 1;
  }
}

bool parse_count(const std::string& text, long long& out) {
  errno = 0;
  char* end = nullptr;
  out = std::strtoll(text.c_str(), &end, 10);
  return !text.empty() && end != text.c_str() && *end == '\0' && errno != ERANGE;
}

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::optional<node_plan> plan_nodes(int nranks, const node_request& request, std::string& why, bool& bad_usage) {
  bad_usage = true;
  node_plan plan;
  long long nodes = 1;
  if (!request.nodes.empty()) {
    if (!parse_count(request.nodes, nodes)) {
      why = fmt::format("-N {}: the number of nodes must be a whole number, e.g. -N 2", request.nodes);
      return std::nullopt;
    }
    // Every node must hold at least one rank: the ranks number nodes densely.
    if (nodes < 1 || nodes > nranks) {
      why = fmt::format("-N {}: the number of nodes must be between 1 and the number of ranks ({})", request.nodes,
                        nranks);
      return std::nullopt;
    }
  }
  if (request.spawn_given && request.hosts.empty()) {
    why = "--spawn says how to start a rank on a host, so it needs --hosts";
    return std::nullopt;
  }
  if (!request.hosts.empty()) {
    plan.hosts = split_hosts(request.hosts);
    std::set<std::string> seen;
    for (const auto& h : plan.hosts) {
      if (h.empty() || h.find_first_of(" \t") != std::string::npos) {
        why = fmt::format("--hosts {}: give host names separated by commas, without blanks or empty names",
                          request.hosts);
        return std::nullopt;
      }
      if (!seen.insert(h).second) {
        why = fmt::format("--hosts {}: {} is named twice; each host is one node (use -N to split one machine)",
                          request.hosts, h);
        return std::nullopt;
      }
    }
    long long named = static_cast<long long>(plan.hosts.size());
    if (!request.nodes.empty() && nodes != named) {
      why = fmt::format("-N {} conflicts with --hosts, which names {} host(s): leave out -N or make them agree",
                        request.nodes, named);
      return std::nullopt;
    }
    if (named > nranks) {
      why = fmt::format("--hosts names {} hosts but the job has {} rank(s): every node needs at least one rank",
                        named, nranks);
      return std::nullopt;
    }
    nodes = named;
    plan.spawn = split_words(request.spawn_given ? request.spawn : default_spawn);
    if (plan.spawn.empty()) {
      why = "--spawn is empty: give the command that starts a rank on {host}, e.g. --spawn 'ip netns exec {host}'";
      return std::nullopt;
    }
    bool names_host = false;
    for (const auto& w : plan.spawn) names_host |= w.find("{host}") != std::string::npos;
    if (!names_host) {
      why = fmt::format("--spawn '{}' does not contain {{host}}, so it would start every rank the same way; "
                        "write where the host name goes, e.g. --spawn 'ip netns exec {{host}}'",
                        request.spawn);
      return std::nullopt;
    }
    // ssh runs a command on another machine: the ranks there cannot inherit
    // a socket from us, so one clumprun agent per host starts them and talks
    // to us over TCP (remote.cpp).
    plan.remote = request.remote || basename_of(plan.spawn[0]) == "ssh";
    plan.through_shell = basename_of(plan.spawn[0]) == "ssh";
  } else if (request.remote) {
    why = "--remote starts the ranks of each host through an agent, so it needs --hosts";
    return std::nullopt;
  }
  plan.node_count = static_cast<int>(nodes);
  plan.node_of.resize(static_cast<size_t>(nranks));
  plan.local_rank.resize(static_cast<size_t>(nranks));
  int first = 0;
  for (int r = 0; r < nranks; ++r) {
    // floor(r * N / P): groups of consecutive ranks whose sizes differ by at
    // most one. 64-bit: r * N overflows int for large jobs.
    int node = static_cast<int>(static_cast<long long>(r) * nodes / nranks);
    if (r == 0 || node != plan.node_of[static_cast<size_t>(r - 1)]) first = r;
    plan.node_of[static_cast<size_t>(r)] = node;
    plan.local_rank[static_cast<size_t>(r)] = r - first;
  }
  return plan;
}

std::vector<std::string> spawn_words(const node_plan& plan, int node) {
  std::vector<std::string> words;
  if (plan.hosts.empty()) return words;
  const std::string& host = plan.hosts[static_cast<size_t>(node)];
  for (std::string w : plan.spawn) {
    for (size_t at = w.find("{host}"); at != std::string::npos; at = w.find("{host}", at + host.size()))
      w.replace(at, 6, host);
    words.push_back(std::move(w));
  }
  return words;
}

}  // namespace clumprun
