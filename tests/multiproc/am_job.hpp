#pragma once
// Runs one am_conformance scenario as a clumprun job, for the AM test suites.

#include <dirent.h>

#include <string>
#include <vector>

#include "run_cmd.hpp"

namespace clump::test {

inline std::vector<std::string> dev_shm_entries() {
  std::vector<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).find("clump") != std::string::npos) names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

/// `ranks` processes of `program` with `args`, extra environment and
/// clumprun options; checks that nothing is left in /dev/shm.
inline cmd_result program_job(const std::string& program, int ranks, std::vector<std::string> args,
                              std::vector<std::string> env = {}, std::vector<std::string> launcher_options = {}) {
  using namespace std::chrono_literals;
  std::vector<std::string> argv{CLUMPRUN, "-n", std::to_string(ranks), "--timeout", "120"};
  argv.insert(argv.end(), launcher_options.begin(), launcher_options.end());
  argv.push_back(program);
  argv.insert(argv.end(), args.begin(), args.end());
  env.push_back("CLUMP_SEGMENT_SIZE=8M");
  auto before = dev_shm_entries();
  cmd_result r = run_cmd(argv, 150s, env);
  EXPECT_EQ(dev_shm_entries(), before) << "the job left files in /dev/shm";
  return r;
}

#ifdef AM_CONFORMANCE
/// `ranks` processes of am_conformance (see program_job).
inline cmd_result job(int ranks, std::vector<std::string> args, std::vector<std::string> env = {},
                      std::vector<std::string> launcher_options = {}) {
  return program_job(AM_CONFORMANCE, ranks, std::move(args), std::move(env), std::move(launcher_options));
}
#endif

}  // namespace clump::test

#define EXPECT_JOB_OK(r) EXPECT_EQ((r).exit_code, 0) << (r).output
