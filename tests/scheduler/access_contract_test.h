// The access side of the store contract (server/store/access_tokens.h and what binds a sweep, a
// worker or a run to an identity): tokens, server keys, an owner's load, idempotency keys per
// owner, worker ids per token name, which runs a worker held. The same fixture and harnesses as
// store_contract_test.h, a suite of its own so that each file stays one subject; instantiated
// beside StoreContractTest by memory_store_contract_test.cc and postgres_store_contract_test.cc.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tests/scheduler/store_contract_test.h"

namespace parity::server::testing {

template <typename Harness>
class AccessContractTest : public StoreContractTest<Harness> {};

TYPED_TEST_SUITE_P(AccessContractTest);

// Keys are each owner's: another owner's key is never answered with the first owner's sweep,
// whoever used the key first (a squatter cannot take over a key someone else will use).
TYPED_TEST_P(AccessContractTest, IdempotencyKeysAreEachOwners) {
  const CreatedSweep alices = this->Sweep("nightly", 1, 0, "nightly-2024", "alice");
  const CreatedSweep bobs = this->Sweep("nightly", 1, 0, "nightly-2024", "bob");
  EXPECT_FALSE(bobs.deduplicated) << "bob's use of alice's key is bob's own new sweep";
  EXPECT_NE(bobs.sweep.sweep_id(), alices.sweep.sweep_id());
  EXPECT_EQ(bobs.sweep.owner(), "bob");
  const CreatedSweep alice_again = this->Sweep("nightly", 1, 0, "nightly-2024", "alice");
  EXPECT_TRUE(alice_again.deduplicated);
  EXPECT_EQ(alice_again.sweep.sweep_id(), alices.sweep.sweep_id());
  const CreatedSweep bob_again = this->Sweep("nightly", 1, 0, "nightly-2024", "bob");
  EXPECT_EQ(bob_again.sweep.sweep_id(), bobs.sweep.sweep_id()) << "and bob's key is bob's";

  NewSweep changed;
  changed.owner = "alice";
  changed.spec.set_name("another spec");
  changed.idempotency_key = "nightly-2024";
  const absl::Status reused = this->catalog().CreateSweep(changed).status();
  EXPECT_EQ(reused.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(reused.message(), ::testing::HasSubstr(alices.sweep.sweep_id()))
      << "the sweep named is the owner's own";
  EXPECT_THAT(reused.message(), ::testing::Not(::testing::HasSubstr(bobs.sweep.sweep_id())));
  absl::StatusOr<v1::Sweep> untouched = this->catalog().GetSweep(alices.sweep.sweep_id());
  ASSERT_TRUE(untouched.ok()) << untouched.status();
  EXPECT_EQ(untouched->owner(), "alice");
}

// A worker id is the name's that registered it first; the scheduler's own process (no name)
// claims nothing, and the first name to use an unclaimed id claims it.
TYPED_TEST_P(AccessContractTest, AWorkerIdBelongsToTheNameThatRegisteredItFirst) {
  const std::string id = this->Worker("pool-a");
  WorkerRegistration takeover;
  takeover.worker_id = id;
  takeover.owner = "pool-b";
  takeover.hostname = "attacker";
  const absl::Status refused = this->queue().RegisterWorker(takeover).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  WorkersQuery all;
  all.page.page_size = 10;
  absl::StatusOr<Page<v1::Worker>> workers = this->catalog().ListWorkers(all);
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->items.size(), 1u);
  EXPECT_EQ(workers->items[0].hostname(), "contract-host")
      << "a refused registration renames nothing";
  EXPECT_EQ(this->Worker("pool-a", id), id) << "its own name registers it again";
  EXPECT_EQ(this->queue().ClaimWorker(id, "pool-b").value_or("?"), "pool-a");

  const std::string unclaimed = this->Worker();
  EXPECT_EQ(this->queue().ClaimWorker(unclaimed, "pool-c").value_or("?"), "pool-c");
  EXPECT_EQ(this->queue().ClaimWorker(unclaimed, "pool-d").value_or("?"), "pool-c");
  EXPECT_EQ(this->queue().ClaimWorker("7a1c3f6e-0000-4000-8000-0000000000dd", "x").status().code(),
            absl::StatusCode::kNotFound);
}

// What a worker may ask about: the runs it held (now or before), not another worker's.
TYPED_TEST_P(AccessContractTest, RunHoldingsTellWhichRunsAWorkerHeld) {
  this->Sweep("held", 2);
  const std::string a = this->Worker("pool-a");
  const std::string b = this->Worker("pool-b");
  const LeasedRun mine = this->LeaseOne(a);
  const LeasedRun theirs = this->LeaseOne(b);
  Completion failure;
  failure.run_id = mine.run.run_id();
  failure.lease_epoch = mine.lease.lease_epoch();
  failure.failure_class = v1::FAILURE_CLASS_USER_ERROR;
  failure.retry = {v1::RUN_STATE_FAILED, mine.run.attempt(), absl::ZeroDuration()};
  failure.decided_at_attempt = mine.run.attempt();
  ASSERT_TRUE(this->queue().CompleteRun(failure).ok()) << "an ended run was still held";
  const std::string gone = "7a1c3f6e-0000-4000-8000-0000000000ee";
  absl::StatusOr<std::vector<RunHolding>> holdings =
      this->queue().RunHoldings(a, {mine.run.run_id(), theirs.run.run_id(), gone});
  ASSERT_TRUE(holdings.ok()) << holdings.status();
  ASSERT_EQ(holdings->size(), 2u) << "a run that does not exist is left out";
  EXPECT_EQ((*holdings)[0].run_id, mine.run.run_id());
  EXPECT_TRUE((*holdings)[0].held);
  EXPECT_EQ((*holdings)[1].run_id, theirs.run.run_id());
  EXPECT_FALSE((*holdings)[1].held) << "pool-b's run was never pool-a's worker's";
}

TYPED_TEST_P(AccessContractTest, TokensAreFoundByTheirHashAndRevokedOnceByIdOrName) {
  const StoredAccessToken alice = this->Token("alice", TokenRole::kResearcher, "a");
  const StoredAccessToken alice2 = this->Token("alice", TokenRole::kViewer, "b");
  const StoredAccessToken admin = this->Token("root", TokenRole::kAdmin, "c");
  EXPECT_EQ(this->tokens()
                .CreateToken({"eve", TokenRole::kAdmin, std::string(32, 'a'), "x", {}})
                .status()
                .code(),
            absl::StatusCode::kAlreadyExists)
      << "a secret hash is unique";
  absl::StatusOr<std::optional<StoredAccessToken>> found =
      this->tokens().FindToken(std::string(32, 'a'));
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->token_id, alice.token_id);
  EXPECT_EQ((*found)->name, "alice");
  EXPECT_EQ((*found)->role, TokenRole::kResearcher);
  EXPECT_EQ((*found)->created_by, "contract");
  EXPECT_FALSE((*found)->revoked_at.has_value());
  EXPECT_FALSE(this->tokens().FindToken(std::string(32, 'z'))->has_value());
  EXPECT_TRUE(*this->tokens().HasLiveAdmin());

  EXPECT_EQ(*this->tokens().RevokeTokens({"", "alice"}), 2u) << "every live token of the name";
  EXPECT_EQ(*this->tokens().RevokeTokens({"", "alice"}), 0u) << "revoked once";
  EXPECT_TRUE((*this->tokens().FindToken(std::string(32, 'b')))->revoked_at.has_value())
      << "a revoked token is still found, so that it is refused as revoked";
  EXPECT_EQ(*this->tokens().RevokeTokens({admin.token_id, ""}), 1u);
  EXPECT_FALSE(*this->tokens().HasLiveAdmin());

  // Live ones only, unless asked; newest first, paged.
  const StoredAccessToken bob = this->Token("bob", TokenRole::kWorker, "d");
  EXPECT_EQ(this->tokens().ListTokens(false, PageRequest{10, ""})->items.size(), 1u);
  std::vector<std::string> seen;
  PageRequest page{2, ""};
  for (int pages = 0; pages < 4; ++pages) {
    absl::StatusOr<Page<StoredAccessToken>> listed = this->tokens().ListTokens(true, page);
    ASSERT_TRUE(listed.ok()) << listed.status();
    for (const StoredAccessToken& token : listed->items) seen.push_back(token.token_id);
    if (listed->next_page_token.empty()) break;
    page.page_token = listed->next_page_token;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{bob.token_id, admin.token_id, alice2.token_id,
                                            alice.token_id}));
  EXPECT_EQ(this->tokens().ListTokens(true, PageRequest{2, "%%bad"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TYPED_TEST_P(AccessContractTest, AnExpiredAdminIsNotLiveAndAServerKeyIsMadeOnce) {
  this->Token("soon", TokenRole::kAdmin, "e", this->harness_.Now() + absl::Milliseconds(300));
  EXPECT_TRUE(*this->tokens().HasLiveAdmin());
  this->harness_.LetTimePass(absl::Milliseconds(600));
  EXPECT_FALSE(*this->tokens().HasLiveAdmin());
  const std::string first(32, '1'), second(32, '2');
  EXPECT_EQ(*this->tokens().GetOrCreateServerKey("k", first), first);
  EXPECT_EQ(*this->tokens().GetOrCreateServerKey("k", second), first) << "the first key stays";
  EXPECT_EQ(*this->tokens().GetOrCreateServerKey("other", second), second);
}

TYPED_TEST_P(AccessContractTest, AnOwnersLoadCountsItsOpenSweepsAndTheirUnendedRuns) {
  NewSweep sweep;
  sweep.spec.set_name("load");
  sweep.owner = "carol";
  for (int i = 0; i < 3; ++i) sweep.runs.emplace_back().set_name(absl::StrCat("load-", i));
  ASSERT_TRUE(this->catalog().CreateSweep(sweep).ok());
  sweep.idempotency_key = "";
  sweep.runs.resize(1);
  const absl::StatusOr<CreatedSweep> second = this->catalog().CreateSweep(sweep);
  ASSERT_TRUE(second.ok());
  this->Sweep("someone-elses", 4);
  absl::StatusOr<OwnerLoad> load = this->catalog().CountOwnerLoad("carol");
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_EQ(load->open_sweeps, 2u);
  EXPECT_EQ(load->queued_runs, 4u);
  ASSERT_TRUE(this->catalog().CancelSweep(second->sweep.sweep_id(), "done").ok());
  load = this->catalog().CountOwnerLoad("carol");
  EXPECT_EQ(load->open_sweeps, 1u) << "a cancelled sweep is not open";
  EXPECT_EQ(load->queued_runs, 3u);
  EXPECT_EQ(this->catalog().CountOwnerLoad("nobody")->open_sweeps, 0u);
}

REGISTER_TYPED_TEST_SUITE_P(AccessContractTest, IdempotencyKeysAreEachOwners,
                            AWorkerIdBelongsToTheNameThatRegisteredItFirst,
                            RunHoldingsTellWhichRunsAWorkerHeld,
                            TokensAreFoundByTheirHashAndRevokedOnceByIdOrName,
                            AnExpiredAdminIsNotLiveAndAServerKeyIsMadeOnce,
                            AnOwnersLoadCountsItsOpenSweepsAndTheirUnendedRuns);

}  // namespace parity::server::testing
