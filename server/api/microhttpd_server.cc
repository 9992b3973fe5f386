#include "server/api/microhttpd_server.h"

#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <exception>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace parity::server {

// One TCP connection, registered from accept to close so that the watchdog can cut it.
struct MicrohttpdServer::Connection {
  enum class Phase { kReceiving, kHandling, kSending };
  // A dup() of libmicrohttpd's socket: shutdown() through it reaches this connection's socket
  // even if libmicrohttpd has closed its own descriptor and the number went to a new client.
  int fd = -1;
  Phase phase = Phase::kReceiving;
  absl::Time since;  // when the phase began
  bool cut = false;
};

// One request on a connection, from its headers to its completion.
struct MicrohttpdServer::Exchange {
  HttpRequest request;
  size_t body_limit = 0;
  bool answered = false;  // a response is queued (413 from the headers)
};

const std::string& HttpRequest::Header(const std::string& name) const {
  static const std::string* const kEmpty = new std::string();
  auto it = headers.find(name);
  return it == headers.end() ? *kEmpty : it->second;
}

namespace {

MHD_Result OnAccess(void* cls, MHD_Connection* connection, const char* url, const char* method,
                    const char* /*version*/, const char* upload_data, size_t* upload_data_size,
                    void** request_context) {
  return static_cast<MicrohttpdServer*>(cls)->Access(connection, url, method, upload_data,
                                                     upload_data_size, request_context) != 0
             ? MHD_YES
             : MHD_NO;
}

void OnCompleted(void* cls, MHD_Connection* connection, void** request_context,
                 MHD_RequestTerminationCode /*why*/) {
  static_cast<MicrohttpdServer*>(cls)->Completed(connection, request_context);
}

void OnNotify(void* cls, MHD_Connection* connection, void** socket_context,
              MHD_ConnectionNotificationCode code) {
  auto* server = static_cast<MicrohttpdServer*>(cls);
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    server->ConnectionStarted(connection, socket_context);
  } else {
    server->ConnectionClosed(*socket_context);
  }
}

void OnLog(void* /*cls*/, const char* format, va_list args) {
  char line[512];
  std::vsnprintf(line, sizeof(line), format, args);
  std::string text(line);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  // Refused connections (limits) and client errors land here: debug, not a failure of ours.
  spdlog::debug("event=http_transport message=\"{}\"", text);
}

MHD_Result CollectHeader(void* cls, MHD_ValueKind, const char* key, const char* value) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(cls);
  std::string name = absl::AsciiStrToLower(key);
  std::string text = value == nullptr ? "" : value;
  auto [it, inserted] = headers->emplace(name, text);
  if (!inserted) it->second = absl::StrCat(it->second, ", ", text);  // repeated: one list
  return MHD_YES;
}

MHD_Result CollectParam(void* cls, MHD_ValueKind, const char* key, const char* value) {
  static_cast<std::multimap<std::string, std::string>*>(cls)->emplace(
      key, value == nullptr ? "" : value);
  return MHD_YES;
}

// The listening socket, bound and listening (libmicrohttpd takes it over).
absl::StatusOr<int> Listen(const std::string& host, int port, bool* ipv6) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int error =
      ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (error != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("http listen host '", host, "' does not resolve: ", ::gai_strerror(error)));
  }
  std::string last_error = "no address";
  int fd = -1;
  for (const addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 256) != 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      fd = -1;
      continue;
    }
    *ipv6 = a->ai_family == AF_INET6;
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", host, ":", port, " (http): ", last_error));
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

MHD_OptionItem Option(MHD_OPTION option, intptr_t value, void* pointer = nullptr) {
  return MHD_OptionItem{option, value, pointer};
}

}  // namespace

MicrohttpdServer::MicrohttpdServer(Options options, BodyLimit body_limit, Handler handler,
                                   Refusal refusal)
    : options_(std::move(options)),
      body_limit_(std::move(body_limit)),
      handler_(std::move(handler)),
      refusal_(std::move(refusal)) {}

absl::StatusOr<std::unique_ptr<MicrohttpdServer>> MicrohttpdServer::Start(Options options,
                                                                          BodyLimit body_limit,
                                                                          Handler handler,
                                                                          Refusal refusal) {
  std::unique_ptr<MicrohttpdServer> server(new MicrohttpdServer(
      std::move(options), std::move(body_limit), std::move(handler), std::move(refusal)));
  const Options& o = server->options_;
  const HttpLimits& limits = o.limits;
  bool ipv6 = false;
  absl::StatusOr<int> fd = Listen(o.host, o.port, &ipv6);
  if (!fd.ok()) return fd.status();
  server->port_ = BoundPort(*fd);
  const bool tls = !o.tls_cert_pem.empty();
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
  if (ipv6) flags |= MHD_USE_IPv6;
  if (tls) flags |= MHD_USE_TLS;
  const auto seconds = [](absl::Duration d) {
    return static_cast<intptr_t>(std::max<int64_t>(1, absl::ToInt64Seconds(d)));
  };
  std::vector<MHD_OptionItem> items = {
      Option(MHD_OPTION_LISTEN_SOCKET, *fd),
      Option(MHD_OPTION_THREAD_POOL_SIZE, std::max(1, limits.threads)),
      Option(MHD_OPTION_CONNECTION_LIMIT, limits.max_connections),
      Option(MHD_OPTION_PER_IP_CONNECTION_LIMIT, limits.max_connections_per_ip),
      Option(MHD_OPTION_CONNECTION_TIMEOUT, seconds(limits.idle_timeout)),
      // The request line and headers live in this pool, with the read and write buffers.
      Option(MHD_OPTION_CONNECTION_MEMORY_LIMIT,
             static_cast<intptr_t>(limits.max_header_bytes + 16 * 1024)),
      Option(MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&OnNotify), server.get()),
      Option(MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&OnCompleted), server.get()),
      Option(MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(&OnLog), server.get()),
  };
  if (tls) {
    items.push_back(Option(MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(o.tls_key_pem.c_str())));
    items.push_back(
        Option(MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(o.tls_cert_pem.c_str())));
  }
  items.push_back(Option(MHD_OPTION_END, 0));
  server->daemon_ = MHD_start_daemon(flags, 0, nullptr, nullptr, &OnAccess, server.get(),
                                     MHD_OPTION_ARRAY, items.data(), MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    ::close(*fd);
    if (tls) {
      return absl::InvalidArgumentError(
          "https: the certificate or key cannot be used (libmicrohttpd/GnuTLS refused them)");
    }
    return absl::UnavailableError(
        absl::StrCat("cannot start the http server on ", o.host, ":", server->port_));
  }
  server->watchdog_ = std::thread([s = server.get()] { s->Watch(); });
  return server;
}

MicrohttpdServer::~MicrohttpdServer() { Stop(); }

void MicrohttpdServer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (watchdog_.joinable()) watchdog_.join();
  if (daemon_ != nullptr) {
    MHD_stop_daemon(daemon_);  // closes every connection (ConnectionClosed for each)
    daemon_ = nullptr;
  }
}

uint64_t MicrohttpdServer::deadline_cuts() {
  absl::MutexLock lock(&mu_);
  return deadline_cuts_;
}

void MicrohttpdServer::ConnectionStarted(MHD_Connection* connection, void** socket_context) {
  auto* state = new Connection();
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info != nullptr) state->fd = ::fcntl(info->connect_fd, F_DUPFD_CLOEXEC, 0);
  state->since = absl::Now();
  *socket_context = state;
  absl::MutexLock lock(&mu_);
  connections_.insert(state);
}

void MicrohttpdServer::ConnectionClosed(void* socket_context) {
  auto* state = static_cast<Connection*>(socket_context);
  if (state == nullptr) return;
  {
    absl::MutexLock lock(&mu_);
    connections_.erase(state);
  }
  if (state->fd >= 0) ::close(state->fd);
  delete state;
}

int MicrohttpdServer::Access(MHD_Connection* connection, const char* url, const char* method,
                             const char* upload_data, size_t* upload_data_size,
                             void** request_context) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  auto* state = info == nullptr ? nullptr : static_cast<Connection*>(info->socket_context);
  const auto enter = [&](Connection::Phase phase) {
    if (state == nullptr) return;
    absl::MutexLock lock(&mu_);
    state->phase = phase;
    state->since = absl::Now();
  };
  auto* exchange = static_cast<Exchange*>(*request_context);
  if (exchange == nullptr) {  // the headers are in; the body (if any) is not
    exchange = new Exchange();
    *request_context = exchange;
    HttpRequest& request = exchange->request;
    request.method = method;
    request.path = url;
    MHD_get_connection_values(connection, MHD_HEADER_KIND, &CollectHeader, &request.headers);
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &CollectParam, &request.params);
    exchange->body_limit = body_limit_(request);
    const std::string& length = request.Header("content-length");
    uint64_t declared = 0;
    if (!length.empty() &&
        (!absl::SimpleAtoi(length, &declared) || declared > exchange->body_limit)) {
      exchange->answered = true;
      enter(Connection::Phase::kSending);
      return Queue(connection,
                   refusal_(413, absl::StrCat(request.method, " ", request.path, " takes at most ",
                                              exchange->body_limit, " bytes of body")));
    }
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    if (exchange->answered) {  // refused from its headers: the rest is not read
      *upload_data_size = 0;
      return MHD_YES;
    }
    if (exchange->request.body.size() + *upload_data_size > exchange->body_limit) {
      spdlog::debug("event=http_body_too_large path=\"{}\" limit={}", exchange->request.path,
                    exchange->body_limit);
      return MHD_NO;  // a chunked body past the limit: the connection is closed
    }
    exchange->request.body.append(upload_data, *upload_data_size);
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (exchange->answered) return MHD_YES;
  exchange->answered = true;
  enter(Connection::Phase::kHandling);
  HttpResponse response;
  try {
    response = handler_(exchange->request);
  } catch (const std::exception& e) {
    spdlog::error("event=http_handler_failed path=\"{}\" error=\"{}\"", exchange->request.path,
                  e.what());
    response = refusal_(500, e.what());
  }
  enter(Connection::Phase::kSending);
  return Queue(connection, response);
}

void MicrohttpdServer::Completed(MHD_Connection* connection, void** request_context) {
  delete static_cast<Exchange*>(*request_context);
  *request_context = nullptr;
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  auto* state = info == nullptr ? nullptr : static_cast<Connection*>(info->socket_context);
  if (state == nullptr) return;
  // Kept alive: the next request has its own deadline, starting now.
  absl::MutexLock lock(&mu_);
  state->phase = Connection::Phase::kReceiving;
  state->since = absl::Now();
}

int MicrohttpdServer::Queue(MHD_Connection* connection, const HttpResponse& response) {
  MHD_Response* reply = MHD_create_response_from_buffer(
      response.body.size(), const_cast<char*>(response.body.data()), MHD_RESPMEM_MUST_COPY);
  if (reply == nullptr) return MHD_NO;
  MHD_add_response_header(reply, MHD_HTTP_HEADER_CONTENT_TYPE, response.content_type.c_str());
  for (const auto& [name, value] : response.headers) {
    MHD_add_response_header(reply, name.c_str(), value.c_str());
  }
  const MHD_Result queued =
      MHD_queue_response(connection, static_cast<unsigned int>(response.status), reply);
  MHD_destroy_response(reply);
  return queued;
}

void MicrohttpdServer::Watch() {
  const HttpLimits& limits = options_.limits;
  const absl::Duration tick = std::min(absl::Milliseconds(250), limits.request_deadline / 4);
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), tick)) {
    const absl::Time now = absl::Now();
    for (Connection* connection : connections_) {
      if (connection->cut || connection->phase == Connection::Phase::kHandling) continue;
      const absl::Duration limit = connection->phase == Connection::Phase::kReceiving
                                       ? limits.request_deadline
                                       : limits.response_deadline;
      if (now - connection->since <= limit || connection->fd < 0) continue;
      // Both directions: libmicrohttpd's next read sees the end and closes the connection.
      ::shutdown(connection->fd, SHUT_RDWR);
      connection->cut = true;
      ++deadline_cuts_;
    }
  }
}

}  // namespace parity::server
