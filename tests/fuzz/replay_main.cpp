// A driver for decode_fuzz.cpp without libFuzzer, so that its properties run
// in every build (gcc, ASan, TSan) as an ordinary test, deterministically:
// the seed datagrams, each truncated at every length, each with every single
// bit flipped, and a fixed number of seeded random mutations of them.
//
//   decode_fuzz_replay                 the deterministic run (a ctest)
//   decode_fuzz_replay FILE...         runs the target on files (say a crash
//                                      artifact of tests/fuzz/run)

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "datagrams.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// Each input in an allocation of its own exact size, so that ASan sees a read past its end.
void run(const std::vector<std::byte>& b) {
  std::vector<uint8_t> exact(b.size());
  if (!b.empty()) std::memcpy(exact.data(), b.data(), b.size());
  LLVMFuzzerTestOneInput(exact.data(), exact.size());
}

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace clump;
  if (argc > 1) {
    for (int i = 1; i < argc; ++i) {
      std::ifstream in(argv[i], std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "decode_fuzz_replay: cannot read %s\n", argv[i]);
        return 2;
      }
      std::vector<char> text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::vector<std::byte> b(text.size());
      if (!text.empty()) std::memcpy(b.data(), text.data(), text.size());
      run(b);
    }
    std::printf("decode_fuzz_replay: %d file(s), every property held\n", argc - 1);
    return 0;
  }
  std::vector<fuzz::bytes> seeds;
  for (const auto& a : {fuzz::addressing{fuzz::fuzz_job, 1, 0, 5, {3, 7}, {0, 5}},
                        fuzz::addressing{fuzz::fuzz_job, 3, 2, 0xfffffff0u, {0, 0xffffffffu}, {1, 0}}})
    for (const auto& e : fuzz::valid_examples(a, 0, 1, 0x1234)) {
      // The examples must stay valid (the fuzzers start from them): a job just large enough for the sender.
      net::decoded d;
      const net::refusal r = net::decode(e.datagram.data(), e.datagram.size(), a.job, a.dst_rank, a.src_rank + 1, d);
      if (r != net::refusal::none) {
        std::fprintf(stderr, "decode_fuzz_replay: example %s is refused (%s): update datagrams.hpp\n", e.name.c_str(),
                     net::to_string(r));
        return 1;
      }
      seeds.push_back(e.datagram);
    }
  uint64_t inputs = 0;
  uint64_t state = 0x5eed;
  for (const fuzz::bytes& s : seeds) {
    for (size_t n = 0; n <= s.size(); ++n, ++inputs) run(fuzz::bytes(s.begin(), s.begin() + static_cast<long>(n)));
    for (size_t bit = 0; bit < 8 * s.size(); ++bit, ++inputs) {
      fuzz::bytes b = s;
      b[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
      run(b);
    }
    for (int i = 0; i < 20000; ++i, ++inputs) {
      // A few bytes set to random or boundary values, then maybe cut or extended.
      fuzz::bytes b = s;
      const int changes = 1 + static_cast<int>(splitmix(state) % 4);
      for (int c = 0; c < changes; ++c) {
        const uint64_t r = splitmix(state);
        const uint8_t values[] = {0, 1, 2, 0x7f, 0x80, 0xfe, 0xff, static_cast<uint8_t>(r >> 40)};
        b[(r >> 8) % b.size()] = static_cast<std::byte>(values[r % 8]);
      }
      const uint64_t r = splitmix(state);
      if (r % 4 == 0) b.resize(r / 4 % (b.size() + 1));
      if (r % 4 == 1) b.resize(b.size() + r / 4 % 9, std::byte{0});
      run(b);
    }
  }
  std::printf("decode_fuzz_replay: %llu inputs from %zu seeds, every property held\n",
              static_cast<unsigned long long>(inputs), seeds.size());
  return 0;
}
