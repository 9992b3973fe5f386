#include "worker/metric_buffer.h"

#include "gtest/gtest.h"

namespace parity::worker {
namespace {

parity::v1::MetricPoint Point(uint64_t step) {
  parity::v1::MetricPoint p;
  p.set_step(step);
  return p;
}

TEST(MetricBufferTest, DueWhenFullOrOld) {
  MetricBuffer b({.batch_points = 4, .max_delay = absl::Seconds(1), .max_points = 100});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_FALSE(b.FlushDue(t0)) << "nothing waits";
  b.Add(Point(1), t0);
  EXPECT_FALSE(b.FlushDue(t0 + absl::Milliseconds(999)));
  EXPECT_TRUE(b.FlushDue(t0 + absl::Seconds(1))) << "oldest point is max_delay old";
  for (uint64_t s = 2; s <= 4; ++s) b.Add(Point(s), t0);
  EXPECT_TRUE(b.FlushDue(t0)) << "a full batch is due at once";
}

TEST(MetricBufferTest, UnacknowledgedBatchIsSentAgain) {
  MetricBuffer b({.batch_points = 3, .max_delay = absl::Seconds(1), .max_points = 100});
  for (uint64_t s = 1; s <= 5; ++s) b.Add(Point(s), absl::Now());
  std::vector<parity::v1::MetricPoint> first = b.PeekBatch();
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].step(), 1u);
  // The send failed: nothing acknowledged, the same points come again.
  std::vector<parity::v1::MetricPoint> again = b.PeekBatch();
  ASSERT_EQ(again.size(), 3u);
  EXPECT_EQ(again[2].step(), 3u);
  b.Acknowledge(3);
  std::vector<parity::v1::MetricPoint> rest = b.PeekBatch();
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].step(), 4u);
  b.Acknowledge(2);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.latest_step(), 5u);
}

TEST(MetricBufferTest, DropsOldestPastTheBound) {
  MetricBuffer b({.batch_points = 256, .max_delay = absl::Seconds(1), .max_points = 10});
  for (uint64_t s = 1; s <= 15; ++s) b.Add(Point(s), absl::Now());
  EXPECT_EQ(b.size(), 10u);
  EXPECT_EQ(b.dropped(), 5u);
  EXPECT_EQ(b.PeekBatch().front().step(), 6u) << "the oldest points go first";
}

TEST(MetricBufferTest, BatchIsAtMost256ByDefault) {
  MetricBuffer b;
  for (uint64_t s = 1; s <= 1000; ++s) b.Add(Point(s), absl::Now());
  EXPECT_EQ(b.PeekBatch().size(), 256u);
}

}  // namespace
}  // namespace parity::worker
