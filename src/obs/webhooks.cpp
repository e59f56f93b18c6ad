#include "obs/webhooks.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "obs/event_filter.h"
#include "obs/input_transformer.h"
#include "store/event_log.h"

namespace ty::obs {

using nlohmann::json;

struct WebhookDispatcher::Hook {
  WebhookConfig config;
  EventFilter filter;
  std::thread thread;
  std::atomic<bool> stop{false};  // this delivery alone is ending (Sync)
  mutable std::mutex mu;  // guards stats
  WebhookStats stats;
};

namespace {

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

// Either flag ends a POST in flight: the dispatcher stopping, or this delivery alone (Sync).
struct StopFlags {
  const std::atomic<bool>* all;
  const std::atomic<bool>* one;
};

int Abort(void* flags, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* f = static_cast<const StopFlags*>(flags);
  return f->all->load() || f->one->load() ? 1 : 0;
}

// The connection of a delivery with an owner: every address curl is about to connect to (after
// name resolution, each candidate of several) is checked; a refused one gets no socket, so curl
// never connects to it. A proxy would be the address checked instead: none is used.
struct OutboundCheck {
  const OutboundRules* rules;
  std::string refused;  // the last refusal
};

curl_socket_t OpenCheckedSocket(void* data, curlsocktype, struct curl_sockaddr* address) {
  auto* check = static_cast<OutboundCheck*>(data);
  Status st = CheckOutboundAddress(&address->addr, *check->rules);
  if (!st.ok()) {
    check->refused = st.message();
    return CURL_SOCKET_BAD;
  }
  return ::socket(address->family, address->socktype, address->protocol);
}

// One POST; Ok on a 2xx answer, AccessDenied when the outbound rules refuse every address the
// URL names (`rules` null: a configuration-file webhook, not checked).
Status Post(CURL* curl, const WebhookConfig& w, const json& stored, const std::string& body, StopFlags* stopping,
            const OutboundRules* rules) {
  curl_easy_reset(curl);
  OutboundCheck check{rules, ""};
  if (rules) {
    curl_easy_setopt(curl, CURLOPT_OPENSOCKETFUNCTION, OpenCheckedSocket);
    curl_easy_setopt(curl, CURLOPT_OPENSOCKETDATA, &check);
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  }
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  struct curl_slist* headers = nullptr;
  auto add = [&](const std::string& h) { headers = curl_slist_append(headers, h.c_str()); };
  add("Content-Type: application/json");
  add("X-Trainyard-Webhook: " + w.name);
  add("X-Trainyard-Event-Id: " + stored["event"].value("id", ""));
  add("X-Trainyard-Event-Seq: " + std::to_string(stored.value("seq", uint64_t{0})));
  add("X-Trainyard-Event-At: " + std::to_string(stored.value("at", int64_t{0})));
  if (!w.secret.empty()) add("X-Trainyard-Signature: sha256=" + ToHex(HmacSha256(w.secret, body)));
  for (const auto& [name, value] : w.headers) add(name + ": " + value);
  curl_easy_setopt(curl, CURLOPT_URL, w.url.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  if (w.method != "POST") curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, w.method.c_str());
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
  if (rc != CURLE_OK && !check.refused.empty()) return Status(Code::kAccessDenied, w.method + " " + w.url + ": " + check.refused);
  if (rc != CURLE_OK) return Unavailable(std::string("POST ") + w.url + ": " + curl_easy_strerror(rc));
  if (code < 200 || code > 299) return Unavailable("POST " + w.url + ": HTTP " + std::to_string(code));
  return Status::Ok();
}

// The body sent for one stored event: the event, the part of it `input_path` names
// ("$.detail.status"), the constant `input`, or what the InputTransformer renders. A path that
// names nothing sends null, as EventBridge does.
std::string BodyOf(const WebhookConfig& w, const json& stored) {
  const json& event = stored["event"];
  if (!w.input.empty()) return w.input;
  if (!w.input_template.empty()) {
    return RenderInputTemplate(w.input_paths_map, w.input_template, event,
                               {w.rule_name.empty() ? w.name : w.rule_name, w.rule_arn, stored.value("at", int64_t{0})});
  }
  if (w.input_path.empty()) return event.dump();
  const json* at = FindEventPath(event, w.input_path);
  return at ? at->dump(-1, ' ', false, json::error_handler_t::replace) : "null";
}

}  // namespace

WebhookDispatcher::WebhookDispatcher(store::EventLog& log, std::vector<WebhookConfig> hooks, const EventAccess* access)
    : log_(log), initial_(std::move(hooks)), access_(access) {}

void WebhookDispatcher::SetOutboundRules(OutboundRules rules) {
  std::lock_guard lock(rules_mu_);
  rules_ = std::move(rules);
}

WebhookDispatcher::~WebhookDispatcher() { Stop(); }

Status WebhookDispatcher::Prepare(Hook& h) {
  EventFilter& f = h.filter;
  f.sources = h.config.sources;
  f.detail_types = h.config.detail_types;
  f.queues = h.config.queues;
  f.shares = h.config.shares;
  f.tags = h.config.tags;
  Status st = f.SetPattern(h.config.pattern);
  if (!st.ok()) return InvalidArgument("config: webhook " + h.config.name + ": " + st.message());
  bool found = false;
  auto cursor = log_.LoadCursor("webhook/" + h.config.name, &found);
  if (!cursor.ok()) return cursor.status();
  h.stats.name = h.config.name;
  h.stats.cursor = found ? *cursor : log_.LastPublished();
  if (!found) TY_RETURN_IF_ERROR(log_.SaveCursor("webhook/" + h.config.name, h.stats.cursor));
  return Status::Ok();
}

void WebhookDispatcher::Halt(std::unique_ptr<Hook> h, bool wait) {
  {
    std::lock_guard lock(mu_);
    h->stop = true;
  }
  cv_.notify_all();
  // It ends within a second (the longest wait for new events); joined now only when its cursor
  // is about to be read by a successor, else at the next Sync or Stop.
  if (wait && h->thread.joinable()) h->thread.join();
  retiring_.push_back(std::move(h));
}

Status WebhookDispatcher::Start() { return Sync(initial_); }

Status WebhookDispatcher::Sync(std::vector<WebhookConfig> hooks) {
  std::lock_guard sync(sync_mu_);
  if (stopping_) return Status::Ok();
  for (auto& h : retiring_)
    if (h->thread.joinable()) h->thread.join();
  retiring_.clear();
  // Everything new is checked and its cursor loaded before anything running is touched.
  std::vector<std::unique_ptr<Hook>> fresh;
  std::vector<std::unique_ptr<Hook>> kept;
  std::vector<std::unique_ptr<Hook>> old;
  {
    std::lock_guard lock(hooks_mu_);
    old = std::move(hooks_);
  }
  auto restore = [&] {
    std::lock_guard lock(hooks_mu_);
    hooks_ = std::move(old);
  };
  for (auto& c : hooks) {
    auto same = std::find_if(old.begin(), old.end(), [&](const auto& h) { return h && h->config == c; });
    if (same != old.end()) {
      kept.push_back(std::move(*same));
      continue;
    }
    auto h = std::make_unique<Hook>();
    h->config = std::move(c);
    if (Status st = Prepare(*h); !st.ok()) {
      for (auto& k : kept) old.push_back(std::move(k));
      std::erase(old, nullptr);
      restore();
      return st;
    }
    fresh.push_back(std::move(h));
  }
  // What is left of `old` ends; a changed one ends before its successor reads its cursor.
  std::set<std::string> restarted;
  for (auto& h : old) {
    if (!h) continue;
    const std::string name = h->config.name;
    const bool succeeded = std::any_of(fresh.begin(), fresh.end(), [&](const auto& f) { return f->config.name == name; });
    if (succeeded) restarted.insert(name);
    Halt(std::move(h), succeeded);
  }
  for (auto& h : fresh) {
    if (restarted.count(h->config.name)) {
      bool found = false;
      auto cursor = log_.LoadCursor("webhook/" + h->config.name, &found);
      if (cursor.ok() && found) h->stats.cursor = *cursor;
    }
    Hook* hook = h.get();
    h->thread = std::thread([this, hook] { Run(*hook); });
    kept.push_back(std::move(h));
  }
  std::lock_guard lock(hooks_mu_);
  hooks_ = std::move(kept);
  return Status::Ok();
}

void WebhookDispatcher::Stop() {
  std::lock_guard sync(sync_mu_);
  {
    std::lock_guard lock(mu_);
    if (stopping_.exchange(true)) return;
  }
  cv_.notify_all();
  log_.Close();
  for (auto& h : retiring_)
    if (h->thread.joinable()) h->thread.join();
  std::lock_guard lock(hooks_mu_);
  for (auto& h : hooks_)
    if (h->thread.joinable()) h->thread.join();
}

std::vector<WebhookStats> WebhookDispatcher::Stats() const {
  std::vector<WebhookStats> out;
  std::lock_guard hooks(hooks_mu_);
  for (const auto& h : hooks_) {
    std::lock_guard lock(h->mu);
    out.push_back(h->stats);
  }
  return out;
}

bool WebhookDispatcher::Pause(Hook& h, int64_t ms) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stopping_.load() || h.stop.load(); });
  return !stopping_.load() && !h.stop.load();
}

void WebhookDispatcher::Run(Hook& h) {
  const std::string consumer = "webhook/" + h.config.name;
  CURL* curl = curl_easy_init();
  StopFlags flags{&stopping_, &h.stop};
  uint64_t cursor;
  {
    std::lock_guard lock(h.mu);
    cursor = h.stats.cursor;
  }
  uint64_t saved = cursor;
  auto last_save = std::chrono::steady_clock::now();
  std::vector<store::StoredEvent> batch;
  auto ending = [&] { return stopping_.load() || h.stop.load(); };
  // Decisions of the owner's access, per resource, for one batch: a job's many events cost one
  // decision, and a change of policy applies from the next batch on.
  std::map<std::string, bool> readable;
  auto may_read = [&](const json& doc) {
    if (h.config.owner.empty()) return true;  // a configuration-file webhook
    if (!access_) return false;
    const EventReadCheck check = ReadCheckOf(doc);
    auto [it, fresh] = readable.try_emplace(check.Key(), false);
    if (fresh) it->second = access_->MayRead(h.config.owner, check);
    return it->second;
  };
  while (!ending()) {
    batch.clear();
    readable.clear();
    Status st = log_.Read(cursor, 64, &batch);
    if (!st.ok()) {
      spdlog::warn("webhook {}: {}", h.config.name, st.message());
      if (!Pause(h, 1000)) break;
      continue;
    }
    if (batch.empty()) {
      if (saved != cursor && log_.SaveCursor(consumer, cursor).ok()) saved = cursor;
      // A delivery that Sync stops ends after this wait at the latest (the log has no wakeup of its own).
      log_.WaitNewer(cursor, std::chrono::steady_clock::now() + std::chrono::seconds(1));
      continue;
    }
    if (batch.front().seq > cursor + 1 && cursor != 0) {
      std::lock_guard lock(h.mu);
      h.stats.skipped += batch.front().seq - cursor - 1;  // pruned by retention before delivery
    }
    for (const auto& e : batch) {
      json doc = json::parse(e.doc, nullptr, false);
      if (!doc.is_discarded() && h.filter.Matches(doc) && may_read(doc)) {
        const std::string body = BodyOf(h.config, doc);
        int64_t backoff = 1000;
        int attempts = 0;
        bool given_up = false;
        while (!ending()) {
          OutboundRules rules;
          if (!h.config.owner.empty()) {
            std::lock_guard lock(rules_mu_);
            rules = rules_;
          }
          Status sent = Post(curl, h.config, doc, body, &flags, h.config.owner.empty() ? nullptr : &rules);
          if (sent.ok()) break;
          {
            std::lock_guard lock(h.mu);
            ++h.stats.failed_attempts;
            h.stats.last_error = sent.message();
          }
          ++attempts;
          const int64_t age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch()).count() -
                                 doc.value("at", int64_t{0});
          // A refused address stays refused: the event is given up at once.
          if (sent.code() == Code::kAccessDenied || (h.config.max_attempts > 0 && attempts >= h.config.max_attempts) ||
              (h.config.max_event_age_seconds > 0 && age_ms > int64_t{h.config.max_event_age_seconds} * 1000)) {
            spdlog::warn("webhook {}: event {} (id {}) given up after {} attempt(s), {} s old: {}", h.config.name, e.seq,
                         doc["event"].value("id", ""), attempts, age_ms / 1000, sent.message());
            given_up = true;
            break;
          }
          spdlog::debug("webhook {}: event {}: {}; again in {} ms", h.config.name, e.seq, sent.message(), backoff);
          if (!Pause(h, backoff)) break;
          backoff = std::min<int64_t>(backoff * 2, int64_t{h.config.max_backoff_seconds} * 1000);
        }
        if (!given_up && ending()) break;  // not delivered: the saved cursor is before it
        cursor = e.seq;
        // Saved at most every 100 ms while delivering (and whenever it pauses): a crash repeats
        // only what was delivered since. A save per event would cost a third of the thread's time.
        const auto now = std::chrono::steady_clock::now();
        if (now - last_save >= std::chrono::milliseconds(100) && log_.SaveCursor(consumer, cursor).ok()) {
          saved = cursor;
          last_save = now;
        }
        std::lock_guard lock(h.mu);
        ++(given_up ? h.stats.dropped : h.stats.delivered);
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
