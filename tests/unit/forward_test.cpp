// The peer signature between regions (api/forward.h): what it covers, what it refuses, and that the
// head alone proves a forwarded request before its body is read.
#include "api/forward.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "core/strings.h"

namespace ty::api {
namespace {

using ::testing::HasSubstr;

constexpr char kSecret[] = "f3c1b2a4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f80";
constexpr EpochMs kNow = 1'800'000'000'000;
constexpr EpochMs kWindow = 300'000;

std::string RootCaller() {
  PeerCaller c;
  c.type = "root";
  c.access_key_id = "AKIAREGIONSTEST00001";
  c.entry_region = "us-east-1";
  return EncodePeerCaller(c);
}

// A DescribeTrainingJob as region us-east-1 forwards it to eu-west-1.
http::Request Forwarded(std::string body = R"({"TrainingJobName":"j"})") {
  http::Fields headers = {{"Host", "127.0.0.1:8101"},
                          {"Content-Type", "application/x-amz-json-1.1"},
                          {"X-Amz-Target", "SageMaker.DescribeTrainingJob"},
                          {"X-Amz-Date", "20270115T080000Z"},
                          {"User-Agent", "Boto3/1.40"}};
  SignPeerRequest(kSecret, "POST", "/", "", body, "127.0.0.1:9999", RootCaller(), kNow, &headers);
  http::Request req;
  req.method = "POST";
  req.target = req.path = "/";
  req.headers = std::move(headers);
  req.body = std::move(body);
  return req;
}

void SetHeader(http::Request* req, std::string_view name, std::string value) {
  for (auto& [k, v] : req->headers)
    if (EqualsIgnoreCase(k, name)) {
      v = std::move(value);
      return;
    }
  req->headers.emplace_back(std::string(name), std::move(value));
}

TEST(PeerSignature, AForwardedRequestVerifiesOnceAndItsHeadAlone) {
  ReplayGuard replays;
  http::Request req = Forwarded();
  EXPECT_EQ(*req.Header(kPeerSignedHeadersHeader), "content-type;host;x-amz-date;x-amz-target");
  http::Request head = req;
  head.body.clear();
  EXPECT_TRUE(VerifyPeerHead(head, kSecret, kNow, kWindow).ok());
  auto caller = VerifyPeerRequest(req, kSecret, kNow, kWindow, replays);
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  EXPECT_EQ(caller->access_key_id, "AKIAREGIONSTEST00001");
  EXPECT_EQ(VerifyPeerRequest(req, kSecret, kNow, kWindow, replays).status().code(), Code::kBadSignature);  // replay
}

TEST(PeerSignature, EveryHeaderThatSelectsTheOperationOrResourceIsCovered) {
  const std::pair<const char*, const char*> changes[] = {
      {"X-Amz-Target", "SageMaker.StopTrainingJob"},
      {"Host", "127.0.0.1:8102"},
      {"Content-Type", "application/json"},
      {"X-Amz-Date", "20270115T080001Z"},
  };
  for (const auto& [name, value] : changes) {
    SCOPED_TRACE(name);
    ReplayGuard replays;
    http::Request req = Forwarded();
    SetHeader(&req, name, value);
    const Status st = VerifyPeerRequest(req, kSecret, kNow, kWindow, replays).status();
    EXPECT_EQ(st.code(), Code::kBadSignature);
    EXPECT_THAT(st.message(), HasSubstr("does not match"));
    EXPECT_FALSE(VerifyPeerHead(req, kSecret, kNow, kWindow).ok());
  }
  // An x-amz-* header (or Range, a condition) added on the way is named, signed or not.
  for (const char* name : {"x-amz-copy-source", "Range", "If-None-Match"}) {
    SCOPED_TRACE(name);
    ReplayGuard replays;
    http::Request req = Forwarded();
    SetHeader(&req, name, "x");
    const Status st = VerifyPeerRequest(req, kSecret, kNow, kWindow, replays).status();
    EXPECT_EQ(st.code(), Code::kBadSignature);
    EXPECT_THAT(st.message(), HasSubstr("does not cover: " + ToLower(name)));
  }
  // Headers that select nothing may change (a proxy's User-Agent, Via, X-Forwarded-For).
  ReplayGuard replays;
  http::Request req = Forwarded();
  SetHeader(&req, "User-Agent", "proxy/1");
  SetHeader(&req, "X-Forwarded-For", "10.0.0.1");
  EXPECT_TRUE(VerifyPeerRequest(req, kSecret, kNow, kWindow, replays).ok());
}

TEST(PeerSignature, TheBodyMustBeTheOneSigned) {
  ReplayGuard replays;
  http::Request req = Forwarded();
  req.body = R"({"TrainingJobName":"k"})";
  const Status st = VerifyPeerRequest(req, kSecret, kNow, kWindow, replays).status();
  EXPECT_EQ(st.code(), Code::kBadSignature);
  EXPECT_THAT(st.message(), HasSubstr("X-Trainyard-Peer-Content-Sha256"));
  // And a new hash for it needs a new signature.
  SetHeader(&req, kPeerContentHashHeader, Sha256Hex(req.body));
  EXPECT_EQ(VerifyPeerRequest(req, kSecret, kNow, kWindow, replays).status().code(), Code::kBadSignature);
}

TEST(PeerSignature, AnOlderPeersSignatureIsRefusedNamingTheUpgrade) {
  ReplayGuard replays;
  http::Request req = Forwarded();
  std::erase_if(req.headers, [](const auto& h) {
    return EqualsIgnoreCase(h.first, kPeerSignedHeadersHeader) || EqualsIgnoreCase(h.first, kPeerContentHashHeader);
  });
  const Status st = VerifyPeerRequest(req, kSecret, kNow, kWindow, replays).status();
  EXPECT_EQ(st.code(), Code::kUnauthenticated);
  EXPECT_THAT(st.message(), HasSubstr("older trainyard"));
}

TEST(PeerSignature, ARequestWithoutHostIsSentWithTheTargetsAuthoritySigned) {
  http::Fields headers;
  SignPeerRequest(kSecret, "GET", "/trainyard/v1/peer/summary", "queue=q", "", UrlAuthority("http://10.1.2.3:8101/"),
                  RootCaller(), kNow, &headers);
  http::Request req;
  req.method = "GET";
  req.path = "/trainyard/v1/peer/summary";
  req.query = "queue=q";
  req.headers = headers;
  ASSERT_NE(req.Header("Host"), nullptr);
  EXPECT_EQ(*req.Header("Host"), "10.1.2.3:8101");
  ReplayGuard replays;
  EXPECT_TRUE(VerifyPeerRequest(req, kSecret, kNow, kWindow, replays).ok());
}

}  // namespace
}  // namespace ty::api
