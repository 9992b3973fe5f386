// MicrohttpdServer: the web port's transport, on GNU libmicrohttpd, built to survive hostile
// clients. It knows nothing of routes or tokens: it parses a request, holds it to the limits
// below, and hands the whole request to one handler (http_server.cc).
//
// Why libmicrohttpd and not cpp-httplib (which this port used before): cpp-httplib 0.11 gives
// each connection a pool thread from accept to close and has only a per-read timeout, so a
// dozen clients sending one header line every few seconds held all its threads and froze the
// port (health checks included), and it buffered any body before a handler could refuse it.
// libmicrohttpd reads requests on a few epoll threads without a thread per connection, caps
// connections per client address and in all, bounds each connection's memory, lets the handler
// refuse a body from its headers, and speaks TLS through GnuTLS.
//
// The limits (HttpLimits):
//   request_deadline   the whole request — TLS handshake, headers and body — must arrive
//                      within this from the connection's accept (or the end of its previous
//                      response); a watchdog thread cuts connections that overrun it, which
//                      libmicrohttpd's own timeout (reset by every byte) cannot.
//   response_deadline  a response must be taken by the client within this once written.
//   idle_timeout       a connection silent this long is closed (libmicrohttpd's timeout).
//   max_connections, max_connections_per_ip   refused beyond these (the client sees a close).
//   max_header_bytes   the request line and headers (431 beyond it).
//   a body limit per request, from the handler's BodyLimit: a declared Content-Length above it
//   is answered 413 before any of the body is read; a chunked body that grows past it is cut.
//
// Threading: `threads` epoll threads parse requests and run the handler; the handler must be
// thread-safe. Owned by HttpServer; Stop() (or the destructor) joins every thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace parity::server {

struct HttpLimits {
  absl::Duration request_deadline = absl::Seconds(10);
  absl::Duration response_deadline = absl::Seconds(120);
  absl::Duration idle_timeout = absl::Seconds(30);
  int max_connections = 512;
  int max_connections_per_ip = 32;
  size_t max_header_bytes = 16 * 1024;
  int threads = 4;
};

struct HttpRequest {
  std::string method;                              // "GET", "HEAD", "POST", ...
  std::string path;                                // decoded, without the query
  std::multimap<std::string, std::string> params;  // the query, decoded
  std::map<std::string, std::string> headers;      // names lower-cased
  std::string body;

  // The header's value, or "" when absent; `name` in lower case.
  const std::string& Header(const std::string& name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

class MicrohttpdServer {
 public:
  // The largest body `request` (headers read, body not yet) may carry.
  using BodyLimit = std::function<size_t(const HttpRequest& request)>;
  using Handler = std::function<HttpResponse(const HttpRequest& request)>;
  // The answer when the transport refuses a request itself (413), so that it carries the same
  // headers and error document as the handler's.
  using Refusal = std::function<HttpResponse(int status, const std::string& message)>;

  struct Options {
    std::string host;          // a name or address; resolved, the first address is bound
    int port = 0;              // 0 = any free port (see port())
    std::string tls_cert_pem;  // both set: HTTPS only
    std::string tls_key_pem;
    HttpLimits limits;
  };

  // Binds and serves. UNAVAILABLE when the address cannot be bound, INVALID_ARGUMENT when the
  // host does not resolve or the certificate and key are not usable.
  static absl::StatusOr<std::unique_ptr<MicrohttpdServer>> Start(Options options,
                                                                 BodyLimit body_limit,
                                                                 Handler handler, Refusal refusal);
  ~MicrohttpdServer();
  MicrohttpdServer(const MicrohttpdServer&) = delete;
  MicrohttpdServer& operator=(const MicrohttpdServer&) = delete;

  int port() const { return port_; }
  // Connections cut by the request or response deadline so far.
  uint64_t deadline_cuts();
  // Closes every connection and joins the threads. Idempotent.
  void Stop();

  // libmicrohttpd's callbacks (C linkage-compatible statics in the .cc) reach these.
  struct Connection;
  struct Exchange;
  void ConnectionStarted(MHD_Connection* connection, void** socket_context);
  void ConnectionClosed(void* socket_context);
  int Access(MHD_Connection* connection, const char* url, const char* method,
             const char* upload_data, size_t* upload_data_size, void** request_context);
  void Completed(MHD_Connection* connection, void** request_context);

 private:
  MicrohttpdServer(Options options, BodyLimit body_limit, Handler handler, Refusal refusal);
  int Queue(MHD_Connection* connection, const HttpResponse& response);
  void Watch();

  const Options options_;
  const BodyLimit body_limit_;
  const Handler handler_;
  const Refusal refusal_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;

  absl::Mutex mu_;
  std::set<Connection*> connections_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t deadline_cuts_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread watchdog_;
};

}  // namespace parity::server
