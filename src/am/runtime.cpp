#include <clump/runtime.hpp>

#include <exception>
#include <vector>

#include "am/endpoint_impl.hpp"
#include "core/settings.hpp"

namespace clump {

struct runtime::impl {
  am::process& proc = am::process::get();
  clump::bundle bundle{bundle_mode::sequential};
  clump::endpoint endpoint{bundle};
};

runtime::runtime() : impl_(std::make_unique<impl>()) {
  am::process& p = impl_->proc;
  clump::endpoint& ep = impl_->endpoint;
  ep.set_tag(p.job().tag(p.rank()));
  ep.allocate_segment(core::settings().segment_size);
  if (ep.translation_count() < p.size()) ep.set_translation_count(std::min(p.size(), 65535));
  // Exchange names rather than assume slots: the program may own other
  // endpoints created before this one.
  std::vector<endpoint_name> names(static_cast<size_t>(p.size()));
  endpoint_name mine = ep.name();
  p.job().allgather(&mine, names.data(), sizeof mine, am::process::progress_fn(impl_->bundle));
  for (int r = 0; r < p.size() && r < 65535; ++r) ep.map(r, names[static_cast<size_t>(r)], p.job().tag(r));
  // Every rank's endpoint and segment exist before anyone sends.
  barrier();
}

runtime::runtime(int&, char**&) : runtime() {}

runtime::~runtime() {
  if (std::uncaught_exceptions() == 0) {
    try {
      barrier();
    } catch (...) {
    }
  }
  impl_->proc.leaving();  // before the endpoint goes (see process::leaving)
}

int runtime::rank() const noexcept { return impl_->proc.rank(); }
int runtime::size() const noexcept { return impl_->proc.size(); }
uint64_t runtime::job_id() const noexcept { return impl_->proc.job_id(); }
int runtime::node_size() const noexcept {
  boot::job& j = impl_->proc.job();
  int n = 0;
  for (int r = 0; r < j.size(); ++r) n += j.node(r) == j.node(j.rank());
  return n;
}
clump::bundle& runtime::bundle() noexcept { return impl_->bundle; }
clump::endpoint& runtime::endpoint() noexcept { return impl_->endpoint; }

void runtime::barrier() { impl_->proc.job().barrier(am::process::progress_fn(impl_->bundle)); }

void runtime::allgather(const void* src, void* dst, size_t len) {
  impl_->proc.job().allgather(src, dst, len, am::process::progress_fn(impl_->bundle));
}

void runtime::broadcast(void* buf, size_t len, int root) {
  impl_->proc.job().broadcast(buf, len, root, am::process::progress_fn(impl_->bundle));
}

void runtime::exit(int code) {
  impl_->proc.job().exit_job(code);
  __builtin_unreachable();  // exit_job is [[noreturn]] through a virtual call
}

}  // namespace clump
