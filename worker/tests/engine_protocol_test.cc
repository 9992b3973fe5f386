#include "worker/engine_protocol.h"

#include <signal.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace parity::worker {
namespace {

TEST(EngineProtocolTest, MetricLine) {
  EngineEvent e = ParseEngineLine(
      R"({"step":120,"tokens":"491520","unique_tokens":400000,"epoch":1.2,"train_bpc":2.5,"val_bpc":2.6,)"
      R"("learning_rate":0.001,"grad_norm":0.8,"aux_loss":0.01,"z_loss":0.002,"tokens_per_second":5000,)"
      R"("flops_per_second":1e9,"flops":3e12,"expert_load":[{"layer":1,"min_share":0.1,"max_share":0.3,"cv":0.4,)"
      R"("dead_experts":0,"shares":[0.1,0.3,0.3,0.3]}]})");
  auto* p = std::get_if<parity::v1::MetricPoint>(&e);
  ASSERT_NE(p, nullptr) << "a metric line must decode to a MetricPoint";
  EXPECT_EQ(p->step(), 120u);
  EXPECT_EQ(p->tokens(), 491520u) << "64-bit integers may come as strings";
  EXPECT_EQ(p->unique_tokens(), 400000u);
  EXPECT_DOUBLE_EQ(p->train_bpc(), 2.5);
  ASSERT_TRUE(p->has_val_bpc());
  EXPECT_DOUBLE_EQ(p->val_bpc(), 2.6);
  EXPECT_DOUBLE_EQ(p->flops(), 3e12);
  ASSERT_EQ(p->expert_load_size(), 1);
  EXPECT_EQ(p->expert_load(0).layer(), 1u);
  EXPECT_DOUBLE_EQ(p->expert_load(0).coefficient_of_variation(), 0.4);
  EXPECT_EQ(p->expert_load(0).shares_size(), 4);
  EXPECT_TRUE(p->has_time());
}

TEST(EngineProtocolTest, MetricTimeFromUnixSecondsOrRfc3339) {
  auto time_of = [](std::string_view line) {
    EngineEvent e = ParseEngineLine(line);
    auto* p = std::get_if<parity::v1::MetricPoint>(&e);
    return p == nullptr ? google::protobuf::Timestamp() : p->time();
  };
  const google::protobuf::Timestamp unix =
      time_of(R"({"step":1,"time_unix_seconds":1764547200.5})");
  EXPECT_EQ(unix.seconds(), 1764547200);
  EXPECT_EQ(unix.nanos(), 500000000);
  const google::protobuf::Timestamp text =
      time_of(R"({"step":1,"time":"2025-12-01T00:00:00.25Z"})");
  EXPECT_EQ(text.seconds(), 1764547200) << "2025-12-01T00:00:00Z";
  EXPECT_EQ(text.nanos(), 250000000);
  const google::protobuf::Timestamp bad = time_of(R"({"step":1,"time":"yesterday"})");
  EXPECT_GT(bad.seconds(), 1764547200) << "an unreadable time is replaced by the time of receipt";
}

TEST(EngineProtocolTest, CamelCaseAndMissingValidation) {
  EngineEvent e = ParseEngineLine(
      R"({"type":"metric","step":3,"trainBpc":4.0,"val_bpc":null,"learningRate":0.5})");
  auto* p = std::get_if<parity::v1::MetricPoint>(&e);
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(p->train_bpc(), 4.0);
  EXPECT_DOUBLE_EQ(p->learning_rate(), 0.5);
  EXPECT_FALSE(p->has_val_bpc()) << "no evaluation at this step";
}

TEST(EngineProtocolTest, CheckpointAndSummaryLines) {
  EngineEvent c =
      ParseEngineLine(R"({"type":"checkpoint","step":200,"path":"/ck/step-00000200.ckpt"})");
  auto* ck = std::get_if<EngineCheckpoint>(&c);
  ASSERT_NE(ck, nullptr);
  EXPECT_EQ(ck->step, 200u);
  EXPECT_EQ(ck->path, "/ck/step-00000200.ckpt");

  EngineEvent s = ParseEngineLine(
      R"({"type":"summary","final_train_bpc":2.1,"final_val_bpc":2.2,"tokens":1000,"steps":10,"wall_time_seconds":1.5})");
  auto* sum = std::get_if<parity::v1::RunSummary>(&s);
  ASSERT_NE(sum, nullptr);
  EXPECT_DOUBLE_EQ(sum->final_val_bpc(), 2.2);
  EXPECT_EQ(sum->steps(), 10u);
  EXPECT_EQ(sum->wall_time().seconds(), 1);
  EXPECT_EQ(sum->wall_time().nanos(), 500000000);

  EngineEvent nested = ParseEngineLine(R"({"summary":{"final_val_bpc":3.0,"steps":"7"}})");
  ASSERT_NE(std::get_if<parity::v1::RunSummary>(&nested), nullptr);
  EXPECT_EQ(std::get<parity::v1::RunSummary>(nested).steps(), 7u);
}

// The lines kernels/train/trainer.cc writes today.
TEST(EngineProtocolTest, ParityTrainLines) {
  EngineEvent m = ParseEngineLine(
      R"({"event":"metrics","run_id":"r","step":10,"total_steps":100,"tokens":5120,"unique_tokens":90000,)"
      R"("epoch":0.05,"train_bpc":5.1,"learning_rate":0.0003,"grad_norm":1.5,"aux_loss":0,"z_loss":0,)"
      R"("tokens_per_second":12000,"flops_per_second":3e9,"flops_per_token":2.5e5,"flops_per_token_total":2.6e5})");
  ASSERT_NE(std::get_if<parity::v1::MetricPoint>(&m), nullptr);
  EXPECT_EQ(std::get<parity::v1::MetricPoint>(m).step(), 10u);
  EXPECT_FALSE(std::get<parity::v1::MetricPoint>(m).has_val_bpc());
  EngineEvent s = ParseEngineLine(
      R"({"event":"summary","run_id":"r","status":"completed","steps":100,"total_steps":100,"tokens":51200,)"
      R"("measured_flops_per_token":2.5e5,"train_seconds":3.0,"wall_seconds":3.5,"tokens_per_second":17000,)"
      R"("peak_rss_bytes":123456,"checkpoint":"/c/step-00000100.ckpt","final_train_bpc":3.1,"final_val_bpc":3.2})");
  auto* sum = std::get_if<parity::v1::RunSummary>(&s);
  ASSERT_NE(sum, nullptr);
  EXPECT_DOUBLE_EQ(sum->final_val_bpc(), 3.2);
  EXPECT_EQ(sum->peak_memory_bytes(), 123456u);
  EXPECT_EQ(sum->wall_time().seconds(), 3);
  EXPECT_DOUBLE_EQ(sum->measured_flops_per_token(), 2.5e5);
  EngineEvent e = ParseEngineLine(
      R"({"event":"error","run_id":"r","code":"INVALID_ARGUMENT","message":"bad corpus"})");
  auto* err = std::get_if<EngineError>(&e);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->code, "INVALID_ARGUMENT");
  EXPECT_EQ(err->message, "bad corpus");
}

// The host's peak RSS and the device's high-water mark beside the planner's estimate, each to its
// own field; a line without the device figures (an older engine) leaves them 0.
TEST(EngineProtocolTest, SummaryCarriesDeviceMemoryBesideTheEstimate) {
  EngineEvent s = ParseEngineLine(
      R"({"event":"summary","run_id":"r","status":"completed","steps":10,"tokens":5120,)"
      R"("peak_memory_bytes":1048576000,"peak_device_memory_bytes":61200000000,)"
      R"("estimated_device_memory_bytes":58000000000})");
  auto* sum = std::get_if<parity::v1::RunSummary>(&s);
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(sum->peak_memory_bytes(), 1048576000u) << "the host's peak RSS";
  EXPECT_EQ(sum->peak_device_memory_bytes(), 61200000000u) << "the device's peak";
  EXPECT_EQ(sum->estimated_device_memory_bytes(), 58000000000u) << "the planner's estimate";

  EngineEvent old = ParseEngineLine(R"({"event":"summary","steps":10,"peak_memory_bytes":7})");
  auto* without = std::get_if<parity::v1::RunSummary>(&old);
  ASSERT_NE(without, nullptr);
  EXPECT_EQ(without->peak_memory_bytes(), 7u);
  EXPECT_EQ(without->peak_device_memory_bytes(), 0u) << "absent: not reported";
  EXPECT_EQ(without->estimated_device_memory_bytes(), 0u) << "absent: no estimate";
}

TEST(EngineProtocolTest, OtherLinesAreIgnored) {
  for (const char* line : {"", "loading corpus...", "{not json", R"({"type":"log","msg":"hi"})",
                           R"({"x":1})", "[1,2]"}) {
    EXPECT_TRUE(std::holds_alternative<EngineIgnored>(ParseEngineLine(line))) << line;
  }
}

TEST(EngineProtocolTest, ExitClasses) {
  using K = ExitStatus::Kind;
  EXPECT_EQ(ClassifyEngineExit({.kind = K::kExited, .code = 2}, false),
            parity::v1::FAILURE_CLASS_USER_ERROR);
  EXPECT_EQ(ClassifyEngineExit({.kind = K::kExited, .code = 3}, false),
            parity::v1::FAILURE_CLASS_PREEMPTED)
      << "3 = stopped by SIGTERM after a checkpoint";
  EXPECT_EQ(ClassifyEngineExit({.kind = K::kExited, .code = 4}, false),
            parity::v1::FAILURE_CLASS_INFRASTRUCTURE);
  EXPECT_EQ(ClassifyEngineExit({.kind = K::kExited, .code = 5}, false),
            parity::v1::FAILURE_CLASS_OUT_OF_MEMORY);
  EXPECT_EQ(ClassifyEngineExit({.kind = K::kExited, .code = 6}, false),
            parity::v1::FAILURE_CLASS_DIVERGED)
      << "6 = a non-finite loss: DIVERGED, which the scheduler does not retry";
  EXPECT_EQ(ClassifyEngineExit({.kind = K::kExited, .code = 1}, false),
            parity::v1::FAILURE_CLASS_INFRASTRUCTURE);
  EXPECT_EQ(ClassifyEngineExit({.kind = K::kSignaled, .signal = SIGSEGV}, false),
            parity::v1::FAILURE_CLASS_INFRASTRUCTURE);
  EXPECT_EQ(ClassifyEngineExit({.kind = K::kSignaled, .signal = SIGKILL}, false),
            parity::v1::FAILURE_CLASS_OUT_OF_MEMORY)
      << "a SIGKILL nobody here sent is the OOM killer";
  EXPECT_EQ(ClassifyEngineExit({.kind = K::kSignaled, .signal = SIGKILL}, true),
            parity::v1::FAILURE_CLASS_INFRASTRUCTURE);
}

TEST(EngineProtocolTest, Argv) {
  std::vector<std::string> argv = EngineArgv({.binary = "pt",
                                              .run_json_path = "r.json",
                                              .checkpoint_dir = "ck",
                                              .metrics_fd = 3,
                                              .threads = 4,
                                              .resume = true});
  EXPECT_EQ(argv, (std::vector<std::string>{"pt", "--run", "r.json", "--out", "ck", "--metrics-fd",
                                            "3", "--threads", "4", "--resume"}));
}

TEST(EngineProtocolTest, LatestCheckpointInADirectory) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "ckpt_scan";
  fs::remove_all(dir);
  EXPECT_FALSE(LatestCheckpointIn(dir.string()).has_value()) << "no directory";
  fs::create_directories(dir);
  EXPECT_FALSE(LatestCheckpointIn(dir.string()).has_value()) << "empty directory";
  std::ofstream(dir / "step-00000010.ckpt") << "x";
  std::ofstream(dir / "step-00000030.ckpt") << "x";
  std::ofstream(dir / "step-00000040.ckpt.tmp") << "half";
  std::optional<EngineCheckpoint> c = LatestCheckpointIn(dir.string());
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step, 30u) << "temporary files are not checkpoints";
  std::ofstream(dir / "LATEST") << "step-00000010.ckpt\n";
  c = LatestCheckpointIn(dir.string());
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step, 10u) << "LATEST decides when present";
}

TEST(EngineProtocolTest, EvalBpcPerSetOnMetricAndSummaryLines) {
  EngineEvent m = ParseEngineLine(
      R"({"step":40,"train_bpc":2.0,"val_bpc":1.93,"eval_bpc":{"validation":1.93,"code":2.41}})");
  auto* p = std::get_if<parity::v1::MetricPoint>(&m);
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(p->val_bpc(), 1.93) << "val_bpc stays the primary set's";
  ASSERT_EQ(p->eval_bpc_size(), 2);
  EXPECT_DOUBLE_EQ(p->eval_bpc().at("validation"), 1.93);
  EXPECT_DOUBLE_EQ(p->eval_bpc().at("code"), 2.41);
  const std::string digest(64, 'a');
  EngineEvent s = ParseEngineLine(
      R"({"event":"summary","final_val_bpc":1.9,"final_eval_bpc":{"validation":1.9,"code":2.4},)"
      R"("dataset_digest":")" +
      digest + R"("})");
  auto* summary = std::get_if<parity::v1::RunSummary>(&s);
  ASSERT_NE(summary, nullptr);
  ASSERT_EQ(summary->final_eval_bpc_size(), 2);
  EXPECT_DOUBLE_EQ(summary->final_eval_bpc().at("code"), 2.4);
  EXPECT_EQ(summary->dataset_digest(), digest);
  EngineEvent camel = ParseEngineLine(R"({"step":1,"evalBpc":{"validation":3.0}})");
  ASSERT_NE(std::get_if<parity::v1::MetricPoint>(&camel), nullptr);
  EXPECT_EQ(std::get<parity::v1::MetricPoint>(camel).eval_bpc_size(), 1) << "lowerCamelCase too";
}

TEST(EngineProtocolTest, MalformedEvalBpcIsDroppedAndTheLineKept) {
  auto sets = [](std::string_view line) {
    EngineEvent e = ParseEngineLine(line);
    auto* p = std::get_if<parity::v1::MetricPoint>(&e);
    EXPECT_NE(p, nullptr) << "the line stays a metric point: " << line;
    return p == nullptr ? parity::v1::MetricPoint() : *p;
  };
  EXPECT_EQ(sets(R"({"step":1,"train_bpc":2,"eval_bpc":2.5})").eval_bpc_size(), 0)
      << "a number is not an object of sets";
  EXPECT_EQ(sets(R"({"step":1,"eval_bpc":[1,2]})").eval_bpc_size(), 0);
  EXPECT_DOUBLE_EQ(sets(R"({"step":1,"train_bpc":2,"eval_bpc":"x"})").train_bpc(), 2.0)
      << "the rest of the line survives";
  const parity::v1::MetricPoint mixed =
      sets(R"({"step":1,"eval_bpc":{"validation":1.5,"../etc":1.0,"a b":1.0,"":1.0,)"
           R"("code":"2.0","neg":-1,"nan":"NaN","null":null,"ok-set_2.x":2.5}})");
  EXPECT_EQ(mixed.eval_bpc_size(), 2) << "only the plain names with finite BPC are kept";
  EXPECT_TRUE(mixed.eval_bpc().contains("validation"));
  EXPECT_TRUE(mixed.eval_bpc().contains("ok-set_2.x"));
  std::string many = R"({"step":1,"eval_bpc":{)";
  for (int i = 0; i < 20; ++i) many += absl::StrCat(i > 0 ? "," : "", "\"s", i, "\":1");
  many += "}}";
  EXPECT_EQ(sets(many).eval_bpc_size(), 16) << "at most 16 sets are kept";
  EngineEvent s = ParseEngineLine(R"({"event":"summary","dataset_digest":"../../x"})");
  ASSERT_NE(std::get_if<parity::v1::RunSummary>(&s), nullptr);
  EXPECT_EQ(std::get<parity::v1::RunSummary>(s).dataset_digest(), "")
      << "a digest that is not 64 hex is dropped";
}

TEST(EngineProtocolTest, RendezvousLineAndItsRelay) {
  EngineEvent e = ParseEngineLine(
      R"({"event":"rendezvous","run_id":"r","address":"127.0.0.1:4711","world_size":2,)"
      R"("gang_epoch":3,"token":"00112233445566778899aabbccddeeff"})");
  auto* r = std::get_if<EngineRendezvous>(&e);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->address, "127.0.0.1:4711");
  EXPECT_EQ(r->gang_epoch, 3);
  const std::string relayed = RendezvousRelay(*r);
  EXPECT_EQ(relayed, "127.0.0.1:4711#00112233445566778899aabbccddeeff");
  absl::StatusOr<EngineRendezvous> back = ParseRendezvousRelay(relayed);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->address, r->address);
  EXPECT_EQ(back->token, r->token);
  // An engine that reports no token (an older one) is not relayed: its ranks could not join.
  EXPECT_TRUE(std::holds_alternative<EngineIgnored>(
      ParseEngineLine(R"({"event":"rendezvous","address":"h:1","gang_epoch":3})")));
  EXPECT_TRUE(std::holds_alternative<EngineIgnored>(
      ParseEngineLine(R"({"event":"rendezvous","address":"h:1#x","token":"t"})")));
  for (const char* bad : {"h:1", "#t", "h:1#", "h:1#t#u", ""}) {
    EXPECT_FALSE(ParseRendezvousRelay(bad).ok()) << bad;
  }
}

TEST(EngineProtocolTest, GangArgvNamesRankAndRendezvousButNeverTheToken) {
  std::vector<std::string> r0 = EngineArgv({.binary = "pt",
                                            .run_json_path = "run.json",
                                            .checkpoint_dir = "ck",
                                            .rank = 0,
                                            .world_size = 2,
                                            .gang_epoch = 7,
                                            .rendezvous_listen = "127.0.0.1"});
  const std::string a0 = absl::StrJoin(r0, " ");
  EXPECT_NE(a0.find("--rank 0 --world-size 2 --gang-epoch 7 --rendezvous-listen 127.0.0.1"),
            std::string::npos)
      << a0;
  std::vector<std::string> r1 = EngineArgv({.binary = "pt",
                                            .run_json_path = "run.json",
                                            .checkpoint_dir = "ck",
                                            .rank = 1,
                                            .world_size = 2,
                                            .gang_epoch = 7,
                                            .rendezvous_address = "127.0.0.1:4711"});
  const std::string a1 = absl::StrJoin(r1, " ");
  EXPECT_NE(a1.find("--rank 1 --world-size 2 --gang-epoch 7 --rendezvous 127.0.0.1:4711"),
            std::string::npos)
      << a1;
  EXPECT_EQ(a1.find('#'), std::string::npos) << a1;
  // Not a gang: no rank flags at all.
  EXPECT_EQ(
      absl::StrJoin(EngineArgv({.binary = "pt", .run_json_path = "r", .checkpoint_dir = "c"}), " ")
          .find("--rank"),
      std::string::npos);
}

}  // namespace
}  // namespace parity::worker
