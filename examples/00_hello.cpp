// 00_hello: every rank says hello to rank 0 with an active message; rank 0
// prints the greetings in the order they arrive.
//
//   clumprun -n 4 ./00_hello

#include <clump/clump.hpp>

#include <cstdio>

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  clump::endpoint& ep = rt.endpoint();
  int greeted = 0;
  // A request handler: runs on rank 0 when a greeting arrives.
  auto hello = ep.on_request([&](clump::token& t, int from, int size) {
    std::printf("rank 0 got hello from rank %d of %d (endpoint rank %u)\n", from, size, t.source().rank);
    ++greeted;
  });
  rt.barrier();  // every rank has registered its handlers
  if (ep.request(0, hello, rt.rank(), rt.size()) != clump::status::ok) return 1;
  if (rt.rank() == 0) {
    rt.wait_until([&] { return greeted == rt.size(); });
    std::printf("all %d ranks said hello\n", rt.size());
  }
  rt.barrier();  // end the traffic while the handlers' state (greeted) is alive
  return 0;
} catch (const clump::error& e) {  // setup failed: say why (the message has the fix), exit 1
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
