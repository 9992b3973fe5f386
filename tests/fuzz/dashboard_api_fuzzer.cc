// libFuzzer target: the dashboard's HTTP JSON API router (server/api/dashboard_api.h) as
// http_server.cc calls it: an input is a request target below /api/v1/, "PATH?QUERY", with the
// query split on '&' and '=' (percent-decoded, as cpp-httplib does). Placeholders ("@sweep",
// "@run", "@run2", "@pending", "@worker"; tests/fuzz/fuzz_world.h) become the seeded objects'
// ids. The world is made once: every route is a read.
//
// Checked: no crash, leak or undefined behaviour; every reply is valid JSON with an HTTP status
// the router documents (200, or an error document with 4xx/5xx).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"
#include "server/api/dashboard_api.h"
#include "tests/fuzz/fuzz_world.h"

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string Decode(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 &&
               HexValue(text[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

void Check(bool condition, const char* what, const std::string& detail) {
  if (condition) return;
  fprintf(stderr, "fuzz check failed: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  parity::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static parity::fuzz::FuzzWorld* world = new parity::fuzz::FuzzWorld();
  static parity::server::DashboardApi* api =
      new parity::server::DashboardApi(world->scheduler(), world->store());

  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t question = input.find('?');
  const std::string path = world->ExpandPlaceholders(Decode(input.substr(0, question)));
  parity::server::QueryParams params;
  if (question != std::string_view::npos) {
    std::string_view query = input.substr(question + 1);
    while (!query.empty()) {
      const size_t amp = query.find('&');
      const std::string_view pair = query.substr(0, amp);
      const size_t eq = pair.find('=');
      params.emplace(world->ExpandPlaceholders(Decode(pair.substr(0, eq))),
                     eq == std::string_view::npos
                         ? std::string()
                         : world->ExpandPlaceholders(Decode(pair.substr(eq + 1))));
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
  }
  const parity::server::HttpReply reply = api->Get(path, params);
  // PARITY_FUZZ_DEBUG=1 with an input file shows the route's answer.
  static const bool debug = getenv("PARITY_FUZZ_DEBUG") != nullptr;
  if (debug)
    fprintf(stderr, "%s: %d %s\n", path.c_str(), reply.status, reply.body.substr(0, 300).c_str());
  Check(reply.status == 200 || (reply.status >= 400 && reply.status < 600), "HTTP status",
        std::to_string(reply.status));
  Check(reply.content_type == "application/json", "content type", reply.content_type);
  Check(nlohmann::json::accept(reply.body), "reply is not JSON", reply.body.substr(0, 512));
  return 0;
}
