// sampleb: sample sort of 32-bit keys whose buckets move in one bulk
// exchange, all_to_all_v, of the runs of each sorted block (see
// ../sample/sample_sort.hpp).
//
//   clumprun -n 4 ./sampleb [--keys N] [--key-range R] [--samples S] [--size test|small|large]
#include "../sample/sample_sort.hpp"

int main(int argc, char** argv) try {
  return apps::sorting::run_sample_sort(argc, argv, true);
} catch (const std::exception& e) {
  return apps::failed(e);
}
