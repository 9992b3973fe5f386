// Who may do what, through the real processes' paths: a SchedulerServer on a throwaway
// PostgreSQL, called over real gRPC and HTTP with tokens of each role (server/api/
// access_control.h), leases bound to their holder, the per-identity limits, and TLS.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "clients/cpp/scheduler_channel.h"
#include "core/proto_time.h"
#include "google/protobuf/descriptor.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "parity/v1/sweep_service.grpc.pb.h"
#include "parity/v1/token_service.grpc.pb.h"
#include "parity/v1/worker_service.grpc.pb.h"
#include "server/api/access_control.h"
#include "server/scheduler_server.h"
#include "tests/scheduler/scheduler_fixture.h"
#include "tests/support/test_certificates.h"
#include "tests/support/test_tokens.h"
#include "tests/support/violated_fields.h"

namespace parity::server::testing {
namespace {

using ::parity::testing::ViolatedFields;
namespace fs = std::filesystem;
using ::parity::testing::kTestAdminToken;
using ::parity::testing::TokenChannel;
using ::testing::ElementsAre;

TEST(AccessRulesTest, EveryMethodOfEveryServiceHasARule) {
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  int methods = 0;
  for (const char* name :
       {"parity.v1.SweepService", "parity.v1.WorkerService", "parity.v1.TokenService"}) {
    const google::protobuf::ServiceDescriptor* service = pool->FindServiceByName(name);
    ASSERT_NE(service, nullptr) << name;
    for (int i = 0; i < service->method_count(); ++i, ++methods) {
      const std::string method = absl::StrCat(name, "/", service->method(i)->name());
      EXPECT_TRUE(RequiredPermission(method).has_value())
          << method << " has no access rule: add it to kRules in access_control.cc";
    }
  }
  EXPECT_GE(methods, 22);
  EXPECT_FALSE(RequiredPermission("parity.v1.SweepService/NoSuchMethod").has_value());
}

TEST(AccessRulesTest, EachRoleGetsWhatItsDocumentationSays) {
  using P = Permission;
  using R = TokenRole;
  EXPECT_TRUE(RoleGrants(R::kViewer, P::kRead));
  EXPECT_FALSE(RoleGrants(R::kViewer, P::kSubmit));
  EXPECT_FALSE(RoleGrants(R::kViewer, P::kWorker));
  EXPECT_TRUE(RoleGrants(R::kResearcher, P::kSubmit));
  EXPECT_FALSE(RoleGrants(R::kResearcher, P::kWorker));
  EXPECT_FALSE(RoleGrants(R::kResearcher, P::kAdmin));
  EXPECT_TRUE(RoleGrants(R::kWorker, P::kWorker));
  EXPECT_FALSE(RoleGrants(R::kWorker, P::kRead)) << "a worker token reads nothing";
  EXPECT_FALSE(RoleGrants(R::kWorker, P::kSubmit));
  for (P p : {P::kRead, P::kSubmit, P::kWorker, P::kAdmin}) EXPECT_TRUE(RoleGrants(R::kAdmin, p));
}

class AccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PARITY_REQUIRE_POSTGRES();
    database_url_ = parity::testing::PostgresEnvironment::FreshDatabase();
    Start();
  }

  ServerOptions Options() {
    ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.http_listen = "127.0.0.1:0";
    options.database_url = database_url_;
    options.pool_size = 4;
    options.bootstrap_token = kTestAdminToken;
    options.reap_interval = absl::Milliseconds(100);
    options.scheduler.idle_poll_interval = absl::Milliseconds(100);
    options.scheduler.watch_poll_interval = absl::Milliseconds(20);
    options.scheduler.max_open_sweeps_per_owner = 3;
    options.scheduler.max_priority = 10;
    options.access.max_watch_streams_per_identity = 1;
    return options;
  }

  void Start(ServerOptions options) {
    absl::StatusOr<std::unique_ptr<SchedulerServer>> server =
        SchedulerServer::Start(options, &StubPlanner);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  void Start() { Start(Options()); }

  static std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    return context;
  }

  // A new token of `role` named `name`, made by the admin over gRPC.
  std::string MakeToken(const std::string& name, v1::Role role,
                        absl::Duration lifetime = absl::ZeroDuration()) {
    return parity::testing::MakeTokenAsAdmin(server_->port(), name, role, lifetime);
  }

  std::unique_ptr<v1::SweepService::Stub> Sweeps(const std::string& token) {
    return v1::SweepService::NewStub(TokenChannel(server_->port(), token));
  }
  std::unique_ptr<v1::WorkerService::Stub> Workers(const std::string& token) {
    return v1::WorkerService::NewStub(TokenChannel(server_->port(), token));
  }

  grpc::Status Submit(const std::string& token, v1::SubmitSweepResponse* out, int32_t priority = 0,
                      const std::string& owner = "") {
    v1::SubmitSweepRequest request;
    *request.mutable_spec() = MakeSweepSpec("access", 1);
    request.mutable_spec()->set_priority(priority);
    request.set_owner(owner);
    return Sweeps(token)->SubmitSweep(Context().get(), request, out);
  }

  grpc::StatusCode Cancel(const std::string& token, const std::string& sweep_id) {
    v1::CancelSweepRequest request;
    request.set_sweep_id(sweep_id);
    v1::CancelSweepResponse response;
    return Sweeps(token)->CancelSweep(Context().get(), request, &response).error_code();
  }

  grpc::StatusCode ListSweepsAs(const std::string& token) {
    v1::ListSweepsResponse response;
    return Sweeps(token)
        ->ListSweeps(Context().get(), v1::ListSweepsRequest(), &response)
        .error_code();
  }

  int CountSweeps() {
    v1::ListSweepsResponse response;
    EXPECT_TRUE(Sweeps(kTestAdminToken)
                    ->ListSweeps(Context().get(), v1::ListSweepsRequest(), &response)
                    .ok());
    return response.sweeps_size();
  }

  httplib::Result HttpGet(const std::string& path, const std::string& token) {
    httplib::Client http("127.0.0.1", server_->http_port());
    if (!token.empty()) http.set_bearer_token_auth(token.c_str());
    return http.Get(path.c_str());
  }

  std::string database_url_;
  std::unique_ptr<SchedulerServer> server_;
};

TEST_F(AccessTest, NoTokenIsUnauthenticatedOnEveryServiceAnd401OnTheWebPort) {
  EXPECT_EQ(ListSweepsAs(""), grpc::StatusCode::UNAUTHENTICATED);
  v1::SubmitSweepResponse submitted;
  EXPECT_EQ(Submit("", &submitted).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  v1::RegisterWorkerRequest reg;
  *reg.add_devices() = CpuDevice();
  v1::RegisterWorkerResponse registered;
  EXPECT_EQ(Workers("")->RegisterWorker(Context().get(), reg, &registered).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto tokens = v1::TokenService::NewStub(TokenChannel(server_->port(), ""));
  v1::ListTokensResponse listed;
  EXPECT_EQ(tokens->ListTokens(Context().get(), v1::ListTokensRequest(), &listed).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ListSweepsAs("parity_not-a-token-at-all-000000000000000000000"),
            grpc::StatusCode::UNAUTHENTICATED);

  httplib::Result api = HttpGet("/api/v1/sweeps", "");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 401);
  EXPECT_THAT(api->get_header_value("WWW-Authenticate"), ::testing::HasSubstr("Bearer"));
  httplib::Result metrics = HttpGet("/metrics", "");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 401);
  httplib::Result page = HttpGet("/", "");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 302);
  EXPECT_EQ(page->get_header_value("Location"), "/login");
  httplib::Result health = HttpGet("/healthz", "");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200) << "liveness needs no token";
  EXPECT_EQ(HttpGet("/api/v1/sweeps", kTestAdminToken)->status, 200);
}

TEST_F(AccessTest, AViewerReadsButCannotSubmitOrCancel) {
  const std::string viewer = MakeToken("vera", v1::ROLE_VIEWER);
  v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(Submit(kTestAdminToken, &submitted).ok());
  EXPECT_EQ(ListSweepsAs(viewer), grpc::StatusCode::OK);
  v1::SubmitSweepResponse refused;
  EXPECT_EQ(Submit(viewer, &refused).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Cancel(viewer, submitted.sweep().sweep_id()), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(CountSweeps(), 1) << "a refused submission stores nothing";
  EXPECT_EQ(HttpGet("/api/v1/sweeps", viewer)->status, 200);
  EXPECT_EQ(HttpGet("/metrics", viewer)->status, 200);
}

TEST_F(AccessTest, AResearcherOwnsWhatItSubmitsAndCannotCancelAnothersSweep) {
  const std::string alice = MakeToken("alice", v1::ROLE_RESEARCHER);
  const std::string bob = MakeToken("bob", v1::ROLE_RESEARCHER);
  v1::SubmitSweepResponse mine;
  ASSERT_TRUE(Submit(alice, &mine).ok());
  EXPECT_EQ(mine.sweep().owner(), "alice") << "the owner is the token's name";
  v1::SubmitSweepResponse spoofed;
  const grpc::Status spoof = Submit(alice, &spoofed, 0, "bob");
  EXPECT_EQ(spoof.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(ViolatedFields(spoof), ElementsAre("owner"));
  EXPECT_EQ(Cancel(bob, mine.sweep().sweep_id()), grpc::StatusCode::PERMISSION_DENIED);
  v1::DeleteSweepRequest del;
  del.set_sweep_id(mine.sweep().sweep_id());
  v1::DeleteSweepResponse deleted;
  EXPECT_EQ(Sweeps(bob)->DeleteSweep(Context().get(), del, &deleted).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Cancel(alice, mine.sweep().sweep_id()), grpc::StatusCode::OK);

  // An admin may act on any sweep and submit on anyone's behalf.
  v1::SubmitSweepResponse for_bob;
  ASSERT_TRUE(Submit(kTestAdminToken, &for_bob, 0, "bob").ok());
  EXPECT_EQ(for_bob.sweep().owner(), "bob");
  EXPECT_EQ(Cancel(kTestAdminToken, for_bob.sweep().sweep_id()), grpc::StatusCode::OK);
}

TEST_F(AccessTest, APriorityAboveTheCeilingNeedsAnAdmin) {
  const std::string alice = MakeToken("alice", v1::ROLE_RESEARCHER);
  v1::SubmitSweepResponse response;
  const grpc::Status high = Submit(alice, &response, 11);
  EXPECT_EQ(high.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(ViolatedFields(high), ElementsAre("spec.priority"));
  EXPECT_EQ(CountSweeps(), 0);
  EXPECT_TRUE(Submit(alice, &response, 10).ok()) << "the ceiling itself is allowed";
  EXPECT_TRUE(Submit(kTestAdminToken, &response, 1000).ok());
}

TEST_F(AccessTest, AWorkerTokenCannotSubmitOrRead) {
  const std::string worker = MakeToken("w1", v1::ROLE_WORKER);
  v1::SubmitSweepResponse response;
  EXPECT_EQ(Submit(worker, &response).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(ListSweepsAs(worker), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(HttpGet("/api/v1/sweeps", worker)->status, 403);
  auto tokens = v1::TokenService::NewStub(TokenChannel(server_->port(), worker));
  v1::CreateTokenRequest create;
  create.set_name("evil");
  create.set_role(v1::ROLE_ADMIN);
  v1::CreateTokenResponse created;
  EXPECT_EQ(tokens->CreateToken(Context().get(), create, &created).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::RegisterWorkerRequest reg;
  *reg.add_devices() = CpuDevice();
  v1::RegisterWorkerResponse registered;
  EXPECT_TRUE(Workers(worker)->RegisterWorker(Context().get(), reg, &registered).ok());
}

TEST_F(AccessTest, ARevokedOrExpiredTokenIsRefusedAtOnce) {
  const std::string alice = MakeToken("alice", v1::ROLE_RESEARCHER);
  ASSERT_EQ(ListSweepsAs(alice), grpc::StatusCode::OK);  // now cached
  auto tokens = v1::TokenService::NewStub(TokenChannel(server_->port()));
  v1::RevokeTokenRequest revoke;
  revoke.set_name("alice");
  v1::RevokeTokenResponse revoked;
  ASSERT_TRUE(tokens->RevokeToken(Context().get(), revoke, &revoked).ok());
  EXPECT_EQ(revoked.revoked(), 1u);
  EXPECT_EQ(ListSweepsAs(alice), grpc::StatusCode::UNAUTHENTICATED)
      << "revoked: refused by the very next call";
  EXPECT_EQ(HttpGet("/api/v1/sweeps", alice)->status, 401);

  const std::string brief = MakeToken("brief", v1::ROLE_VIEWER, absl::Seconds(1));
  ASSERT_EQ(ListSweepsAs(brief), grpc::StatusCode::OK);
  absl::SleepFor(absl::Milliseconds(1200));
  EXPECT_EQ(ListSweepsAs(brief), grpc::StatusCode::UNAUTHENTICATED) << "expired";

  v1::ListTokensRequest list;
  list.set_include_inactive(true);
  v1::ListTokensResponse listed;
  ASSERT_TRUE(tokens->ListTokens(Context().get(), list, &listed).ok());
  EXPECT_EQ(listed.tokens_size(), 3) << "admin, alice, brief";
  for (const v1::AccessToken& token : listed.tokens()) {
    EXPECT_THAT(token.DebugString(), ::testing::Not(::testing::HasSubstr("parity_")))
        << "a listing never carries a secret";
  }
}

TEST_F(AccessTest, AWriteForWorkerAsLeaseFromWorkerBChangesNothing) {
  const std::string token_a = MakeToken("worker-a", v1::ROLE_WORKER);
  const std::string token_b = MakeToken("worker-b", v1::ROLE_WORKER);
  v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(Submit(kTestAdminToken, &submitted).ok());
  auto register_as = [&](const std::string& token) {
    v1::RegisterWorkerRequest reg;
    *reg.add_devices() = CpuDevice();
    v1::RegisterWorkerResponse registered;
    EXPECT_TRUE(Workers(token)->RegisterWorker(Context().get(), reg, &registered).ok());
    return registered.worker_id();
  };
  const std::string worker_a = register_as(token_a);
  const std::string worker_b = register_as(token_b);
  v1::LeaseRunRequest lease;
  lease.set_worker_id(worker_a);
  *lease.add_free_devices() = CpuDevice();
  v1::LeaseRunResponse leased;
  ASSERT_TRUE(Workers(token_a)->LeaseRun(Context().get(), lease, &leased).ok());
  ASSERT_TRUE(leased.has_lease());
  const std::string run_id = leased.run().run_id();

  // What B can learn: the run id and epoch from the read APIs, never the secret.
  v1::GetRunRequest get;
  get.set_run_id(run_id);
  v1::GetRunResponse before;
  ASSERT_TRUE(Sweeps(kTestAdminToken)->GetRun(Context().get(), get, &before).ok());
  const int64_t epoch = before.run().lease().lease_epoch();
  ASSERT_EQ(epoch, leased.lease().lease_epoch());
  EXPECT_EQ(before.SerializeAsString().find(leased.lease_secret()), std::string::npos)
      << "a read API returned the lease secret";

  auto b = Workers(token_b);
  for (const std::string& secret : {std::string(), std::string(43, 'x')}) {
    v1::HeartbeatRequest heartbeat;
    heartbeat.set_worker_id(worker_b);
    heartbeat.set_run_id(run_id);
    heartbeat.set_lease_epoch(epoch);
    heartbeat.set_lease_secret(secret);
    heartbeat.set_step(500);
    heartbeat.mutable_checkpoint()->set_step(500);
    heartbeat.mutable_checkpoint()->set_uri(run_id + "/recorded-9/step-00000500.ckpt");
    v1::HeartbeatResponse beat;
    EXPECT_EQ(b->Heartbeat(Context().get(), heartbeat, &beat).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    v1::ReportMetricsRequest metrics;
    metrics.set_run_id(run_id);
    metrics.set_lease_epoch(epoch);
    metrics.set_lease_secret(secret);
    metrics.add_points()->set_step(1);
    v1::ReportMetricsResponse reported;
    EXPECT_EQ(b->ReportMetrics(Context().get(), metrics, &reported).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    v1::CompleteRunRequest complete;
    complete.set_run_id(run_id);
    complete.set_lease_epoch(epoch);
    complete.set_lease_secret(secret);
    *complete.mutable_success() = core::PlannedSummary(leased.run().spec(), 0.1, 0.1);
    v1::CompleteRunResponse completed;
    EXPECT_EQ(b->CompleteRun(Context().get(), complete, &completed).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  // Even A's own secret, sent with B's token, is not B's to use.
  v1::CompleteRunRequest stolen;
  stolen.set_run_id(run_id);
  stolen.set_lease_epoch(epoch);
  stolen.set_lease_secret(leased.lease_secret());
  *stolen.mutable_success() = core::PlannedSummary(leased.run().spec(), 0.1, 0.1);
  v1::CompleteRunResponse completed;
  EXPECT_EQ(b->CompleteRun(Context().get(), stolen, &completed).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  v1::GetRunResponse after;
  ASSERT_TRUE(Sweeps(kTestAdminToken)->GetRun(Context().get(), get, &after).ok());
  EXPECT_EQ(after.run().SerializeAsString(), before.run().SerializeAsString())
      << "a refused write must change nothing";
  EXPECT_EQ(Sql(database_url_, "SELECT count(*) FROM metrics"), "0");

  // A, the holder, completes it.
  v1::CompleteRunRequest complete;
  complete.set_run_id(run_id);
  complete.set_lease_epoch(epoch);
  complete.set_lease_secret(leased.lease_secret());
  *complete.mutable_success() = core::PlannedSummary(leased.run().spec(), 1.2, 1.2);
  ASSERT_TRUE(Workers(token_a)->CompleteRun(Context().get(), complete, &completed).ok());
  EXPECT_EQ(completed.run().state(), v1::RUN_STATE_SUCCEEDED);
}

TEST_F(AccessTest, AnIdentityPastItsOpenSweepOrWatchLimitIsRefusedWithNothingStored) {
  const std::string alice = MakeToken("alice", v1::ROLE_RESEARCHER);
  v1::SubmitSweepResponse response;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Submit(alice, &response).ok());
  const grpc::Status fourth = Submit(alice, &response);
  EXPECT_EQ(fourth.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(ViolatedFields(fourth), ElementsAre("spec"));
  EXPECT_EQ(CountSweeps(), 3);
  EXPECT_TRUE(Submit(kTestAdminToken, &response).ok()) << "the limit is per identity";

  // One watch stream at a time (the test's limit).
  grpc::ClientContext first_context;
  v1::WatchSweepRequest watch;
  watch.set_sweep_id(response.sweep().sweep_id());
  auto sweeps = Sweeps(alice);
  std::unique_ptr<grpc::ClientReader<v1::WatchSweepResponse>> first =
      sweeps->WatchSweep(&first_context, watch);
  v1::WatchSweepResponse message;
  ASSERT_TRUE(first->Read(&message)) << "the first stream opens";
  auto second_context = Context();
  std::unique_ptr<grpc::ClientReader<v1::WatchSweepResponse>> second =
      sweeps->WatchSweep(second_context.get(), watch);
  while (second->Read(&message)) {
  }
  EXPECT_EQ(second->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  first_context.TryCancel();
  while (first->Read(&message)) {
  }
  first->Finish();
  // Given back when the stream ends.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  grpc::StatusCode third_code = grpc::StatusCode::RESOURCE_EXHAUSTED;
  while (third_code == grpc::StatusCode::RESOURCE_EXHAUSTED && absl::Now() < deadline) {
    grpc::ClientContext third_context;
    third_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(300)));
    auto third = sweeps->WatchSweep(&third_context, watch);
    const bool opened = third->Read(&message);
    if (opened) {
      third_code = grpc::StatusCode::OK;
      third_context.TryCancel();
      while (third->Read(&message)) {
      }
      third->Finish();
    } else {
      third_code = third->Finish().error_code();
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  EXPECT_EQ(third_code, grpc::StatusCode::OK);
}

TEST_F(AccessTest, TheBootstrapFileIsMadeOnce0600AndItsTokenIsTheAdmins) {
  server_.reset();
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("parity-boot-", getpid());
  fs::create_directories(dir);
  ServerOptions options = Options();
  options.bootstrap_token.clear();
  options.bootstrap_token_file = (dir / "admin.token").string();
  Start(options);
  ASSERT_TRUE(fs::exists(options.bootstrap_token_file));
  struct stat info {};
  ASSERT_EQ(stat(options.bootstrap_token_file.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  const absl::StatusOr<std::string> token = clients::ReadSecretFile(options.bootstrap_token_file);
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(ListSweepsAs(*token), grpc::StatusCode::OK);
  server_.reset();
  Start(options);  // the same file again: the same token, no new one
  EXPECT_EQ(ListSweepsAs(*token), grpc::StatusCode::OK);
  EXPECT_EQ(Sql(database_url_, "SELECT count(*) FROM access_tokens WHERE role = 'admin'"), "2")
      << "the test's own bootstrap token and the file's";
  fs::remove_all(dir);
}

// A CA, a server certificate for 127.0.0.1 and "localhost" and a client certificate
// (tests/support/test_certificates.h) in a scratch directory.
class TlsAccessTest : public AccessTest {
 protected:
  void SetUp() override {
    PARITY_REQUIRE_POSTGRES();
    dir_ = fs::temp_directory_path() / absl::StrCat("parity-tls-", getpid());
    fs::create_directories(dir_);
    const absl::Status made = parity::testing::MakeTestCertificates(dir_.string());
    ASSERT_TRUE(made.ok()) << made;
    database_url_ = parity::testing::PostgresEnvironment::FreshDatabase();
  }
  void TearDown() override { fs::remove_all(dir_); }

  ServerOptions TlsOptions(bool mutual) {
    ServerOptions options = Options();
    options.tls.cert_file = (dir_ / "server.pem").string();
    options.tls.key_file = (dir_ / "server.key").string();
    if (mutual) options.tls.client_ca_file = (dir_ / "ca.pem").string();
    return options;
  }

  std::shared_ptr<grpc::Channel> TlsChannel(const std::string& token, bool client_cert) {
    clients::SchedulerChannelOptions options;
    options.address = absl::StrCat("127.0.0.1:", server_->port());
    options.token = token;
    options.tls_ca_file = (dir_ / "ca.pem").string();
    if (client_cert) {
      options.tls_client_cert_file = (dir_ / "client.pem").string();
      options.tls_client_key_file = (dir_ / "client.key").string();
    }
    return *clients::MakeSchedulerChannel(options);
  }

  // A worker token made by the admin over `channel`.
  std::string MakeTokenOver(const std::shared_ptr<grpc::Channel>& channel) {
    v1::CreateTokenRequest request;
    request.set_name("tls-worker");
    request.set_role(v1::ROLE_WORKER);
    v1::CreateTokenResponse response;
    const grpc::Status status =
        v1::TokenService::NewStub(channel)->CreateToken(Context().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.secret();
  }

  fs::path dir_;
};

TEST_F(TlsAccessTest, APlaintextClientCannotConnectAndATlsOneWithTheTokenCan) {
  Start(TlsOptions(false));
  v1::ListSweepsResponse response;
  EXPECT_EQ(Sweeps(kTestAdminToken)
                ->ListSweeps(Context().get(), v1::ListSweepsRequest(), &response)
                .error_code(),
            grpc::StatusCode::UNAVAILABLE)
      << "plaintext to a TLS port";
  auto tls = v1::SweepService::NewStub(TlsChannel(kTestAdminToken, false));
  const grpc::Status ok = tls->ListSweeps(Context().get(), v1::ListSweepsRequest(), &response);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  auto anonymous = v1::SweepService::NewStub(TlsChannel("", false));
  EXPECT_EQ(anonymous->ListSweeps(Context().get(), v1::ListSweepsRequest(), &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED)
      << "TLS is not a token";

  httplib::SSLClient https("127.0.0.1", server_->http_port());
  https.set_ca_cert_path((dir_ / "ca.pem").c_str());
  https.enable_server_certificate_verification(true);
  https.set_bearer_token_auth(kTestAdminToken);
  httplib::Result api = https.Get("/api/v1/sweeps");
  ASSERT_TRUE(api) << httplib::to_string(api.error());
  EXPECT_EQ(api->status, 200);
  httplib::Result login = https.Get(absl::StrCat("/login?token=", kTestAdminToken).c_str());
  ASSERT_TRUE(login);
  EXPECT_THAT(login->get_header_value("Set-Cookie"), ::testing::HasSubstr("Secure"));
  httplib::Client plain("127.0.0.1", server_->http_port());
  EXPECT_FALSE(plain.Get("/healthz")) << "plaintext HTTP to the HTTPS port";
}

TEST_F(TlsAccessTest, WithMutualTlsAWorkerNeedsAClientCertificateAsWellAsItsToken) {
  Start(TlsOptions(true));
  const std::string worker = MakeTokenOver(TlsChannel(kTestAdminToken, false));
  v1::RegisterWorkerRequest reg;
  *reg.add_devices() = CpuDevice();
  v1::RegisterWorkerResponse registered;
  auto without = v1::WorkerService::NewStub(TlsChannel(worker, false));
  EXPECT_EQ(without->RegisterWorker(Context().get(), reg, &registered).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto with = v1::WorkerService::NewStub(TlsChannel(worker, true));
  const grpc::Status ok = with->RegisterWorker(Context().get(), reg, &registered);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  v1::ListSweepsResponse response;
  auto cli = v1::SweepService::NewStub(TlsChannel(kTestAdminToken, false));
  EXPECT_TRUE(cli->ListSweeps(Context().get(), v1::ListSweepsRequest(), &response).ok())
      << "clients other than workers connect without a certificate";
}

TEST(PlaintextGuardTest, PlaintextOnANonLoopbackAddressIsRefusedUnlessAskedFor) {
  ServerOptions options;
  options.listen_address = "0.0.0.0:0";
  options.database_url = "postgresql://127.0.0.1:1/never";
  options.migrate_on_start = false;
  absl::StatusOr<std::unique_ptr<SchedulerServer>> server =
      SchedulerServer::Start(options, &StubPlanner);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(server.status().message()), ::testing::HasSubstr("--listen"));
}

}  // namespace
}  // namespace parity::server::testing
