#include "http/server.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "core/strings.h"

namespace ty::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

namespace {

// Query-string decoding: %XX escapes, and '+' as a space (form encoding, as browsers send it).
std::string QueryDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && HexDigitValue(s[i + 1]) >= 0 && HexDigitValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexDigitValue(s[i + 1]) * 16 + HexDigitValue(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// The Date header's value for now, formatted once per second per thread. RFC 9110 section 6.6.1: a
// server with a clock sends Date on every response; AWS does, errors included, and SDKs read it to
// correct a client's skewed clock before SigV4 refuses its signatures.
const std::string& DateNow() {
  thread_local int64_t second = -1;
  thread_local std::string value;
  int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  if (ms / 1000 != second) {
    second = ms / 1000;
    value = FormatHttpDate(ms);
  }
  return value;
}

// The head of a response; `length` < 0 means a chunked body. Every response carries Date.
std::string Head(const Response& res, int64_t length, bool keep_alive) {
  std::string out = "HTTP/1.1 " + std::to_string(res.status) + " ";
  auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(res.status));
  out.append(reason.data(), reason.size());
  out += "\r\n";
  out += "Date: " + DateNow() + "\r\n";
  for (const auto& [k, v] : res.headers) {
    if (EqualsIgnoreCase(k, "content-length") || EqualsIgnoreCase(k, "transfer-encoding") ||
        EqualsIgnoreCase(k, "connection") || EqualsIgnoreCase(k, "date"))
      continue;
    // Header values come from handlers; a CR or LF in one would split the response.
    if (k.find_first_of("\r\n:") != std::string::npos || v.find_first_of("\r\n") != std::string::npos) continue;
    out += k + ": " + v + "\r\n";
  }
  out += length < 0 ? std::string("Transfer-Encoding: chunked\r\n") : "Content-Length: " + std::to_string(length) + "\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return out;
}

std::string Chunk(std::string_view data) {
  char size[24];
  int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out(size, static_cast<size_t>(n));
  out += data;
  out += "\r\n";
  return out;
}

// A FIFO of work run by a fixed set of threads.
class WorkerPool {
 public:
  void Start(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  }
  void Push(std::function<void()> work) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(work));
    }
    cv_.notify_one();
  }
  // Ends the threads once the work they run has returned; queued work is dropped.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      queue_.clear();
    }
    cv_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }
  int64_t queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(queue_.size());
  }

 private:
  void Loop() {
    while (true) {
      std::function<void()> work;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      work();
    }
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace

const std::string* Request::Header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (EqualsIgnoreCase(k, name)) return &v;
  return nullptr;
}

std::vector<std::string> Request::Params(std::string_view name) const {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= query.size() && !query.empty()) {
    size_t end = query.find('&', start);
    if (end == std::string::npos) end = query.size();
    std::string_view part(query.data() + start, end - start);
    size_t eq = part.find('=');
    if (QueryDecode(part.substr(0, eq)) == name)
      out.push_back(eq == std::string_view::npos ? std::string() : QueryDecode(part.substr(eq + 1)));
    start = end + 1;
  }
  return out;
}

struct Server::Impl {
  // Constant after construction (max_connections until Bind).
  Limits limits;
  Handler handler;
  Refusal refusal;

  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_backoff{ioc};
  WorkerPool workers;
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> open{0};
  std::atomic<int64_t> refused{0};
  std::atomic<int64_t> buffered{0};  // reserved body bytes, see Limits::max_buffered_body_bytes

  Impl(Limits l, Handler h, Refusal r) : limits(l), handler(std::move(h)), refusal(std::move(r)) {}

  void Accept();
  void RefuseOverCap(tcp::socket socket);
  std::string Render(int status, const std::string& message, const Request* head) {
    Response res = refusal(status, message, head);
    return Head(res, static_cast<int64_t>(res.body.size()), false) + res.body;
  }
};

namespace {

// One connection. Its socket is touched only on its strand; a worker hands results back by
// posting to it.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server::Impl& server, tcp::socket socket) : server_(server), stream_(std::move(socket)) {
    server_.open.fetch_add(1);
    beast::error_code ec;
    const auto remote = stream_.socket().remote_endpoint(ec);
    if (!ec) peer_ = remote.address().to_string();
  }
  ~Session() {
    ReleaseBody();
    server_.open.fetch_sub(1);
  }

  void Start() { WaitForRequest(); }

 private:
  using Parser = bhttp::request_parser<bhttp::string_body>;

  // Idle until the first byte of the next request (which may already be buffered).
  void WaitForRequest() {
    if (server_.stopping) return Close();
    if (buffer_.size() > 0) return ReadHead();
    stream_.expires_after(std::chrono::milliseconds(server_.limits.idle_timeout_ms));
    stream_.async_read_some(buffer_.prepare(1024), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) return self->Close();
      self->buffer_.commit(n);
      self->ReadHead();
    });
  }

  void ReadHead() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(std::min<int64_t>(server_.limits.max_header_bytes, UINT32_MAX)));
    parser_->body_limit(static_cast<std::uint64_t>(server_.limits.max_body_bytes));
    stream_.expires_after(std::chrono::milliseconds(server_.limits.header_timeout_ms));
    bhttp::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->OnHead(ec);
    });
  }

  void OnHead(beast::error_code ec) {
    if (ec == bhttp::error::header_limit)
      return Refuse(431, "The request's header exceeds the limit of " + std::to_string(server_.limits.max_header_bytes) +
                             " bytes (server.max_header_bytes)");
    if (ec == bhttp::error::body_limit) return RefuseBody();
    if (ec == beast::error::timeout) return Close();  // a head that trickles in (slow loris)
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset) return Close();
    if (ec) return Refuse(400, "The request is not valid HTTP/1.1: " + ec.message());
    const auto& head = parser_->get();
    if (std::distance(head.begin(), head.end()) > server_.limits.max_header_fields)
      return Refuse(431, "The request has more than " + std::to_string(server_.limits.max_header_fields) +
                             " header fields (server.max_header_fields)");
    if (!ReserveBody()) {
      return Refuse(503, "The server is reading too many request bodies at once (server.max_buffered_request_bytes = " +
                             std::to_string(server_.limits.max_buffered_body_bytes) + "); retry later");
    }
    auto expect = parser_->get()[bhttp::field::expect];
    if (EqualsIgnoreCase(std::string_view(expect.data(), expect.size()), "100-continue")) {
      out_ = "HTTP/1.1 100 Continue\r\n\r\n";
      stream_.expires_after(std::chrono::milliseconds(server_.limits.body_timeout_ms));
      net::async_write(stream_, net::buffer(out_), [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return self->Close();
        self->ReadBody();
      });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    stream_.expires_after(std::chrono::milliseconds(server_.limits.body_timeout_ms));
    bhttp::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->OnBody(ec);
    });
  }

  void OnBody(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) return RefuseBody();
    if (ec) return Close();
    stream_.expires_never();
    auto message = parser_->release();
    parser_.reset();
    // A large body may have grown the read buffer; an idle keep-alive connection keeps only a
    // little (10,000 of them should cost tens of MB, not GB).
    if (buffer_.capacity() > 16 * 1024 && buffer_.size() <= 1024) buffer_.shrink_to_fit();
    keep_alive_ = message.keep_alive();
    Request req;
    req.method = std::string(message.method_string());
    req.target = std::string(message.target());
    size_t q = req.target.find('?');
    req.path = req.target.substr(0, q);
    req.query = q == std::string::npos ? "" : req.target.substr(q + 1);
    for (const auto& f : message) req.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    req.body = std::move(message.body());
    req.peer = peer_;
    server_.workers.Push([self = shared_from_this(), req = std::move(req)]() mutable { self->Serve(req); });
  }

  // On a worker: runs the handler and hands the response to the strand.
  void Serve(const Request& req) {
    Response res;
    try {
      res = server_.handler(req);
    } catch (const std::exception& e) {
      spdlog::error("{} {}: handler failed: {}", req.method, req.path, e.what());
      res = server_.refusal(500, "The server could not handle the request", &req);
    }
    if (res.stream) return ServeStream(res);
    std::string bytes = Head(res, static_cast<int64_t>(res.body.size()), keep_alive_);
    bytes += res.body;
    net::post(stream_.get_executor(), [self = shared_from_this(), bytes = std::move(bytes)]() mutable {
      self->Write(std::move(bytes), self->keep_alive_);
    });
  }

  // On a worker: sends a streamed body piece by piece. Each write must finish within the body
  // timeout, so a client that stops reading frees the worker.
  void ServeStream(Response& res) {
    ReleaseBody();  // nothing runs on the strand while a worker holds the request
    bool ok = WriteFromWorker(Head(res, -1, false));
    while (ok && !server_.stopping) {
      std::string piece;
      bool more = res.stream(&piece);
      if (!piece.empty()) ok = WriteFromWorker(Chunk(piece));
      if (!more) {
        if (ok) WriteFromWorker("0\r\n\r\n");
        break;
      }
    }
    if (res.on_stream_end) res.on_stream_end();
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->Close(); });
  }

  bool WriteFromWorker(std::string bytes) {
    auto done = std::make_shared<std::promise<bool>>();
    auto result = done->get_future();
    net::post(stream_.get_executor(), [self = shared_from_this(), bytes = std::move(bytes), done]() mutable {
      self->out_ = std::move(bytes);
      self->stream_.expires_after(std::chrono::milliseconds(self->server_.limits.body_timeout_ms));
      net::async_write(self->stream_, net::buffer(self->out_), [done](beast::error_code ec, size_t) { done->set_value(!ec); });
    });
    // The write's own deadline ends it; the loop only notices a stopped server, whose strand
    // will never run it.
    while (result.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready)
      if (server_.stopping) return false;
    return result.get();
  }

  // Holds the body's bytes against the server-wide budget until its response is written.
  bool ReserveBody() {
    int64_t want = 0;
    if (auto length = parser_->content_length()) {
      want = static_cast<int64_t>(*length);
    } else if (parser_->chunked()) {
      want = server_.limits.max_body_bytes;
    }
    if (want == 0) return true;
    if (server_.buffered.fetch_add(want) + want > server_.limits.max_buffered_body_bytes) {
      server_.buffered.fetch_sub(want);
      return false;
    }
    reserved_ = want;
    return true;
  }

  void ReleaseBody() {
    if (reserved_ > 0) server_.buffered.fetch_sub(reserved_);
    reserved_ = 0;
  }

  void Write(std::string bytes, bool then_read) {
    ReleaseBody();
    out_ = std::move(bytes);
    stream_.expires_after(std::chrono::milliseconds(server_.limits.body_timeout_ms));
    net::async_write(stream_, net::buffer(out_), [self = shared_from_this(), then_read](beast::error_code ec, size_t) {
      if (ec || !then_read) return self->Close();
      self->WaitForRequest();
    });
  }

  void RefuseBody() {
    Refuse(413, "The request body exceeds the limit of " + std::to_string(server_.limits.max_body_bytes) +
                    " bytes (server.max_request_bytes)");
  }

  // Answers with a refusal and closes: what is left of the request is never read.
  void Refuse(int status, const std::string& message) {
    std::optional<Request> head;
    if (parser_ && parser_->is_header_done()) {
      head.emplace();
      const auto& h = parser_->get();
      head->method = std::string(h.method_string());
      head->target = std::string(h.target());
      head->path = head->target.substr(0, head->target.find('?'));
      for (const auto& f : h) head->headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    parser_.reset();
    buffer_.clear();
    buffer_.shrink_to_fit();
    Write(server_.Render(status, message, head ? &*head : nullptr), false);
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  Server::Impl& server_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  std::string out_;  // the bytes being written; one write at a time
  bool keep_alive_ = false;
  std::string peer_;  // the client's address; constant after construction
  int64_t reserved_ = 0;  // of server_.buffered, for the request under way
};

}  // namespace

void Server::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (stopping) return;
    if (ec) {
      if (ec == net::error::operation_aborted) return;
      // Out of descriptors (or another transient failure): retry shortly instead of spinning.
      spdlog::warn("accept failed: {}", ec.message());
      accept_backoff.expires_after(std::chrono::milliseconds(50));
      accept_backoff.async_wait([this](beast::error_code e) {
        if (!e) Accept();
      });
      return;
    }
    if (open.load() >= limits.max_connections) {
      RefuseOverCap(std::move(socket));
    } else {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Session>(*this, std::move(socket))->Start();
    }
    Accept();
  });
}

// Over the cap no state is kept: one non-blocking write of a 503 and the socket is closed.
void Server::Impl::RefuseOverCap(tcp::socket socket) {
  refused.fetch_add(1);
  static thread_local std::string reply;
  reply = Render(503, "The server has too many open connections (server.max_connections = " +
                          std::to_string(limits.max_connections) + "); retry later",
                 nullptr);
  beast::error_code ignored;
  socket.non_blocking(true, ignored);
  socket.write_some(net::buffer(reply), ignored);
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  socket.close(ignored);
}

Server::Server(Limits limits, Handler handler, Refusal refusal)
    : impl_(std::make_unique<Impl>(limits, std::move(handler), std::move(refusal))) {}

Server::~Server() {
  Stop();
  impl_->workers.Stop();
}

StatusOr<int> Server::Bind(const std::string& host, int port) {
  // Each connection holds a descriptor: keep the cap inside RLIMIT_NOFILE, with a reserve for the
  // store, the jobs' logs and pipes.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    int64_t cur = static_cast<int64_t>(nofile.rlim_cur);
    int64_t fit = cur - std::min<int64_t>(1024, cur / 4);
    if (fit < impl_->limits.max_connections) {
      spdlog::info("server.max_connections {} lowered to {} to fit the open-file limit of {}",
                   impl_->limits.max_connections, fit, cur);
      impl_->limits.max_connections = static_cast<int>(std::max<int64_t>(fit, 1));
    }
  }
  beast::error_code ec;
  auto address = net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) {
    tcp::resolver resolver(impl_->ioc);
    auto found = resolver.resolve(host, std::to_string(port), ec);
    if (ec || found.empty()) return Unavailable("cannot resolve " + host + ": " + ec.message());
    address = found.begin()->endpoint().address();
  }
  tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  auto& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    beast::error_code ignored;
    a.close(ignored);
    return Unavailable("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  }
  return static_cast<int>(a.local_endpoint().port());
}

void Server::Run() {
  Impl& s = *impl_;
  s.workers.Start(std::max(1, s.limits.workers));
  net::post(s.acceptor.get_executor(), [&s] { s.Accept(); });
  std::vector<std::thread> io;
  for (int i = 1; i < std::max(1, s.limits.io_threads); ++i) io.emplace_back([&s] { s.ioc.run(); });
  s.ioc.run();
  for (auto& t : io) t.join();
  s.workers.Stop();
}

void Server::Stop() {
  Impl& s = *impl_;
  if (s.stopping.exchange(true)) return;
  net::post(s.ioc, [&s] {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    s.accept_backoff.cancel();
  });
  s.ioc.stop();
}

Stats Server::stats() const {
  return Stats{impl_->open.load(), impl_->refused.load(), impl_->workers.queued(), impl_->buffered.load()};
}

}  // namespace ty::http
