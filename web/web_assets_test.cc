// The embedded dashboard: every file web/CMakeLists.txt lists is in the binary, whole.
#include "web/web_assets.h"

#include <string>

#include "core/failure_remedy.h"
#include "gtest/gtest.h"

namespace parity::web {
namespace {

TEST(WebAssets, EveryFileIsEmbeddedWithItsContentType) {
  for (const char* name : {"index.html", "assets/app.js", "assets/styles.css",
                           "assets/chart.umd.js", "assets/favicon.svg"}) {
    const std::optional<EmbeddedAsset> asset = FindAsset(name);
    ASSERT_TRUE(asset.has_value()) << name << " is not embedded";
    EXPECT_GT(asset->size, 100u) << name;
    EXPECT_EQ(asset->content().size(), asset->size);
  }
  EXPECT_EQ(std::string(FindAsset("index.html")->content_type), "text/html; charset=utf-8");
  EXPECT_EQ(std::string(FindAsset("assets/app.js")->content_type),
            "text/javascript; charset=utf-8");
  EXPECT_FALSE(FindAsset("/index.html").has_value());
  EXPECT_FALSE(FindAsset("assets/missing.js").has_value());
}

TEST(WebAssets, ChartJsIsTheVendoredVersion4Build) {
  const std::string chart(FindAsset("assets/chart.umd.js")->content());
  EXPECT_NE(chart.find("Chart.js v4."), std::string::npos) << chart.substr(0, 200);
  // The bundle is an IIFE (a classic script), which file:// reports can load.
  const std::string app(FindAsset("assets/app.js")->content());
  EXPECT_EQ(app.rfind("(() => {", 0), 0u) << app.substr(0, 80);
}

TEST(WebAssets, IndexHtmlTakesTheHeadSnippetAndLoadsChartJsBeforeTheApp) {
  const std::string html = IndexHtmlWith("<base href=\"/\">");
  EXPECT_EQ(html.find("<!--parity:head-->"), std::string::npos);
  const size_t base = html.find("<base href=\"/\">");
  const size_t chart = html.find("assets/chart.umd.js");
  const size_t app = html.find("assets/app.js");
  ASSERT_NE(base, std::string::npos);
  ASSERT_NE(chart, std::string::npos);
  ASSERT_NE(app, std::string::npos);
  EXPECT_LT(base, chart);
  EXPECT_LT(chart, app);
}

// The dashboard (web/src/failures.js) and the CLI give the same remedy for a failure class: every
// sentence of core's table is in the bundled app.js, so editing one side alone fails here.
TEST(WebAssets, TheDashboardCarriesEveryFailureRemedyOfCore) {
  const std::string app(FindAsset("assets/app.js")->content());
  const auto* classes = v1::FailureClass_descriptor();
  for (int i = 0; i < classes->value_count(); ++i) {
    const auto value = static_cast<v1::FailureClass>(classes->value(i)->number());
    const std::string remedy(core::FailureRemedy(value));
    if (remedy.empty()) continue;
    EXPECT_NE(app.find(remedy), std::string::npos)
        << classes->value(i)->name() << ": web/src/failures.js lacks \"" << remedy << "\"";
  }
}

// The run page (web/src/gang.js) words a gang's rendezvous as `parity status RUN` does
// (cli/run_status_format.cc): the phrases are in the bundled app.js.
TEST(WebAssets, TheRunPageWordsTheRendezvousAsTheCli) {
  const std::string app(FindAsset("assets/app.js")->content());
  for (const char* phrase :
       {" after placement", " checked in, ", "deadline in ", "deadline passed ",
        " ago (the scheduler fails and requeues the gang)"}) {
    EXPECT_NE(app.find(phrase), std::string::npos) << "web/src/gang.js lacks \"" << phrase << "\"";
  }
}

}  // namespace
}  // namespace parity::web
