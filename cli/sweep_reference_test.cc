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

}  // namespace
}  // namespace parity::cli
