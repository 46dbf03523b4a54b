// Writes the seed corpus of decode_fuzz into a directory: one valid datagram
// of every kind and shape (datagrams.hpp), as rank 1 of job fuzz_job sends it
// to rank 0 and as rank 3 sends it to rank 2 of a larger job, plus one
// example of each refusal. Made at build or run time so that no binary file
// lives in the repository.
//
//   make_corpus DIR

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "datagrams.hpp"

namespace {

bool write_file(const std::string& path, const clump::fuzz::bytes& b) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::fprintf(stderr, "make_corpus: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace clump;
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus DIR (an existing directory)\n");
    return 2;
  }
  const std::string dir = argv[1];
  int count = 0;
  auto put = [&](const std::string& name, const fuzz::bytes& b) {
    if (!write_file(dir + "/" + std::to_string(count++) + "-" + name, b)) std::exit(1);
  };
  const fuzz::addressing to_rank0{fuzz::fuzz_job, 1, 0, 5, {3, 7}, {0, 0x5}};
  const fuzz::addressing to_rank2{fuzz::fuzz_job, 3, 2, 0xfffffff0u, {0, 0xffffffffu}, {1, 0}};
  for (const auto& e : fuzz::valid_examples(to_rank0, 0, 1, 0x1234)) put(e.name, e.datagram);
  for (const auto& e : fuzz::valid_examples(to_rank2, 1, 255, ~0ull)) put("rank2_" + e.name, e.datagram);

  // One of each refusal, so that the fuzzer starts next to every branch.
  fuzz::bytes medium;
  for (const auto& e : fuzz::valid_examples(to_rank0, 0, 1, 0x1234))
    if (e.name == "medium_request_whole") medium = e.datagram;
  auto changed = [&](size_t at, uint8_t v) {
    fuzz::bytes b = medium;
    b[at] = static_cast<std::byte>(v);
    return b;
  };
  put("wrong_version", changed(offsetof(net::datagram_header, version), net::wire_version + 1));
  put("other_job", changed(offsetof(net::datagram_header, job), 0x42));
  put("bad_rank", changed(offsetof(net::datagram_header, src_rank), 9));
  put("bad_channel", changed(offsetof(net::datagram_header, channel), 1));
  put("bad_kind", changed(sizeof(net::datagram_header) + offsetof(net::message_header, kind), 4));
  put("too_many_args", changed(sizeof(net::datagram_header) + offsetof(net::message_header, nargs), 21));
  put("truncated", fuzz::bytes(medium.begin(), medium.begin() + 100));
  put("not_clump", fuzz::bytes(medium.begin() + 1, medium.end()));
  std::printf("make_corpus: %d datagrams in %s\n", count, dir.c_str());
  return 0;
}
