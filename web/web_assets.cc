#include "web/web_assets.h"

#include <string>

namespace parity::web {

std::optional<EmbeddedAsset> FindAsset(std::string_view name) {
  for (const EmbeddedAsset& asset : EmbeddedAssets()) {
    if (name == asset.name) return asset;
  }
  return std::nullopt;
}

std::string IndexHtmlWith(std::string_view head_html) {
  constexpr std::string_view kPlaceholder = "<!--parity:head-->";
  const std::optional<EmbeddedAsset> index = FindAsset("index.html");
  if (!index) return "";
  std::string html(index->content());
  if (const size_t at = html.find(kPlaceholder); at != std::string::npos) {
    html.replace(at, kPlaceholder.size(), head_html);
  }
  return html;
}

}  // namespace parity::web
