// The listener's TLS: the self-signed certificate kept on disk, the files UseTls accepts, and
// requests over TLS marked as such (aws:SecureTransport), over real sockets on 127.0.0.1 with an
// OpenSSL client.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "http/certificate.h"
#include "http/server.h"

namespace ty::http {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kNow = 1'767'225'600;  // 2026-01-01T00:00:00Z

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/http-tls-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Response SecureEcho(const Request& req) {
  Response r;
  r.body = req.secure_transport ? "<secure>" : "<plain>";
  return r;
}

Response Refusal(int status, const std::string& message, const Request*) {
  Response r;
  r.status = status;
  r.body = message;
  return r;
}

class Running {
 public:
  explicit Running(const TlsFiles* tls, Handler handler = SecureEcho) : server_(Limits{}, std::move(handler), Refusal) {
    if (tls) {
      Status st = server_.UseTls(*tls);
      EXPECT_TRUE(st.ok()) << st.message();
    }
    auto port = server_.Bind("127.0.0.1", 0);
    EXPECT_TRUE(port.ok()) << port.status().message();
    port_ = *port;
    thread_ = std::thread([this] { server_.Run(); });
  }
  ~Running() {
    server_.Stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
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

// One request (a GET of /x unless given) over TLS that trusts only `ca_file`; the whole answer, or
// "handshake failed".
std::string TlsGet(int port, const std::string& ca_file, int max_version = 0,
                   const std::string& req = "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (max_version) {
    SSL_CTX_set_min_proto_version(ctx, 0);
    SSL_CTX_set_max_proto_version(ctx, max_version);
    SSL_CTX_set_security_level(ctx, 0);
  }
  SSL* ssl = SSL_new(ctx);
  int fd = Connect(port);
  SSL_set_fd(ssl, fd);
  SSL_set1_host(ssl, "127.0.0.1");
  std::string got;
  if (SSL_connect(ssl) != 1) {
    got = "handshake failed";
  } else {
    SSL_write(ssl, req.data(), static_cast<int>(req.size()));
    char buf[4096];
    int n;
    while ((n = SSL_read(ssl, buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  }
  ERR_clear_error();
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  close(fd);
  return got;
}

TEST(SelfSignedCertificate, IsMadeOnceWithAPrivateKeyAndReusedAfter) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/tls";
  auto files = EnsureSelfSignedCertificate(dir, {"localhost", "127.0.0.1", "::1", "build-host"}, kNow);
  ASSERT_TRUE(files.ok()) << files.status().message();
  struct stat st{};
  ASSERT_EQ(stat(files->key_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto first = CertificateFingerprint(files->certificate_file);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->size(), 32u * 3 - 1);  // "AB:CD:..." for 32 bytes
  auto again = EnsureSelfSignedCertificate(dir, {"localhost"}, kNow + 86400);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*CertificateFingerprint(again->certificate_file), *first);
}

TEST(SelfSignedCertificate, NamesItsSubjectAlternativeNamesOnly) {
  TempDir tmp;
  auto files = EnsureSelfSignedCertificate(tmp.path(), {"localhost", "127.0.0.1", "::1", "build-host"}, kNow);
  ASSERT_TRUE(files.ok());
  auto missing =
      NamesNotCovered(files->certificate_file, {"localhost", "127.0.0.1", "::1", "build-host", "other-host", "10.0.0.1"});
  ASSERT_TRUE(missing.ok());
  EXPECT_THAT(*missing, ElementsAre("other-host", "10.0.0.1"));
}

TEST(Tls, RequestsOverTlsAreMarkedSecureAndPlainOnesAreNot) {
  TempDir tmp;
  auto files = EnsureSelfSignedCertificate(tmp.path(), {"localhost", "127.0.0.1"}, kNow);
  ASSERT_TRUE(files.ok());
  {
    Running s(&*files);
    EXPECT_THAT(TlsGet(s.port(), files->certificate_file), AllOf(StartsWith("HTTP/1.1 200 "), HasSubstr("<secure>")));
  }
  Running plain(nullptr);
  int fd = Connect(plain.port());
  std::string req = "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, static_cast<size_t>(n));
  close(fd);
  EXPECT_THAT(got, HasSubstr("<plain>"));
}

// A body of known length from 256 KiB up is read past the parser straight into the request; over
// TLS it must still arrive whole, decrypted and in order.
TEST(Tls, ALargeBodyArrivesWhole) {
  TempDir tmp;
  auto files = EnsureSelfSignedCertificate(tmp.path(), {"localhost", "127.0.0.1"}, kNow);
  ASSERT_TRUE(files.ok());
  Running s(&*files, [](const Request& req) {
    Response r;
    r.body = "<" + std::to_string(req.body.size()) + ":" + std::to_string(std::hash<std::string>{}(req.body)) + ">";
    return r;
  });
  std::string body((1 << 20) + 7, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>((i * 17 + i / 1009) & 0xff);
  std::string req = "POST /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body;
  EXPECT_THAT(TlsGet(s.port(), files->certificate_file, 0, req),
              HasSubstr("<" + std::to_string(body.size()) + ":" + std::to_string(std::hash<std::string>{}(body)) + ">"));
}

TEST(Tls, VersionsBelow12AreRefused) {
  TempDir tmp;
  auto files = EnsureSelfSignedCertificate(tmp.path(), {"127.0.0.1"}, kNow);
  ASSERT_TRUE(files.ok());
  Running s(&*files);
  EXPECT_EQ(TlsGet(s.port(), files->certificate_file, TLS1_1_VERSION), "handshake failed");
  EXPECT_THAT(TlsGet(s.port(), files->certificate_file, TLS1_2_VERSION), HasSubstr("<secure>"));
}

TEST(Tls, AKeyOfAnotherCertificateIsRefusedByName) {
  TempDir a, b;
  auto one = EnsureSelfSignedCertificate(a.path(), {"localhost"}, kNow);
  auto two = EnsureSelfSignedCertificate(b.path(), {"localhost"}, kNow);
  ASSERT_TRUE(one.ok() && two.ok());
  Server server(Limits{}, SecureEcho, Refusal);
  Status st = server.UseTls({one->certificate_file, two->key_file});
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("does not belong"));
  st = server.UseTls({one->certificate_file, a.path() + "/nothing.pem"});
  EXPECT_THAT(st.message(), HasSubstr("does not exist"));
  EXPECT_TRUE(server.UseTls(*one).ok());
}

}  // namespace
}  // namespace ty::http
