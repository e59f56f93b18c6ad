// The HTTP/1.1 listener: event-driven I/O (Boost.Beast on Boost.Asio, kept inside server.cpp)
// with every limit a hostile client could push against, and a worker pool that runs handlers.
//
// Threads: `io_threads` threads only read and write sockets; they never run a handler. A request
// is handed to the worker pool once it has been read whole, through one FIFO, and a connection
// reads its next request only after its response is written (one in flight per connection), so a
// client that keeps many requests coming waits its turn behind the others.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ty::http {

using Fields = std::vector<std::pair<std::string, std::string>>;

// A request read whole (head and body).
struct Request {
  std::string method;  // "POST"
  std::string target;  // as sent: path and query
  std::string path;    // target before '?'
  std::string query;   // target after '?', without it; may be empty
  Fields headers;      // names as received
  std::string body;
  std::string peer;    // the connection's remote address ("127.0.0.1", "::1"); "" when unknown
  bool secure_transport = false;  // arrived over TLS (the aws:SecureTransport condition key)
  // The body plan withheld the body (BodyPlan::withhold_body): none of it was read, `body` is empty,
  // and the connection closes after the answer. The handler must refuse such a request.
  bool body_withheld = false;

  // The first header named `name` (compared case-insensitively), or null.
  const std::string* Header(std::string_view name) const;
  // The percent-decoded values of query parameter `name`, in order.
  std::vector<std::string> Params(std::string_view name) const;
};

// Produces the next piece of a streamed body: appends to `out` (possibly nothing) and returns false
// once the stream is over. May block (it runs on a worker); must return within a bounded time.
using StreamProducer = std::function<bool(std::string* out)>;

struct Response {
  int status = 200;
  Fields headers;  // Content-Length, Transfer-Encoding, Connection and Date are the server's
  std::string body;
  // When set, the body is produced piece by piece on the worker until the producer returns false, a
  // write fails or the server stops. Without content_length it is sent with chunked encoding and
  // the connection closes after; with it, see content_length.
  StreamProducer stream;
  // -1: unset (the length of `body`). On the answer to a HEAD request with an empty body it is the
  // Content-Length sent, with no body (the length a GET would have). On a streamed response it makes
  // the stream a plain Content-Length body: when the producer yields exactly this many bytes the
  // connection stays alive for the next request; bytes beyond it are dropped and a stream that
  // ends short closes the connection (the client sees a truncated body, never a wrong one).
  int64_t content_length = -1;
  std::function<void()> on_stream_end;  // called once when a stream ends, however it ends
};

// Runs on a worker thread; may block (long polls), but should return in bounded time.
using Handler = std::function<Response(const Request&)>;

// The response for a request the server refuses itself before any handler runs: 400 (malformed,
// or framed in a way RFC 9112 lets a server refuse: obs-fold, a repeated Host or Content-Length,
// Transfer-Encoding beside Content-Length), 413 (body over the limit), 431 (header over the
// limit), 500 (a handler threw), 501 (a Transfer-Encoding other than chunked) and 503 (over a
// connection cap, or too many bodies buffered). `head` is the request's head when it was read (no body), else null.
using Refusal = std::function<Response(int status, const std::string& message, const Request* head)>;

// What the handler's side decides from a request's head (method, target, path, query, headers,
// peer; no body) before any of its body is read or any of the budget is reserved for it.
struct BodyPlan {
  int64_t limit = 0;  // the most body bytes this request may send; more is refused (413)
  // Whom the body's bytes are charged to in the buffered budget (Limits::max_buffered_body_bytes):
  // the caller the head proves (a signature over the head checked: an access key), or "" when the
  // head proves nobody, and then the connection's address is charged, in the unproven share.
  std::string caller;
  // The head already fails authentication: no byte of the body is read or reserved; the head goes
  // to the handler alone (Request::body_withheld) and the connection closes after the answer.
  bool withhold_body = false;
};
// Runs on an I/O thread: it must be quick and must not block.
using BodyPlanner = std::function<BodyPlan(const Request& head)>;
// The plan with only a limit (every body charged to its address).
using BodyLimit = std::function<int64_t(const Request& head)>;

struct Limits {
  int64_t max_body_bytes = 6 * 1024 * 1024;  // Content-Length and chunked bodies alike, unless SetBodyLimit
  int64_t max_header_bytes = 16 * 1024;      // request line and every header line together
  int max_header_fields = 100;               // header lines
  // Bodies being read or waiting for their handler, all connections together: a Content-Length
  // body reserves its length when its head arrives, a chunked one its request's body limit.
  int64_t max_buffered_body_bytes = 512 * 1024 * 1024;
  // Shares of that budget (BodyPlan::caller), so that heads which prove nobody cannot hold it all:
  // one proven caller holds at most max_buffered_body_bytes_per_caller; bodies of unproven heads
  // hold at most max_buffered_unproven_body_bytes together and max_buffered_body_bytes_per_address
  // from one address. A body that does not fit its share is refused (503) like one over the budget.
  int64_t max_buffered_body_bytes_per_caller = INT64_MAX;
  int64_t max_buffered_unproven_body_bytes = INT64_MAX;
  int64_t max_buffered_body_bytes_per_address = INT64_MAX;
  int header_timeout_ms = 10'000;            // the whole head must arrive this soon after its first byte
  int body_timeout_ms = 60'000;              // the whole body, after the head; and each response write
  int idle_timeout_ms = 60'000;              // a connection with no request under way is closed after this
  int max_connections = 20'000;              // beyond it new connections get a 503 and are closed
  int max_connections_per_address = 20'000;  // open connections from one remote address, loopback included; beyond it: the same 503
  int io_threads = 1;
  int workers = 16;
};

// PEM files for a TLS listener.
struct TlsFiles {
  std::string certificate_file;  // the certificate, then any intermediates
  std::string key_file;          // its private key, unencrypted
};

struct Stats {
  int64_t open_connections = 0;
  int64_t refused_connections = 0;  // over max_connections or max_connections_per_address
  int64_t queued_requests = 0;      // read whole, waiting for a worker
  int64_t buffered_body_bytes = 0;  // reserved by bodies being read or waiting
};

class Server {
 public:
  Server(Limits limits, Handler handler, Refusal refusal);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port (port 0 picks a free one) and returns the bound port. The connection cap is
  // lowered to fit RLIMIT_NOFILE (less a reserve for the rest of the process).
  StatusOr<int> Bind(const std::string& host, int port);
  // Makes every connection speak TLS (1.2 or later) with this certificate: the handshake must
  // finish within header_timeout_ms of the connection, and a client that sends plaintext is
  // answered with a plaintext 400 naming https and closed. An error names the file and the reason
  // when the files cannot be read or do not belong together. REQUIRES: before Run().
  Status UseTls(const TlsFiles& files);
  // Chooses each request's body plan (default: every request gets Limits::max_body_bytes, charged
  // to its address). A body over the chosen limit is answered 413 naming it. REQUIRES: before Run().
  void SetBodyPlan(BodyPlanner planner);
  void SetBodyLimit(BodyLimit limit);
  // Serves until Stop(). REQUIRES: Bind() succeeded.
  void Run();
  // Thread-safe; Run() returns once the I/O threads and workers have ended.
  void Stop();

  Stats stats() const;

  struct Impl;  // defined in server.cpp, with the connections that use it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ty::http
