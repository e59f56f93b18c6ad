#include "http/server.h"

#include "http/certificate.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <atomic>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/strings.h"

namespace ty::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

namespace {

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
    if (FormDecode(part.substr(0, eq)) == name)
      out.push_back(eq == std::string_view::npos ? std::string() : FormDecode(part.substr(eq + 1)));
    start = end + 1;
  }
  return out;
}

struct Server::Impl {
  // Constant after construction (max_connections until Bind).
  Limits limits;
  Handler handler;
  Refusal refusal;
  BodyPlanner body_plan;  // set by SetBodyPlan before Run, constant after; null: limits.max_body_bytes

  // Set by UseTls before Run, constant after; every connection speaks TLS when it is set.
  std::optional<net::ssl::context> tls;

  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_backoff{ioc};
  WorkerPool workers;
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> open{0};
  std::atomic<int64_t> refused{0};
  std::atomic<int64_t> buffered{0};  // reserved body bytes, see Limits::max_buffered_body_bytes

  // The budget's shares (Limits::max_buffered_body_bytes_per_caller and the unproven ones) and the
  // connections open per address. I/O threads touch them from many strands.
  std::mutex shares_mu;
  std::unordered_map<std::string, int64_t> held_by;  // guarded by shares_mu: "caller <key>" / "address <ip>" -> bytes
  int64_t unproven_held = 0;                          // guarded by shares_mu
  std::unordered_map<std::string, int> open_from;     // guarded by shares_mu: address -> open connections

  Impl(Limits l, Handler h, Refusal r) : limits(l), handler(std::move(h)), refusal(std::move(r)) {}

  void Accept();
  void RefuseOverCap(tcp::socket socket, const std::string& message);

  // Reserves `bytes` of the budget for a body charged to `caller` (or, when it is "", to `address`
  // in the unproven share). Returns "" when reserved, else the refusal's message.
  std::string Reserve(const std::string& caller, const std::string& address, int64_t bytes) {
    const bool proven = !caller.empty();
    const std::string owner = proven ? "caller " + caller : "address " + address;
    std::lock_guard<std::mutex> lock(shares_mu);
    int64_t& held = held_by[owner];
    auto refuse = [&](std::string why) {
      if (held == 0) held_by.erase(owner);
      return why;
    };
    if (buffered.load() + bytes > limits.max_buffered_body_bytes)
      return refuse("The server is reading too many request bodies at once (server.max_buffered_request_bytes = " +
                    std::to_string(limits.max_buffered_body_bytes) + "); retry later");
    if (proven && held + bytes > limits.max_buffered_body_bytes_per_caller)
      return refuse("Access key " + caller + " already has " + std::to_string(held) +
                    " bytes of request bodies being read, and may hold " +
                    std::to_string(limits.max_buffered_body_bytes_per_caller) +
                    " (its share of server.max_buffered_request_bytes); retry later");
    if (!proven && held + bytes > limits.max_buffered_body_bytes_per_address)
      return refuse("Requests from " + address + " whose head proves no caller already have " + std::to_string(held) +
                    " bytes of bodies being read, and may hold " + std::to_string(limits.max_buffered_body_bytes_per_address) +
                    " (an address's share of server.max_buffered_request_bytes); retry later");
    if (!proven && unproven_held + bytes > limits.max_buffered_unproven_body_bytes)
      return refuse("Requests whose head proves no caller already have " + std::to_string(unproven_held) +
                    " bytes of bodies being read, and may hold " + std::to_string(limits.max_buffered_unproven_body_bytes) +
                    " (their share of server.max_buffered_request_bytes); retry later");
    held += bytes;
    if (!proven) unproven_held += bytes;
    buffered.fetch_add(bytes);
    return "";
  }
  void Release(const std::string& caller, const std::string& address, int64_t bytes) {
    const bool proven = !caller.empty();
    std::lock_guard<std::mutex> lock(shares_mu);
    auto it = held_by.find(proven ? "caller " + caller : "address " + address);
    if (it != held_by.end() && (it->second -= bytes) <= 0) held_by.erase(it);
    if (!proven) unproven_held -= bytes;
    buffered.fetch_sub(bytes);
  }
  // False when `address` already has max_connections_per_address open; counts it otherwise.
  bool OpenFrom(const std::string& address) {
    std::lock_guard<std::mutex> lock(shares_mu);
    int& n = open_from[address];
    if (n >= limits.max_connections_per_address) {
      if (n == 0) open_from.erase(address);
      return false;
    }
    ++n;
    return true;
  }
  void ClosedFrom(const std::string& address) {
    std::lock_guard<std::mutex> lock(shares_mu);
    auto it = open_from.find(address);
    if (it != open_from.end() && --it->second <= 0) open_from.erase(it);
  }
  std::string Render(int status, const std::string& message, const Request* head) {
    Response res = refusal(status, message, head);
    return Head(res, static_cast<int64_t>(res.body.size()), false) + res.body;
  }
};

namespace {

// One connection, plain (beast::tcp_stream) or TLS (TlsStream). Its socket is touched only on its
// strand; a worker hands results back by posting to it. Deadlines are kept by the TCP layer under
// the TLS one, so every limit below holds alike for both.
template <typename Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;
  static constexpr int64_t kLingerMs = 2'000;         // Linger(): how long a closing connection drains
  static constexpr size_t kLingerBytes = 1 << 20;     // and how much
  static constexpr size_t kDrainChunk = 4096;

 public:
  // `peer`: the remote address, already counted by Server::Impl::OpenFrom.
  Session(Server::Impl& server, tcp::socket socket, std::string peer)
      : server_(server), stream_(Open(server, std::move(socket))), peer_(std::move(peer)) {
    server_.open.fetch_add(1);
  }
  ~Session() {
    ReleaseBody();
    server_.ClosedFrom(peer_);
    server_.open.fetch_sub(1);
  }

  void Start() {
    if constexpr (kTls) {
      Handshake();
    } else {
      WaitForRequest();
    }
  }

 private:
  using Parser = bhttp::request_parser<bhttp::string_body>;
  // From this size up a body of known length bypasses the parser (ReadBodyDirect).
  static constexpr std::uint64_t kDirectBodyBytes = 256 * 1024;

  static Stream Open(Server::Impl& server, tcp::socket socket) {
    if constexpr (kTls) {
      return Stream(beast::tcp_stream(std::move(socket)), *server.tls);
    } else {
      return Stream(std::move(socket));
    }
  }
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }
  std::shared_ptr<Session> Self() { return this->shared_from_this(); }

  // TLS only: the first bytes must be a TLS handshake, and the handshake must finish within the
  // header deadline (a client that stalls in it is cut off as a slow head is). Plaintext gets a
  // plaintext 400 that says to use https, and the connection closes.
  void Handshake() {
    Tcp().expires_after(std::chrono::milliseconds(server_.limits.header_timeout_ms));
    beast::async_detect_ssl(Tcp(), buffer_, [self = Self()](beast::error_code ec, bool tls) {
      if (ec) return self->Close();
      if (!tls) return self->RefusePlaintext();
      self->stream_.async_handshake(net::ssl::stream_base::server, self->buffer_.data(),
                                    [self](beast::error_code ec, size_t used) {
                                      if (ec) {
                                        spdlog::debug("TLS handshake failed: {}", ec.message());
                                        return self->Close();
                                      }
                                      self->handshake_done_ = true;
                                      self->buffer_.consume(used);
                                      self->WaitForRequest();
                                    });
    });
  }

  void RefusePlaintext() {
    buffer_.clear();
    out_ = server_.Render(400, "This port speaks HTTPS (TLS): send the request to an https:// endpoint", nullptr);
    Tcp().expires_after(std::chrono::milliseconds(server_.limits.body_timeout_ms));
    net::async_write(Tcp(), net::buffer(out_), [self = Self()](beast::error_code, size_t) { self->CloseSocket(); });
  }

  // Idle until the first byte of the next request (which may already be buffered).
  void WaitForRequest() {
    if (server_.stopping) return Close();
    if (buffer_.size() > 0) return ReadHead();
    Tcp().expires_after(std::chrono::milliseconds(server_.limits.idle_timeout_ms));
    stream_.async_read_some(buffer_.prepare(1024), [self = Self()](beast::error_code ec, size_t n) {
      if (ec) return self->Close();
      self->buffer_.commit(n);
      self->ReadHead();
    });
  }

  void ReadHead() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(std::min<int64_t>(server_.limits.max_header_bytes, UINT32_MAX)));
    // The limit is chosen from the head (OnHead); until then the parser must not refuse a
    // Content-Length over the default.
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    body_limit_ = server_.limits.max_body_bytes;
    Tcp().expires_after(std::chrono::milliseconds(server_.limits.header_timeout_ms));
    AwaitWholeHead();
  }

  // Reads until the buffer holds the head's end, so its raw lines can be checked before the parser,
  // which joins folded lines, sees them: RFC 9112 section 5.2 lets a server refuse obs-fold, and a
  // fold that one hop joins and another splits is a way to smuggle a header. A head longer than the
  // limit goes to the parser as it is, which refuses it (431).
  void AwaitWholeHead() {
    const std::string_view data(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    size_t end = data.find("\r\n\r\n");
    end = std::min(end, data.find("\n\n"));  // a head with bare LFs: the parser refuses it
    if (end != std::string_view::npos) {
      const std::string_view head = data.substr(0, end + 1);
      for (size_t i = head.find('\n'); i != std::string_view::npos && i + 1 < head.size(); i = head.find('\n', i + 1))
        if (head[i + 1] == ' ' || head[i + 1] == '\t')
          return Refuse(400, "The request's header continues a line onto the next (obs-fold), which RFC 9112 lets "
                             "servers refuse: send each header on one line");
    }
    if (end != std::string_view::npos || data.size() > static_cast<size_t>(server_.limits.max_header_bytes)) {
      bhttp::async_read_header(stream_, buffer_, *parser_, [self = Self()](beast::error_code ec, size_t) {
        self->OnHead(ec);
      });
      return;
    }
    stream_.async_read_some(buffer_.prepare(4096), [self = Self()](beast::error_code ec, size_t n) {
      if (ec) return self->OnHead(ec);
      self->buffer_.commit(n);
      self->AwaitWholeHead();
    });
  }

  // RFC 9112's framing rules a server may enforce, checked on the parsed head; "" when it is sound.
  // Each is a way two hops could read one request differently (request smuggling).
  template <class Header>
  static std::pair<int, std::string> FramingError(const Header& head) {
    int hosts = 0, lengths = 0, codings = 0;
    std::string coding;
    for (const auto& f : head) {
      if (f.name() == bhttp::field::host) ++hosts;
      if (f.name() == bhttp::field::content_length) {
        ++lengths;
        const auto v = f.value();
        if (v.empty() || v.find_first_not_of("0123456789") != beast::string_view::npos)
          return {400, "Content-Length must be one decimal number, not '" + std::string(v.substr(0, 40)) + "'"};
      }
      if (f.name() == bhttp::field::transfer_encoding) {
        ++codings;
        coding = std::string(Trim(std::string_view(f.value().data(), f.value().size())));
      }
    }
    if (hosts > 1) return {400, "The request has more than one Host header"};
    if (lengths > 1) return {400, "The request has more than one Content-Length header"};
    if (codings > 0 && lengths > 0)
      return {400, "The request has both Transfer-Encoding and Content-Length: send one"};
    if (codings > 1 || (codings == 1 && !EqualsIgnoreCase(coding, "chunked")))
      return {501, "Transfer-Encoding '" + coding.substr(0, 40) + "' is not supported: only 'chunked'"};
    return {0, ""};
  }

  void OnHead(beast::error_code ec) {
    if (ec == bhttp::error::header_limit)
      return Refuse(431, "The request's header exceeds the limit of " + std::to_string(server_.limits.max_header_bytes) +
                             " bytes (server.max_header_bytes)");
    if (ec == bhttp::error::body_limit) return RefuseBody();
    if (ec == beast::error::timeout) return Close();  // a head that trickles in (slow loris)
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset) return Close();
    if (kTls && ec.category() == net::error::get_ssl_category()) return Close();  // truncated or corrupt records
    if (ec) return Refuse(400, "The request is not valid HTTP/1.1: " + ec.message());
    const auto& head = parser_->get();
    if (std::distance(head.begin(), head.end()) > server_.limits.max_header_fields)
      return Refuse(431, "The request has more than " + std::to_string(server_.limits.max_header_fields) +
                             " header fields (server.max_header_fields)");
    if (auto [status, why] = FramingError(head); status != 0) return Refuse(status, why);
    Request head_view = HeadOf(head);
    BodyPlan plan;
    plan.limit = server_.limits.max_body_bytes;
    if (server_.body_plan) plan = server_.body_plan(head_view);
    if (plan.withhold_body) return ServeHeadAlone(std::move(head_view));
    body_limit_ = std::max<int64_t>(0, plan.limit);
    if (auto length = parser_->content_length(); length && *length > static_cast<std::uint64_t>(body_limit_))
      return RefuseBody();
    parser_->body_limit(static_cast<std::uint64_t>(body_limit_));
    if (std::string why = ReserveBody(plan.caller); !why.empty()) return Refuse(503, why);
    auto expect = parser_->get()[bhttp::field::expect];
    if (EqualsIgnoreCase(std::string_view(expect.data(), expect.size()), "100-continue")) {
      out_ = "HTTP/1.1 100 Continue\r\n\r\n";
      Tcp().expires_after(std::chrono::milliseconds(server_.limits.body_timeout_ms));
      net::async_write(stream_, net::buffer(out_), [self = Self()](beast::error_code ec, size_t) {
        if (ec) return self->Close();
        self->ReadBody();
      });
      return;
    }
    ReadBody();
  }

  // The head failed authentication (BodyPlan::withhold_body): its handler answers it without a body,
  // and the connection closes after, since the unread body still follows on it.
  void ServeHeadAlone(Request req) {
    // A client sending the body before it reads the answer (no Expect: 100-continue) reads it
    // rather than a reset: the body, up to the limit a request may have, is dropped as it comes.
    if (auto length = parser_->content_length())
      linger_bytes_ = static_cast<size_t>(std::min<std::uint64_t>(*length, static_cast<std::uint64_t>(server_.limits.max_body_bytes)));
    parser_.reset();
    keep_alive_ = false;
    req.body_withheld = true;
    Tcp().expires_never();
    server_.workers.Push([self = Self(), req = std::move(req)]() mutable { self->Serve(req); });
  }

  void ReadBody() {
    Tcp().expires_after(std::chrono::milliseconds(server_.limits.body_timeout_ms));
    if (auto length = parser_->content_length(); length && *length >= kDirectBodyBytes && !parser_->is_done())
      return ReadBodyDirect(static_cast<size_t>(*length));
    bhttp::async_read(stream_, buffer_, *parser_, [self = Self()](beast::error_code ec, size_t) {
      self->OnBody(ec);
    });
  }

  // A large body of known length (its limit already checked in OnHead) is read from the socket
  // straight into the request's string, sized once, rather than through buffer_ and the parser
  // 64 KiB at a time: an upload of hundreds of MiB is copied once from the kernel, and the body
  // deadline covers the whole read as it does on the parser's path.
  void ReadBodyDirect(size_t length) {
    direct_body_.resize(length);
    size_t have = net::buffer_copy(net::buffer(direct_body_), buffer_.data());
    buffer_.consume(have);
    net::async_read(stream_, net::buffer(direct_body_.data() + have, length - have),
                    [self = Self()](beast::error_code ec, size_t) {
                      if (ec) self->direct_body_ = std::string();
                      self->OnBody(ec, true);
                    });
  }

  // `direct`: the body was read by ReadBodyDirect into direct_body_ (the parser has the head only).
  void OnBody(beast::error_code ec, bool direct = false) {
    if (ec == bhttp::error::body_limit) return RefuseBody();
    if (ec) return Close();
    Tcp().expires_never();
    auto message = parser_->release();
    parser_.reset();
    if (direct) message.body() = std::move(direct_body_);
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
    req.secure_transport = kTls;
    server_.workers.Push([self = Self(), req = std::move(req)]() mutable { self->Serve(req); });
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
    int64_t length = static_cast<int64_t>(res.body.size());
    if (req.method == "HEAD" && res.body.empty() && res.content_length >= 0) length = res.content_length;
    std::string bytes = Head(res, length, keep_alive_);
    bytes += res.body;
    net::post(stream_.get_executor(), [self = Self(), bytes = std::move(bytes)]() mutable {
      self->Write(std::move(bytes), self->keep_alive_);
    });
  }

  // On a worker: sends a streamed body piece by piece. Each write must finish within the body
  // timeout, so a client that stops reading frees the worker.
  void ServeStream(Response& res) {
    ReleaseBody();  // nothing runs on the strand while a worker holds the request
    if (res.content_length >= 0) return ServeKnownLength(res);
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
    net::post(stream_.get_executor(), [self = Self()] { self->Close(); });
  }

  // On a worker: a stream of announced length, sent as it comes (no chunk framing). Only a stream
  // that delivered exactly its length leaves the connection usable for the next request.
  void ServeKnownLength(Response& res) {
    const int64_t length = res.content_length;
    int64_t sent = 0;
    bool ok = WriteFromWorker(Head(res, length, keep_alive_));
    bool more = true;
    while (ok && more && !server_.stopping) {
      std::string piece;
      more = res.stream(&piece);
      if (static_cast<int64_t>(piece.size()) > length - sent) {
        piece.resize(static_cast<size_t>(length - sent));
        more = false;
        ok = false;  // the producer broke its promise: the connection cannot be trusted further
        if (!piece.empty()) WriteFromWorker(std::move(piece));
        break;
      }
      if (!piece.empty()) {
        sent += static_cast<int64_t>(piece.size());
        ok = WriteFromWorker(std::move(piece));
      }
    }
    if (res.on_stream_end) res.on_stream_end();
    bool reuse = ok && !more && sent == length && keep_alive_ && !server_.stopping;
    net::post(stream_.get_executor(), [self = Self(), reuse] {
      if (reuse) return self->WaitForRequest();
      self->Close();
    });
  }

  bool WriteFromWorker(std::string bytes) {
    auto done = std::make_shared<std::promise<bool>>();
    auto result = done->get_future();
    net::post(stream_.get_executor(), [self = Self(), bytes = std::move(bytes), done]() mutable {
      self->out_ = std::move(bytes);
      beast::get_lowest_layer(self->stream_).expires_after(std::chrono::milliseconds(self->server_.limits.body_timeout_ms));
      net::async_write(self->stream_, net::buffer(self->out_), [done](beast::error_code ec, size_t) { done->set_value(!ec); });
    });
    // The write's own deadline ends it; the loop only notices a stopped server, whose strand
    // will never run it.
    while (result.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready)
      if (server_.stopping) return false;
    return result.get();
  }

  // Holds the body's bytes against the server-wide budget, and the share of `caller` (or of this
  // address), until its response is written. Returns "" when held, else why not.
  std::string ReserveBody(const std::string& caller) {
    int64_t want = 0;
    if (auto length = parser_->content_length()) {
      want = static_cast<int64_t>(*length);
    } else if (parser_->chunked()) {
      want = body_limit_;
    }
    if (want == 0) return "";
    if (std::string why = server_.Reserve(caller, peer_, want); !why.empty()) return why;
    reserved_ = want;
    reserved_for_ = caller;
    return "";
  }

  void ReleaseBody() {
    if (reserved_ > 0) server_.Release(reserved_for_, peer_, reserved_);
    reserved_ = 0;
  }

  void Write(std::string bytes, bool then_read) {
    ReleaseBody();
    out_ = std::move(bytes);
    Tcp().expires_after(std::chrono::milliseconds(server_.limits.body_timeout_ms));
    net::async_write(stream_, net::buffer(out_), [self = Self(), then_read](beast::error_code ec, size_t) {
      if (ec) return self->Close();
      if (!then_read) return self->Linger();
      self->WaitForRequest();
    });
  }

  // After a last response: closing a socket with unread input makes the kernel send a reset, which
  // can reach the client before it has read the answer (a 413 or 431 it is still sending into
  // would arrive as "connection reset"). So a plain connection stops sending, then reads and drops
  // what the client still sends, for at most a moment and a bounded number of bytes, and closes.
  void Linger() {
    if constexpr (kTls) {
      Close();
    } else {
      if (closed_) return;
      closed_ = true;
      beast::error_code ignored;
      Tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
      Tcp().expires_after(std::chrono::milliseconds(std::min<int64_t>(server_.limits.header_timeout_ms, kLingerMs)));
      buffer_.clear();
      buffer_.shrink_to_fit();
      drain_ = std::make_unique<char[]>(kDrainChunk);
      Drain(0);
    }
  }

  void Drain(size_t drained) {
    if (drained >= std::max(kLingerBytes, linger_bytes_)) return CloseSocket();
    Tcp().async_read_some(net::buffer(drain_.get(), kDrainChunk), [self = Self(), drained](beast::error_code ec, size_t n) {
      if (ec) return self->CloseSocket();  // end of input, reset, or the deadline
      self->Drain(drained + n);
    });
  }

  void RefuseBody() {
    Refuse(413, "The request body exceeds the limit of " + std::to_string(body_limit_) + " bytes" +
                    (body_limit_ == server_.limits.max_body_bytes ? " (server.max_request_bytes)" : " for this request"));
  }

  // Answers with a refusal and closes: what is left of the request is only drained (Linger).
  void Refuse(int status, const std::string& message) {
    std::optional<Request> head;
    if (parser_ && parser_->is_header_done()) head = HeadOf(parser_->get());
    parser_.reset();
    buffer_.clear();
    buffer_.shrink_to_fit();
    Write(server_.Render(status, message, head ? &*head : nullptr), false);
  }

  // A TLS connection first sends its close_notify (without waiting for the peer's, which an idle
  // client would never send), so a client can tell the end of a response from a cut.
  void Close() {
    if (closed_) return;
    closed_ = true;
    if constexpr (kTls) {
      if (handshake_done_) {
        SSL_set_shutdown(stream_.native_handle(), SSL_RECEIVED_SHUTDOWN);
        Tcp().expires_after(std::chrono::milliseconds(std::min(server_.limits.body_timeout_ms, 5'000)));
        stream_.async_shutdown([self = Self()](beast::error_code) { self->CloseSocket(); });
        return;
      }
    }
    CloseSocket();
  }

  void CloseSocket() {
    beast::error_code ignored;
    Tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Tcp().close();
  }

  template <class Message>
  Request HeadOf(const Message& h) const {
    Request head;
    head.method = std::string(h.method_string());
    head.target = std::string(h.target());
    size_t q = head.target.find('?');
    head.path = head.target.substr(0, q);
    head.query = q == std::string::npos ? "" : head.target.substr(q + 1);
    for (const auto& f : h) head.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    head.peer = peer_;
    head.secure_transport = kTls;
    return head;
  }

  Server::Impl& server_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::unique_ptr<char[]> drain_;  // Linger()'s scratch, only while a closing connection drains
  std::optional<Parser> parser_;
  std::string direct_body_;  // the body under way, while ReadBodyDirect reads it
  std::string out_;  // the bytes being written; one write at a time
  bool keep_alive_ = false;
  const std::string peer_;  // the client's address ("" when unknown); counted in Server::Impl::open_from
  int64_t reserved_ = 0;  // of server_.buffered, for the request under way
  std::string reserved_for_;  // the caller reserved_ is charged to; "": peer_
  int64_t body_limit_ = 0;  // the request under way's body limit, chosen from its head
  bool handshake_done_ = false;  // TLS only
  bool closed_ = false;
  size_t linger_bytes_ = 0;  // Linger() drains up to this much, when more than kLingerBytes
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
    beast::error_code remote_ec;
    const auto remote = socket.remote_endpoint(remote_ec);
    std::string address = remote_ec ? std::string() : remote.address().to_string();
    if (open.load() >= limits.max_connections) {
      RefuseOverCap(std::move(socket), "The server has too many open connections (server.max_connections = " +
                                           std::to_string(limits.max_connections) + "); retry later");
    } else if (!OpenFrom(address)) {
      RefuseOverCap(std::move(socket), "Too many open connections from " + address +
                                           " (server.max_connections_per_address = " +
                                           std::to_string(limits.max_connections_per_address) + "); retry later");
    } else {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      if (tls) {
        std::make_shared<Session<TlsStream>>(*this, std::move(socket), std::move(address))->Start();
      } else {
        std::make_shared<Session<beast::tcp_stream>>(*this, std::move(socket), std::move(address))->Start();
      }
    }
    Accept();
  });
}

// Over the cap no state is kept: one non-blocking write of a 503 and the socket is closed (on a
// TLS listener only closed: a plaintext answer would mean nothing to a TLS client).
void Server::Impl::RefuseOverCap(tcp::socket socket, const std::string& message) {
  refused.fetch_add(1);
  beast::error_code ignored;
  if (tls) {
    socket.close(ignored);
    return;
  }
  static thread_local std::string reply;
  reply = Render(503, message, nullptr);
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

namespace {

}  // namespace

void Server::SetBodyPlan(BodyPlanner planner) { impl_->body_plan = std::move(planner); }

void Server::SetBodyLimit(BodyLimit limit) {
  impl_->body_plan = [limit = std::move(limit)](const Request& head) {
    BodyPlan plan;
    plan.limit = limit(head);
    return plan;
  };
}

Status Server::UseTls(const TlsFiles& files) {
  // Versions and ciphers: TLS 1.2 with forward-secret AEAD suites only (Mozilla's "intermediate"
  // list, less DHE), TLS 1.3 with OpenSSL's defaults; no renegotiation, which TLS 1.3 dropped and
  // a client could otherwise use to make the server redo handshakes on one connection.
  net::ssl::context ctx(net::ssl::context::tls_server);
  SSL_CTX* native = ctx.native_handle();
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  // Idle connections hold no read or write buffers (10,000 idle TLS clients cost ~70 KB each without it).
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_set_cipher_list(native,
                              "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                              "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                              "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305") != 1)
    return Internal("cannot set the TLS cipher list: " + OpenSslReason());
  for (const std::string* path : {&files.certificate_file, &files.key_file}) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(*path, ec))
      return InvalidArgument("TLS " + std::string(path == &files.key_file ? "key" : "certificate") + " file " + *path +
                             " does not exist or is not a file");
  }
  if (SSL_CTX_use_certificate_chain_file(native, files.certificate_file.c_str()) != 1)
    return InvalidArgument("cannot read a PEM certificate from " + files.certificate_file + ": " + OpenSslReason());
  if (SSL_CTX_use_PrivateKey_file(native, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1 &&
      ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH)
    return InvalidArgument("cannot read a PEM private key from " + files.key_file + ": " + OpenSslReason());
  if (ERR_peek_last_error() != 0 || SSL_CTX_check_private_key(native) != 1)
    return InvalidArgument("the TLS key " + files.key_file + " does not belong to the certificate " +
                           files.certificate_file + ": " + OpenSslReason());
  impl_->tls.emplace(std::move(ctx));
  return Status::Ok();
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
