// SigV4: the AWS test-suite vector, requests signed by real botocore (1.43), sign/verify round
// trips, and one test per verification failure class.
#include "api/sigv4.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "core/strings.h"

namespace ty::api {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kExampleKey[] = "AKIDEXAMPLE";
constexpr char kExampleSecret[] = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
constexpr char kTyKey[] = "AKIATRAINYARD0000001";
constexpr char kTySecret[] = "trainyardSecretKey/abc+def0123456789XYZ";
const std::vector<std::string> kServices = {"batch", "sagemaker", "logs"};

EpochMs At(const char* amz_date) {
  EpochMs ms = 0;
  EXPECT_TRUE(ParseAmzDate(amz_date, &ms)) << amz_date;
  return ms;
}

SecretLookup Lookup() {
  return [](std::string_view key) -> std::optional<std::string> {
    if (key == kExampleKey) return std::string(kExampleSecret);
    if (key == kTyKey) return std::string(kTySecret);
    return std::nullopt;
  };
}

const std::string* Header(const HttpRequestView& req, std::string_view lower_name) {
  for (const auto& [k, v] : req.headers)
    if (ToLower(k) == lower_name) return &v;
  return nullptr;
}

size_t HeaderCount(const HttpRequestView& req, std::string_view lower_name) {
  return std::count_if(req.headers.begin(), req.headers.end(),
                       [&](const auto& h) { return ToLower(h.first) == lower_name; });
}

void SetHeader(HttpRequestView& req, std::string_view lower_name, std::string value) {
  for (auto& [k, v] : req.headers)
    if (ToLower(k) == lower_name) v = value;
}

// --- The AWS SigV4 test suite: get-vanilla --------------------------------------------------------

constexpr char kVanillaAuth[] =
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
    "SignedHeaders=host;x-amz-date, "
    "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31";

TEST(SigV4, SignReproducesAwsTestSuiteGetVanilla) {
  HttpRequestView req{"GET", "/", "", {{"Host", "example.amazonaws.com"}}, ""};
  SignSigV4(req, {kExampleKey, kExampleSecret}, "us-east-1", "service", At("20150830T123600Z"));
  ASSERT_NE(Header(req, "x-amz-date"), nullptr);
  EXPECT_EQ(*Header(req, "x-amz-date"), "20150830T123600Z");
  ASSERT_NE(Header(req, "authorization"), nullptr);
  EXPECT_EQ(*Header(req, "authorization"), kVanillaAuth);
  EXPECT_EQ(Header(req, "x-amz-content-sha256"), nullptr);
}

TEST(SigV4, VerifiesAwsTestSuiteGetVanilla) {
  HttpRequestView req{"GET", "/", "",
                      {{"Host", "example.amazonaws.com"},
                       {"X-Amz-Date", "20150830T123600Z"},
                       {"Authorization", kVanillaAuth}},
                      ""};
  auto caller = VerifySigV4(req, Lookup(), "us-east-1", {"service"}, At("20150830T123600Z"));
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  EXPECT_EQ(caller->access_key_id, kExampleKey);
  EXPECT_EQ(caller->service, "service");
  EXPECT_EQ(caller->region, "us-east-1");
}

TEST(SigV4, EmptyPathSignsAsSlash) {
  HttpRequestView req{"GET", "", "", {{"Host", "example.amazonaws.com"}}, ""};
  SignSigV4(req, {kExampleKey, kExampleSecret}, "us-east-1", "service", At("20150830T123600Z"));
  EXPECT_EQ(*Header(req, "authorization"), kVanillaAuth);
}

// --- Requests signed by botocore 1.43 (SigV4Auth.add_auth with a patched clock) -------------------
// Headers are as they arrive on the wire: botocore signs the Host it derives from the URL, and
// urllib3 adds headers that are not signed.

constexpr char kBatchBody[] =
    R"({"jobQueue": "default", "jobName": "train-1", "serviceJobType": "SAGEMAKER_TRAINING", )"
    R"("serviceRequestPayload": "{\"TrainingJobName\":\"t1\"}"})";
constexpr char kBatchAuth[] =
    "AWS4-HMAC-SHA256 Credential=AKIATRAINYARD0000001/20260102/us-east-1/batch/aws4_request, "
    "SignedHeaders=content-type;host;x-amz-date, "
    "Signature=f961533102e27d6ba1687253f575f17ea858fc7996cad71c6e4c8a1fd199338e";

HttpRequestView BotocoreBatchRequest() {
  std::string_view body = kBatchBody;
  return HttpRequestView{"POST", "/v1/submitservicejob", "",
                         {{"Host", "127.0.0.1:8080"},
                          {"Accept-Encoding", "identity"},
                          {"Content-Type", "application/json"},
                          {"User-Agent", "aws-cli/2.15 botocore/1.43"},
                          {"X-Amz-Date", "20260102T030405Z"},
                          {"Authorization", kBatchAuth},
                          {"Content-Length", std::to_string(body.size())}},
                         body};
}

TEST(SigV4, VerifiesBotocoreBatchRequest) {
  auto caller = VerifySigV4(BotocoreBatchRequest(), Lookup(), "us-east-1", kServices,
                            At("20260102T030405Z") + 90'000);
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  EXPECT_EQ(caller->access_key_id, kTyKey);
  EXPECT_EQ(caller->service, "batch");
  EXPECT_EQ(caller->region, "us-east-1");
}

TEST(SigV4, SignMatchesBotocoreBatchRequest) {
  HttpRequestView req{"POST", "/v1/submitservicejob", "",
                      {{"host", "127.0.0.1:8080"},
                       {"content-type", "application/json"},
                       {"user-agent", "aws-cli/2.15 botocore/1.43"}},
                      kBatchBody};
  SignSigV4(req, {kTyKey, kTySecret}, "us-east-1", "batch", At("20260102T030405Z"));
  EXPECT_EQ(*Header(req, "authorization"), kBatchAuth);
}

constexpr char kSageMakerBody[] = R"({"MaxResults": 10, "StatusEquals": "InProgress"})";
constexpr char kSageMakerAuth[] =
    "AWS4-HMAC-SHA256 Credential=AKIATRAINYARD0000001/20260102/us-east-1/sagemaker/aws4_request, "
    "SignedHeaders=content-type;host;x-amz-date;x-amz-target, "
    "Signature=835e24855d151bdd9a3c9d8de4458874a1d5c41581b04a74007d2dfacf42b08e";

HttpRequestView BotocoreSageMakerRequest() {
  return HttpRequestView{"POST", "/", "",
                         {{"Host", "127.0.0.1:8080"},
                          {"Content-Type", "application/x-amz-json-1.1"},
                          {"X-Amz-Target", "SageMaker.ListTrainingJobs"},
                          {"User-Agent", "Boto3/1.40"},
                          {"X-Amz-Date", "20260102T030405Z"},
                          {"Authorization", kSageMakerAuth},
                          {"Content-Length", "48"}},
                         kSageMakerBody};
}

TEST(SigV4, VerifiesBotocoreSageMakerJson11Request) {
  auto caller = VerifySigV4(BotocoreSageMakerRequest(), Lookup(), "us-east-1", {"sagemaker"},
                            At("20260102T030405Z") - 60'000);
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  EXPECT_EQ(caller->service, "sagemaker");
}

TEST(SigV4, SignMatchesBotocoreSageMakerRequest) {
  HttpRequestView req{"POST", "/", "",
                      {{"Host", "127.0.0.1:8080"},
                       {"Content-Type", "application/x-amz-json-1.1"},
                       {"X-Amz-Target", "SageMaker.ListTrainingJobs"}},
                      kSageMakerBody};
  SignSigV4(req, {kTyKey, kTySecret}, "us-east-1", "sagemaker", At("20260102T030405Z"));
  EXPECT_EQ(*Header(req, "authorization"), kSageMakerAuth);
}

// Botocore vector for the encoding rules: an already-encoded path with dot segments (encoded again),
// an unsorted query with a repeated key and a value-less key, whitespace runs in a header value and
// a repeated header.
constexpr char kEncodingAuth[] =
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/batch/aws4_request, "
    "SignedHeaders=host;x-amz-date;x-amz-meta-note;x-multi, "
    "Signature=70ede67795da4dd51c545cac55c88f4c551606355927ec580e47ce4e7f5689c7";

HttpRequestView EncodingRequest() {
  return HttpRequestView{"GET", "/v1/a%20b/./c~d/../e%2Ff", "b=2&a=%2F&a=1&c=&d=x%20y~",
                         {{"Host", "127.0.0.1:8080"},
                          {"X-Amz-Meta-Note", "  a   b\tc  "},
                          {"X-Multi", "one"},
                          {"X-Multi", " two "}},
                         ""};
}

TEST(SigV4, EncodingRulesMatchBotocore) {
  HttpRequestView req = EncodingRequest();
  SignSigV4(req, {kExampleKey, kExampleSecret}, "us-east-1", "batch", At("20260102T030405Z"));
  EXPECT_EQ(*Header(req, "authorization"), kEncodingAuth);
  auto caller = VerifySigV4(req, Lookup(), "us-east-1", kServices, At("20260102T030405Z"));
  EXPECT_TRUE(caller.ok()) << caller.status().message();
}

TEST(SigV4, QueryEncodingIsCanonicalisedBeforeSigning) {
  // Lower-case hex escapes and '~' escaped needlessly canonicalise to the same query.
  HttpRequestView req = EncodingRequest();
  req.query = "d=x%20y%7e&a=1&c&b=2&a=%2f";
  SignSigV4(req, {kExampleKey, kExampleSecret}, "us-east-1", "batch", At("20260102T030405Z"));
  EXPECT_EQ(*Header(req, "authorization"), kEncodingAuth);
}

TEST(SigV4, VerifiesBotocoreRequestDatedByDateHeader) {
  HttpRequestView req{
      "POST", "/v1/describejobs", "",
      {{"Host", "127.0.0.1:8080"},
       {"Content-Type", "application/json"},
       {"Date", "Fri, 02 Jan 2026 03:04:05 -0000"},
       {"Authorization",
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/batch/aws4_request, "
        "SignedHeaders=content-type;date;host, "
        "Signature=6f1a4b878543080b2abac3226812e9721e937bdb29f58768e517294bce66c9c8"}},
      R"({"jobs":["j1"]})"};
  auto caller = VerifySigV4(req, Lookup(), "us-east-1", kServices, At("20260102T030405Z"));
  EXPECT_TRUE(caller.ok()) << caller.status().message();
}

// Presigned by botocore's SigV4QueryAuth with expires=300.
HttpRequestView PresignedRequest() {
  return HttpRequestView{
      "GET", "/v1/listjobs",
      "jobQueue=default&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20260102%2F"
      "us-east-1%2Fbatch%2Faws4_request&X-Amz-Date=20260102T030405Z&X-Amz-Expires=300&"
      "X-Amz-SignedHeaders=host&"
      "X-Amz-Signature=53e1e9bb89a3850594b8450a8958d56c289600baeb66fc6204db18cbc6751c7b",
      {{"Host", "127.0.0.1:8080"}, {"User-Agent", "curl/8"}},
      ""};
}

TEST(SigV4, VerifiesBotocorePresignedUrlUntilItExpires) {
  auto ok = VerifySigV4(PresignedRequest(), Lookup(), "us-east-1", kServices,
                        At("20260102T030405Z") + 299'000);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->service, "batch");

  auto late = VerifySigV4(PresignedRequest(), Lookup(), "us-east-1", kServices,
                          At("20260102T030405Z") + 301'000);
  EXPECT_EQ(late.status().code(), Code::kExpired);

  HttpRequestView tampered = PresignedRequest();
  tampered.query.replace(tampered.query.find("default"), 7, "private");
  auto bad = VerifySigV4(tampered, Lookup(), "us-east-1", kServices, At("20260102T030405Z"));
  EXPECT_EQ(bad.status().code(), Code::kBadSignature);
}

TEST(SigV4, PresignedUrlMissingSignatureIsMalformed) {
  HttpRequestView req = PresignedRequest();
  req.query = req.query.substr(0, req.query.find("&X-Amz-Signature="));
  auto r = VerifySigV4(req, Lookup(), "us-east-1", kServices, At("20260102T030405Z"));
  EXPECT_EQ(r.status().code(), Code::kUnauthenticated);
  EXPECT_THAT(r.status().message(), HasSubstr("'X-Amz-Signature'"));
}

// --- Round trips ----------------------------------------------------------------------------------

HttpRequestView SignedPost(EpochMs now) {
  HttpRequestView req{"POST", "/v1/createjobqueue", "",
                      {{"Host", "localhost:8080"}, {"Content-Type", "application/json"}},
                      R"({"jobQueueName":"q1","priority":1})"};
  SignSigV4(req, {kTyKey, kTySecret}, "eu-west-1", "batch", now);
  return req;
}

TEST(SigV4, SignThenVerifyRoundTrips) {
  const EpochMs now = At("20260102T030405Z") + 123;
  auto caller = VerifySigV4(SignedPost(now), Lookup(), "eu-west-1", kServices, now);
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  EXPECT_EQ(caller->access_key_id, kTyKey);
  EXPECT_EQ(caller->service, "batch");
  EXPECT_EQ(caller->region, "eu-west-1");
}

TEST(SigV4, SignReplacesStaleSignatureHeaders) {
  const EpochMs now = At("20260102T030405Z");
  HttpRequestView req = SignedPost(now - 3'600'000);
  SignSigV4(req, {kTyKey, kTySecret}, "eu-west-1", "batch", now);
  EXPECT_EQ(HeaderCount(req, "authorization"), 1u);
  EXPECT_EQ(HeaderCount(req, "x-amz-date"), 1u);
  EXPECT_EQ(*Header(req, "x-amz-date"), "20260102T030405Z");
  EXPECT_EQ(*Header(req, "host"), "localhost:8080");
  EXPECT_THAT(*Header(req, "authorization"),
              HasSubstr("SignedHeaders=content-type;host;x-amz-date, "));
  EXPECT_TRUE(VerifySigV4(req, Lookup(), "eu-west-1", kServices, now).ok());
}

TEST(SigV4, HeaderNameCaseAndValueWhitespaceDoNotMatter) {
  const EpochMs now = At("20260102T030405Z");
  HttpRequestView req = SignedPost(now);
  for (auto& [k, v] : req.headers) k = ToUpper(k);
  SetHeader(req, "content-type", "  application/json ");
  EXPECT_TRUE(VerifySigV4(req, Lookup(), "eu-west-1", kServices, now).ok());
}

TEST(SigV4, SkewAtTheLimitIsAccepted) {
  const EpochMs t = At("20260102T030405Z");
  EXPECT_TRUE(VerifySigV4(SignedPost(t), Lookup(), "eu-west-1", kServices, t + 15 * 60'000).ok());
  EXPECT_TRUE(VerifySigV4(SignedPost(t), Lookup(), "eu-west-1", kServices, t - 15 * 60'000).ok());
}

TEST(SigV4, MatchingContentSha256HeaderIsAccepted) {
  const EpochMs now = At("20260102T030405Z");
  HttpRequestView req{"POST", "/v1/createjobqueue", "",
                      {{"Host", "localhost:8080"}}, R"({"jobQueueName":"q1"})"};
  req.headers.emplace_back("X-Amz-Content-SHA256", Sha256Hex(req.body));
  SignSigV4(req, {kTyKey, kTySecret}, "eu-west-1", "batch", now);
  EXPECT_TRUE(VerifySigV4(req, Lookup(), "eu-west-1", kServices, now).ok());
}

// --- Failures -------------------------------------------------------------------------------------

constexpr EpochMs kT = 1'767'323'045'000;  // 20260102T030405Z

Status Verify(const HttpRequestView& req, EpochMs now = kT,
              const std::vector<std::string>& services = kServices) {
  return VerifySigV4(req, Lookup(), "us-east-1", services, now).status();
}

TEST(SigV4Failure, MissingAuthorization) {
  HttpRequestView req = BotocoreBatchRequest();
  std::erase_if(req.headers, [](const auto& h) { return h.first == "Authorization"; });
  Status st = Verify(req);
  EXPECT_EQ(st.code(), Code::kUnauthenticated);
  EXPECT_EQ(st.message(), "Missing Authentication Token");
}

TEST(SigV4Failure, MalformedAuthorizationNamesWhatIsMissing) {
  struct Case {
    std::string header;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/batch/aws4_request, "
       "SignedHeaders=host;x-amz-date",
       "Authorization header requires 'Signature' parameter."},
      {"AWS4-HMAC-SHA256 SignedHeaders=host;x-amz-date, Signature=abcd",
       "Authorization header requires 'Credential' parameter."},
      {"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/batch/aws4_request, "
       "Signature=abcd",
       "Authorization header requires 'SignedHeaders' parameter."},
      {"AWS4-HMAC-SHA256", "Authorization header requires 'Credential' parameter."},
      {"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/batch, "
       "SignedHeaders=host;x-amz-date, Signature=abcd",
       "Credential should be of the form"},
      {"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/batch/aws5_request, "
       "SignedHeaders=host;x-amz-date, Signature=abcd",
       "Credential should be scoped with a valid terminator: 'aws4_request', not 'aws5_request'."},
      {"AWS AKIDEXAMPLE:c2lnbmF0dXJl", "Unsupported Authorization Type: 'AWS'."},
      {"", "Unsupported Authorization Type"},
  };
  for (const auto& c : cases) {
    HttpRequestView req = BotocoreBatchRequest();
    SetHeader(req, "authorization", c.header);
    Status st = Verify(req);
    EXPECT_EQ(st.code(), Code::kUnauthenticated) << c.header;
    EXPECT_THAT(st.message(), HasSubstr(c.expected)) << c.header;
  }
}

TEST(SigV4Failure, UnknownAccessKey) {
  HttpRequestView req = BotocoreBatchRequest();
  SetHeader(req, "authorization",
            "AWS4-HMAC-SHA256 Credential=AKIANOBODY/20260102/us-east-1/batch/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-date, Signature=" + std::string(64, '0'));
  Status st = Verify(req);
  EXPECT_EQ(st.code(), Code::kUnknownKey);
  EXPECT_EQ(st.message(), "The security token included in the request is invalid.");

  auto no_lookup = VerifySigV4(BotocoreBatchRequest(), SecretLookup(), "us-east-1", kServices, kT);
  EXPECT_EQ(no_lookup.status().code(), Code::kUnknownKey);
}

TEST(SigV4Failure, WrongRegion) {
  auto r = VerifySigV4(BotocoreBatchRequest(), Lookup(), "eu-central-1", kServices, kT);
  EXPECT_EQ(r.status().code(), Code::kBadSignature);
  EXPECT_THAT(r.status().message(),
              StartsWith("Credential should be scoped to a valid region, not 'us-east-1'. "));
  EXPECT_THAT(r.status().message(), HasSubstr("eu-central-1"));
}

TEST(SigV4Failure, WrongService) {
  Status st = Verify(BotocoreBatchRequest(), kT, {"sagemaker"});
  EXPECT_EQ(st.code(), Code::kBadSignature);
  EXPECT_EQ(st.message(), "Credential should be scoped to correct service: 'sagemaker'.");
}

TEST(SigV4Failure, MissingOrInvalidDate) {
  HttpRequestView missing = BotocoreBatchRequest();
  std::erase_if(missing.headers, [](const auto& h) { return h.first == "X-Amz-Date"; });
  Status st = Verify(missing);
  EXPECT_EQ(st.code(), Code::kUnauthenticated);
  EXPECT_THAT(st.message(), HasSubstr("'X-Amz-Date' or a 'Date' header"));

  for (const char* bad : {"2026-01-02T03:04:05Z", "20260102T030405", "yesterday", ""}) {
    HttpRequestView invalid = BotocoreBatchRequest();
    SetHeader(invalid, "x-amz-date", bad);
    EXPECT_EQ(Verify(invalid).code(), Code::kUnauthenticated) << bad;
  }

  HttpRequestView bad_date_header = BotocoreBatchRequest();
  std::erase_if(bad_date_header.headers, [](const auto& h) { return h.first == "X-Amz-Date"; });
  bad_date_header.headers.emplace_back("Date", "Friday, sometime in January");
  EXPECT_EQ(Verify(bad_date_header).code(), Code::kUnauthenticated);
}

TEST(SigV4Failure, ExpiredInThePast) {
  Status st = Verify(BotocoreBatchRequest(), kT + 20 * 60'000);
  EXPECT_EQ(st.code(), Code::kExpired);
  EXPECT_EQ(st.message(),
            "Signature expired: 20260102T030405Z is now earlier than 20260102T030905Z "
            "(20260102T032405Z - 15 min.)");
}

TEST(SigV4Failure, ExpiredInTheFuture) {
  Status st = Verify(BotocoreBatchRequest(), kT - 20 * 60'000);
  EXPECT_EQ(st.code(), Code::kExpired);
  EXPECT_EQ(st.message(),
            "Signature not yet current: 20260102T030405Z is still later than 20260102T025905Z "
            "(20260102T024405Z + 15 min.)");
}

TEST(SigV4Failure, ScopeDateMustMatchRequestDate) {
  HttpRequestView req = BotocoreBatchRequest();
  std::string auth = *Header(req, "authorization");
  auth.replace(auth.find("/20260102/"), 10, "/20260101/");
  SetHeader(req, "authorization", auth);
  Status st = Verify(req);
  EXPECT_EQ(st.code(), Code::kBadSignature);
  EXPECT_THAT(st.message(), HasSubstr("'20260101' != '20260102'"));
}

TEST(SigV4Failure, HostNotSigned) {
  HttpRequestView req{"POST", "/v1/submitservicejob", "",
                      {{"Content-Type", "application/json"}}, kBatchBody};
  SignSigV4(req, {kTyKey, kTySecret}, "us-east-1", "batch", kT);
  req.headers.emplace_back("Host", "127.0.0.1:8080");
  Status st = Verify(req);
  EXPECT_EQ(st.code(), Code::kBadSignature);
  EXPECT_THAT(st.message(), HasSubstr("'Host'"));
}

// A request signed over Host and X-Amz-Date alone, then given `name: value` (as a man in the middle
// could): the header must be refused by name rather than acted on.
HttpRequestView SignedThenAdded(std::string name, std::string value) {
  HttpRequestView req{"POST", "/", "", {{"Host", "127.0.0.1:8080"}}, kSageMakerBody};
  SignSigV4(req, {kTyKey, kTySecret}, "us-east-1", "sagemaker", kT);
  req.headers.emplace_back(std::move(name), std::move(value));
  return req;
}

TEST(SigV4Failure, UnsignedTargetIsRefusedNamingIt) {
  // The finding: SignedHeaders=host;x-amz-date with X-Amz-Target swapped to a Stop.
  Status st = Verify(SignedThenAdded("X-Amz-Target", "SageMaker.StopTrainingJob"));
  EXPECT_EQ(st.code(), Code::kBadSignature);
  EXPECT_THAT(st.message(), HasSubstr("not signed: x-amz-target."));
}

TEST(SigV4Failure, UnsignedContentTypeIsRefused) {
  Status st = Verify(SignedThenAdded("Content-Type", "application/x-amz-json-1.1"));
  EXPECT_EQ(st.code(), Code::kBadSignature);
  EXPECT_THAT(st.message(), HasSubstr("not signed: content-type."));
}

TEST(SigV4Failure, EveryUnsignedAmzHeaderIsRefused) {
  for (const char* name : {"X-Amz-Security-Token", "x-amz-content-sha256", "X-AMZ-Meta-Anything"}) {
    HttpRequestView req = SignedThenAdded(name, "v");
    if (ToLower(name) == "x-amz-content-sha256") req.headers.back().second = Sha256Hex(req.body);
    Status st = Verify(req);
    EXPECT_EQ(st.code(), Code::kBadSignature) << name;
    EXPECT_THAT(st.message(), HasSubstr("not signed: " + ToLower(name) + ".")) << name;
  }
}

TEST(SigV4, UnsignedHeadersThatChooseNothingAreAccepted) {
  // What botocore never signs (User-Agent, X-Amzn-Trace-Id) and headers outside x-amz-*.
  for (const char* name : {"User-Agent", "X-Amzn-Trace-Id", "X-Custom", "Accept-Encoding"}) {
    auto caller = VerifySigV4(SignedThenAdded(name, "v"), Lookup(), "us-east-1", kServices, kT);
    EXPECT_TRUE(caller.ok()) << name << ": " << caller.status().message();
  }
}

void ExpectMismatch(const HttpRequestView& req) {
  Status st = Verify(req);
  EXPECT_EQ(st.code(), Code::kBadSignature);
  EXPECT_EQ(st.message(),
            "The request signature we calculated does not match the signature you provided. Check "
            "your AWS Secret Access Key and signing method. Consult the service documentation for "
            "details.");
}

TEST(SigV4Failure, TamperedBody) {
  HttpRequestView req = BotocoreBatchRequest();
  std::string tampered(req.body);
  tampered.replace(tampered.find("train-1"), 7, "train-2");
  req.body = tampered;
  ExpectMismatch(req);
}

TEST(SigV4Failure, TamperedSignedHeader) {
  HttpRequestView req = BotocoreSageMakerRequest();
  SetHeader(req, "x-amz-target", "SageMaker.DeleteTrainingJob");
  ExpectMismatch(req);

  HttpRequestView ct = BotocoreBatchRequest();
  SetHeader(ct, "content-type", "text/plain");
  ExpectMismatch(ct);

  HttpRequestView dropped = BotocoreBatchRequest();
  std::erase_if(dropped.headers, [](const auto& h) { return h.first == "Content-Type"; });
  ExpectMismatch(dropped);
}

TEST(SigV4Failure, TamperedPathQueryMethodOrTime) {
  HttpRequestView path = BotocoreBatchRequest();
  path.path = "/v1/terminatejob";
  ExpectMismatch(path);

  HttpRequestView query = BotocoreBatchRequest();
  query.query = "x=1";
  ExpectMismatch(query);

  HttpRequestView method = BotocoreBatchRequest();
  method.method = "PUT";
  ExpectMismatch(method);

  HttpRequestView date = BotocoreBatchRequest();
  SetHeader(date, "x-amz-date", "20260102T030406Z");
  ExpectMismatch(date);
}

TEST(SigV4Failure, WrongSecretOrSignature) {
  HttpRequestView req = BotocoreBatchRequest();
  auto wrong_secret = VerifySigV4(
      req, [](std::string_view) -> std::optional<std::string> { return "not-the-secret"; },
      "us-east-1", kServices, kT);
  EXPECT_EQ(wrong_secret.status().code(), Code::kBadSignature);

  std::string auth = *Header(req, "authorization");
  SetHeader(req, "authorization", auth.substr(0, auth.size() - 1));  // 63 hex digits
  ExpectMismatch(req);
}

TEST(SigV4Failure, ContentSha256HeaderMustMatchBody) {
  HttpRequestView req = BotocoreBatchRequest();
  req.headers.emplace_back("X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD");
  Status st = Verify(req);
  EXPECT_EQ(st.code(), Code::kBadSignature);
  EXPECT_THAT(st.message(), HasSubstr("x-amz-content-sha256"));
}

// --- S3 rules: requests signed by botocore 1.43's S3SigV4Auth / S3SigV4QueryAuth ------------------
// (tests/unit/sigv4_s3_vectors.py prints them; path-style, endpoint http://127.0.0.1:9000,
// 20260102T030405Z.) User-Agent, Expect and the amz-sdk-* headers are sent but never signed.

const std::vector<std::string> kS3 = {"s3", "sts"};
constexpr char kS3Time[] = "20260102T030405Z";
constexpr char kEmptySha[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

HttpRequestView S3Request(std::string method, std::string path, std::string query,
                          std::vector<std::pair<std::string, std::string>> extra, std::string_view body = "") {
  HttpRequestView req{std::move(method), std::move(path), std::move(query),
                      {{"Host", "127.0.0.1:9000"}, {"User-Agent", "Boto3/1.43.11"}, {"amz-sdk-request", "attempt=1"}},
                      body};
  for (auto& h : extra) req.headers.push_back(std::move(h));
  return req;
}

// PutObject of "hello" to "dir/a b+c=d.txt": a key with a space, '+' and '=', the body's hash signed.
HttpRequestView BotoPutHello() {
  return S3Request(
      "PUT", "/bkt/dir/a%20b%2Bc%3Dd.txt", "",
      {{"Expect", "100-continue"},
       {"x-amz-checksum-crc32", "NhCmhg=="},
       {"x-amz-sdk-checksum-algorithm", "CRC32"},
       {"X-Amz-Date", kS3Time},
       {"X-Amz-Content-SHA256", "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"},
       {"Authorization",
        "AWS4-HMAC-SHA256 Credential=AKIATRAINYARD0000001/20260102/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;x-amz-checksum-crc32;x-amz-content-sha256;x-amz-date;x-amz-sdk-checksum-algorithm, "
        "Signature=9456e80d19be9d4a811e181a9073b3ae25370ac9eeb9298499a73cc4e8973e84"},
       {"Content-Length", "5"}},
      "hello");
}

TEST(SigV4S3, VerifiesBotocorePutWithSpacePlusAndEqualsInTheKey) {
  auto caller = VerifySigV4(BotoPutHello(), Lookup(), "us-east-1", kS3, At(kS3Time));
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  EXPECT_EQ(caller->service, "s3");
  EXPECT_EQ(caller->payload_mode, PayloadMode::kSignedBody);
  EXPECT_EQ(caller->amz_date, kS3Time);
  EXPECT_EQ(caller->scope, "20260102/us-east-1/s3/aws4_request");
  EXPECT_EQ(caller->seed_signature, "9456e80d19be9d4a811e181a9073b3ae25370ac9eeb9298499a73cc4e8973e84");
  // kSigning = HMAC chain over "AWS4"+secret, date, region, service, "aws4_request".
  std::string key = HmacSha256(HmacSha256(HmacSha256(HmacSha256(std::string("AWS4") + kTySecret, "20260102"),
                                                     "us-east-1"), "s3"), "aws4_request");
  EXPECT_EQ(caller->signing_key, key);
  EXPECT_EQ(caller->signing_key.size(), 32u);
  EXPECT_FALSE(caller->presigned);
  EXPECT_EQ(caller->security_token, "");
}

TEST(SigV4S3, TheSignedBodyHashMustMatchTheBody) {
  HttpRequestView req = BotoPutHello();
  req.body = "hellO";
  Status st = VerifySigV4(req, Lookup(), "us-east-1", kS3, At(kS3Time)).status();
  EXPECT_EQ(st.code(), Code::kBadSignature);
  EXPECT_THAT(st.message(), StartsWith("XAmzContentSHA256Mismatch: "));
}

TEST(SigV4S3, VerifiesBotocoreGetOfAUnicodeKey) {
  HttpRequestView req = S3Request(
      "GET", "/bkt/%C3%BCn%C3%AF/c%C3%B6d%C3%A9%20%E2%9C%93.txt", "",
      {{"x-amz-checksum-mode", "ENABLED"},
       {"X-Amz-Date", kS3Time},
       {"X-Amz-Content-SHA256", kEmptySha},
       {"Authorization",
        "AWS4-HMAC-SHA256 Credential=AKIATRAINYARD0000001/20260102/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;x-amz-checksum-mode;x-amz-content-sha256;x-amz-date, "
        "Signature=9c6203dd053542036119347878676b90a1744a6ca60ef54d30cc2391866a0eae"}});
  auto caller = VerifySigV4(req, Lookup(), "us-east-1", kS3, At(kS3Time));
  ASSERT_TRUE(caller.ok()) << caller.status().message();
}

// The key "a//b/../c/./d": S3 signs the path as sent; the normalizing rules of other services
// ("/bkt/a/c/d") would not verify it, and would make two keys one.
HttpRequestView BotoGetDotSegments() {
  return S3Request("GET", "/bkt/a//b/../c/./d", "",
                   {{"x-amz-checksum-mode", "ENABLED"},
                    {"X-Amz-Date", kS3Time},
                    {"X-Amz-Content-SHA256", kEmptySha},
                    {"Authorization",
                     "AWS4-HMAC-SHA256 Credential=AKIATRAINYARD0000001/20260102/us-east-1/s3/aws4_request, "
                     "SignedHeaders=host;x-amz-checksum-mode;x-amz-content-sha256;x-amz-date, "
                     "Signature=b0525cedc873b1bd6be8314edbd0233021cf9963444ae1e69882a3db17b5b5c8"}});
}

TEST(SigV4S3, SignsThePathAsSentWithDoubleSlashesAndDotSegments) {
  auto caller = VerifySigV4(BotoGetDotSegments(), Lookup(), "us-east-1", kS3, At(kS3Time));
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  HttpRequestView normalized = BotoGetDotSegments();
  normalized.path = "/bkt/a/c/d";
  EXPECT_EQ(VerifySigV4(normalized, Lookup(), "us-east-1", kS3, At(kS3Time)).status().code(),
            Code::kBadSignature);
}

TEST(SigV4S3, VerifiesBotocoreListWithAnEncodedQuery) {
  HttpRequestView req = S3Request(
      "GET", "/bkt", "list-type=2&prefix=a%20b%2F&delimiter=%2F&encoding-type=url",
      {{"X-Amz-Date", kS3Time},
       {"X-Amz-Content-SHA256", kEmptySha},
       {"Authorization",
        "AWS4-HMAC-SHA256 Credential=AKIATRAINYARD0000001/20260102/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
        "Signature=952d36d224ff95b48d6771ecb817a18a18cc04b818802535d0f5337ba08a6806"}});
  auto caller = VerifySigV4(req, Lookup(), "us-east-1", kS3, At(kS3Time));
  ASSERT_TRUE(caller.ok()) << caller.status().message();
}

// payload_signing_enabled=False: the body is not covered, so any body verifies.
TEST(SigV4S3, UnsignedPayloadLeavesTheBodyUncovered) {
  HttpRequestView req = S3Request(
      "PUT", "/bkt/k", "",
      {{"x-amz-checksum-crc32", "r1umCw=="},
       {"x-amz-sdk-checksum-algorithm", "CRC32"},
       {"X-Amz-Date", kS3Time},
       {"X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD"},
       {"Authorization",
        "AWS4-HMAC-SHA256 Credential=AKIATRAINYARD0000001/20260102/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;x-amz-checksum-crc32;x-amz-content-sha256;x-amz-date;x-amz-sdk-checksum-algorithm, "
        "Signature=1e5b1f0053e93fc27d2ba1b68890c6610f7a7e92009c8865dd66ae8a2bb63537"}},
      "unsigned body");
  auto caller = VerifySigV4(req, Lookup(), "us-east-1", kS3, At(kS3Time));
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  EXPECT_EQ(caller->payload_mode, PayloadMode::kUnsigned);
  req.body = "another body";
  EXPECT_TRUE(VerifySigV4(req, Lookup(), "us-east-1", kS3, At(kS3Time)).ok());
  // The mode itself is signed: claiming a hash instead breaks the signature.
  SetHeader(req, "x-amz-content-sha256", Sha256Hex(req.body));
  EXPECT_EQ(VerifySigV4(req, Lookup(), "us-east-1", kS3, At(kS3Time)).status().code(), Code::kBadSignature);
}

TEST(SigV4S3, HeaderSignedRequestsMustSendXAmzContentSha256) {
  HttpRequestView req = BotoPutHello();
  std::erase_if(req.headers, [](const auto& h) { return ToLower(h.first) == "x-amz-content-sha256"; });
  Status st = VerifySigV4(req, Lookup(), "us-east-1", kS3, At(kS3Time)).status();
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_THAT(st.message(), StartsWith("InvalidRequest: "));
  EXPECT_THAT(st.message(), HasSubstr("x-amz-content-sha256"));
}

TEST(SigV4S3, AnUnknownPayloadModeIsRefusedNamingTheValues) {
  for (const char* bad : {"STREAMING-AWS4-HMAC-SHA256-EVENTS", "unsigned-payload",
                          "2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824", ""}) {
    HttpRequestView req = BotoPutHello();
    SetHeader(req, "x-amz-content-sha256", bad);
    Status st = VerifySigV4(req, Lookup(), "us-east-1", kS3, At(kS3Time)).status();
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << bad;
    EXPECT_THAT(st.message(), StartsWith("InvalidArgument: x-amz-content-sha256 must be UNSIGNED-PAYLOAD")) << bad;
  }
}

TEST(SigV4S3, StreamingModesAreReportedAndLeaveTheEncodedBodyToTheDecoder) {
  // Signed here with SignSigV4 (which signs any x-amz-content-sha256 given) for each mode.
  const std::pair<std::string_view, PayloadMode> modes[] = {
      {kStreamingSignedPayload, PayloadMode::kStreamingSigned},
      {kStreamingSignedPayloadTrailer, PayloadMode::kStreamingSignedTrailer},
      {kStreamingUnsignedPayloadTrailer, PayloadMode::kStreamingUnsignedTrailer}};
  for (const auto& [value, mode] : modes) {
    HttpRequestView req{"PUT", "/bkt/k", "", {{"Host", "127.0.0.1:9000"}, {"x-amz-content-sha256", std::string(value)}},
                        "5;chunk-signature=...\r\nhello\r\n"};
    SignSigV4(req, {kTyKey, kTySecret}, "us-east-1", "s3", At(kS3Time));
    auto caller = VerifySigV4(req, Lookup(), "us-east-1", kS3, At(kS3Time));
    ASSERT_TRUE(caller.ok()) << value << ": " << caller.status().message();
    EXPECT_EQ(caller->payload_mode, mode) << value;
    std::string auth = *Header(req, "authorization");
    EXPECT_EQ(caller->seed_signature, auth.substr(auth.find("Signature=") + 10)) << value;
  }
}

// A presigned GetObject for a session key: "p q/ü+=.bin", X-Amz-Security-Token in the query.
constexpr char kPresignedQuery[] =
    "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIATRAINYARD0000002%2F20260102%2Fus-east-1%2Fs3%2F"
    "aws4_request&X-Amz-Date=20260102T030405Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host&"
    "X-Amz-Security-Token=tok%2Ben%2F%3D%3D&"
    "X-Amz-Signature=e838470ccce8b7a62a05b806dc5a87b4e57f1dba491af5a75fdae5ee9241e137";

SecretLookup SessionLookup() {
  return [](std::string_view key) -> std::optional<std::string> {
    if (key == "ASIATRAINYARD0000002") return std::string("sessionSecret/xyz");
    return std::nullopt;
  };
}

TEST(SigV4S3, VerifiesABotocorePresignedUrlWithASessionToken) {
  HttpRequestView req{"GET", "/bkt/p%20q/%C3%BC%2B%3D.bin", kPresignedQuery, {{"Host", "127.0.0.1:9000"}}, ""};
  auto caller = VerifySigV4(req, SessionLookup(), "us-east-1", kS3, At("20260102T031000Z"));
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  EXPECT_TRUE(caller->presigned);
  EXPECT_EQ(caller->payload_mode, PayloadMode::kUnsigned);
  EXPECT_EQ(caller->security_token, "tok+en/==");
  // Valid for X-Amz-Expires (900 s) from X-Amz-Date, not after.
  EXPECT_TRUE(VerifySigV4(req, SessionLookup(), "us-east-1", kS3, At("20260102T031905Z")).ok());
  EXPECT_EQ(VerifySigV4(req, SessionLookup(), "us-east-1", kS3, At("20260102T031906Z")).status().code(),
            Code::kExpired);
}

TEST(SigV4S3, APresignedUrlsTokenIsSigned) {
  std::string query = kPresignedQuery;
  query.replace(query.find("tok%2Ben"), 8, "tok%2Bex");
  HttpRequestView req{"GET", "/bkt/p%20q/%C3%BC%2B%3D.bin", query, {{"Host", "127.0.0.1:9000"}}, ""};
  EXPECT_EQ(VerifySigV4(req, SessionLookup(), "us-east-1", kS3, At("20260102T031000Z")).status().code(),
            Code::kBadSignature);
}

TEST(SigV4S3, PresignedExpiresMustBeOneSecondToSevenDays) {
  for (const char* expires : {"0", "604801", "-5", "9x"}) {
    std::string query = kPresignedQuery;
    query.replace(query.find("X-Amz-Expires=900"), 17, std::string("X-Amz-Expires=") + expires);
    HttpRequestView req{"GET", "/bkt/p%20q/%C3%BC%2B%3D.bin", query, {{"Host", "127.0.0.1:9000"}}, ""};
    Status st = VerifySigV4(req, SessionLookup(), "us-east-1", kS3, At("20260102T031000Z")).status();
    EXPECT_EQ(st.code(), Code::kUnauthenticated) << expires;
    EXPECT_THAT(st.message(), HasSubstr("X-Amz-Expires")) << expires;
  }
}

TEST(SigV4S3, OtherServicesStillNormalizeThePathAndCoverTheBody) {
  // The same dot-segment path signed for a non-S3 service verifies in its normalized form only.
  HttpRequestView req{"GET", "/a//b/../c", "", {{"Host", "h"}}, ""};
  SignSigV4(req, {kTyKey, kTySecret}, "us-east-1", "sagemaker", At(kS3Time));
  ASSERT_TRUE(VerifySigV4(req, Lookup(), "us-east-1", kServices, At(kS3Time)).ok());
  req.path = "/a/c";
  EXPECT_TRUE(VerifySigV4(req, Lookup(), "us-east-1", kServices, At(kS3Time)).ok());
  HttpRequestView unsigned_payload{"POST", "/", "", {{"Host", "h"}, {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}}, "{}"};
  SignSigV4(unsigned_payload, {kTyKey, kTySecret}, "us-east-1", "sagemaker", At(kS3Time));
  EXPECT_EQ(VerifySigV4(unsigned_payload, Lookup(), "us-east-1", kServices, At(kS3Time)).status().code(),
            Code::kBadSignature);
}

// ---- S3 Signature Version 2: AWS's published examples (S3 developer guide, "Signing and
// authenticating REST requests") ----

constexpr char kV2Key[] = "AKIAIOSFODNN7EXAMPLE";
constexpr char kV2Secret[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

SecretLookup V2Lookup() {
  return [](std::string_view key) -> std::optional<std::string> {
    if (key == kV2Key) return std::string(kV2Secret);
    return std::nullopt;
  };
}

HttpRequestView V2Get(std::string authorization) {
  HttpRequestView v;
  v.method = "GET";
  v.path = "/photos/puppy.jpg";
  v.headers = {{"Host", "johnsmith.s3.amazonaws.com"}, {"Date", "Tue, 27 Mar 2007 19:36:42 +0000"},
               {"Authorization", std::move(authorization)}};
  return v;
}

TEST(SigV2, VerifiesThePublishedHeaderExampleVirtualHosted) {
  const EpochMs when = 1175024202000;  // Tue, 27 Mar 2007 19:36:42 GMT
  auto v = V2Get("AWS AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMU=");
  ASSERT_TRUE(IsSigV2(v));
  auto caller = VerifySigV2(v, V2Lookup(), "johnsmith", when);
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  EXPECT_EQ(caller->access_key_id, kV2Key);
  EXPECT_EQ(caller->payload_mode, PayloadMode::kUnsigned);
  // The same request path-style names the bucket in its path instead.
  v.path = "/johnsmith/photos/puppy.jpg";
  EXPECT_TRUE(VerifySigV2(v, V2Lookup(), "", when).ok());
  // Another bucket, another secret, a skewed clock, an unknown key.
  EXPECT_EQ(VerifySigV2(v, V2Lookup(), "other", when).status().code(), Code::kBadSignature);
  EXPECT_EQ(VerifySigV2(V2Get("AWS AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMV="), V2Lookup(), "johnsmith", when)
                .status().code(), Code::kBadSignature);
  EXPECT_EQ(VerifySigV2(v, V2Lookup(), "", when + 16 * 60 * 1000).status().code(), Code::kExpired);
  EXPECT_EQ(VerifySigV2(V2Get("AWS AKIAOTHER:bWq2s1WEIj+Ydj0vQ697zp+IXMU="), V2Lookup(), "johnsmith", when)
                .status().code(), Code::kUnknownKey);
  EXPECT_EQ(VerifySigV2(V2Get("AWS nocolon"), V2Lookup(), "johnsmith", when).status().code(), Code::kUnauthenticated);
}

TEST(SigV2, VerifiesThePublishedPresignedExampleUntilItExpires) {
  HttpRequestView v;
  v.method = "GET";
  v.path = "/photos/puppy.jpg";
  v.query = "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1175139620&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D";
  v.headers = {{"Host", "johnsmith.s3.amazonaws.com"}};
  ASSERT_TRUE(IsSigV2(v));
  auto caller = VerifySigV2(v, V2Lookup(), "johnsmith", 1175139620000);
  ASSERT_TRUE(caller.ok()) << caller.status().message();
  EXPECT_TRUE(caller->presigned);
  EXPECT_EQ(VerifySigV2(v, V2Lookup(), "johnsmith", 1175139621000).status().code(), Code::kExpired);
  // A signed sub-resource added to the URL breaks the signature; an unsigned parameter does not.
  HttpRequestView with_acl = v;
  with_acl.query += "&acl";
  EXPECT_EQ(VerifySigV2(with_acl, V2Lookup(), "johnsmith", 1175139620000).status().code(), Code::kBadSignature);
  HttpRequestView with_other = v;
  with_other.query += "&x-id=GetObject";
  EXPECT_TRUE(VerifySigV2(with_other, V2Lookup(), "johnsmith", 1175139620000).ok());
  // SigV4 requests are not SigV2.
  HttpRequestView v4;
  v4.headers = {{"Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/s3/aws4_request"}};
  EXPECT_FALSE(IsSigV2(v4));
}

TEST(SigV2, APresignedUrlMayExpireAtMostSevenDaysAhead) {
  const EpochMs now = 1'800'000'000'000;
  auto presigned = [&](int64_t expires_s) {
    HttpRequestView v;
    v.method = "GET";
    v.path = "/bkt/key";
    v.headers = {{"Host", "127.0.0.1:9000"}};
    v.query = "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=" + std::to_string(expires_s) + "&Signature=bm90LWl0";
    return VerifySigV2(v, V2Lookup(), "", now).status();
  };
  // Eight days ahead is refused before the signature is looked at; six days gets that far.
  const Status far = presigned(now / 1000 + 8 * 24 * 3600);
  EXPECT_EQ(far.code(), Code::kUnauthenticated);
  EXPECT_THAT(far.message(), HasSubstr("at most 604800 seconds"));
  EXPECT_EQ(presigned(now / 1000 + 6 * 24 * 3600).code(), Code::kBadSignature);
}

// --- The head before the body (VerifySigV4Head) ---------------------------------------------------

TEST(SigV4Head, AnS3HeadIsVerifiedWholeWithoutItsBody) {
  HttpRequestView req{"PUT", "/bkt/k", "", {{"Host", "127.0.0.1:9000"}, {"x-amz-content-sha256", Sha256Hex("the body")}},
                      "the body"};
  SignSigV4(req, {kTyKey, kTySecret}, "us-east-1", "s3", At(kS3Time));
  HttpRequestView head = req;
  head.body = {};
  EXPECT_TRUE(VerifySigV4Head(head, Lookup(), "us-east-1", kS3, At(kS3Time)).ok());
  // The whole request still needs the body the hash names.
  EXPECT_EQ(VerifySigV4(head, Lookup(), "us-east-1", kS3, At(kS3Time)).status().code(), Code::kBadSignature);
  // A made-up signature, or an unsigned x-amz-content-sha256, fails at the head.
  HttpRequestView forged = head;
  std::string& auth = forged.headers[forged.headers.size() - 1].second;
  ASSERT_THAT(auth, StartsWith("AWS4-HMAC-SHA256"));
  auth = auth.substr(0, auth.find("Signature=") + 10) + std::string(64, '0');
  EXPECT_EQ(VerifySigV4Head(forged, Lookup(), "us-east-1", kS3, At(kS3Time)).status().code(), Code::kBadSignature);
  HttpRequestView unsigned_hash = head;
  std::string& a2 = unsigned_hash.headers.back().second;
  a2.replace(a2.find("x-amz-content-sha256;"), 21, "");
  Status st = VerifySigV4Head(unsigned_hash, Lookup(), "us-east-1", kS3, At(kS3Time)).status();
  EXPECT_EQ(st.code(), Code::kBadSignature);
  EXPECT_THAT(st.message(), HasSubstr("x-amz-content-sha256"));
}

TEST(SigV4Head, AnotherServicesHeadIsCheckedForKeyScopeAndTimeOnly) {
  HttpRequestView req{"POST", "/", "", {{"Host", "h"}, {"Content-Type", "application/x-amz-json-1.1"}}, "{}"};
  SignSigV4(req, {kTyKey, kTySecret}, "us-east-1", "sagemaker", At(kS3Time));
  HttpRequestView head = req;
  head.body = {};
  EXPECT_TRUE(VerifySigV4Head(head, Lookup(), "us-east-1", {"sagemaker"}, At(kS3Time)).ok());
  EXPECT_EQ(VerifySigV4Head(head, [](std::string_view) { return std::optional<std::string>(); }, "us-east-1",
                            {"sagemaker"}, At(kS3Time)).status().code(),
            Code::kUnknownKey);
  EXPECT_EQ(VerifySigV4Head(head, Lookup(), "eu-west-1", {"sagemaker"}, At(kS3Time)).status().code(), Code::kBadSignature);
  EXPECT_EQ(VerifySigV4Head(head, Lookup(), "us-east-1", {"sagemaker"}, At(kS3Time) + 3600 * 1000).status().code(),
            Code::kExpired);
}

}  // namespace
}  // namespace ty::api
