// radixb: radix sort whose keys move in bulk stores, one per run of global
// places on one process (see ../radix/radix_sort.hpp).
//
//   clumprun -n 4 ./radixb [--keys N] [--size test|small|large]
#include "../radix/radix_sort.hpp"

int main(int argc, char** argv) try {
  return apps::radix::run(argc, argv, true);
} catch (const std::exception& e) {
  return apps::failed(e);
}
