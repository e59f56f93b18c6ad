// Webhook delivery (obs/webhooks.h) over the in-memory event log and a local HTTP receiver: the
// set of deliveries follows Sync (EventBridge rules and targets change while the server runs).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "http/server.h"
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
  void Publish(uint64_t seq, const std::string& source, json detail = json::object()) {
    json event = {{"id", "e" + std::to_string(seq)}, {"source", source}, {"detail-type", "T"}, {"detail", detail}};
    json stored = {{"seq", seq}, {"at", 0}, {"queue", ""}, {"share", ""}, {"tags", json::object()}, {"event", event}};
    {
      std::lock_guard lock(data_->mu);
      data_->docs[store::Kind::kEvent][store::EventLog::Key(seq)] = stored.dump();
    }
    log_.Published(seq);
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

}  // namespace
}  // namespace ty::obs
