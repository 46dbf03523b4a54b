// radix: radix sort with one one-way store per key (see radix_sort.hpp).
//
//   clumprun -n 4 ./radix [--keys N] [--size test|small|large]
#include "radix_sort.hpp"

int main(int argc, char** argv) try {
  return apps::radix::run(argc, argv, false);
} catch (const std::exception& e) {
  return apps::failed(e);
}
