// 02_remote_read: the split-phase remote read of the ATM paper's Figure 2.
// A read request carries the address to read and where to put the value; the
// owner's handler replies with the value; the reply handler stores it and
// marks the read complete. The caller overlaps other work and then waits.
//
//   clumprun -n 2 ./02_remote_read

#include <clump/clump.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  clump::endpoint& ep = rt.endpoint();
  const int n = rt.size();
  // Each rank owns a small table: table[i] = rank * 1000 + i.
  std::vector<uint64_t> table(64);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<uint64_t>(rt.rank()) * 1000 + i;

  // The "remote read" pair: read_reply writes the value into the local
  // destination and counts the completion; read_request runs at the owner.
  int outstanding = 0;
  auto read_reply = ep.on_reply([&](clump::token&, uint64_t* dest, uint64_t value) {
    *dest = value;  // the pointer travelled to the owner and back untouched
    --outstanding;
  });
  auto read_request = ep.on_request([&](clump::token& t, uint32_t index, uint64_t* dest) {
    (void)t.reply(read_reply, dest, table.at(index));
  });
  rt.barrier();

  // Split phase: issue every read first, then wait for all of them.
  const int peer = (rt.rank() + 1) % n;
  std::vector<uint64_t> got(8);
  for (uint32_t i = 0; i < got.size(); ++i) {
    ++outstanding;
    if (ep.request(peer, read_request, i * 7, &got[i]) != clump::status::ok) return 1;
  }
  // ... computation overlapping the reads would go here ...
  rt.wait_until([&] { return outstanding == 0; });

  for (uint32_t i = 0; i < got.size(); ++i) {
    if (got[i] != static_cast<uint64_t>(peer) * 1000 + i * 7) {
      std::printf("rank %d: read %u from rank %d gave %llu\n", rt.rank(), i, peer,
                  static_cast<unsigned long long>(got[i]));
      return 1;
    }
  }
  std::printf("rank %d read %zu values from rank %d split-phase: ok\n", rt.rank(), got.size(), peer);
  // Other ranks may still be reading our table: keep serving until all are
  // done, while `table` and the handlers' other state are still alive.
  rt.barrier();
  return 0;
} catch (const clump::error& e) {  // setup failed: say why (the message has the fix), exit 1
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
