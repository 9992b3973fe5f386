#include "core/failure_remedy.h"

#include "gtest/gtest.h"

namespace parity::core {
namespace {

TEST(FailureRemedyTest, ClassNamesAreLowercaseWithoutThePrefix) {
  EXPECT_EQ(FailureClassName(v1::FAILURE_CLASS_USER_ERROR), "user_error");
  EXPECT_EQ(FailureClassName(v1::FAILURE_CLASS_DATA_MISMATCH), "data_mismatch");
  EXPECT_EQ(FailureClassName(v1::FAILURE_CLASS_UNSPECIFIED), "");
  EXPECT_EQ(FailureClassName(static_cast<v1::FailureClass>(999)), "unknown");
}

// Every class the proto defines has a remedy, so a class added later cannot go unexplained.
TEST(FailureRemedyTest, EveryClassHasARemedy) {
  const auto* descriptor = v1::FailureClass_descriptor();
  for (int i = 0; i < descriptor->value_count(); ++i) {
    const auto value = static_cast<v1::FailureClass>(descriptor->value(i)->number());
    if (value == v1::FAILURE_CLASS_UNSPECIFIED) continue;
    EXPECT_FALSE(FailureRemedy(value).empty()) << descriptor->value(i)->name();
    EXPECT_NE(FailureRemedy(value), FailureRemedy(static_cast<v1::FailureClass>(999)))
        << descriptor->value(i)->name() << " falls through to the generic remedy";
  }
  EXPECT_EQ(FailureRemedy(v1::FAILURE_CLASS_USER_ERROR),
            "fix the spec or give the workers the dataset; see the message");
  EXPECT_EQ(FailureRemedy(v1::FAILURE_CLASS_DATA_MISMATCH),
            "re-copy the dataset or pin data.dataset_digest");
}

}  // namespace
}  // namespace parity::core
