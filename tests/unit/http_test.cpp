// The HTTP listener and the input guards: JSON depth counting, token buckets, and the listener's
// ordering, fairness, stream and deadline contracts over real sockets on 127.0.0.1.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/guards.h"
#include "http/server.h"

namespace ty::http {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// --- JsonDepth ------------------------------------------------------------------------------------

TEST(JsonDepth, CountsObjectsAndArraysTogether) {
  EXPECT_EQ(JsonDepth(R"({"a": 1})", 64), 1);
  EXPECT_EQ(JsonDepth(R"({"a": [{"b": []}], "c": {}})", 64), 4);
  EXPECT_EQ(JsonDepth("42", 64), 0);
}

TEST(JsonDepth, BracketsInsideStringsDoNotCount) {
  EXPECT_EQ(JsonDepth(R"({"a": "[[[[{{{{"})", 64), 1);
  // An escaped quote does not end the string; an escaped backslash before the quote does.
  EXPECT_EQ(JsonDepth(R"({"a": "\"[[[["})", 64), 1);
  EXPECT_EQ(JsonDepth(R"({"a": "\\", "b": [[]]})", 64), 3);
}

TEST(JsonDepth, StopsCountingPastTheLimit) {
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(JsonDepth(deep, 64), 65);
  EXPECT_EQ(JsonDepth(std::string(64, '[') + std::string(64, ']'), 64), 64);
}

// --- RateLimiter ----------------------------------------------------------------------------------

TEST(RateLimiter, BurstThenRefusedUntilTokensAccrue) {
  RateLimiter r(/*rate_per_second=*/2, /*burst=*/3);
  // tokens: 3 -> 0 at t=0; +1 per 500 ms after.
  EXPECT_TRUE(r.Admit("k", 0));
  EXPECT_TRUE(r.Admit("k", 0));
  EXPECT_TRUE(r.Admit("k", 0));
  EXPECT_FALSE(r.Admit("k", 0));
  EXPECT_FALSE(r.Admit("k", 499));
  EXPECT_TRUE(r.Admit("k", 500));
  EXPECT_FALSE(r.Admit("k", 500));
  // A long pause refills only up to the burst.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(r.Admit("k", 60'000)) << i;
  EXPECT_FALSE(r.Admit("k", 60'000));
}

TEST(RateLimiter, KeysHaveTheirOwnBuckets) {
  RateLimiter r(1, 1);
  EXPECT_TRUE(r.Admit("a", 0));
  EXPECT_FALSE(r.Admit("a", 0));
  EXPECT_TRUE(r.Admit("b", 0));
}

TEST(RateLimiter, ZeroRateAdmitsEverything) {
  RateLimiter r(0, 0);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(r.Admit("k", 0));
}

// --- Server ---------------------------------------------------------------------------------------

// A server on a free port, run on its own thread for the length of a test.
class Running {
 public:
  Running(Limits limits, Handler handler, BodyLimit body_limit = nullptr)
      : Running(limits, std::move(handler), std::move(body_limit), true) {}
  Running(Limits limits, Handler handler, BodyPlanner plan) : Running(limits, std::move(handler), BodyLimit(nullptr), false) {
    server_.SetBodyPlan(std::move(plan));
    Start();
  }
  ~Running() {
    server_.Stop();
    thread_.join();
  }
  int port() const { return port_; }
  Server& server() { return server_; }

 private:
  Running(Limits limits, Handler handler, BodyLimit body_limit, bool start)
      : server_(limits, std::move(handler), [](int status, const std::string& message, const Request*) {
          Response r;
          r.status = status;
          r.body = message;
          return r;
        }) {
    if (body_limit) server_.SetBodyLimit(std::move(body_limit));
    if (start) Start();
  }
  void Start() {
    auto port = server_.Bind("127.0.0.1", 0);
    EXPECT_TRUE(port.ok()) << port.status().message();
    port_ = *port;
    thread_ = std::thread([this] { server_.Run(); });
  }

  Server server_;
  int port_ = 0;
  std::thread thread_;
};

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

void Send(int fd, const std::string& s) { ASSERT_EQ(send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size())); }

// Reads until `count` responses' bodies ("<path>") have arrived, or the peer closes or times out.
std::string ReadUntil(int fd, const std::string& needle) {
  std::string got;
  char buf[4096];
  while (got.find(needle) == std::string::npos) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

std::string Get(const std::string& path) { return "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n"; }

Response Echo(const Request& req) {
  Response r;
  r.body = "<" + req.path + ">";
  return r;
}

template <typename Pred>
bool Eventually(Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

TEST(Server, PipelinedRequestsAreAnsweredInOrder) {
  Limits l;
  l.workers = 4;
  Running s(l, Echo);
  int fd = Connect(s.port());
  Send(fd, Get("/1") + Get("/2") + Get("/3"));
  std::string got = ReadUntil(fd, "</3>");
  EXPECT_LT(got.find("</1>"), got.find("</2>"));
  EXPECT_LT(got.find("</2>"), got.find("</3>"));
  close(fd);
}

TEST(Server, ABusyConnectionTakesItsTurnBehindOthers) {
  // One worker. A's first request holds it; while it does, A has four more pipelined and B sends
  // one. A connection has one request in flight, so B's is queued first and served second.
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::vector<std::string> order;
  Limits l;
  l.workers = 1;
  Running s(l, [&](const Request& req) {
    std::unique_lock<std::mutex> lock(mu);
    order.push_back(req.path);
    if (req.path == "/a1") cv.wait(lock, [&] { return open; });
    return Echo(req);
  });
  int a = Connect(s.port()), b = Connect(s.port());
  Send(a, Get("/a1") + Get("/a2") + Get("/a3") + Get("/a4") + Get("/a5"));
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return order.size() == 1;
  }));
  Send(b, Get("/b1"));
  ASSERT_TRUE(Eventually([&] { return s.server().stats().queued_requests == 1; }));
  {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
  }
  cv.notify_all();
  EXPECT_THAT(ReadUntil(a, "</a5>"), HasSubstr("</a5>"));
  EXPECT_THAT(ReadUntil(b, "</b1>"), HasSubstr("</b1>"));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_THAT(order, ElementsAre("/a1", "/b1", "/a2", "/a3", "/a4", "/a5"));
  close(a);
  close(b);
}

TEST(Server, AStreamEndsWhenItsClientLeaves) {
  std::atomic<bool> ended{false};
  Limits l;
  Running s(l, [&](const Request&) {
    Response r;
    r.stream = [](std::string* out) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      *out = "data: tick\n\n";
      return true;
    };
    r.on_stream_end = [&] { ended = true; };
    return r;
  });
  int fd = Connect(s.port());
  Send(fd, Get("/stream"));
  EXPECT_THAT(ReadUntil(fd, "tick"), StartsWith("HTTP/1.1 200 OK\r\n"));
  close(fd);
  EXPECT_TRUE(Eventually([&] { return ended.load(); }));
}

TEST(Server, IdleConnectionsAreClosed) {
  Limits l;
  l.idle_timeout_ms = 100;
  Running s(l, Echo);
  int fd = Connect(s.port());
  Send(fd, Get("/1"));
  EXPECT_THAT(ReadUntil(fd, "</1>"), HasSubstr("</1>"));
  char c;
  EXPECT_EQ(recv(fd, &c, 1, 0), 0);  // closed by the server, well before the 5 s receive timeout
  close(fd);
}

TEST(Server, HeadOverTheLimitIsRefusedWith431) {
  Limits l;
  l.max_header_bytes = 1024;
  Running s(l, Echo);
  int fd = Connect(s.port());
  Send(fd, "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(2000, 'a') + "\r\n\r\n");
  EXPECT_THAT(ReadUntil(fd, "max_header_bytes"), StartsWith("HTTP/1.1 431 "));
  close(fd);
}

TEST(Server, ChunkedBodyOverTheLimitIsRefusedWith413) {
  Limits l;
  l.max_body_bytes = 1000;
  Running s(l, Echo);
  int fd = Connect(s.port());
  Send(fd, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n" + std::string(1024, 'a') + "\r\n");
  EXPECT_THAT(ReadUntil(fd, "max_request_bytes"), StartsWith("HTTP/1.1 413 "));
  close(fd);
}

TEST(Server, TooManyHeaderFieldsAreRefusedWith431) {
  Limits l;
  l.max_header_fields = 10;
  Running s(l, Echo);
  std::string head = "GET / HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 10; ++i) head += "X-" + std::to_string(i) + ": v\r\n";
  int fd = Connect(s.port());
  Send(fd, head + "\r\n");
  EXPECT_THAT(ReadUntil(fd, "max_header_fields"), StartsWith("HTTP/1.1 431 "));
  close(fd);
}

// A client still sending when it is refused must still read the refusal: closing a socket with
// unread input resets the connection, and a reset can overtake the answer already sent.
TEST(Server, AClientStillSendingReadsItsRefusal) {
  Limits l;
  l.max_header_bytes = 1024;
  Running s(l, Echo);
  int fd = Connect(s.port());
  int small = 4096;  // keep most of the head in the client, not in kernel buffers, when it is refused
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  std::string head = "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(900 * 1024, 'a') + "\r\n\r\n";
  size_t sent = 0;
  while (sent < head.size()) {
    ssize_t n = send(fd, head.data() + sent, head.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  EXPECT_EQ(sent, head.size()) << "the server stopped reading before the client finished";
  EXPECT_THAT(ReadUntil(fd, "max_header_bytes"), StartsWith("HTTP/1.1 431 "));
  close(fd);
}

TEST(Server, BodiesBeyondTheBufferedBudgetAreRefusedWith503) {
  // budget 1000: A's head reserves 800 while its body is awaited; B's 300 would pass the budget.
  Limits l;
  l.max_body_bytes = 1000;
  l.max_buffered_body_bytes = 1000;
  Running s(l, Echo);
  int a = Connect(s.port());
  Send(a, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 800\r\n\r\n");
  ASSERT_TRUE(Eventually([&] { return s.server().stats().buffered_body_bytes == 800; }));
  int b = Connect(s.port());
  Send(b, "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 300\r\n\r\n" + std::string(300, 'b'));
  EXPECT_THAT(ReadUntil(b, "max_buffered_request_bytes"), StartsWith("HTTP/1.1 503 "));
  close(b);
  // Once A's request is answered its reservation is given back.
  Send(a, std::string(800, 'a'));
  EXPECT_THAT(ReadUntil(a, "</a>"), HasSubstr("</a>"));
  EXPECT_TRUE(Eventually([&] { return s.server().stats().buffered_body_bytes == 0; }));
  int c = Connect(s.port());
  Send(c, "POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 300\r\n\r\n" + std::string(300, 'c'));
  EXPECT_THAT(ReadUntil(c, "</c>"), HasSubstr("</c>"));
  close(a);
  close(c);
}

// --- Per-request body limits, HEAD lengths, known-length streams ------------------------------------

// Bodies of /big may reach 5000 bytes; every other request keeps the server's 1000.
int64_t BigUploads(const Request& head) { return head.path == "/big" ? 5000 : 1000; }

Response SizeOfBody(const Request& req) {
  Response r;
  r.body = "<" + req.path + ":" + std::to_string(req.body.size()) + ">";
  return r;
}

std::string Post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A body of known length from 256 KiB up is read past the parser, straight into the request: it
// must arrive whole and in order whether its first bytes came with the head or not, and the
// request pipelined after it must still be read from where the body ends.
TEST(Server, ALargeKnownLengthBodyArrivesWholeAndThePipelinedRequestAfterItIsServed) {
  Limits l;
  l.max_buffered_body_bytes = 8 << 20;
  Running s(l, [](const Request& req) {
    Response r;
    r.body = "<" + req.path + ":" + std::to_string(req.body.size()) + ":" +
             std::to_string(std::hash<std::string>{}(req.body)) + ">";
    return r;
  }, [](const Request&) -> int64_t { return 4 << 20; });
  std::string body((1 << 20) + 3, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>((i * 31 + i / 977) & 0xff);
  const std::string want = "</big:" + std::to_string(body.size()) + ":" + std::to_string(std::hash<std::string>{}(body)) + ">";
  const std::string request = Post("/big", body);
  int fd = Connect(s.port());
  Send(fd, request.substr(0, request.find("\r\n\r\n") + 4 + 1000));  // the head and a little of the body
  Send(fd, request.substr(request.find("\r\n\r\n") + 4 + 1000) + Get("/next"));
  std::string got = ReadUntil(fd, "</next:0:");
  EXPECT_THAT(got, HasSubstr(want));
  EXPECT_THAT(got, HasSubstr("</next:0:"));
  EXPECT_LT(got.find(want), got.find("</next:0:"));
  close(fd);
}

TEST(Server, ALargeBodyCutShortIsNeverServed) {
  Limits l;
  std::atomic<int> served{0};
  Running s(l, [&](const Request&) {
    ++served;
    return Response{};
  }, [](const Request&) -> int64_t { return 4 << 20; });
  int fd = Connect(s.port());
  Send(fd, "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n" + std::string(600 * 1024, 'a'));
  shutdown(fd, SHUT_WR);
  EXPECT_EQ(ReadUntil(fd, "never"), "");  // reads until the server closes, answering nothing
  close(fd);
  EXPECT_EQ(served.load(), 0);
}

TEST(Server, TheBodyLimitIsChosenFromTheHead) {
  Limits l;
  l.max_body_bytes = 1000;
  Running s(l, SizeOfBody, BigUploads);
  int fd = Connect(s.port());
  Send(fd, Post("/big", std::string(3000, 'a')));
  EXPECT_THAT(ReadUntil(fd, "</big:3000>"), HasSubstr("</big:3000>"));
  close(fd);
  fd = Connect(s.port());
  Send(fd, Post("/small", std::string(3000, 'a')));
  std::string got = ReadUntil(fd, "max_request_bytes");
  EXPECT_THAT(got, StartsWith("HTTP/1.1 413 "));
  EXPECT_THAT(got, HasSubstr("limit of 1000 bytes"));
  close(fd);
}

TEST(Server, AContentLengthOverTheChosenLimitIsRefusedWith413NamingIt) {
  Limits l;
  l.max_body_bytes = 1000;
  Running s(l, SizeOfBody, BigUploads);
  int fd = Connect(s.port());
  Send(fd, Post("/big", std::string(6000, 'a')));
  std::string got = ReadUntil(fd, "for this request");
  EXPECT_THAT(got, StartsWith("HTTP/1.1 413 "));
  EXPECT_THAT(got, HasSubstr("limit of 5000 bytes"));
  close(fd);
}

TEST(Server, AChunkedBodyReservesAndIsHeldToTheChosenLimit) {
  Limits l;
  l.max_body_bytes = 1000;
  Running s(l, SizeOfBody, BigUploads);
  int fd = Connect(s.port());
  Send(fd, "POST /big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  ASSERT_TRUE(Eventually([&] { return s.server().stats().buffered_body_bytes == 5000; }));
  Send(fd, "bb8\r\n" + std::string(3000, 'a') + "\r\n0\r\n\r\n");  // 0xbb8 = 3000
  EXPECT_THAT(ReadUntil(fd, "</big:3000>"), HasSubstr("</big:3000>"));
  EXPECT_TRUE(Eventually([&] { return s.server().stats().buffered_body_bytes == 0; }));
  close(fd);
  fd = Connect(s.port());
  Send(fd, "POST /big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1388\r\n" + std::string(5000, 'a') +
               "\r\n1\r\na\r\n0\r\n\r\n");  // 5001 bytes
  std::string got = ReadUntil(fd, "for this request");
  EXPECT_THAT(got, StartsWith("HTTP/1.1 413 "));
  EXPECT_THAT(got, HasSubstr("limit of 5000 bytes"));
  close(fd);
}

TEST(Server, AHeadAnswerCarriesTheContentLengthAndNoBody) {
  Limits l;
  Running s(l, [](const Request& req) {
    Response r;
    if (req.method == "HEAD") {
      r.content_length = 123456;
    } else {
      r.body = "<" + req.path + ">";
    }
    return r;
  });
  int fd = Connect(s.port());
  // The GET after the HEAD is answered on the same connection only if the HEAD's answer ended at
  // its head: a client reading 123456 body bytes would never see "</next>".
  Send(fd, "HEAD /object HTTP/1.1\r\nHost: x\r\n\r\n" + Get("/next"));
  std::string got = ReadUntil(fd, "</next>");
  EXPECT_THAT(got, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(got, HasSubstr("Content-Length: 123456\r\n"));
  size_t second = got.find("HTTP/1.1 200 OK\r\n", 1);
  ASSERT_NE(second, std::string::npos) << got;
  EXPECT_EQ(got.find("\r\n\r\n") + 4, second) << "bytes between the HEAD answer and the next: " << got;
  EXPECT_THAT(got.substr(second), HasSubstr("</next>"));
  close(fd);
}

TEST(Server, AKnownLengthStreamIsAPlainBodyAndKeepsTheConnection) {
  Limits l;
  Running s(l, [](const Request& req) {
    if (req.path != "/object") return Echo(req);
    Response r;
    r.content_length = 6;
    auto pieces = std::make_shared<std::vector<std::string>>(std::vector<std::string>{"abc", "", "def"});
    r.stream = [pieces](std::string* out) {
      *out = pieces->front();
      pieces->erase(pieces->begin());
      return !pieces->empty();
    };
    return r;
  });
  int fd = Connect(s.port());
  Send(fd, Get("/object") + Get("/next"));
  std::string got = ReadUntil(fd, "</next>");
  EXPECT_THAT(got, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(got, HasSubstr("Content-Length: 6\r\nConnection: keep-alive\r\n\r\nabcdefHTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(got, Not(HasSubstr("Transfer-Encoding")));
  EXPECT_THAT(got, HasSubstr("</next>"));
  close(fd);
}

TEST(Server, AStreamShortOfItsLengthClosesTheConnection) {
  Limits l;
  Running s(l, [](const Request&) {
    Response r;
    r.content_length = 10;
    r.stream = [](std::string* out) { *out = "abc"; return false; };
    return r;
  });
  int fd = Connect(s.port());
  Send(fd, Get("/object"));
  std::string got = ReadUntil(fd, "never");  // reads until the server closes
  EXPECT_THAT(got, HasSubstr("Content-Length: 10\r\n"));
  EXPECT_EQ(got.substr(got.find("\r\n\r\n") + 4), "abc");
  close(fd);
}

TEST(Server, AStreamBeyondItsLengthIsCutAtItAndClosed) {
  Limits l;
  Running s(l, [](const Request&) {
    Response r;
    r.content_length = 4;
    r.stream = [](std::string* out) { *out = "abcdefgh"; return true; };
    return r;
  });
  int fd = Connect(s.port());
  Send(fd, Get("/object") + Get("/next"));
  std::string got = ReadUntil(fd, "never");
  EXPECT_EQ(got.substr(got.find("\r\n\r\n") + 4), "abcd");
  close(fd);
}

// --- Date -----------------------------------------------------------------------------------------

// The Date values of the responses in `got`; each must be IMF-fixdate.
std::vector<int64_t> DatesIn(const std::string& got) {
  std::vector<int64_t> out;
  for (size_t at = got.find("\r\nDate: "); at != std::string::npos; at = got.find("\r\nDate: ", at + 1)) {
    std::string value = got.substr(at + 8, got.find("\r\n", at + 8) - (at + 8));
    std::tm tm{};
    const char* end = strptime(value.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    EXPECT_TRUE(end != nullptr && *end == '\0' && value.size() == 29) << value;
    out.push_back(static_cast<int64_t>(timegm(&tm)));
  }
  return out;
}

void ExpectOneDateNearNow(const std::string& got) {
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::vector<int64_t> dates = DatesIn(got);
  ASSERT_EQ(dates.size(), 1u) << got;
  EXPECT_LE(std::llabs(dates[0] - now), 5) << got;
}

TEST(Server, EveryResponseCarriesOneDateNearNow) {
  Limits l;
  l.max_header_bytes = 1024;
  l.max_connections = 2;
  Running s(l, [](const Request& req) {
    Response r = Echo(req);
    if (req.path == "/old") r.headers = {{"Date", "Thu, 01 Jan 1970 00:00:00 GMT"}};  // the server's wins
    if (req.path == "/fail") r.status = 500;
    if (req.path == "/stream") r.stream = [](std::string* out) { *out = "<stream>"; return false; };
    return r;
  });
  for (const char* path : {"/ok", "/old", "/fail", "/stream"}) {
    SCOPED_TRACE(path);
    int fd = Connect(s.port());
    Send(fd, Get(path));
    std::string got = ReadUntil(fd, std::string("<") + (path == std::string("/stream") ? "stream" : path));
    ExpectOneDateNearNow(got.substr(0, got.find("\r\n\r\n") + 2));
    close(fd);
    ASSERT_TRUE(Eventually([&] { return s.server().stats().open_connections == 0; }));  // the cap is 2
  }
  {  // the listener's own refusals: an oversized head, a malformed request, the connection cap
    int fd = Connect(s.port());
    Send(fd, "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(2000, 'a') + "\r\n\r\n");
    std::string got = ReadUntil(fd, "max_header_bytes");
    EXPECT_THAT(got, StartsWith("HTTP/1.1 431 "));
    ExpectOneDateNearNow(got);
    close(fd);
    ASSERT_TRUE(Eventually([&] { return s.server().stats().open_connections == 0; }));  // the cap is 2
    fd = Connect(s.port());
    Send(fd, "NOT HTTP\r\n\r\n");
    got = ReadUntil(fd, "not valid HTTP");
    EXPECT_THAT(got, StartsWith("HTTP/1.1 400 "));
    ExpectOneDateNearNow(got);
    close(fd);
    ASSERT_TRUE(Eventually([&] { return s.server().stats().open_connections == 0; }));  // the cap is 2
  }
  int a = Connect(s.port()), b = Connect(s.port());
  ASSERT_TRUE(Eventually([&] { return s.server().stats().open_connections == 2; }));
  int c = Connect(s.port());
  std::string got = ReadUntil(c, "max_connections");
  EXPECT_THAT(got, StartsWith("HTTP/1.1 503 "));
  ExpectOneDateNearNow(got);
  close(a);
  close(b);
  close(c);
}

// --- Framing (RFC 9112): what two hops could read differently is refused before any handler ---------

TEST(Server, AmbiguousFramingIsRefusedAndNeverServed) {
  Limits l;
  std::atomic<int> served{0};
  Running s(l, [&](const Request& req) {
    ++served;
    return Echo(req);
  });
  const std::pair<std::string, std::string> cases[] = {
      {"POST /te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\nContent-Length: 3\r\n\r\nabc", "HTTP/1.1 400 "},
      {"POST /te HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc", "HTTP/1.1 400 "},
      {"POST /te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", "HTTP/1.1 501 "},
      {"POST /te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n", "HTTP/1.1 501 "},
      {"POST /te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
       "HTTP/1.1 400 "},
      {"GET /host HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", "HTTP/1.1 400 "},
      {"POST /cl HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", "HTTP/1.1 400 "},
      {"POST /cl HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc", "HTTP/1.1 400 "},
      {"GET /fold HTTP/1.1\r\nHost: x\r\nX-Long: a\r\n b\r\n\r\n", "HTTP/1.1 400 "},
      {"GET /fold HTTP/1.1\r\nHost: x\r\nX-Long: a\r\n\tb\r\n\r\n", "HTTP/1.1 400 "},
  };
  for (const auto& [request, status] : cases) {
    SCOPED_TRACE(request);
    int fd = Connect(s.port());
    Send(fd, request);
    EXPECT_THAT(ReadUntil(fd, "never"), StartsWith(status));  // answered, then closed
    close(fd);
  }
  EXPECT_EQ(served.load(), 0);
  // The same requests framed soundly are served.
  int fd = Connect(s.port());
  Send(fd, "POST /te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" +
               Get("/fold"));
  EXPECT_THAT(ReadUntil(fd, "</fold>"), HasSubstr("</fold>"));
  close(fd);
}

// --- Connections per address ------------------------------------------------------------------------

int ConnectFrom(const char* source, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

TEST(Server, OneAddressHoldsAtMostItsConnectionsAndOthersAreStillServed) {
  Limits l;
  l.max_connections_per_address = 2;
  Running s(l, Echo);
  int a = ConnectFrom("127.0.0.1", s.port()), b = ConnectFrom("127.0.0.1", s.port());
  ASSERT_TRUE(Eventually([&] { return s.server().stats().open_connections == 2; }));
  int c = ConnectFrom("127.0.0.1", s.port());
  std::string got = ReadUntil(c, "never");
  EXPECT_THAT(got, StartsWith("HTTP/1.1 503 "));
  EXPECT_THAT(got, HasSubstr("from 127.0.0.1 (server.max_connections_per_address = 2)"));
  close(c);
  // Another address (loopback too) has its own allowance.
  int d = ConnectFrom("127.0.0.2", s.port());
  Send(d, Get("/other"));
  EXPECT_THAT(ReadUntil(d, "</other>"), HasSubstr("</other>"));
  // A closed connection gives its place back.
  close(a);
  ASSERT_TRUE(Eventually([&] { return s.server().stats().open_connections == 2; }));
  int e = ConnectFrom("127.0.0.1", s.port());
  Send(e, Get("/again"));
  EXPECT_THAT(ReadUntil(e, "</again>"), HasSubstr("</again>"));
  EXPECT_EQ(s.server().stats().refused_connections, 1);
  close(b);
  close(d);
  close(e);
}

// --- The body plan: withheld bodies and the budget's shares -----------------------------------------

// Heads with "X-Caller: <key>" are proven callers; "X-Forged" ones fail; the rest prove nobody.
BodyPlan PlanFromHead(const Request& head) {
  BodyPlan plan;
  plan.limit = 1000;
  if (const std::string* key = head.Header("X-Caller")) plan.caller = *key;
  plan.withhold_body = head.Header("X-Forged") != nullptr;
  return plan;
}

TEST(Server, AWithheldBodyIsNeitherReadNorReservedAndTheConnectionCloses) {
  Limits l;
  Running s(l, [](const Request& req) {
    Response r;
    r.status = req.body_withheld ? 403 : 200;
    r.body = "<" + req.path + ":" + std::to_string(req.body.size()) + (req.body_withheld ? ":withheld>" : ">");
    return r;
  }, PlanFromHead);
  int fd = Connect(s.port());
  // Only the head is sent: the answer comes at once, with no byte of the body awaited.
  Send(fd, "PUT /forged HTTP/1.1\r\nHost: x\r\nX-Forged: 1\r\nContent-Length: 900\r\n\r\n");
  std::string got = ReadUntil(fd, "never");
  EXPECT_THAT(got, StartsWith("HTTP/1.1 403 "));
  EXPECT_THAT(got, HasSubstr("</forged:0:withheld>"));
  EXPECT_THAT(got, HasSubstr("Connection: close"));
  EXPECT_EQ(s.server().stats().buffered_body_bytes, 0);
  close(fd);
}

TEST(Server, UnprovenHeadsHoldOnlyTheirAddresssShareOfTheBudget) {
  // budget 1000; one address may hold 500 for heads that prove nobody, all of them together 700.
  Limits l;
  l.max_buffered_body_bytes = 1000;
  l.max_buffered_body_bytes_per_address = 500;
  l.max_buffered_unproven_body_bytes = 700;
  Running s(l, SizeOfBody, PlanFromHead);
  int a = ConnectFrom("127.0.0.1", s.port());
  Send(a, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 400\r\n\r\n");
  ASSERT_TRUE(Eventually([&] { return s.server().stats().buffered_body_bytes == 400; }));
  int b = ConnectFrom("127.0.0.1", s.port());
  Send(b, "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n");
  std::string got = ReadUntil(b, "never");
  EXPECT_THAT(got, StartsWith("HTTP/1.1 503 "));
  EXPECT_THAT(got, HasSubstr("from 127.0.0.1 whose head proves no caller already have 400 bytes"));
  close(b);
  // Another address may still read 200, but not 400: the unproven heads together hold at most 700.
  int c = ConnectFrom("127.0.0.2", s.port());
  Send(c, "POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 400\r\n\r\n");
  EXPECT_THAT(ReadUntil(c, "never"), HasSubstr("whose head proves no caller already have 400 bytes"));
  close(c);
  int d = ConnectFrom("127.0.0.2", s.port());
  Send(d, Post("/d", std::string(200, 'd')));
  EXPECT_THAT(ReadUntil(d, "</d:200>"), HasSubstr("</d:200>"));
  close(d);
  // A proven caller is not in the unproven share: it reads 500 beside A's 400.
  int e = ConnectFrom("127.0.0.1", s.port());
  Send(e, "POST /e HTTP/1.1\r\nHost: x\r\nX-Caller: AKIA1\r\nContent-Length: 500\r\n\r\n" + std::string(500, 'e'));
  EXPECT_THAT(ReadUntil(e, "</e:500>"), HasSubstr("</e:500>"));
  close(e);
  Send(a, std::string(400, 'a'));
  EXPECT_THAT(ReadUntil(a, "</a:400>"), HasSubstr("</a:400>"));
  close(a);
  EXPECT_TRUE(Eventually([&] { return s.server().stats().buffered_body_bytes == 0; }));
}

TEST(Server, OneProvenCallerHoldsAtMostItsShareOfTheBudget) {
  Limits l;
  l.max_buffered_body_bytes = 1000;
  l.max_buffered_body_bytes_per_caller = 600;
  Running s(l, SizeOfBody, PlanFromHead);
  int a = Connect(s.port());
  Send(a, "POST /a HTTP/1.1\r\nHost: x\r\nX-Caller: AKIA1\r\nContent-Length: 400\r\n\r\n");
  ASSERT_TRUE(Eventually([&] { return s.server().stats().buffered_body_bytes == 400; }));
  int b = Connect(s.port());
  Send(b, "POST /b HTTP/1.1\r\nHost: x\r\nX-Caller: AKIA1\r\nContent-Length: 300\r\n\r\n");
  std::string got = ReadUntil(b, "never");
  EXPECT_THAT(got, StartsWith("HTTP/1.1 503 "));
  EXPECT_THAT(got, HasSubstr("Access key AKIA1 already has 400 bytes"));
  close(b);
  int c = Connect(s.port());
  Send(c, "POST /c HTTP/1.1\r\nHost: x\r\nX-Caller: AKIA2\r\nContent-Length: 300\r\n\r\n" + std::string(300, 'c'));
  EXPECT_THAT(ReadUntil(c, "</c:300>"), HasSubstr("</c:300>"));
  close(c);
  close(a);
  EXPECT_TRUE(Eventually([&] { return s.server().stats().buffered_body_bytes == 0; }));
}

}  // namespace
}  // namespace ty::http
