// The one loader for YAML and JSON: friendly names, numeric suffixes, unknown-field paths, and a
// YAML spec and its JSON twin that must read (and plan) identically.
#include "core/spec_loader.h"

#include <map>

#include "core/field_violation.h"
#include "core/planner.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace parity::core {
namespace {

using parity::v1::SweepSpec;

// The field paths of the violations in `status`, joined for readable failure messages.
std::string Fields(const absl::Status& status) {
  std::string out;
  for (const auto& v : FieldViolationsOf(status)) out += v.field + " (" + v.description + "); ";
  return out;
}

TEST(SpecLoaderTest, YamlAndJsonTwinsReadAndPlanIdentically) {
  absl::StatusOr<SweepSpec> yaml = LoadSweepSpecFile("core/tests/data/twin.yaml");
  absl::StatusOr<SweepSpec> json = LoadSweepSpecFile("core/tests/data/twin.json");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  ASSERT_TRUE(json.ok()) << json.status();
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(*yaml, *json)) << "YAML and JSON twins differ: " << diff;

  auto yaml_runs = PlanSweep(*yaml);
  auto json_runs = PlanSweep(*json);
  ASSERT_TRUE(yaml_runs.ok()) << yaml_runs.status();
  ASSERT_TRUE(json_runs.ok()) << json_runs.status();
  ASSERT_EQ(yaml_runs->size(), json_runs->size());
  EXPECT_EQ(yaml_runs->size(), (2u + 2u) * 2 * 3 * 2 * 2 - 16)
      << "(2 MoE + 2 baselines) × 2 budgets × 3 data × 2 seeds × 2 wd values, less the runs "
         "planned once: dense 1C strict (D̂ = its own D) is dense 1C unique, and dense 2C strict "
         "(D̂ = D_1C, 2 epochs) is dense 2C loose 2 epochs, at 2 budgets × 2 seeds × 2 wd each";
  for (size_t i = 0; i < yaml_runs->size(); ++i) {
    EXPECT_TRUE(
        google::protobuf::util::MessageDifferencer::Equals((*yaml_runs)[i], (*json_runs)[i]))
        << "run " << i << " (" << (*yaml_runs)[i].name() << ") differs between the twins";
  }
}

TEST(SpecLoaderTest, FriendlyEnumNamesAndSuffixes) {
  auto spec = ParseSweepSpec(R"(
name: x
moe: {moe: {layout: all-moe, router: {balance: LOSS_FREE}}, attention: gqa}
training: {rule: step-law, schedule: Cosine}
data: {reuse: strict, unique_tokens: 68B}
grid: {compute: [{compute_flops: 2.86e21}, {dense_tokens: 68e9}, {dense_tokens: 1_500_000}]}
)",
                             SpecFormat::kYaml);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->moe().moe().layout(), parity::v1::MOE_LAYOUT_ALL_MOE);
  EXPECT_EQ(spec->moe().moe().router().balance(), parity::v1::BALANCE_METHOD_LOSS_FREE);
  EXPECT_EQ(spec->moe().attention(), parity::v1::ATTENTION_KIND_GROUPED_QUERY);
  EXPECT_EQ(spec->training().rule(), parity::v1::HYPERPARAMETER_RULE_STEP_LAW);
  EXPECT_EQ(spec->training().schedule(), parity::v1::LR_SCHEDULE_COSINE);
  EXPECT_EQ(spec->data().reuse(), parity::v1::REUSE_MODE_STRICT);
  EXPECT_EQ(spec->data().unique_tokens(), 68000000000u);
  EXPECT_DOUBLE_EQ(spec->grid().compute(0).compute_flops(), 2.86e21);
  EXPECT_EQ(spec->grid().compute(1).dense_tokens(), 68000000000u);
  EXPECT_EQ(spec->grid().compute(2).dense_tokens(), 1500000u);
}

TEST(SpecLoaderTest, EnumSpellings) {
  const auto* layout = parity::v1::MoeLayout_descriptor();
  EXPECT_EQ(ParseEnumValue(*layout, "1dense+SE"), parity::v1::MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT);
  EXPECT_EQ(ParseEnumValue(*layout, "interleaved"), parity::v1::MOE_LAYOUT_INTERLEAVED);
  EXPECT_EQ(ParseEnumValue(*layout, "MOE_LAYOUT_ALL_MOE"), parity::v1::MOE_LAYOUT_ALL_MOE);
  EXPECT_EQ(ParseEnumValue(*parity::v1::Architecture_descriptor(), "moe"),
            parity::v1::ARCHITECTURE_MOE);
  EXPECT_EQ(ParseEnumValue(*parity::v1::Architecture_descriptor(), "dense"),
            parity::v1::ARCHITECTURE_DENSE);
  EXPECT_EQ(ParseEnumValue(*parity::v1::ReuseMode_descriptor(), "loose"),
            parity::v1::REUSE_MODE_LOOSE);
  EXPECT_EQ(ParseEnumValue(*layout, "sideways"), std::nullopt);
}

TEST(SpecLoaderTest, Quantities) {
  EXPECT_EQ(ParseQuantity("68B"), 68e9);
  EXPECT_EQ(ParseQuantity("1.5T"), 1.5e12);
  EXPECT_EQ(ParseQuantity("500M"), 5e8);
  EXPECT_EQ(ParseQuantity("2.86e21"), 2.86e21);
  EXPECT_EQ(ParseQuantity("nan"), std::nullopt);
  EXPECT_EQ(ParseQuantity("12X"), std::nullopt);
  EXPECT_EQ(ParseQuantity(""), std::nullopt);
}

TEST(SpecLoaderTest, ReportsEveryMalformedFieldWithItsPath) {
  auto spec = ParseSweepSpec(R"(
name: x
colour: blue
grid:
  moe:
    - {top_k: 2}
    - {top_k: two, flavour: 3}
  compute: [{compute_flops: lots}]
  seeds: 3
training: {sequence_length: 64.5, schedule: sideways}
moe: {tie_embeddings: maybe}
)",
                             SpecFormat::kYaml);
  ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string fields = Fields(spec.status());
  for (const char* path :
       {"colour", "grid.moe[1].top_k", "grid.moe[1].flavour", "grid.compute[0].compute_flops",
        "grid.seeds", "training.sequence_length", "training.schedule", "moe.tie_embeddings"}) {
    EXPECT_NE(fields.find(std::string(path) + " ("), std::string::npos)
        << "expected a violation at " << path << "; got: " << fields;
  }
  EXPECT_NE(fields.find("unknown field"), std::string::npos) << fields;
  EXPECT_NE(fields.find("(cosine, wsd, constant)"), std::string::npos)
      << "a bad enum value should list the accepted ones as a spec writes them: " << fields;
  EXPECT_EQ(fields.find("LR_SCHEDULE_"), std::string::npos)
      << "enum errors use the YAML spelling, never the proto name: " << fields;
}

// A typo gets the nearest valid name, at any depth, in the spelling a spec uses.
TEST(SpecLoaderTest, TyposGetDidYouMeanInYamlSpelling) {
  auto spec = ParseSweepSpec(R"(
name: x
moe: {moe: {layot: all-moe, router: {balance: loss-fre}}, num_head: 4}
training: {lerning_rate: 1e-3, schedule: wds, rule: steplaw}
data: {reuse: lose}
grid: {moe: [{target_activation_rate: 0.2, layout: 1dense+se}, {top_kk: 2}]}
colour: blue
)",
                             SpecFormat::kYaml);
  ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  std::map<std::string, std::string> by_field;
  for (const auto& v : FieldViolationsOf(spec.status())) by_field[v.field] = v.description;
  const std::pair<const char*, const char*> expected[] = {
      {"moe.moe.layot", "unknown field of MoeSpec; did you mean 'layout'?"},
      {"moe.moe.router.balance",
       "'loss-fre' is not a balance method; did you mean 'loss_free'? (aux_loss, loss_free, "
       "none)"},
      {"moe.num_head", "unknown field of ModelSpec; did you mean 'num_heads'?"},
      {"training.lerning_rate", "unknown field of TrainingSpec; did you mean 'learning_rate'?"},
      {"training.schedule",
       "'wds' is not a learning-rate schedule; did you mean 'wsd'? (cosine, wsd, "
       "constant)"},
      {"data.reuse", "'lose' is not a reuse mode; did you mean 'loose'? (unique, strict, loose)"},
      {"grid.moe[1].top_kk", "unknown field of MoePoint; did you mean 'top_k'?"},
  };
  for (const auto& [field, description] : expected) {
    ASSERT_TRUE(by_field.contains(field)) << "expected a violation at " << field;
    EXPECT_EQ(by_field[field].rfind(description, 0), 0u)
        << field << ": expected '" << description << "', got '" << by_field[field] << "'";
  }
  // Nothing near: the message lists the keys instead of guessing.
  ASSERT_TRUE(by_field.contains("colour"));
  EXPECT_NE(by_field["colour"].find("(its keys: name, description, moe, dense"), std::string::npos)
      << by_field["colour"];
  EXPECT_NE(by_field["colour"].find("docs/spec-reference.md"), std::string::npos);
  EXPECT_FALSE(by_field.contains("grid.moe[0].layout")) << "1dense+se is an accepted spelling";
  EXPECT_FALSE(by_field.contains("training.rule")) << "steplaw is an accepted alias";
}

TEST(SpecLoaderTest, SyntaxErrorsAndMissingFiles) {
  auto yaml = ParseSweepSpec("name: [unclosed", SpecFormat::kYaml);
  EXPECT_EQ(yaml.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Fields(yaml.status()).find("YAML syntax error at line 1"), std::string::npos)
      << Fields(yaml.status());
  auto json = ParseSweepSpec("{\"name\": ", SpecFormat::kJson);
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  auto not_a_map = ParseSweepSpec("- 1\n- 2\n", SpecFormat::kYaml);
  EXPECT_EQ(not_a_map.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadSweepSpecFile("core/tests/data/no_such_file.yaml").status().code(),
            absl::StatusCode::kNotFound);
}

// Found by tests/fuzz (spec_yaml_fuzzer): yaml-cpp passes any bytes through, and a value that is
// not UTF-8 (a spec saved in Latin-1) made nlohmann::json throw from dump() outside the loader's
// try, ending the process. Now a violation names the byte; JSON's parser refuses it as well.
TEST(SpecLoaderTest, TextThatIsNotUtf8IsAViolationNotACrash) {
  for (const SpecFormat format : {SpecFormat::kYaml, SpecFormat::kJson}) {
    const std::string text = format == SpecFormat::kYaml
                                 ? "name: ok\ndescription: caf\xe9\n"
                                 : "{\"name\": \"ok\", \"description\": \"caf\xe9\"}";
    absl::StatusOr<SweepSpec> spec;
    ASSERT_NO_THROW(spec = ParseSweepSpec(text, format));
    ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    const std::vector<FieldViolation> violations = FieldViolationsOf(spec.status());
    ASSERT_EQ(violations.size(), 1u) << spec.status();
    EXPECT_EQ(violations[0].field, "spec");
  }
  auto yaml = ParseSweepSpec("name: ok\ndescription: caf\xe9\n", SpecFormat::kYaml);
  EXPECT_NE(Fields(yaml.status()).find("line 2, column 17"), std::string::npos)
      << Fields(yaml.status());
  // Nested in a structure that an error message quotes whole.
  EXPECT_EQ(
      ParseSweepSpec("name: ok\ngrid: {seeds: [[\"\xff\"]]}\n", SpecFormat::kYaml).status().code(),
      absl::StatusCode::kInvalidArgument);
  // Valid UTF-8 beyond ASCII is text like any other.
  auto accented = ParseSweepSpec("name: caf\xc3\xa9\n", SpecFormat::kYaml);
  ASSERT_TRUE(accented.ok()) << accented.status();
  EXPECT_EQ(accented->name(), "caf\xc3\xa9");
}

// The planning axes of issue #22 read from YAML with their friendly spellings.
TEST(SpecLoaderTest, FrontierBaselinePolicyAblationsAndRegimeFlag) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(R"(
name: axes
allow_undertrained: yes
grid:
  moe:
    - {target_activation_rate: 0.2, top_k: 4, layout: all-moe, shared_expert_hidden: 256,
       balance: loss-free}
  dense_sizes: [{params_multiple: 0.5}, {target_params: 25M}, {d_model: 512, num_layers: 8}]
baselines: [{compute_multiple: 1.91, reuse: unique}]
)",
                                                  SpecFormat::kYaml);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->allow_undertrained());
  const auto& point = spec->grid().moe(0);
  EXPECT_EQ(point.top_k(), 4u);
  EXPECT_EQ(point.layout(), parity::v1::MOE_LAYOUT_ALL_MOE);
  EXPECT_EQ(point.shared_expert_hidden(), 256u);
  EXPECT_EQ(point.balance(), parity::v1::BALANCE_METHOD_LOSS_FREE);
  ASSERT_EQ(spec->grid().dense_sizes_size(), 3);
  EXPECT_DOUBLE_EQ(spec->grid().dense_sizes(0).params_multiple(), 0.5);
  EXPECT_EQ(spec->grid().dense_sizes(1).target_params(), 25000000u);
  EXPECT_EQ(spec->grid().dense_sizes(2).d_model(), 512u);
  EXPECT_DOUBLE_EQ(spec->baselines(0).compute_multiple(), 1.91);
  EXPECT_EQ(spec->baselines(0).reuse(), parity::v1::REUSE_MODE_UNIQUE);
  const absl::Status bad =
      ParseSweepSpec("name: x\ngrid: {dense_sizes: [{multiple: 2}]}\n", SpecFormat::kYaml).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Fields(bad).find("grid.dense_sizes[0].multiple"), std::string::npos) << Fields(bad);
}

TEST(SpecLoaderTest, JsonAcceptsFriendlyNamesToo) {
  auto spec = ParseSweepSpec(R"({"name": "j", "moe": {"moe": {"layout": "1dense+SE"}},
                                 "data": {"uniqueTokens": "68B"}})",
                             SpecFormat::kJson);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->moe().moe().layout(), parity::v1::MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT);
  EXPECT_EQ(spec->data().unique_tokens(), 68000000000u);
}

}  // namespace
}  // namespace parity::core
