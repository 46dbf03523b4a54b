// A program outside clump's tree, built against an installed clump: each rank
// sends one request to the next, whose handler replies.
#include <clump/clump.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  clump::runtime rt{argc, argv};
  auto& ep = rt.endpoint();
  int replied = 0;
  auto done = ep.on_reply([&](clump::token&, int v) { replied = v; });
  auto ask = ep.on_request([&](clump::token& t, int v) { (void)t.reply(done, v * 2); });
  rt.barrier();
  if (ep.request((rt.rank() + 1) % rt.size(), ask, 21) != clump::status::ok) return 1;
  rt.wait_until([&] { return replied != 0; });
  std::printf("consumer rank %d: %d\n", rt.rank(), replied);
  return replied == 42 ? 0 : 1;
}
