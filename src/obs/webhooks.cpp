#include "obs/webhooks.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "obs/event_filter.h"
#include "store/event_log.h"

namespace ty::obs {

using nlohmann::json;

struct WebhookDispatcher::Hook {
  WebhookConfig config;
  EventFilter filter;
  std::thread thread;
  mutable std::mutex mu;  // guards stats
  WebhookStats stats;
};

namespace {

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

int Abort(void* stopping, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<std::atomic<bool>*>(stopping)->load() ? 1 : 0;
}

// One POST; Ok on a 2xx answer.
Status Post(CURL* curl, const WebhookConfig& w, const json& stored, const std::string& body, std::atomic<bool>* stopping) {
  curl_easy_reset(curl);
  struct curl_slist* headers = nullptr;
  auto add = [&](const std::string& h) { headers = curl_slist_append(headers, h.c_str()); };
  add("Content-Type: application/json");
  add("X-Trainyard-Webhook: " + w.name);
  add("X-Trainyard-Event-Id: " + stored["event"].value("id", ""));
  add("X-Trainyard-Event-Seq: " + std::to_string(stored.value("seq", uint64_t{0})));
  add("X-Trainyard-Event-At: " + std::to_string(stored.value("at", int64_t{0})));
  if (!w.secret.empty()) add("X-Trainyard-Signature: sha256=" + ToHex(HmacSha256(w.secret, body)));
  curl_easy_setopt(curl, CURLOPT_URL, w.url.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, static_cast<long>(w.timeout_seconds));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, static_cast<long>(std::min(w.timeout_seconds, 5)));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Discard);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, Abort);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, stopping);
  CURLcode rc = curl_easy_perform(curl);
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) return Unavailable(std::string("POST ") + w.url + ": " + curl_easy_strerror(rc));
  if (code < 200 || code > 299) return Unavailable("POST " + w.url + ": HTTP " + std::to_string(code));
  return Status::Ok();
}

}  // namespace

WebhookDispatcher::WebhookDispatcher(store::EventLog& log, std::vector<WebhookConfig> hooks) : log_(log) {
  for (auto& c : hooks) {
    auto h = std::make_unique<Hook>();
    h->stats.name = c.name;
    h->config = std::move(c);
    hooks_.push_back(std::move(h));
  }
}

WebhookDispatcher::~WebhookDispatcher() { Stop(); }

Status WebhookDispatcher::Start() {
  for (auto& h : hooks_) {
    EventFilter& f = h->filter;
    f.sources = h->config.sources;
    f.detail_types = h->config.detail_types;
    f.queues = h->config.queues;
    f.shares = h->config.shares;
    f.tags = h->config.tags;
    Status st = f.SetPattern(h->config.pattern);
    if (!st.ok()) return InvalidArgument("config: webhook " + h->config.name + ": " + st.message());
    bool found = false;
    auto cursor = log_.LoadCursor("webhook/" + h->config.name, &found);
    if (!cursor.ok()) return cursor.status();
    h->stats.cursor = found ? *cursor : log_.LastPublished();
    if (!found) TY_RETURN_IF_ERROR(log_.SaveCursor("webhook/" + h->config.name, h->stats.cursor));
  }
  for (auto& h : hooks_) {
    Hook* hook = h.get();
    h->thread = std::thread([this, hook] { Run(*hook); });
  }
  return Status::Ok();
}

void WebhookDispatcher::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_.exchange(true)) return;
  }
  cv_.notify_all();
  log_.Close();
  for (auto& h : hooks_)
    if (h->thread.joinable()) h->thread.join();
}

std::vector<WebhookStats> WebhookDispatcher::Stats() const {
  std::vector<WebhookStats> out;
  for (const auto& h : hooks_) {
    std::lock_guard lock(h->mu);
    out.push_back(h->stats);
  }
  return out;
}

bool WebhookDispatcher::Pause(int64_t ms) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stopping_.load(); });
  return !stopping_.load();
}

void WebhookDispatcher::Run(Hook& h) {
  const std::string consumer = "webhook/" + h.config.name;
  CURL* curl = curl_easy_init();
  uint64_t cursor;
  {
    std::lock_guard lock(h.mu);
    cursor = h.stats.cursor;
  }
  uint64_t saved = cursor;
  auto last_save = std::chrono::steady_clock::now();
  std::vector<store::StoredEvent> batch;
  while (!stopping_) {
    batch.clear();
    Status st = log_.Read(cursor, 64, &batch);
    if (!st.ok()) {
      spdlog::warn("webhook {}: {}", h.config.name, st.message());
      if (!Pause(1000)) break;
      continue;
    }
    if (batch.empty()) {
      if (saved != cursor && log_.SaveCursor(consumer, cursor).ok()) saved = cursor;
      log_.WaitNewer(cursor, std::chrono::steady_clock::now() + std::chrono::seconds(1));
      continue;
    }
    if (batch.front().seq > cursor + 1 && cursor != 0) {
      std::lock_guard lock(h.mu);
      h.stats.skipped += batch.front().seq - cursor - 1;  // pruned by retention before delivery
    }
    for (const auto& e : batch) {
      json doc = json::parse(e.doc, nullptr, false);
      if (!doc.is_discarded() && h.filter.Matches(doc)) {
        const std::string body = doc["event"].dump();
        int64_t backoff = 1000;
        while (!stopping_) {
          Status sent = Post(curl, h.config, doc, body, &stopping_);
          if (sent.ok()) break;
          {
            std::lock_guard lock(h.mu);
            ++h.stats.failed_attempts;
            h.stats.last_error = sent.message();
          }
          spdlog::debug("webhook {}: event {}: {}; again in {} ms", h.config.name, e.seq, sent.message(), backoff);
          if (!Pause(backoff)) break;
          backoff = std::min<int64_t>(backoff * 2, int64_t{h.config.max_backoff_seconds} * 1000);
        }
        if (stopping_) break;  // not delivered: the saved cursor is before it
        cursor = e.seq;
        // Saved at most every 100 ms while delivering (and whenever it pauses): a crash repeats
        // only what was delivered since. A save per event would cost a third of the thread's time.
        const auto now = std::chrono::steady_clock::now();
        if (now - last_save >= std::chrono::milliseconds(100) && log_.SaveCursor(consumer, cursor).ok()) {
          saved = cursor;
          last_save = now;
        }
        std::lock_guard lock(h.mu);
        ++h.stats.delivered;
        h.stats.cursor = cursor;
      } else {
        cursor = e.seq;
        std::lock_guard lock(h.mu);
        h.stats.cursor = cursor;
      }
    }
    if (saved != cursor && log_.SaveCursor(consumer, cursor).ok()) saved = cursor;
  }
  curl_easy_cleanup(curl);
}

}  // namespace ty::obs
