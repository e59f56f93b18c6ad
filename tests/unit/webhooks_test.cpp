// Webhook delivery (obs/webhooks.h) over the in-memory event log and a local HTTP receiver: the
// set of deliveries follows Sync (EventBridge rules and targets change while the server runs).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <set>

#include "http/server.h"
#include "obs/event_access.h"
#include "obs/outbound.h"
#include "obs/webhooks.h"
#include "store/event_log.h"
#include "testing/fakes.h"

namespace ty::obs {
namespace {

using nlohmann::json;

struct Received {
  std::string method, path, api_key;
  json body;
};

// Records every request; answers 204.
class Receiver {
 public:
  Receiver()
      : server_(http::Limits{}, [this](const http::Request& r) { return Take(r); },
                [](int status, const std::string& message, const http::Request*) {
                  http::Response res;
                  res.status = status;
                  res.body = message;
                  return res;
                }) {
    auto port = server_.Bind("127.0.0.1", 0);
    EXPECT_TRUE(port.ok()) << port.status().message();
    port_ = *port;
    thread_ = std::thread([this] { server_.Run(); });
  }
  ~Receiver() {
    server_.Stop();
    thread_.join();
  }
  std::string Url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  // Waits (up to 30 s) until `n` requests have arrived; returns them all.
  std::vector<Received> WaitFor(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(30), [&] { return got_.size() >= n; });
    return got_;
  }
  // Every POST of the event with this id is answered 500.
  std::string refused_id;  // set before anything is published

  std::vector<Received> All() {
    std::lock_guard lock(mu_);
    return got_;
  }

 private:
  http::Response Take(const http::Request& r) {
    const std::string* key = r.Header("x-api-key");
    json body = json::parse(r.body, nullptr, false);
    {
      std::lock_guard lock(mu_);
      got_.push_back({r.method, r.path, key ? *key : "", body});
    }
    cv_.notify_all();
    http::Response res;
    res.status = body.is_object() && body.value("id", "") == refused_id ? 500 : 204;
    return res;
  }

  http::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Received> got_;
};

class WebhooksTest : public ::testing::Test {
 protected:
  // An event as the store holds it: its key and document.
  static std::pair<std::string, std::string> Stored(uint64_t seq, const std::string& source, json detail = json::object(),
                                                    json resources = json::array(), const std::string& put_by = "") {
    json event = {{"id", "e" + std::to_string(seq)}, {"source", source}, {"detail-type", "T"}, {"detail", detail},
                  {"resources", resources}, {"account", "1"}, {"region", "r"}};
    json stored = {{"seq", seq}, {"at", 0}, {"queue", ""}, {"share", ""}, {"tags", json::object()}, {"event", event}};
    if (!put_by.empty()) stored["put_by"] = put_by;
    return {store::EventLog::Key(seq), stored.dump()};
  }
  // Stores the events at once (a reader sees all of them or none) and announces the last.
  void PublishAll(const std::vector<std::pair<std::string, std::string>>& events, uint64_t last) {
    {
      std::lock_guard lock(data_->mu);
      for (const auto& [key, doc] : events) data_->docs[store::Kind::kEvent][key] = doc;
    }
    log_.Published(last);
  }
  void Publish(uint64_t seq, const std::string& source, json detail = json::object(), json resources = json::array(),
               const std::string& put_by = "") {
    PublishAll({Stored(seq, source, std::move(detail), std::move(resources), put_by)}, seq);
  }
  WebhookConfig Hook(const std::string& name, const std::string& path, const std::string& pattern = "") {
    WebhookConfig w;
    w.name = name;
    w.url = receiver_.Url(path);
    w.pattern = pattern;
    w.max_backoff_seconds = 1;
    return w;
  }
  // Waits (up to 30 s) until the only delivery has handled event `seq`.
  static void WaitCursor(const WebhookDispatcher& d, uint64_t seq) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (d.Stats()[0].cursor < seq && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    ASSERT_EQ(d.Stats()[0].cursor, seq);
  }
  static std::vector<std::string> Ids(const std::vector<Received>& got) {
    std::vector<std::string> out;
    for (const auto& r : got) out.push_back(r.body.is_object() ? r.body.value("id", r.body.dump()) : r.body.dump());
    return out;
  }

  std::shared_ptr<testing::MemData> data_ = std::make_shared<testing::MemData>();
  testing::MemEventLog log_{data_};
  Receiver receiver_;
};

TEST_F(WebhooksTest, ADeliveryAddedBySyncStartsAfterTheNewestEventAndARemovedOneSendsNothingMore) {
  WebhookDispatcher d(log_, {});
  ASSERT_TRUE(d.Start().ok());
  Publish(1, "before");
  ASSERT_TRUE(d.Sync({Hook("a", "/a")}).ok());
  Publish(2, "after");
  EXPECT_EQ(Ids(receiver_.WaitFor(1)), std::vector<std::string>{"e2"});

  ASSERT_TRUE(d.Sync({}).ok());
  Publish(3, "removed");
  ASSERT_TRUE(d.Sync({Hook("b", "/b")}).ok());
  Publish(4, "to-b");
  auto got = receiver_.WaitFor(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].path, "/b");
  d.Stop();  // every thread has ended: nothing else can arrive
  EXPECT_EQ(Ids(receiver_.All()), (std::vector<std::string>{"e2", "e4"}));
  EXPECT_EQ(d.Stats().size(), 1u);
}

TEST_F(WebhooksTest, AChangedDeliveryGoesOnFromItsCursorWithItsNewSettings) {
  WebhookDispatcher d(log_, {});
  ASSERT_TRUE(d.Start().ok());
  ASSERT_TRUE(d.Sync({Hook("r", "/r", R"({"source": ["one"]})")}).ok());
  Publish(1, "one");
  Publish(2, "two");
  receiver_.WaitFor(1);
  // Until its answer is in, e1 is not delivered (a change now would abort it and send it again).
  WaitCursor(d, 2);
  WebhookConfig changed = Hook("r", "/r", R"({"source": ["two", "three"]})");
  changed.method = "PUT";
  changed.headers = {{"x-api-key", "k"}};
  changed.input_path = "$.detail.inner";
  ASSERT_TRUE(d.Sync({changed}).ok());
  Publish(3, "three", {{"inner", {{"id", "inner-3"}}}});
  auto got = receiver_.WaitFor(2);
  d.Stop();
  got = receiver_.All();
  // e2 ("two") was handled under the old pattern (not wanted) before the change: not sent again.
  EXPECT_EQ(Ids(got), (std::vector<std::string>{"e1", "inner-3"}));
  EXPECT_EQ(got[1].method, "PUT");
  EXPECT_EQ(got[1].api_key, "k");
}

TEST_F(WebhooksTest, AConstantInputIsSentInsteadOfTheEvent) {
  WebhookDispatcher d(log_, {});
  WebhookConfig w = Hook("c", "/c");
  w.input = R"({"id": "constant"})";
  ASSERT_TRUE(d.Sync({w}).ok());
  Publish(1, "x");
  EXPECT_EQ(Ids(receiver_.WaitFor(1)), std::vector<std::string>{"constant"});
}

TEST_F(WebhooksTest, AnInputTransformerRendersTheBodyWithTheRulesNameAndArn) {
  WebhookDispatcher d(log_, {});
  WebhookConfig w = Hook("eventbridge/chat/t1/7", "/chat");
  w.input_paths_map = {{"status", "$.detail.status"}, {"src", "$.source"}};
  w.input_template = R"({"id": "<aws.events.rule-name>", "text": "<src> says \"<status>\"", "arn": <aws.events.rule-arn>})";
  w.rule_name = "chat";
  w.rule_arn = "arn:aws:events:us-east-1:1:rule/chat";
  ASSERT_TRUE(d.Sync({w}).ok());
  Publish(1, "trainyard.test", {{"status", "line\n\"quoted\"</b>"}});
  auto got = receiver_.WaitFor(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, json({{"id", "chat"},
                               {"text", "trainyard.test says \"line\n\"quoted\"</b>\""},
                               {"arn", "arn:aws:events:us-east-1:1:rule/chat"}}));
}

TEST_F(WebhooksTest, ASyncWithABadPatternChangesNothing) {
  WebhookDispatcher d(log_, {});
  ASSERT_TRUE(d.Sync({Hook("a", "/a")}).ok());
  Status bad = d.Sync({Hook("a", "/a"), Hook("bad", "/bad", R"({"source": "not-a-list"})")});
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("bad"), std::string::npos) << bad.message();
  Publish(1, "x");
  EXPECT_EQ(Ids(receiver_.WaitFor(1)), std::vector<std::string>{"e1"});
  ASSERT_EQ(d.Stats().size(), 1u);
  EXPECT_EQ(d.Stats()[0].name, "a");
}

TEST_F(WebhooksTest, AnEventIsGivenUpAfterItsAttemptsAndTheNextIsDelivered) {
  receiver_.refused_id = "e1";
  WebhookDispatcher d(log_, {});
  WebhookConfig w = Hook("limited", "/l");
  w.max_attempts = 2;
  ASSERT_TRUE(d.Sync({w}).ok());
  Publish(1, "x");
  Publish(2, "x");
  receiver_.WaitFor(3);
  WaitCursor(d, 2);  // e2's answer is in
  d.Stop();
  EXPECT_EQ(Ids(receiver_.All()), (std::vector<std::string>{"e1", "e1", "e2"}));  // two tries, then the next
  const WebhookStats stats = d.Stats()[0];
  EXPECT_EQ(stats.dropped, 1u);
  EXPECT_EQ(stats.delivered, 1u);
  EXPECT_EQ(stats.failed_attempts, 2u);
  EXPECT_EQ(stats.cursor, 2u);
}

// Allows what `allowed` lists (owner + " " + resource); counts the questions.
class FakeAccess : public EventAccess {
 public:
  std::set<std::string> allowed;
  mutable std::atomic<int> asked{0};
  bool MayRead(const std::string& owner, const EventReadCheck& check) const override {
    ++asked;
    return allowed.count(owner + " " + (check.put_by.empty() ? check.resource : "put-by:" + check.put_by)) > 0;
  }
};

TEST_F(WebhooksTest, ARulesDeliverySendsOnlyWhatItsOwnerMayReadAndAWebhookOfTheFileEverything) {
  const std::string a_job = "arn:aws:batch:r:1:service-job/a1", c_job = "arn:aws:batch:r:1:service-job/c1";
  FakeAccess access;
  access.allowed = {"user/c " + c_job, "user/c put-by:user/c"};
  WebhookDispatcher d(log_, {}, &access);
  WebhookConfig rule = Hook("eventbridge/c-rule/t/1", "/rule");
  rule.owner = "user/c";
  rule.rule_name = "c-rule";
  d.SetOutboundRules({.allow_local = true});  // the receiver listens on loopback
  ASSERT_TRUE(d.Sync({rule, Hook("from-config", "/config")}).ok());
  // Stored at once, so that one pass of the dispatcher reads all five (published one by one, a
  // pass could run between two and ask about a1 again in the next: a flaky count).
  PublishAll({Stored(1, "aws.batch", {}, {a_job}),
              Stored(2, "aws.batch", {}, {a_job}),  // the same resource: decided once in the pass
              Stored(3, "aws.batch", {}, {c_job}),
              Stored(4, "team.c", {}, json::array(), "user/c"),
              Stored(5, "team.a", {}, json::array(), "user/a")}, 5);
  receiver_.WaitFor(7);  // 5 to the file's webhook, 2 to the rule
  d.Stop();
  std::vector<std::string> to_rule, to_config;
  for (const auto& r : receiver_.All()) (r.path == "/rule" ? to_rule : to_config).push_back(r.body.value("id", ""));
  EXPECT_EQ(to_rule, (std::vector<std::string>{"e3", "e4"}));
  EXPECT_EQ(to_config, (std::vector<std::string>{"e1", "e2", "e3", "e4", "e5"}));
  EXPECT_LE(access.asked.load(), 4);  // a1, c1, put by c, put by a
}

TEST_F(WebhooksTest, ARulesDeliveryWithoutAnAccessPortSendsNothing) {
  WebhookDispatcher d(log_, {});
  WebhookConfig rule = Hook("eventbridge/r/t/1", "/rule");
  rule.owner = "user/c";
  d.SetOutboundRules({.allow_local = true});
  ASSERT_TRUE(d.Sync({rule}).ok());
  Publish(1, "team.c", {}, json::array(), "user/c");
  WaitCursor(d, 1);
  d.Stop();
  EXPECT_TRUE(receiver_.All().empty());
}

TEST_F(WebhooksTest, ARulesDeliveryToLoopbackIsRefusedAtConnectAndGivenUpAtOnce) {
  FakeAccess access;
  access.allowed = {"user/c put-by:user/c"};
  WebhookDispatcher d(log_, {}, &access);
  WebhookConfig rule = Hook("eventbridge/r/t/1", "/internal/admin");  // the receiver listens on 127.0.0.1
  rule.owner = "user/c";
  rule.max_attempts = 186;
  WebhookConfig by_name = Hook("eventbridge/r/t2/1", "/by-name");
  by_name.url = "http://localhost:" + receiver_.Url("").substr(receiver_.Url("").rfind(':') + 1) + "/by-name";
  by_name.owner = "user/c";
  ASSERT_TRUE(d.Sync({rule, by_name, Hook("from-config", "/config")}).ok());  // outbound rules: the defaults
  Publish(1, "team.c", {}, json::array(), "user/c");
  receiver_.WaitFor(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto handled = [&] {
    for (const auto& s : d.Stats())
      if (s.cursor < 1) return false;
    return true;
  };
  while (!handled() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  d.Stop();
  ASSERT_EQ(receiver_.All().size(), 1u);
  EXPECT_EQ(receiver_.All()[0].path, "/config");  // the operator's own webhook may reach loopback
  for (const auto& s : d.Stats()) {
    if (s.name == "from-config") continue;
    EXPECT_EQ(s.dropped, 1u) << s.name;
    EXPECT_EQ(s.failed_attempts, 1u) << s.name;  // not retried: refused addresses stay refused
    EXPECT_NE(s.last_error.find("loopback"), std::string::npos) << s.last_error;
  }
}

sockaddr_storage Address(const std::string& text, int port) {
  sockaddr_storage ss{};
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, text.c_str(), &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
  } else {
    EXPECT_EQ(inet_pton(AF_INET6, text.c_str(), &in6->sin6_addr), 1) << text;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
  }
  return ss;
}

TEST(OutboundTest, LoopbackLinkLocalUnspecifiedAndTheServersOwnPortsAreRefused) {
  OutboundRules rules;
  rules.own_ports = {8080};
  rules.own_addresses = {"10.1.2.3", "fd00::5"};
  for (const std::string refused : {"127.0.0.1", "127.0.0.2", "127.255.255.254", "0.0.0.0", "0.1.2.3", "169.254.169.254",
                                    "169.254.0.1", "::", "::1", "fe80::1", "febf::1", "::ffff:127.0.0.1",
                                    "::ffff:169.254.169.254", "::ffff:0.0.0.0", "::127.0.0.1", "64:ff9b::7f00:1"}) {
    sockaddr_storage a = Address(refused, 443);
    EXPECT_EQ(CheckOutboundAddress(reinterpret_cast<sockaddr*>(&a), rules).code(), Code::kAccessDenied) << refused;
  }
  for (const std::string own : {"10.1.2.3", "fd00::5"}) {
    sockaddr_storage a = Address(own, 8080);
    EXPECT_EQ(CheckOutboundAddress(reinterpret_cast<sockaddr*>(&a), rules).code(), Code::kAccessDenied) << own;
    a = Address(own, 8081);
    EXPECT_TRUE(CheckOutboundAddress(reinterpret_cast<sockaddr*>(&a), rules).ok()) << own;
  }
  for (const std::string allowed : {"10.0.0.7", "192.168.1.1", "8.8.8.8", "2001:db8::1", "fec0::1", "::ffff:10.0.0.7"}) {
    sockaddr_storage a = Address(allowed, 8080);
    EXPECT_TRUE(CheckOutboundAddress(reinterpret_cast<sockaddr*>(&a), rules).ok()) << allowed;
  }
  rules.allow_local = true;
  sockaddr_storage a = Address("127.0.0.1", 8080);
  EXPECT_TRUE(CheckOutboundAddress(reinterpret_cast<sockaddr*>(&a), rules).ok());
}

TEST(OutboundTest, AnEndpointNamingThisHostIsRefusedWhenMade) {
  OutboundRules rules;
  for (const std::string url : {"http://127.0.0.1:5432/x", "http://localhost/internal/admin", "https://LocalHost.:8443/",
                                "http://api.localhost/", "http://127.0.0.2/", "http://0.0.0.0:8080/", "http://[::1]:80/",
                                "http://[::ffff:127.0.0.1]/", "http://169.254.169.254/latest/meta-data/",
                                "http://127.1/", "http://2130706433/", "http://0x7f000001/", "http://[fe80::1%25eth0]/",
                                "ftp://example.com/", "http://"}) {
    Status st = CheckOutboundUrl(url, rules);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << url;
    EXPECT_NE(st.message().find("InvocationEndpoint"), std::string::npos) << st.message();
  }
  for (const std::string url : {"https://hooks.example.com/a", "http://10.0.0.7:8080/x", "https://[2001:db8::1]/"})
    EXPECT_TRUE(CheckOutboundUrl(url, rules).ok()) << url;
  rules.allow_local = true;
  EXPECT_TRUE(CheckOutboundUrl("http://127.0.0.1:5432/x", rules).ok());
}

TEST(EventAccessTest, EachEventStandsForTheDescribeCallOnItsResource) {
  auto check = [](json event, const std::string& put_by = "") {
    json stored = {{"seq", 1}, {"event", event}};
    if (!put_by.empty()) stored["put_by"] = put_by;
    EventReadCheck c = ReadCheckOf(stored);
    return c.action + " " + c.resource;
  };
  EXPECT_EQ(check({{"resources", {"arn:aws:batch:r:1:service-job/j1", "arn:aws:batch:r:1:job-queue/q"}}}),
            "batch:DescribeServiceJob arn:aws:batch:r:1:service-job/j1");
  EXPECT_EQ(check({{"resources", {"arn:aws:batch:r:1:job/j2"}}}), "batch:DescribeJobs arn:aws:batch:r:1:job/j2");
  EXPECT_EQ(check({{"resources", {"arn:aws:sagemaker:r:1:training-job/t"}}}),
            "sagemaker:DescribeTrainingJob arn:aws:sagemaker:r:1:training-job/t");
  EXPECT_EQ(check({{"resources", {"arn:aws:sagemaker:r:1:hyper-parameter-tuning-job/h"}}}),
            "sagemaker:DescribeHyperParameterTuningJob arn:aws:sagemaker:r:1:hyper-parameter-tuning-job/h");
  EXPECT_EQ(check({{"resources", {"arn:aws:cloudwatch:r:1:alarm:x"}}}), "cloudwatch:DescribeAlarms arn:aws:cloudwatch:r:1:alarm:x");
  EXPECT_EQ(check({{"resources", {"arn:aws:events:r:1:rule/s"}}}), "events:DescribeRule arn:aws:events:r:1:rule/s");
  EXPECT_EQ(check({{"detail-type", "AWS API Call via CloudTrail"}, {"resources", {"arn:aws:iam::1:user/x"}}}),
            "trainyard:LookupAuditEvents *");
  // Put by a user: checked as events:PutEvents on the bus, whatever it claims to be.
  EXPECT_EQ(check({{"detail-type", "AWS API Call via CloudTrail"}, {"account", "1"}, {"region", "r"}}, "arn:aws:iam::1:user/c"),
            "events:PutEvents arn:aws:events:r:1:event-bus/default");
  // Nothing known: no action, which only the root's rules and the file's webhooks pass.
  EXPECT_EQ(check({{"resources", json::array()}}), " ");
  EXPECT_EQ(check({{"resources", {"arn:aws:s3:::bucket"}}}), " ");
  EXPECT_EQ(check(json::object()), " ");
}

}  // namespace
}  // namespace ty::obs
