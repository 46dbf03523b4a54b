#include <sched.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "am/endpoint_impl.hpp"
#include "am/returns.hpp"
#include "am/send.hpp"
#include "core/settings.hpp"
#include "shm/wake.hpp"

namespace clump {

using namespace clump::detail;

void detail::bundle_impl::set(std::vector<endpoint_impl*> eps) {
  auto l = std::make_unique<list>();
  l->eps = std::move(eps);
  // Release: a poll that loads the new list sees it fully built.
  endpoints.store(l.get(), std::memory_order_release);
  lists.push_back(std::move(l));
}

bundle::bundle(bundle_mode mode) : impl_(new bundle_impl(core::settings())) {
  am::process& proc = am::process::get();
  impl_->proc = &proc;
  impl_->owner = this;
  impl_->mode = mode;
  impl_->poll_batch = core::settings().poll_batch;
  try {
    impl_->wake_offset = proc.region().take_wake_word();
  } catch (...) {
    delete impl_;
    throw;
  }
  impl_->wake = &proc.region().wake_word(impl_->wake_offset);
  impl_->set({});
}

bundle::~bundle() {
  am::process::get().region().give_wake_word(impl_->wake_offset);
  delete impl_;
}

// send-stage: poll (bench/send-breakdown's stages of a send and the poll before it; comments only)
unsigned bundle::poll() noexcept {
  if (handler_depth > 0) return 0;  // no polling from inside a handler
  if (impl_->mode == bundle_mode::parallel) {
    std::shared_lock lock(impl_->walkers);
    return poll_endpoints();
  }
  return poll_endpoints();
}

unsigned bundle::poll_endpoints() noexcept {
  // Acquire: pairs with bundle_impl::set.
  const bundle_impl::list* l = impl_->endpoints.load(std::memory_order_acquire);
  const unsigned batch = impl_->poll_batch;
  unsigned n = 0;
  // send-stage: netpoll
  // The network first (what it delivers lands in the queues polled below),
  // but only as often as the adaptive poller says.
  am::transport* const net = impl_->proc->polled();
  if (net) [[unlikely]]
    if (net->rang() || impl_->net_poller.due()) net->progress(impl_->net_poller);
  // send-stage: poll
  for (endpoint_impl* e : l->eps) {
    // Look at the two heads here, inline: an empty poll is then a few loads.
    // (In parallel mode the head read without the consumer flag may be stale;
    // a false "ready" only costs the call, which checks again.)
    if (shm::peek(e->own.reply, e->reply_head.load(std::memory_order_relaxed))) n += poll_replies(*e, batch);
    if (shm::peek(e->own.request, e->request_head.load(std::memory_order_relaxed))) n += poll_requests(*e, batch);
    // Relaxed: a hint; deliver_returns takes the lock.
    if (e->has_returns.load(std::memory_order_relaxed) || e->has_outbox.load(std::memory_order_relaxed)) [[unlikely]]
      n += deliver_returns(*e);
  }
  // Relaxed: a hint; the list has its own lock.
  if (orphans_waiting.load(std::memory_order_relaxed)) [[unlikely]]
    retry_orphans(*impl_->proc);  // returns a freed endpoint left behind
  // What the handlers sent (replies, packed together) goes now, not at the
  // next poll: this process may not be scheduled again soon.
  if (net && net->holding()) [[unlikely]]
    net->flush();
  // Acquire: pairs with the release that set it after `after_poll`.
  if (impl_->after_poll_due.load(std::memory_order_acquire)) [[unlikely]]
    impl_->after_poll();
  return n;
}

std::chrono::microseconds bundle::spin_time(bool crowded) noexcept {
  const core::config& cfg = core::settings();
  // Crowded: sample sort over the network, 4 ranks on 2 cores, spent 1.79 s
  // in its pushes with 300 us, 1.45 s with 1 ms, 1.30 s with 10 ms.
  if (crowded && !cfg.spin_chosen) return std::chrono::milliseconds(2);
  return std::chrono::microseconds(cfg.spin_before_sleep_us);
}

bool bundle::crowded_host() noexcept { return am::process::get().crowded(); }

bool bundle::network_holding() const noexcept {
  const am::transport* net = impl_->proc->polled();
  return net && net->holding();
}

void bundle::give_way() noexcept {
  // The network's turn comes at the next poll: between yields, polls are
  // too few for the adaptive poller's count (it would look at the socket
  // once in 8 to 32 of them, each after a trip through the scheduler).
  impl_->net_poller.force();
  // What this rank holds back for packing goes before the core does: the
  // rank that answers it may be the one that gets the core. (After a poll
  // nothing is held: the poll sent it. Before a wait's first poll it may be:
  // wait_until gives way first when it is, rather than look at the socket
  // for an answer to messages that have not left.) Over the network with 4
  // ranks on 2 cores, sample sort, whose every key is a store held for the
  // fetch_add that follows, took 1.28 s in place of 1.54 s (medians of 7
  // alternated runs): a receive system call (1.5 us here) fewer per key on
  // each side, and a tenth fewer context switches.
  if (am::transport* net = impl_->proc->polled(); net && net->holding()) net->flush();
  ::sched_yield();
}

static bool any_pending(bundle_impl& b) noexcept {
  std::shared_lock<std::shared_mutex> lock;
  if (b.mode == bundle_mode::parallel) lock = std::shared_lock(b.walkers);
  const bundle_impl::list* l = b.endpoints.load(std::memory_order_acquire);
  for (const endpoint_impl* e : l->eps)
    if (has_pending(*e)) return true;
  return false;
}

void detail::sleep_bundle(bundle_impl& b, std::chrono::nanoseconds timeout, const std::function<bool()>* also) noexcept {
  std::atomic<uint32_t>& w = *b.wake;
  // Sleep on both protocols at once: while we sleep, the network's service
  // thread watches the socket and delivers into our queues, which wakes us
  // like any shared-memory sender.
  am::transport* t = b.proc->polled();
  if (t) t->before_sleep();
  const uint32_t v = shm::prepare_sleep(w);
  // After announcing the sleep, look once more: a sender that claimed before
  // it could see our bit is visible here (handshake in shm/queue.hpp), and
  // so is whatever `also` stands for (its setter wakes after setting it).
  // (`also` reads with seq_cst: the sleeper's half of that handshake.)
  if (any_pending(b) || (also && (*also)())) {
    shm::cancel_sleep(w);
  } else {
    shm::sleep(w, v, static_cast<long>(timeout.count()));
  }
  if (t) t->after_sleep();
}

void bundle::sleep_until_message(std::chrono::nanoseconds timeout) noexcept { sleep_bundle(*impl_, timeout, nullptr); }

void bundle::sleep_until_message(std::chrono::nanoseconds timeout, const std::function<bool()>& ready) noexcept {
  sleep_bundle(*impl_, timeout, &ready);
}

void bundle::check_failures(std::chrono::steady_clock::time_point last_work, const char* what) {
  am::process& p = am::process::get();
  const uint64_t deaths = p.check_local_peers();
  if (deaths <= p.acknowledged()) return;
  const auto since = std::max(last_work, p.last_death());
  if (std::chrono::steady_clock::now() - since < std::chrono::seconds(1)) return;
  std::string who;
  for (int r : failed_ranks()) who += (who.empty() ? "" : ", ") + std::to_string(r);
  throw error(status::resource, what,
              "rank " + who + " failed (its process is gone) and nothing has arrived here for a second since: this "
              "wait may depend on it and would never end (a program that handles failures calls "
              "clump::acknowledge_failures() and waits on)");
}

std::vector<int> failed_ranks() {
  std::vector<int> out;
  am::process* p = am::process::existing();
  if (!p) return out;
  for (int r = 0; r < p->size(); ++r)
    if (p->known_dead(r)) out.push_back(r);
  return out;
}

bool rank_failed(int rank) noexcept {
  am::process* p = am::process::existing();
  return p && p->rank_failed(rank);
}

void acknowledge_failures() noexcept {
  if (am::process* p = am::process::existing()) p->acknowledge();
}

void bundle::set_event_mask(event_mask m) noexcept {
  // Relaxed: a setting read by the waiting thread itself.
  impl_->mask.store(static_cast<int>(m), std::memory_order_relaxed);
}

event_mask bundle::get_event_mask() const noexcept {
  return static_cast<event_mask>(impl_->mask.load(std::memory_order_relaxed));
}

status bundle::wait() noexcept {
  if (get_event_mask() == event_mask::none) return status::bad_arg;
  while (!any_pending(*impl_)) sleep_until_message(std::chrono::milliseconds(100));
  set_event_mask(event_mask::none);
  return status::ok;
}

bundle_mode bundle::mode() const noexcept { return impl_->mode; }

}  // namespace clump
