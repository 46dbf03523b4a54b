// 08_rpc_hash_table: a distributed hash table with remote procedure calls,
// as UPC++'s guide builds one. Each key lives on the rank its hash names;
// insert and find are rpcs to that rank, and their answers are futures.
// Every rank inserts its keys with all the calls in flight at once, then
// finds the keys of the next rank and checks every value.
//
//   clumprun -n 4 ./08_rpc_hash_table [keys per rank]

#include <clump/clump.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

std::unordered_map<std::string, std::string> local_part;  // this rank's share of the table

// Registered at start-up under the same names on every process.
const auto insert_fn = clump::rpc_function("dht.insert", [](const std::string& key, const std::string& value) {
  return local_part.insert_or_assign(key, value).second;  // true: the key is new
});
const auto find_fn = clump::rpc_function("dht.find", [](const std::string& key) {
  auto it = local_part.find(key);
  return it == local_part.end() ? std::string() : it->second;
});

int owner(const std::string& key, int ranks) { return static_cast<int>(std::hash<std::string>{}(key) % ranks); }

std::string key_of(int rank, int i) { return "key-" + std::to_string(rank) + "-" + std::to_string(i); }
std::string value_of(int rank, int i) { return "value " + std::to_string(rank * 1000003 + i); }

}  // namespace

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  clump::async_engine engine{rt};
  const int me = rt.rank(), n = rt.size();
  const int keys = argc > 1 ? std::atoi(argv[1]) : 10000;

  std::vector<clump::future<bool>> inserts;
  for (int i = 0; i < keys; ++i) {
    const std::string k = key_of(me, i);
    inserts.push_back(clump::rpc(owner(k, n), insert_fn, k, value_of(me, i)));
  }
  int fresh = 0;
  for (bool is_new : clump::when_all(std::move(inserts)).wait()) fresh += is_new;
  rt.barrier();  // every rank's inserts are in

  const int next = (me + 1) % n;
  std::vector<clump::future<std::string>> finds;
  for (int i = 0; i < keys; ++i) {
    const std::string k = key_of(next, i);
    finds.push_back(clump::rpc(owner(k, n), find_fn, k));
  }
  const auto found = clump::when_all(std::move(finds)).wait();
  int wrong = fresh != keys;
  for (int i = 0; i < keys; ++i) wrong += found[static_cast<size_t>(i)] != value_of(next, i);
  rt.barrier();
  std::printf("dht: rank %d holds %zu keys; %d inserts and %d finds, %s\n", me, local_part.size(), keys, keys,
              wrong ? "WRONG values" : "every value right");
  return wrong ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "08_rpc_hash_table: %s\n", e.what());
  return 1;
}
