// Helpers shared by the kernels tests: a CPU device, text tokens, seeded random arrays, a
// scratch-directory fixture with a small corpus, and a central finite-difference checker whose
// failure message names the element and both values.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "kernels/backend/device.h"
#include "kernels/model/rng.h"

namespace parity::kernels::testing {

// A fresh directory per test (removed afterwards) holding `corpus_`, `verses` numbered verses of
// English text: the small byte corpus the training tests run on.
class CorpusDirTest : public ::testing::Test {
 protected:
  explicit CorpusDirTest(int verses = 400) : verses_(verses) {}
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() /
        ("parity_" + std::string(::testing::UnitTest::GetInstance()->current_test_suite()->name()) +
         "_" + std::to_string(::getpid()) + "_" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    corpus_ = (dir_ / "corpus.txt").string();
    std::ofstream out(corpus_, std::ios::binary);
    for (int i = 0; i < verses_; ++i) {
      out << "Verse " << i << ": And God said, Let there be light: and there was light. ";
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::string corpus_;

 private:
  int verses_;
};

// n token ids of English text (bytes), starting `offset` bytes in: inputs with offset 0 and their
// next-byte targets with offset 1.
inline std::vector<int32_t> TextTokens(int64_t n, int64_t offset) {
  static const std::string kText =
      "In the beginning God created the heaven and the earth. And the earth was without form, "
      "and void; and darkness was upon the face of the deep. ";
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) {
    t[i] = static_cast<unsigned char>(kText[(i + offset) % kText.size()]);
  }
  return t;
}

inline std::vector<double> RandomVector(int64_t n, uint64_t seed, double scale = 1.0) {
  Rng rng{.seed = seed};
  std::vector<double> v(n);
  for (auto& x : v) x = scale * rng.Normal();
  return v;
}

// Compares analytic[i] with (f(x+eps) − f(x−eps))/2eps for up to `max_checks` indices spread over
// [0, n). `x` is perturbed in place and restored.
inline void ExpectGradientsMatch(const std::string& what, double* x, int64_t n,
                                 const std::vector<double>& analytic,
                                 const std::function<double()>& f, int64_t max_checks = 64,
                                 double rtol = 2e-5, double atol = 1e-8, double eps = 1e-5) {
  ASSERT_EQ(static_cast<int64_t>(analytic.size()), n) << what;
  const int64_t stride = std::max<int64_t>(1, n / max_checks);
  int failures = 0;
  for (int64_t i = (n > max_checks ? 7 % stride : 0); i < n; i += stride) {
    const double saved = x[i];
    x[i] = saved + eps;
    const double up = f();
    x[i] = saved - eps;
    const double down = f();
    x[i] = saved;
    const double numeric = (up - down) / (2 * eps);
    const double tol = atol + rtol * std::max(std::abs(numeric), std::abs(analytic[i]));
    if (std::abs(numeric - analytic[i]) > tol && failures++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << " vs finite-difference "
                    << numeric << " (tolerance " << tol << ")";
    }
  }
  EXPECT_EQ(failures, 0) << what << ": gradient mismatches";
}

}  // namespace parity::kernels::testing
