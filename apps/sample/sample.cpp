// sample: sample sort of 32-bit keys; every key goes to its bucket with an
// atomic remote push, a fetch_add on the destination's bucket counter that
// reserves a slot and a one-way store into it (see sample_sort.hpp).
//
//   clumprun -n 4 ./sample [--keys N] [--key-range R] [--samples S] [--size test|small|large]
#include "sample_sort.hpp"

int main(int argc, char** argv) try {
  return apps::sorting::run_sample_sort(argc, argv, false);
} catch (const std::exception& e) {
  return apps::failed(e);
}
