// libfabric is loaded when first asked for (src/ofi/fabric.cpp). Debian's
// brings libinfinipath, whose constructor takes over the fatal signals: a
// program that then aborted printed a backtrace and exited with 1 instead
// of dying of SIGABRT. Asking libfabric for its providers must leave every
// signal's disposition as it was.

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ofi/fabric.hpp"

namespace {

TEST(fabric, asking_for_the_providers_leaves_the_signals_as_they_were) {
  struct sigaction before[NSIG];
  bool known[NSIG] = {};  // glibc keeps two real-time signals for itself
  for (int s = 1; s < NSIG; ++s) known[s] = sigaction(s, nullptr, &before[s]) == 0;
  ASSERT_TRUE(known[SIGABRT] && known[SIGSEGV]);
  std::string why;
  const auto providers = clump::ofi::rdm_providers(why);
  if (providers.empty()) std::printf("no providers: %s\n", why.c_str());
  for (int s = 1; s < NSIG; ++s) {
    if (!known[s]) continue;
    struct sigaction now {};
    ASSERT_EQ(sigaction(s, nullptr, &now), 0) << s;
    EXPECT_EQ(reinterpret_cast<void*>(now.sa_handler), reinterpret_cast<void*>(before[s].sa_handler))
        << "signal " << s << " (" << strsignal(s) << ") was taken over";
  }
}

TEST(fabric, a_program_that_asked_still_dies_of_its_abort) {
  EXPECT_EXIT(
      {
        std::string why;
        clump::ofi::rdm_providers(why);
        std::abort();
      },
      testing::KilledBySignal(SIGABRT), "");
}

#if defined(CLUMP_HAVE_OFI)
// udp;ofi_rxd's default window (128 packets per peer) broke its receive
// bookkeeping under load (docs/net-protocol.md): clump lowers it when it
// loads libfabric, unless the user chose a value. (Each in a fresh process:
// the library is loaded once per process.)
int rxd_window_after_loading(const char* user_value) {
  if (user_value) setenv("FI_OFI_RXD_MAX_UNACKED", user_value, 1);
  else unsetenv("FI_OFI_RXD_MAX_UNACKED");
  std::string why;
  clump::ofi::rdm_providers(why);
  const char* v = std::getenv("FI_OFI_RXD_MAX_UNACKED");
  return v ? std::atoi(v) : -1;
}

TEST(fabric, loading_it_lowers_the_rxd_window_unless_the_user_set_one) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(rxd_window_after_loading(nullptr)), testing::ExitedWithCode(32), "");
  EXPECT_EXIT(std::exit(rxd_window_after_loading("100")), testing::ExitedWithCode(100), "");
}
#endif

}  // namespace
