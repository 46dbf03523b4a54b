// Endpoints that come and go, several endpoints in one bundle, several
// sleepers on one bundle: cases found in review, each of which failed (hung,
// lost messages or slept through a wake-up) before its fix. One process, a
// job of one; small queues so that they fill quickly.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include <clump/clump.hpp>

#include "am/endpoint_impl.hpp"
#include "am/process.hpp"

namespace {

// Settings are read once, on first use: set them before anything runs.
const int small_queues = [] {
  setenv("CLUMP_SHM_QUEUE_DEPTH", "16", 1);
  setenv("CLUMP_POLL_BATCH", "1", 1);
  setenv("CLUMP_SEGMENT_SIZE", "1M", 1);
  return 0;
}();

using namespace std::chrono;

TEST(endpoints, a_reply_waiting_for_room_drains_every_reply_queue_of_its_bundle) {
  // E2 asks E1 five times; E1 answers each with a maximum medium. Four fill
  // E2's reply ring; the fifth reply waits inside E1's handler, and only
  // draining E2's reply queue (same bundle) lets it through.
  clump::bundle b;
  clump::endpoint e1(b), e2(b);
  e1.set_tag(clump::tag_all);
  e2.set_tag(clump::tag_all);
  e2.map(0, e1.name(), clump::tag_all);
  std::vector<std::byte> big(clump::max_medium());
  int replies = 0;
  auto got = e2.on_reply([&](clump::token&, std::span<const std::byte>, uint32_t) { ++replies; });
  auto req = e1.on_request([&](clump::token& t, uint32_t v) { EXPECT_EQ(t.reply(got, big, v), clump::status::ok); });
  for (uint32_t i = 0; i < 5; ++i) ASSERT_EQ(e2.request(0, req, i), clump::status::ok);
  const auto deadline = steady_clock::now() + seconds(20);
  while (replies < 5 && steady_clock::now() < deadline) b.poll();
  EXPECT_EQ(replies, 5);
}

TEST(endpoints, a_reused_slot_starts_where_the_old_endpoint_left_its_queues) {
  // A sender's cached view of the old endpoint's queue must not let it
  // overwrite packets of the new endpoint in the same slot; and the requests
  // the old endpoint never handled come back, none reaches the new one.
  clump::bundle b;
  clump::endpoint s(b);
  s.set_tag(clump::tag_all);
  int old_count = 0, new_count = 0, returned = 0;
  s.on_returned([&](const clump::returned_message& m) {
    EXPECT_EQ(m.reason, clump::return_reason::bad_endpoint);
    ++returned;
  });
  auto q = std::make_unique<clump::endpoint>(b);
  q->set_tag(clump::tag_all);
  auto h = q->on_request([&](clump::token&, uint32_t) { ++old_count; });
  s.map(0, q->name(), clump::tag_all);
  for (uint32_t i = 0; i < 17; ++i) ASSERT_EQ(s.request(0, h, i), clump::status::ok);
  const uint32_t slot = q->name().slot;
  q.reset();
  auto q2 = std::make_unique<clump::endpoint>(b);
  q2->set_tag(clump::tag_all);
  ASSERT_EQ(q2->name().slot, slot) << "the test needs the slot to be reused";
  auto h2 = q2->on_request([&](clump::token&, uint32_t) { ++new_count; });
  s.unmap(0);
  s.map(0, q2->name(), clump::tag_all);
  for (uint32_t i = 0; i < 40; ++i) ASSERT_EQ(s.request(0, h2, i), clump::status::ok);
  const auto deadline = steady_clock::now() + seconds(20);
  while ((new_count < 40 || old_count + returned < 17) && steady_clock::now() < deadline) b.poll();
  EXPECT_EQ(new_count, 40);
  EXPECT_EQ(old_count + returned, 17) << old_count << " handled by the old endpoint, " << returned << " returned";
  EXPECT_GT(returned, 0) << "the test needs requests left in the old endpoint's queue";
}

TEST(endpoints, generations_past_two_to_the_32_still_tell_endpoints_apart) {
  // Packets carry the low 32 bits of generations, names all 64: across the
  // wrap of the low bits (0 among them), every message reaches the endpoint
  // it names, names come back whole, and an old name finds nobody.
  clump::bundle b;
  clump::endpoint s(b);
  s.set_tag(clump::tag_all);
  int returned = 0;
  s.on_returned([&](const clump::returned_message& m) {
    EXPECT_EQ(m.reason, clump::return_reason::bad_endpoint);
    ++returned;
  });
  uint32_t slot = 0;
  {
    clump::endpoint probe(b);
    slot = probe.name().slot;
  }
  clump::am::process::get().region().set_next_generation(slot, (uint64_t{1} << 32) - 2);
  std::vector<std::byte> payload(300, std::byte{9});
  clump::endpoint_name previous{};
  int got = 0, answered = 0;
  for (int i = 0; i < 5; ++i) {
    clump::endpoint q(b);
    ASSERT_EQ(q.name().slot, slot);
    ASSERT_EQ(q.name().generation, (uint64_t{1} << 32) - 2 + static_cast<uint64_t>(i));
    q.set_tag(clump::tag_all);
    q.allocate_segment(4096);
    auto pong = s.on_reply(200, [&](clump::token& t, uint32_t) {
      EXPECT_EQ(t.source(), q.name());
      ++answered;
    });
    auto ping = q.on_request(201, [&](clump::token& t, std::span<const std::byte> d, uint32_t v) {
      EXPECT_EQ(t.source(), s.name());
      EXPECT_EQ(d.size(), 300u);
      ++got;
      EXPECT_EQ(t.reply(pong, v), clump::status::ok);
    });
    if (i > 0) {
      s.map(1, previous, clump::tag_all);
      ASSERT_EQ(s.request_long(1, ping, payload, 0, 7u), clump::status::ok);  // to the endpoint freed last round
      s.unmap(1);
    }
    s.map(0, q.name(), clump::tag_all);
    ASSERT_EQ(s.request(0, ping, payload, static_cast<uint32_t>(i)), clump::status::ok);
    ASSERT_EQ(s.request_long(0, ping, payload, 100, static_cast<uint32_t>(i)), clump::status::ok);
    const auto deadline = steady_clock::now() + seconds(10);
    while ((answered < 2 * (i + 1) || returned < i) && steady_clock::now() < deadline) b.poll();
    EXPECT_EQ(got, 2 * (i + 1));
    EXPECT_EQ(answered, 2 * (i + 1));
    EXPECT_EQ(returned, i);
    s.unmap(0);
    previous = q.name();
  }
}

// A reply to a requester freed since comes back to the replier's handler 0
// (AM-2's AM_REPLY_* opcodes), at once: nothing waits for the requester.
TEST(endpoints, replies_to_a_freed_requester_come_back_not_waited_for) {
  clump::bundle b;
  clump::endpoint e(b);
  e.set_tag(clump::tag_all);
  std::vector<std::byte> big(clump::max_medium());
  int handled = 0, returned = 0;
  clump::status last = clump::status::in_use;
  e.on_returned([&](const clump::returned_message& m) {
    EXPECT_EQ(m.reason, clump::return_reason::bad_endpoint);
    EXPECT_EQ(m.op, clump::message_op::reply_medium);
    EXPECT_EQ(m.length, big.size());
    ++returned;
  });
  auto r = std::make_unique<clump::endpoint>(b);
  r->set_tag(clump::tag_all);
  auto got = r->on_reply([](clump::token&, std::span<const std::byte>, uint32_t) {});
  auto req = e.on_request([&](clump::token& t, uint32_t v) {
    ++handled;
    last = t.reply(got, big, v);
  });
  r->map(0, e.name(), clump::tag_all);
  for (uint32_t i = 0; i < 5; ++i) ASSERT_EQ(r->request(0, req, i), clump::status::ok);
  r.reset();  // the requester goes away before its replies are sent
  for (int i = 0; i < 10 && (handled < 5 || returned < 5); ++i) b.poll();
  EXPECT_EQ(handled, 5);
  EXPECT_EQ(last, clump::status::ok);
  EXPECT_EQ(returned, 5);
}

TEST(endpoints, returns_that_cannot_be_delivered_do_not_keep_the_bundle_awake) {
  clump::bundle b, ba;
  clump::endpoint e(b);
  e.set_tag(clump::tag_all);
  auto a = std::make_unique<clump::endpoint>(ba);
  a->set_tag(clump::tag_all);
  a->on_returned([](const clump::returned_message&) {});
  a->map(0, e.name(), clump::tag_all);
  clump::request_handler<uint32_t> none{200};  // nothing at 200 on e: each comes back
  for (uint32_t i = 0; i < 17; ++i) {
    ASSERT_EQ(a->request(0, none, i), clump::status::ok);
    b.poll();
  }
  a.reset();  // its reply queue is never drained again
  for (int i = 0; i < 40; ++i) b.poll();
  const auto t0 = steady_clock::now();
  for (int i = 0; i < 5; ++i) b.sleep_until_message(milliseconds(20));
  EXPECT_GE(steady_clock::now() - t0, milliseconds(90)) << "the bundle did not sleep";
}

TEST(endpoints, a_sleeper_is_woken_even_when_another_sleeper_gave_up) {
  clump::bundle bp(clump::bundle_mode::parallel);
  clump::endpoint e(bp);
  e.set_tag(clump::tag_all);
  auto h = e.on_request([](clump::token&, uint32_t) {});
  clump::bundle bs;
  clump::endpoint s(bs);
  s.set_tag(clump::tag_all);
  s.map(0, e.name(), clump::tag_all);
  auto& word = *bp.impl()->wake;
  steady_clock::time_point woke{};
  std::thread sleeper([&] {
    bp.sleep_until_message(seconds(10));
    woke = steady_clock::now();
  });
  // Wait (bounded) until the sleeper is counted, then sleep and give up here.
  const auto deadline = steady_clock::now() + seconds(10);
  while ((word.load() & 0xffu) == 0 && steady_clock::now() < deadline) std::this_thread::yield();
  bp.sleep_until_message(milliseconds(1));
  const auto sent = steady_clock::now();
  ASSERT_EQ(s.request(0, h, 7u), clump::status::ok);
  sleeper.join();
  EXPECT_LT(woke - sent, seconds(5)) << "the sleeper was not woken by the send";
  bp.poll();
}

TEST(endpoints, an_endpoint_of_a_parallel_bundle_can_be_freed_while_another_thread_polls) {
  // Under ASan/TSan in CI: the poller must never touch a freed endpoint.
  clump::bundle bp(clump::bundle_mode::parallel);
  clump::endpoint keep(bp);  // the bundle is never empty
  std::atomic<bool> stop{false};
  std::atomic<long> handled{0};
  std::thread poller([&] {
    while (!stop.load()) bp.poll();
  });
  clump::bundle bs;
  clump::endpoint s(bs);
  s.set_tag(clump::tag_all);
  for (int round = 0; round < 200; ++round) {
    auto e = std::make_unique<clump::endpoint>(bp);
    e->set_tag(clump::tag_all);
    auto h = e->on_request([&](clump::token&, uint32_t) { handled.fetch_add(1); });
    s.map(0, e->name(), clump::tag_all);
    ASSERT_EQ(s.request(0, h, static_cast<uint32_t>(round)), clump::status::ok);
    e.reset();
    s.unmap(0);
  }
  stop = true;
  poller.join();
  EXPECT_LE(handled.load(), 200);
}

TEST(endpoints, a_get_whose_requester_shrank_its_segment_comes_back_to_the_requester) {
  clump::bundle b;
  clump::endpoint owner(b), asker(b);
  owner.set_tag(clump::tag_all);
  asker.set_tag(clump::tag_all);
  owner.allocate_segment(1 << 16);
  asker.allocate_segment(1 << 16);
  asker.map(0, owner.name(), clump::tag_all);
  std::vector<clump::return_reason> asker_back, owner_back;
  asker.on_returned([&](const clump::returned_message& m) { asker_back.push_back(m.reason); });
  owner.on_returned([&](const clump::returned_message& m) { owner_back.push_back(m.reason); });
  int arrived = 0;
  auto got = asker.on_reply([&](clump::token&, std::span<const std::byte>) { ++arrived; });
  ASSERT_EQ(asker.get(0, got, 0, 60000, 4096), clump::status::ok);
  asker.allocate_segment(4096);  // before the owner answers, the destination range disappears
  for (int i = 0; i < 10; ++i) b.poll();
  EXPECT_EQ(arrived, 0);
  EXPECT_TRUE(owner_back.empty());
  ASSERT_EQ(asker_back.size(), 1u);
  EXPECT_EQ(asker_back[0], clump::return_reason::bad_segment_offset);
}

}  // namespace

namespace {

TEST(endpoints, segment_sizes_that_would_wrap_are_refused) {
  // ~0 bytes rounded up to a page would wrap to 0, "succeed", and leave every
  // bounds check open: refused instead, and the endpoint keeps its segment.
  clump::bundle b;
  clump::endpoint e(b);
  e.allocate_segment(4096);
  EXPECT_THROW(e.allocate_segment(~size_t{0}), clump::error);
  EXPECT_THROW(e.allocate_segment(~size_t{0} - 4095), clump::error);
  EXPECT_EQ(e.segment().size(), 4096u);
  std::byte here[16];
  EXPECT_THROW(e.set_segment(here, ~size_t{0}), clump::error);
  EXPECT_EQ(e.segment().size(), 4096u);
}

}  // namespace
