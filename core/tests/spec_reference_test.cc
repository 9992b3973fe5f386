// The generated spec reference against its sources: every key documented with its comment and
// unit, every example valid, every enum spelling accepted by the loader, every default the one the
// planner applies, and the "did you mean" matcher.
#include "core/spec_reference.h"

#include <string>

#include "core/hyperparameters.h"
#include "core/planner.h"
#include "core/spec_defaults.h"
#include "core/spec_loader.h"
#include "core/spec_names.h"
#include "gtest/gtest.h"
#include "parity/v1/sweep.pb.h"

namespace parity::core {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

TEST(SpecReferenceTest, EveryKeyHasItsProtoCommentAndEveryNumberAUnit) {
  for (const Descriptor* type : SpecMessageTypes()) {
    for (int i = 0; i < type->field_count(); ++i) {
      const FieldDescriptor& f = *type->field(i);
      EXPECT_FALSE(FieldComment(f).empty())
          << f.full_name() << " has no comment: write one in its .proto (the reference prints it)";
      const bool numeric = f.cpp_type() != FieldDescriptor::CPPTYPE_STRING &&
                           f.cpp_type() != FieldDescriptor::CPPTYPE_BOOL &&
                           f.cpp_type() != FieldDescriptor::CPPTYPE_ENUM &&
                           f.cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE;
      if (numeric) {
        EXPECT_FALSE(FieldUnit(f).empty())
            << f.full_name() << ": its comment states no unit in parentheses, e.g. \"(tokens)\" "
            << "(the units are listed in core/spec_reference.cc, kUnits): " << FieldComment(f);
      }
    }
  }
  const FieldDescriptor* unique_tokens =
      parity::v1::DataSpec::descriptor()->FindFieldByName("unique_tokens");
  EXPECT_EQ(FieldUnit(*unique_tokens), "tokens");
  const FieldDescriptor* rate =
      parity::v1::MoeSpec::descriptor()->FindFieldByName("target_activation_rate");
  EXPECT_EQ(FieldUnit(*rate), "fraction") << "\"(fraction in (0, 1])\" is a fraction";
}

TEST(SpecReferenceTest, EverySectionHasAnExampleTheLoaderAccepts) {
  for (const Descriptor* type : SpecMessageTypes()) {
    bool found = false;
    for (const SpecExample& example : SpecExamples()) found |= example.type == type;
    EXPECT_TRUE(found) << type->name() << " has no example: add one to core/spec_examples.cc";
  }
  for (const SpecExample& example : SpecExamples()) {
    std::unique_ptr<google::protobuf::Message> message(
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(example.type)->New());
    const absl::Status status = ParseMessage(example.yaml, SpecFormat::kYaml, *message);
    EXPECT_TRUE(status.ok()) << example.type->name() << "'s example: " << status;
  }
  // The top-level example is a whole study: it plans.
  absl::StatusOr<parity::v1::SweepSpec> spec =
      ParseSweepSpec(SpecExamples()[0].yaml, SpecFormat::kYaml);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::vector<parity::v1::RunSpec>> runs = PlanSweep(*spec);
  EXPECT_TRUE(runs.ok()) << "the reference's SweepSpec example must plan: " << runs.status();
}

TEST(SpecReferenceTest, EveryEnumSpellingParsesBackToItsValue) {
  for (const google::protobuf::EnumDescriptor* type :
       {parity::v1::MoeLayout_descriptor(), parity::v1::BalanceMethod_descriptor(),
        parity::v1::ReuseMode_descriptor(), parity::v1::LrSchedule_descriptor(),
        parity::v1::HyperparameterRule_descriptor(), parity::v1::AttentionKind_descriptor(),
        parity::v1::PositionEncoding_descriptor(), parity::v1::Precision_descriptor(),
        parity::v1::Architecture_descriptor()}) {
    for (int i = 1; i < type->value_count(); ++i) {
      const auto& value = *type->value(i);
      EXPECT_EQ(ParseEnumValue(*type, EnumYamlName(value)), value.number()) << value.name();
      for (const std::string& alias : EnumAliases(value)) {
        EXPECT_EQ(ParseEnumValue(*type, alias), value.number()) << value.name() << " " << alias;
      }
    }
  }
  EXPECT_EQ(EnumYamlName(*parity::v1::MoeLayout_descriptor(), parity::v1::MOE_LAYOUT_ALL_MOE),
            "all-moe");
}

TEST(SpecReferenceTest, DefaultsNameRealFieldsAndAreThoseThePlannerApplies) {
  for (const SpecDefault& d : SpecDefaults()) {
    EXPECT_NE(
        google::protobuf::DescriptorPool::generated_pool()->FindFieldByName(std::string(d.field)),
        nullptr)
        << d.field << " is listed in core/spec_defaults.cc but is no field";
  }
  parity::v1::TrainingSpec t;
  t.set_learning_rate(1e-3);
  t.set_batch_tokens(64);
  t.set_sequence_length(64);
  ASSERT_TRUE(ResolveTraining(t, 1000, 64000).ok());
  EXPECT_EQ(t.adam_beta2(), kDefaultAdamBeta2);
  EXPECT_EQ(t.eval_tokens(), kDefaultEvalTokens);
  EXPECT_EQ(SpecDefaultOf("parity.v1.TrainingSpec.adam_beta2"), "0.95");
  EXPECT_EQ(SpecDefaultOf("parity.v1.TrainingSpec.schedule"), "cosine");
  const std::string doc = SpecReferenceMarkdown();
  EXPECT_NE(doc.find("| `adam_beta2` | number | dimensionless | 0.95 | AdamW β2"),
            std::string::npos)
      << "a row names the key, type, unit, default and comment";
  EXPECT_NE(doc.find("| `reuse` | one of `unique`, `strict`, `loose` |"), std::string::npos);
  EXPECT_NE(doc.find("| `1dense+SE` | `one_dense_shared_expert`, `1dense_se`"), std::string::npos)
      << "the enum table lists the YAML spelling and the other accepted ones";
  EXPECT_EQ(doc.find("| `REUSE_MODE_"), std::string::npos) << "no proto enum names as values";
  EXPECT_EQ(doc.find("one of `REUSE_MODE_"), std::string::npos) << "no proto enum names as values";
  EXPECT_NE(doc.find("D̂ for `strict` reuse (tokens)"), std::string::npos)
      << "proto comments' enum names (STRICT) are printed in YAML spelling";
  EXPECT_NE(doc.find("| `adam_epsilon` | number | dimensionless | 1e-8 |"), std::string::npos);
  EXPECT_NE(SpecKeysText().find("grid.moe[].top_k  integer ≥ 0  count\n"), std::string::npos)
      << SpecKeysText();
}

TEST(SpecNamesTest, NearestNameFoldsCaseAndSeparatorsAndStaysNear) {
  const std::vector<std::string> keys = {"learning_rate", "batch_tokens", "top_k", "rule"};
  EXPECT_EQ(NearestName("learnign_rate", keys), "learning_rate") << "a transposition is one edit";
  EXPECT_EQ(NearestName("Batch-Tokens", keys), "batch_tokens");
  EXPECT_EQ(NearestName("topk2", keys), "top_k");
  EXPECT_EQ(NearestName("colour", keys), std::nullopt) << "nothing is near";
  EXPECT_EQ(NearestName("x", keys), std::nullopt);
  EXPECT_EQ(NearestName(std::string(100000, 'a'), keys), std::nullopt) << "no typo of a key";
  EXPECT_EQ(EnumTypeWords(*parity::v1::ReuseMode_descriptor()), "reuse mode");
}

}  // namespace
}  // namespace parity::core
