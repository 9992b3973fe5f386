// What one identity can still do to another's work, each attack of issue #23 replayed through the
// real paths: a SchedulerServer on a throwaway PostgreSQL, called over real gRPC and HTTP with
// tokens of each role. Idempotency keys per owner, worker ids bound to their token, bounded
// metric points and curve responses, the negative token cache, revoked watches, filter.states.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/proto_time.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "parity/v1/sweep_service.grpc.pb.h"
#include "parity/v1/token_service.grpc.pb.h"
#include "parity/v1/worker_service.grpc.pb.h"
#include "server/api/access_control.h"
#include "server/scheduler_server.h"
#include "server/store/memory/memory_run_store.h"
#include "tests/scheduler/scheduler_fixture.h"
#include "tests/support/test_tokens.h"
#include "tests/support/violated_fields.h"

namespace parity::server::testing {
namespace {

using ::parity::testing::kTestAdminToken;
using ::parity::testing::TokenChannel;
using ::parity::testing::ViolatedFields;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

class TenancyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PARITY_REQUIRE_POSTGRES();
    database_url_ = parity::testing::PostgresEnvironment::FreshDatabase();
    ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.http_listen = "127.0.0.1:0";
    options.database_url = database_url_;
    options.pool_size = 4;
    options.bootstrap_token = kTestAdminToken;
    options.scheduler.idle_poll_interval = absl::Milliseconds(100);
    options.scheduler.watch_poll_interval = absl::Milliseconds(20);
    options.scheduler.watch_reauth_interval = absl::Milliseconds(500);
    absl::StatusOr<std::unique_ptr<SchedulerServer>> server =
        SchedulerServer::Start(options, &StubPlanner);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  static std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    return context;
  }

  std::string MakeToken(const std::string& name, v1::Role role) {
    return parity::testing::MakeTokenAsAdmin(server_->port(), name, role);
  }
  std::unique_ptr<v1::SweepService::Stub> Sweeps(const std::string& token) {
    return v1::SweepService::NewStub(TokenChannel(server_->port(), token));
  }
  std::unique_ptr<v1::WorkerService::Stub> Workers(const std::string& token) {
    return v1::WorkerService::NewStub(TokenChannel(server_->port(), token));
  }

  grpc::Status Submit(const std::string& token, const std::string& key,
                      v1::SubmitSweepResponse* out, const std::string& name = "nightly",
                      int runs = 1) {
    v1::SubmitSweepRequest request;
    *request.mutable_spec() = MakeSweepSpec(name, runs);
    request.set_idempotency_key(key);
    return Sweeps(token)->SubmitSweep(Context().get(), request, out);
  }

  grpc::Status Register(const std::string& token, const std::string& id, std::string* out,
                        const std::string& hostname = "host") {
    v1::RegisterWorkerRequest request;
    request.set_worker_id(id);
    request.set_hostname(hostname);
    *request.add_devices() = CpuDevice();
    v1::RegisterWorkerResponse response;
    const grpc::Status status = Workers(token)->RegisterWorker(Context().get(), request, &response);
    if (out != nullptr) *out = response.worker_id();
    return status;
  }

  grpc::Status Lease(const std::string& token, const std::string& worker_id,
                     v1::LeaseRunResponse* out) {
    v1::LeaseRunRequest request;
    request.set_worker_id(worker_id);
    *request.add_free_devices() = CpuDevice();
    return Workers(token)->LeaseRun(Context().get(), request, out);
  }

  httplib::Result HttpGet(const std::string& path, const std::string& token) {
    httplib::Client http("127.0.0.1", server_->http_port());
    http.set_bearer_token_auth(token.c_str());
    return http.Get(path.c_str());
  }

  std::string database_url_;
  std::unique_ptr<SchedulerServer> server_;
};

TEST_F(TenancyTest, BobReusingAlicesKeyGetsANewSweepOfHisOwn) {
  const std::string alice = MakeToken("alice", v1::ROLE_RESEARCHER);
  const std::string bob = MakeToken("bob", v1::ROLE_RESEARCHER);
  v1::SubmitSweepResponse alices, bobs;
  ASSERT_TRUE(Submit(alice, "alice-key", &alices).ok());
  ASSERT_TRUE(Submit(bob, "alice-key", &bobs).ok());
  EXPECT_FALSE(bobs.deduplicated()) << "Alice's sweep must not come back to Bob as his";
  EXPECT_NE(bobs.sweep().sweep_id(), alices.sweep().sweep_id());
  EXPECT_EQ(bobs.sweep().owner(), "bob");
  v1::GetSweepRequest get;
  get.set_sweep_id(alices.sweep().sweep_id());
  v1::GetSweepResponse still;
  ASSERT_TRUE(Sweeps(alice)->GetSweep(Context().get(), get, &still).ok());
  EXPECT_EQ(still.sweep().state(), v1::SWEEP_STATE_ACTIVE) << "Alice's sweep is untouched";
  EXPECT_EQ(still.sweep().owner(), "alice");
}

TEST_F(TenancyTest, BobClaimingAKeyFirstDoesNotTakeAlicesSubmission) {
  const std::string alice = MakeToken("alice", v1::ROLE_RESEARCHER);
  const std::string bob = MakeToken("bob", v1::ROLE_RESEARCHER);
  v1::SubmitSweepResponse bobs, alices;
  ASSERT_TRUE(Submit(bob, "nightly-2024", &bobs).ok());
  ASSERT_TRUE(Submit(alice, "nightly-2024", &alices).ok());
  EXPECT_FALSE(alices.deduplicated());
  EXPECT_EQ(alices.sweep().owner(), "alice") << "Alice gets her own sweep, not Bob's";
  EXPECT_NE(alices.sweep().sweep_id(), bobs.sweep().sweep_id());
  // Bob cannot cancel what Alice got.
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(alices.sweep().sweep_id());
  v1::CancelSweepResponse cancelled;
  EXPECT_EQ(Sweeps(bob)->CancelSweep(Context().get(), cancel, &cancelled).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // Alice resending is deduplicated to her sweep.
  v1::SubmitSweepResponse again;
  ASSERT_TRUE(Submit(alice, "nightly-2024", &again).ok());
  EXPECT_TRUE(again.deduplicated());
  EXPECT_EQ(again.sweep().sweep_id(), alices.sweep().sweep_id());
}

TEST_F(TenancyTest, TheSameOwnersKeyWithAnotherSpecIsAlreadyExists) {
  const std::string alice = MakeToken("alice", v1::ROLE_RESEARCHER);
  v1::SubmitSweepResponse first, second;
  ASSERT_TRUE(Submit(alice, "k", &first).ok());
  const grpc::Status refused = Submit(alice, "k", &second, "another-spec");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(refused.error_message(), HasSubstr(first.sweep().sweep_id()));
  EXPECT_THAT(refused.error_message(), HasSubstr("use a new key"));
}

TEST_F(TenancyTest, WorkerBCannotRegisterLeaseHeartbeatOrAskRetentionAsWorkerA) {
  const std::string pool_a = MakeToken("pool-a", v1::ROLE_WORKER);
  const std::string pool_b = MakeToken("pool-b", v1::ROLE_WORKER);
  v1::SubmitSweepResponse sweep;
  ASSERT_TRUE(Submit(kTestAdminToken, "", &sweep, "pools", 2).ok());
  std::string worker_a, worker_b;
  ASSERT_TRUE(Register(pool_a, "", &worker_a, "a-host").ok());
  ASSERT_TRUE(Register(pool_b, "", &worker_b, "b-host").ok());
  v1::LeaseRunResponse leased_a;
  ASSERT_TRUE(Lease(pool_a, worker_a, &leased_a).ok());
  ASSERT_TRUE(leased_a.has_lease());

  // Rename A: refused, A keeps its hostname.
  const grpc::Status renamed = Register(pool_b, worker_a, nullptr, "evil");
  EXPECT_EQ(renamed.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(renamed.error_message(), HasSubstr("registered by another identity"));
  EXPECT_EQ(Sql(database_url_, "SELECT hostname FROM workers WHERE worker_id = '" + worker_a + "'"),
            "a-host");
  // Lease as A: refused, nothing leased.
  v1::LeaseRunResponse stolen;
  EXPECT_EQ(Lease(pool_b, worker_a, &stolen).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Sql(database_url_, "SELECT count(*) FROM runs WHERE state = 'LEASED'"), "1");
  // An admin may not act as A either.
  EXPECT_EQ(Lease(kTestAdminToken, worker_a, &stolen).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // Heartbeat as A (even with a lease of its own): refused before the run is looked at.
  v1::LeaseRunResponse leased_b;
  ASSERT_TRUE(Lease(pool_b, worker_b, &leased_b).ok());
  ASSERT_TRUE(leased_b.has_lease());
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(worker_a);
  heartbeat.set_run_id(leased_b.run().run_id());
  heartbeat.set_lease_epoch(leased_b.lease().lease_epoch());
  heartbeat.set_lease_secret(leased_b.lease_secret());
  v1::HeartbeatResponse beat;
  EXPECT_EQ(Workers(pool_b)->Heartbeat(Context().get(), heartbeat, &beat).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // Retention as A: refused.
  v1::CheckpointRetentionRequest retention;
  retention.set_worker_id(worker_a);
  retention.add_run_ids(leased_a.run().run_id());
  v1::CheckpointRetentionResponse answer;
  EXPECT_EQ(Workers(pool_b)->CheckpointRetention(Context().get(), retention, &answer).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(answer.runs_size(), 0);
  // A itself still works as A.
  EXPECT_TRUE(Register(pool_a, worker_a, nullptr, "a-host").ok());
}

TEST_F(TenancyTest, RetentionAnswersOnlyAboutRunsTheWorkerHeld) {
  const std::string pool_a = MakeToken("pool-a", v1::ROLE_WORKER);
  const std::string pool_b = MakeToken("pool-b", v1::ROLE_WORKER);
  v1::SubmitSweepResponse sweep;
  ASSERT_TRUE(Submit(kTestAdminToken, "", &sweep, "pools", 2).ok());
  std::string worker_a, worker_b;
  ASSERT_TRUE(Register(pool_a, "", &worker_a).ok());
  ASSERT_TRUE(Register(pool_b, "", &worker_b).ok());
  v1::LeaseRunResponse leased_a, leased_b;
  ASSERT_TRUE(Lease(pool_a, worker_a, &leased_a).ok());
  ASSERT_TRUE(Lease(pool_b, worker_b, &leased_b).ok());
  const std::string deleted = "7a1c3f6e-0000-4000-8000-0000000000ff";

  v1::CheckpointRetentionRequest request;
  request.set_worker_id(worker_b);
  request.add_run_ids(leased_a.run().run_id());  // pool-a's run: not answered
  request.add_run_ids(leased_b.run().run_id());  // its own
  request.add_run_ids(deleted);                  // no such run: exists = false
  v1::CheckpointRetentionResponse answer;
  ASSERT_TRUE(Workers(pool_b)->CheckpointRetention(Context().get(), request, &answer).ok());
  ASSERT_EQ(answer.runs_size(), 2) << answer.DebugString();
  EXPECT_EQ(answer.runs(0).run_id(), leased_b.run().run_id());
  EXPECT_TRUE(answer.runs(0).exists());
  EXPECT_EQ(answer.runs(0).lease_epoch(), leased_b.lease().lease_epoch());
  EXPECT_EQ(answer.runs(1).run_id(), deleted);
  EXPECT_FALSE(answer.runs(1).exists());
  EXPECT_EQ(answer.SerializeAsString().find(leased_a.run().run_id()), std::string::npos)
      << "nothing of pool-a's run reaches pool-b";
}

TEST_F(TenancyTest, TwoMillionExpertSharesAreRefusedAndNothingIsStored) {
  const std::string pool = MakeToken("pool", v1::ROLE_WORKER);
  v1::SubmitSweepResponse sweep;
  ASSERT_TRUE(Submit(kTestAdminToken, "", &sweep, "moe", 2).ok());
  std::string worker;
  ASSERT_TRUE(Register(pool, "", &worker).ok());
  v1::LeaseRunResponse dense, moe;
  ASSERT_TRUE(Lease(pool, worker, &dense).ok());
  ASSERT_TRUE(Lease(pool, worker, &moe).ok());
  ASSERT_EQ(moe.run().spec().model().moe().num_experts(), 8u) << "the stub's MoE run: L=4, E=8";

  v1::ReportMetricsRequest huge;
  huge.set_run_id(moe.run().run_id());
  huge.set_lease_epoch(moe.lease().lease_epoch());
  huge.set_lease_secret(moe.lease_secret());
  v1::MetricPoint* point = huge.add_points();
  point->set_step(1);
  v1::ExpertLoadStats* load = point->add_expert_load();
  for (int i = 0; i < 2000000; ++i) load->add_shares(0.5e-6);
  v1::ReportMetricsResponse reported;
  auto context = Context();
  const grpc::Status refused = Workers(pool)->ReportMetrics(context.get(), huge, &reported);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << refused.error_message();
  EXPECT_THAT(ViolatedFields(refused), ElementsAre("points[0].expert_load[0].shares"));
  EXPECT_EQ(Sql(database_url_, "SELECT count(*) FROM metrics"), "0") << "nothing stored";

  // Too many layers, and any load on a dense run, are refused the same way.
  huge.mutable_points(0)->mutable_expert_load(0)->clear_shares();
  for (int i = 0; i < 4; ++i) *huge.mutable_points(0)->add_expert_load() = v1::ExpertLoadStats();
  EXPECT_THAT(ViolatedFields(Workers(pool)->ReportMetrics(Context().get(), huge, &reported)),
              ElementsAre("points[0].expert_load"));
  v1::ReportMetricsRequest on_dense;
  on_dense.set_run_id(dense.run().run_id());
  on_dense.set_lease_epoch(dense.lease().lease_epoch());
  on_dense.set_lease_secret(dense.lease_secret());
  on_dense.add_points()->add_expert_load()->add_shares(1.0);
  EXPECT_THAT(ViolatedFields(Workers(pool)->ReportMetrics(Context().get(), on_dense, &reported)),
              ElementsAre("points[0].expert_load"));

  // The model's own shape goes through: 4 layers of 8 shares.
  v1::ReportMetricsRequest fits;
  fits.set_run_id(moe.run().run_id());
  fits.set_lease_epoch(moe.lease().lease_epoch());
  fits.set_lease_secret(moe.lease_secret());
  v1::MetricPoint* ok_point = fits.add_points();
  ok_point->set_step(1);
  for (uint32_t layer = 0; layer < 4; ++layer) {
    v1::ExpertLoadStats* stats = ok_point->add_expert_load();
    stats->set_layer(layer);
    for (int e = 0; e < 8; ++e) stats->add_shares(0.125);
  }
  const grpc::Status stored = Workers(pool)->ReportMetrics(Context().get(), fits, &reported);
  EXPECT_TRUE(stored.ok()) << stored.error_message();
  EXPECT_EQ(reported.accepted(), 1u);
}

TEST_F(TenancyTest, CurvesComeInPagesThatTogetherHoldEveryRun) {
  const std::string viewer = MakeToken("vera", v1::ROLE_VIEWER);
  v1::SubmitSweepResponse sweep;
  ASSERT_TRUE(Submit(kTestAdminToken, "", &sweep, "curves", 120).ok());
  const std::string base = "/api/v1/sweeps/" + sweep.sweep().sweep_id() + "/curves?points=2000";
  // 100,000 points per response / 2,000 per run = 50 runs a page: 120 runs are 3 pages.
  std::set<std::string> seen_pages;
  std::string token;
  int pages = 0;
  do {
    httplib::Result reply = HttpGet(token.empty() ? base : base + "&page_token=" + token, viewer);
    ASSERT_TRUE(reply);
    ASSERT_EQ(reply->status, 200) << reply->body;
    const json doc = json::parse(reply->body);
    EXPECT_EQ(doc["runs_per_page"], 50);
    token = doc["next_page_token"].is_null() ? "" : doc["next_page_token"].get<std::string>();
    ++pages;
  } while (!token.empty() && pages < 10);
  EXPECT_EQ(pages, 3) << "120 runs at 50 a page";

  // A run_id list longer than a page is refused, naming the field.
  std::string ids;
  for (int i = 0; i < 51; ++i) absl::StrAppend(&ids, i ? "," : "", sweep.run_ids(i));
  httplib::Result too_many = HttpGet(base + "&run_id=" + ids, viewer);
  ASSERT_TRUE(too_many);
  EXPECT_EQ(too_many->status, 400);
  EXPECT_THAT(too_many->body, HasSubstr("run_id"));
  EXPECT_THAT(too_many->body, HasSubstr("at most 50 runs"));
}

TEST_F(TenancyTest, ARevokedTokensWatchEndsWithinSeconds) {
  const std::string viewer = MakeToken("vera", v1::ROLE_VIEWER);
  v1::SubmitSweepResponse sweep;
  ASSERT_TRUE(Submit(kTestAdminToken, "", &sweep, "watched", 1).ok());
  v1::WatchSweepRequest watch;
  watch.set_sweep_id(sweep.sweep().sweep_id());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  auto sweeps = Sweeps(viewer);
  std::unique_ptr<grpc::ClientReader<v1::WatchSweepResponse>> stream =
      sweeps->WatchSweep(&context, watch);
  v1::WatchSweepResponse message;
  ASSERT_TRUE(stream->Read(&message)) << "the opening snapshot";

  auto tokens = v1::TokenService::NewStub(TokenChannel(server_->port()));
  v1::RevokeTokenRequest revoke;
  revoke.set_name("vera");
  v1::RevokeTokenResponse revoked;
  ASSERT_TRUE(tokens->RevokeToken(Context().get(), revoke, &revoked).ok());
  const absl::Time at = absl::Now();
  while (stream->Read(&message)) {
  }
  const grpc::Status ended = stream->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAUTHENTICATED) << ended.error_message();
  EXPECT_LT(absl::Now() - at, absl::Seconds(5)) << "the stream outlived its token";
}

TEST_F(TenancyTest, BadFilterStatesAreRefusedNamingTheIndex) {
  v1::QueryResultsRequest request;
  request.mutable_filter()->add_states(v1::RUN_STATE_SUCCEEDED);
  request.mutable_filter()->mutable_states()->Add(999);  // no run state; a client can send it
  v1::QueryResultsResponse response;
  const grpc::Status refused =
      Sweeps(kTestAdminToken)->QueryResults(Context().get(), request, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(ViolatedFields(refused), ElementsAre("filter.states[1]"));
}

TEST_F(TenancyTest, RepeatedBogusTokensAreRefusedAndANewTokenWorksAtOnce) {
  const std::string bogus = "parity_" + std::string(43, 'b');
  for (int i = 0; i < 50; ++i) {
    v1::ListSweepsResponse listed;
    ASSERT_EQ(Sweeps(bogus)->ListSweeps(Context().get(), {}, &listed).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  const std::string fresh = MakeToken("fresh", v1::ROLE_VIEWER);
  v1::ListSweepsResponse listed;
  EXPECT_TRUE(Sweeps(fresh)->ListSweeps(Context().get(), {}, &listed).ok());
}

// The negative cache, measured: the store's token lookups under many bogus calls.
class CountingTokens : public AccessTokens {
 public:
  explicit CountingTokens(AccessTokens& inner) : inner_(inner) {}
  absl::StatusOr<StoredAccessToken> CreateToken(const NewAccessToken& token) override {
    return inner_.CreateToken(token);
  }
  absl::StatusOr<std::optional<StoredAccessToken>> FindToken(const std::string& hash) override {
    ++lookups;
    return inner_.FindToken(hash);
  }
  absl::StatusOr<Page<StoredAccessToken>> ListTokens(bool inactive,
                                                     const PageRequest& page) override {
    return inner_.ListTokens(inactive, page);
  }
  absl::StatusOr<uint32_t> RevokeTokens(const TokenRevocation& which) override {
    return inner_.RevokeTokens(which);
  }
  absl::StatusOr<bool> HasLiveAdmin() override { return inner_.HasLiveAdmin(); }
  absl::StatusOr<std::string> GetOrCreateServerKey(const std::string& name,
                                                   const std::string& candidate) override {
    return inner_.GetOrCreateServerKey(name, candidate);
  }
  std::atomic<int> lookups{0};

 private:
  AccessTokens& inner_;
};

TEST(NegativeTokenCacheTest, ManyBogusCallsCostBoundedLookups) {
  FakeClock clock(absl::FromUnixSeconds(1700000000));
  MemoryRunStore memory([&clock] { return clock.Now(); });
  CountingTokens tokens(memory);
  AccessControlOptions options;
  options.negative_cache_ttl = absl::Seconds(5);
  options.negative_cache_size = 4;
  AccessControl access(tokens, clock, options);
  const std::string method = "parity.v1.SweepService/ListSweeps";
  const std::string bogus = "parity_" + std::string(43, 'x');
  for (int i = 0; i < 10000; ++i) {
    EXPECT_EQ(access.Authorize(bogus, method).status().code(), absl::StatusCode::kUnauthenticated);
  }
  EXPECT_EQ(tokens.lookups.load(), 1) << "one lookup, then the negative cache answers";
  for (int i = 0; i < 10000; ++i) {
    EXPECT_EQ(access.Authorize("short", method).status().code(),
              absl::StatusCode::kUnauthenticated);
  }
  EXPECT_EQ(tokens.lookups.load(), 1) << "no issued token is that short: no lookup";
  clock.Advance(absl::Seconds(6));
  EXPECT_FALSE(access.Authorize(bogus, method).ok());
  EXPECT_EQ(tokens.lookups.load(), 2) << "past the TTL it is looked up again";

  // Bounded: the oldest goes first when more bogus tokens come than it holds.
  for (int i = 0; i < 6; ++i) {
    EXPECT_FALSE(access.Authorize("parity_" + std::string(43, 'a' + i), method).ok());
  }
  EXPECT_EQ(tokens.lookups.load(), 8);
  EXPECT_FALSE(access.Authorize("parity_" + std::string(43, 'a' + 5), method).ok());
  EXPECT_EQ(tokens.lookups.load(), 8) << "the newest is still cached";

  // A token presented before it existed works once it is created here (the bootstrap path).
  const std::string later = std::string(40, 'L');
  EXPECT_FALSE(access.Authorize(later, method).ok());
  ASSERT_TRUE(access.Bootstrap(later).ok());
  EXPECT_TRUE(access.Authorize(later, method).ok()) << "created: evicted from the negative cache";
}

}  // namespace
}  // namespace parity::server::testing
