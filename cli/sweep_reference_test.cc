#include "cli/sweep_reference.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace parity::cli {
namespace {

parity::v1::Sweep MakeSweep(const std::string& id, const std::string& name) {
  parity::v1::Sweep sweep;
  sweep.set_sweep_id(id);
  sweep.mutable_spec()->set_name(name);
  return sweep;
}

std::vector<std::string> Ids(const std::vector<parity::v1::Sweep>& sweeps) {
  std::vector<std::string> ids;
  for (const parity::v1::Sweep& s : sweeps) ids.push_back(s.sweep_id());
  return ids;
}

const std::vector<parity::v1::Sweep> kSweeps = {
    MakeSweep("7f3a9c10-0000-4000-8000-000000000001", "micro"),
    MakeSweep("7f3b0000-0000-4000-8000-000000000002", "cpu-study"),
    MakeSweep("a0b1c2d3-0000-4000-8000-000000000003", "micro"),
    MakeSweep("beef0000-0000-4000-8000-000000000004", "7f3a")};

TEST(SweepReferenceTest, AUniqueIdPrefixOfFourOrMoreHexDigitsNamesItsSweep) {
  EXPECT_EQ(Ids(SweepsNamedBy("7f3a9c10", kSweeps)),
            std::vector<std::string>{"7f3a9c10-0000-4000-8000-000000000001"});
  EXPECT_EQ(Ids(SweepsNamedBy("A0B1", kSweeps)),
            std::vector<std::string>{"a0b1c2d3-0000-4000-8000-000000000003"})
      << "a prefix is case-insensitive, as UUIDs are";
  EXPECT_TRUE(SweepsNamedBy("a0b", kSweeps).empty()) << "three digits are too short to mean an id";
  EXPECT_EQ(SweepsNamedBy("7f3", kSweeps).size(), 0u);
  EXPECT_EQ(SweepsNamedBy("7f3b", kSweeps).size(), 1u);
}

TEST(SweepReferenceTest, ANameNamesEverySweepOfThatNameAndAnAmbiguityIsSeen) {
  EXPECT_EQ(Ids(SweepsNamedBy("cpu-study", kSweeps)),
            std::vector<std::string>{"7f3b0000-0000-4000-8000-000000000002"});
  EXPECT_EQ(SweepsNamedBy("micro", kSweeps).size(), 2u) << "two sweeps named micro: ambiguous";
  // "7f3a" is both a sweep's name and another's id prefix: both are candidates.
  EXPECT_EQ(SweepsNamedBy("7f3a", kSweeps).size(), 2u);
  EXPECT_TRUE(SweepsNamedBy("nothing", kSweeps).empty());
}

std::vector<std::string> RunIds(const std::vector<RunCandidate>& runs) {
  std::vector<std::string> ids;
  for (const RunCandidate& r : runs) ids.push_back(r.run_id);
  return ids;
}

const std::vector<RunCandidate> kRuns = {
    {"c0ffee00-0000-4000-8000-000000000001", "moe-ra25-C1-s0",
     "7f3a9c10-0000-4000-8000-000000000001", "micro", parity::v1::RUN_STATE_SUCCEEDED},
    {"c0ffee11-0000-4000-8000-000000000002", "dense-1C-C1-s0",
     "7f3a9c10-0000-4000-8000-000000000001", "micro", parity::v1::RUN_STATE_FAILED},
    {"d00d0000-0000-4000-8000-000000000003", "moe-ra25-C1-s0",
     "7f3b0000-0000-4000-8000-000000000002", "cpu-study", parity::v1::RUN_STATE_RUNNING}};

TEST(RunReferenceTest, AUniqueIdPrefixOrANameWithinItsSweepNamesARun) {
  EXPECT_EQ(RunIds(RunsNamedBy("c0ffee1", kRuns)),
            std::vector<std::string>{"c0ffee11-0000-4000-8000-000000000002"});
  EXPECT_EQ(RunIds(RunsNamedBy("D00D", kRuns)),
            std::vector<std::string>{"d00d0000-0000-4000-8000-000000000003"});
  EXPECT_EQ(RunIds(RunsNamedBy("cpu-study/moe-ra25-C1-s0", kRuns)),
            std::vector<std::string>{"d00d0000-0000-4000-8000-000000000003"});
  EXPECT_EQ(RunIds(RunsNamedBy("7f3a/c0ffee0", kRuns)),
            std::vector<std::string>{"c0ffee00-0000-4000-8000-000000000001"})
      << "SWEEP/RUN takes id prefixes on both sides";
}

TEST(RunReferenceTest, AmbiguityAndNothingAreSeen) {
  EXPECT_EQ(RunsNamedBy("moe-ra25-C1-s0", kRuns).size(), 2u) << "the name is in two sweeps";
  EXPECT_EQ(RunsNamedBy("c0ffee", kRuns).size(), 2u) << "a prefix of two ids";
  EXPECT_TRUE(RunsNamedBy("c0f", kRuns).empty()) << "too short to mean an id";
  EXPECT_TRUE(RunsNamedBy("micro/no-such-run", kRuns).empty());
  EXPECT_TRUE(RunsNamedBy("no-such-sweep/moe-ra25-C1-s0", kRuns).empty());
}

}  // namespace
}  // namespace parity::cli
