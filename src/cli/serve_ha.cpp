// Several `trainyard serve` processes over one PostgreSQL database, one of which leads
// (docs/operations.md, "High availability").
//
// Every server binds its listener at once and answers every request:
//  - the leader (the holder of the lease, store/postgres.h) runs the controller and serves the
//    API itself, as a lone server does;
//  - a follower runs no controller. It passes each request on, unchanged and still signed, to the
//    leader's advertised address and returns the leader's answer: the leader authenticates,
//    authorizes and decides, so there is one place where state changes and reads see every
//    acknowledged write. While no server leads (a failover), a request waits for one up to the
//    lease and two seconds, then is answered 503.
//
// The lease loop runs every third of the lease: a follower records itself and tries to take the
// lease; the leader renews it. A leader the database deposed (its renewal or a commit refused by
// the fence, or no renewal for a whole lease) exits with status 75 at once: its memory is stale,
// and a process manager restarts it as a follower. Attempts run on in their supervisors; the next
// leader re-adopts them as a restart does.
#include "cli/serve_ha.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/console.h"
#include "api/forward.h"
#include "control/controller.h"
#include "core/steady_clock.h"
#include "core/strings.h"

namespace ty::cli {
namespace {

using nlohmann::json;

constexpr int kDeposedExit = 75;
constexpr std::string_view kForwardedBy = "X-Trainyard-Forwarded-By";

[[noreturn]] void Deposed(const std::string& why) {
  spdlog::error("no longer the leader: {}; exiting (status {}) so that a restart rejoins as a follower", why, kDeposedExit);
  spdlog::shutdown();
  std::fflush(nullptr);
  std::_Exit(kDeposedExit);
}

std::string ThisHost() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0 && *name) return name;
  return "localhost";
}

class ReplicatedServer {
 public:
  explicit ReplicatedServer(const ReplicatedServe& s)
      : s_(s),
        lease_ms_(static_cast<int64_t>(s.config.ha.lease_seconds * 1000)),
        listener_(api::ListenerLimits(s.config), [this](const http::Request& req) { return Route(req); },
                  [](int status, const std::string& message, const http::Request* head) {
                    return api::RefuseRequest(status, message, head);
                  }) {
    listener_.SetBodyPlan([this](const http::Request& head) {
      if (api::ApiServer* a = serving_.load()) return a->PlanBody(head);
      // A follower holds no keys: the leader authenticates what it passes on. A body is charged to
      // the access key its head names, unverified (kept apart from verified ones), so an upload
      // larger than an address's share still passes; the whole budget still bounds them all.
      http::BodyPlan plan;
      plan.limit = std::max(s_.config.s3.max_upload_bytes, s_.config.max_request_bytes);
      if (std::vector<std::string> scope = api::CredentialScope(head); !scope.empty())
        plan.caller = "unverified " + scope[0];
      return plan;
    });
  }

  int Run() {
    // The schema first (migrated, or a newer one refused), before this server says it is up.
    if (auto probe = store::OpenPostgresStore(s_.config.store_url); !probe.ok()) return Fail(probe.status().message());
    if (s_.tls_files)
      if (Status st = listener_.UseTls(*s_.tls_files); !st.ok()) return Fail("TLS: " + st.message());
    auto bound = listener_.Bind(s_.host, s_.port);
    if (!bound.ok()) return Fail(bound.status().message());
    port_ = *bound;
    const std::string scheme = s_.tls_files ? "https" : "http";
    std::string host = s_.host == "0.0.0.0" || s_.host == "::" || s_.host.empty() ? ThisHost() : s_.host;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    address_ = s_.config.ha.advertise_url.empty() ? scheme + "://" + host + ":" + std::to_string(port_) : s_.config.ha.advertise_url;
    while (!address_.empty() && address_.back() == '/') address_.pop_back();
    name_ = s_.config.ha.name.empty() ? ThisHost() + ":" + std::to_string(port_) : s_.config.ha.name;
    id_ = name_ + "/" + RandomAlnum(8, false);
    auto lease = store::OpenLeaderLease(s_.config.store_url, id_, name_, address_);
    if (!lease.ok()) return Fail(lease.status().message());
    lease_ = std::move(lease).value();
    spdlog::info("server {} joins the servers over PostgreSQL ([store] url), advertised as {}; lease {} ms", name_, address_,
                 lease_ms_);

    std::thread http([this] { listener_.Run(); });
    std::thread loop([this] { LeaseLoop(); });
    // Up once its place is known: serving as the leader, or following one (or still waiting for a
    // lease that has not expired). A server that cannot open the state as the leader on its first
    // try fails its start, as a lone server does.
    bool failed = false;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return announced_ || start_failure_; });
      failed = start_failure_;
    }
    if (failed) {
      std::fprintf(stderr, "trainyard: %s\n", start_error_.c_str());
      std::fflush(nullptr);
      std::_Exit(1);
    }
    std::printf("listening on %s://%s:%d\n", scheme.c_str(), s_.host.c_str(), port_);
    std::fflush(stdout);
    if (s_.config.console.enabled)
      spdlog::info("web console at {}://{}:{}/console/ (sign in with an access key of this server)", scheme, s_.host, port_);

    int sig = 0;
    sigwait(&s_.signals, &sig);
    spdlog::info("received signal {}; shutting down", sig);
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    loop.join();
    if (promotion_.joinable()) promotion_.join();
    if (api::ApiServer* a = serving_.exchange(nullptr)) {
      a->Stop();
      controller_->Shutdown();  // finishes the current turn; its commit is the last of this term
    }
    if (term_ > 0) {
      // Handing over at once: a follower takes the lease at its next try, not a lease later.
      if (Status st = lease_->Release(term_); !st.ok()) spdlog::warn("cannot release the lease: {}", st.message());
      else spdlog::info("released the lease of term {}", term_);
    }
    (void)lease_->Heartbeat("stopped", term_);
    listener_.Stop();
    http.detach();  // idle keep-alive connections may hold workers; the state is durable by now
    spdlog::info("stopped");
    spdlog::shutdown();
    std::fflush(nullptr);
    std::_Exit(0);
  }

 private:
  int Fail(const std::string& message) {
    std::fprintf(stderr, "trainyard: %s\n", message.c_str());
    return 1;
  }

  // ---- The lease loop ----

  void LeaseLoop() {
    const int64_t tick = std::max<int64_t>(100, lease_ms_ / 3);
    int64_t last_renewed = SteadyMs();
    std::string last_error;
    while (true) {
      {
        std::unique_lock lock(mu_);
        if (stopping_) return;
      }
      const int64_t started = SteadyMs();
      Status st = Status::Ok();
      if (term_ == 0) {
        auto taken = lease_->TryAcquire(lease_ms_);
        if (!taken.ok()) {
          st = taken.status();
        } else if (taken->term > 0) {
          term_ = taken->term;
          last_renewed = started;
          spdlog::info("took the lease: leading as term {} (no leader for {} ms before, by the database's clock)", term_,
                       taken->leaderless_ms);
          took_at_ = started;
          // The thread stays until the server stops: a child it started may be tied to it
          // (PR_SET_PDEATHSIG follows the thread that forked, not the process).
          promotion_ = std::thread([this] {
            Promote();
            std::unique_lock lock(mu_);
            cv_.wait(lock, [this] { return stopping_; });
          });
        }
      } else {
        auto renewed = lease_->Renew(term_, lease_ms_);
        if (renewed.ok() && !*renewed) {
          auto holder = lease_->Holder();
          Deposed("the database refused renewing the lease of term " + std::to_string(term_) + " (fenced: term " +
                  (holder.ok() ? std::to_string(holder->term) + " is held by " + holder->name : std::string("?")) + ")");
        }
        if (renewed.ok()) last_renewed = started;
        else st = renewed.status();
        // Cut off from the database for a whole lease: another server may lead by now.
        if (SteadyMs() - last_renewed > lease_ms_)
          Deposed("the lease of term " + std::to_string(term_) + " could not be renewed for " +
                  std::to_string(SteadyMs() - last_renewed) + " ms (" + (st.ok() ? std::string("slow") : st.message()) + ")");
      }
      if (st.ok()) st = lease_->Heartbeat(serving_.load() ? "leader" : term_ > 0 ? "promoting" : "follower", term_);
      auto holder = st.ok() ? lease_->Holder() : StatusOr<store::LeaseHolder>(st);
      auto servers = holder.ok() ? lease_->Servers() : StatusOr<std::vector<store::ServerRow>>(holder.status());
      {
        std::lock_guard lock(mu_);
        if (servers.ok()) {
          holder_ = *holder;
          servers_ = *servers;
          last_db_ok_ = SteadyMs();
        }
        if (term_ == 0) announced_ = true;  // a follower: up
      }
      cv_.notify_all();
      if (!servers.ok() && servers.status().message() != last_error)
        spdlog::warn("the database did not answer the lease loop: {}", servers.status().message());
      last_error = servers.ok() ? "" : servers.status().message();
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(10, started + tick - SteadyMs())), [this] { return stopping_; });
    }
  }

  // Opens the controller over the shared state as a restart would (loading it, re-adopting the
  // running attempts), every commit fenced by this term, then serves.
  void Promote() {
    store::PostgresOptions options;
    options.fence_term = term_.load();
    options.on_fenced = [](const Status& refused) { Deposed(refused.message()); };
    auto controller = OpenController(s_.config, s_.clock, s_.self_exe, std::move(options));
    if (!controller.ok()) return PromotionFailed("cannot open the state as the leader: " + controller.status().message());
    controller_ = std::move(controller).value();
    WireController(*controller_, s_.offset_clock, s_.host, port_, s_.tls_files);
    api_ = std::make_unique<api::ApiServer>(*controller_, s_.root, &listener_);
    api_->NoteListenerPort(port_);
    if (Status st = api_->StartServices(); !st.ok()) return PromotionFailed(st.message());
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      controller_->Start();
      serving_.store(api_.get());
      announced_ = true;
    }
    cv_.notify_all();
    spdlog::info("term {}: serving as the leader, {} ms after taking the lease", term_, SteadyMs() - took_at_);
  }

  // Before the server said it is up, a failure to lead is a failed start (exit 1, the reason on
  // stderr); after, the server leaves as a deposed one would.
  void PromotionFailed(const std::string& why) {
    bool at_start = false;
    {
      std::lock_guard lock(mu_);
      at_start = !announced_;
      if (at_start) {
        start_failure_ = true;
        start_error_ = why;
      }
    }
    cv_.notify_all();
    if (at_start) return;  // the main thread reports it and exits
    Deposed(why);
  }

  // ---- Requests ----

  http::Response Route(const http::Request& req) {
    if (req.method == "GET" && req.path == "/healthz") return Health(req);
    if (api::ApiServer* a = serving_.load()) return a->Serve(req);
    if (req.Header(kForwardedBy))
      return Unavailable503(req, "The request reached " + name_ + " through another server, and neither leads now; retry");
    // A leader, or the wait for one. A leader that refuses connections is dead or gone (its lease
    // has not run out yet): the request never reached it, so it waits for the next one.
    const int64_t deadline = SteadyMs() + lease_ms_ + 2000;
    http::Fields headers;
    // X-Forwarded-For is extended unless the client signed it (SigV4 SignedHeaders).
    const std::string* auth = req.Header("Authorization");
    const bool xff_signed = auth && ToLower(*auth).find("x-forwarded-for") != std::string::npos;
    std::string forwarded_for;
    for (const auto& [name, value] : req.headers) {
      if (!xff_signed && EqualsIgnoreCase(name, "X-Forwarded-For")) forwarded_for = value;
      else if (!EqualsIgnoreCase(name, kForwardedBy)) headers.emplace_back(name, value);
    }
    headers.emplace_back(std::string(kForwardedBy), name_);
    // Believed by the leader's audit only when this server is one of [audit] trusted_proxies.
    if (!xff_signed && !req.peer.empty()) headers.emplace_back("X-Forwarded-For", forwarded_for.empty() ? req.peer : forwarded_for + ", " + req.peer);
    std::string unreachable;  // the last leader that refused, and why
    while (true) {
      store::LeaseHolder leader;
      {
        std::unique_lock lock(mu_);
        while (true) {
          if (serving_.load()) break;
          if (!holder_.address.empty() && holder_.id != id_ && holder_.expires_in_ms > 0 && last_db_ok_ > 0 &&
              holder_.id != refused_id_) {
            leader = holder_;
            break;
          }
          const int64_t left = deadline - SteadyMs();
          if (left <= 0 || stopping_) break;
          cv_.wait_for(lock, std::chrono::milliseconds(std::min<int64_t>(left, 100)));
        }
      }
      if (api::ApiServer* a = serving_.load()) return a->Serve(req);
      if (!leader.address.empty() && (req.path == "/trainyard/v1/events/stream" || req.path == "/console/api/events"))
        return Unavailable503(req, "Event streams are served by the leader (" + leader.name + " at " + leader.address +
                                       ") only; connect to it, or through an endpoint that routes to the leader "
                                       "(GET /healthz?role=leader)");
      if (leader.address.empty())
        return Unavailable503(req, "No server leads now (a failover is under way" + unreachable + "); retry in a few seconds");
      api::PeerTarget target{"leader", leader.address, 2, s_.config.ha.forward_timeout_seconds};
      bool not_delivered = false;
      auto answer = api::SendToPeer(target, req.method, req.path, req.query, headers, req.body, &not_delivered);
      if (answer.ok()) return std::move(answer).value();
      if (!not_delivered)
        return Unavailable503(req, "The leader (" + leader.name + " at " + leader.address + ") did not answer: " +
                                       answer.status().message() + "; retry");
      unreachable = "; the last leader, " + leader.name + " at " + leader.address + ", refuses connections";
      std::lock_guard lock(mu_);
      refused_id_ = leader.id;  // until the lease changes hands
    }
  }

  http::Response Unavailable503(const http::Request& req, const std::string& message) {
    http::Response res = api::RefuseRequest(503, message, &req);
    res.headers.emplace_back("Retry-After", "1");
    return res;
  }

  // GET /healthz: 200 while this server reaches the database (lag under the lease); with
  // ?role=leader, 200 only on the leader once it serves. The detail (servers, terms, lag) is open
  // unless [server] metrics_token is set; then it needs that token as a bearer.
  http::Response Health(const http::Request& req) {
    const bool leading = serving_.load() != nullptr;
    json out;
    int status = 200;
    {
      std::lock_guard lock(mu_);
      const int64_t lag = last_db_ok_ > 0 ? SteadyMs() - last_db_ok_ : -1;
      const bool healthy = lag >= 0 && lag < lease_ms_;
      const std::string role = leading ? "leader" : term_ > 0 ? "promoting" : "follower";
      out = {{"status", healthy ? "ok" : "unavailable"}, {"role", role}, {"store", "postgresql"}};
      const auto wanted = req.Params("role");
      if (!wanted.empty() && wanted.front() == "leader") status = leading ? 200 : 503;
      else if (!healthy) status = 503;
      if (DetailAllowed(req)) {
        out["server"] = {{"id", id_}, {"name", name_}, {"address", address_}, {"role", role}, {"term", term_.load()}, {"lag_ms", lag}};
        out["leader"] = {{"id", holder_.id},
                         {"name", holder_.name},
                         {"address", holder_.address},
                         {"term", holder_.term},
                         {"lease_remaining_ms", holder_.expires_in_ms},
                         {"held_ms", holder_.held_ms}};
        json list = json::array();
        for (const auto& s : servers_)
          list.push_back({{"id", s.id},
                          {"name", s.name},
                          {"address", s.address},
                          {"role", s.role},
                          {"term", s.term},
                          {"lag_ms", s.last_seen_ms_ago},
                          {"up_ms", s.up_ms}});
        out["servers"] = std::move(list);
      }
    }
    http::Response res;
    res.status = status;
    res.headers = {{"Content-Type", "application/json"}, {"Cache-Control", "no-store"}};
    res.body = out.dump();
    return res;
  }

  bool DetailAllowed(const http::Request& req) const {
    const std::string& token = s_.config.metrics_token;
    if (token.empty()) return true;
    const std::string* auth = req.Header("Authorization");
    if (!auth || !StartsWith(*auth, "Bearer ")) return false;
    return api::SecretEquals(auth->substr(7), token);  // in constant time: the token is a secret
  }

  const ReplicatedServe& s_;
  const int64_t lease_ms_;
  std::string id_, name_, address_;
  int port_ = 0;
  std::unique_ptr<store::LeaderLease> lease_;  // the lease loop's alone
  std::atomic<int64_t> term_{0};  // written by the lease loop alone, before Promote starts
  int64_t took_at_ = 0;
  std::thread promotion_;
  std::unique_ptr<control::Controller> controller_;  // set once, by Promote
  std::unique_ptr<api::ApiServer> api_;
  std::atomic<api::ApiServer*> serving_{nullptr};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  store::LeaseHolder holder_;             // the database's lease row, as the lease loop last read it
  std::vector<store::ServerRow> servers_;
  int64_t last_db_ok_ = 0;                // steady ms of the lease loop's last full round trip
  std::string refused_id_;                // a leader that refused a connection: not tried again
  bool announced_ = false;                // "listening on" may be printed: leading, or following
  bool start_failure_ = false;            // the first promotion failed: the start fails
  std::string start_error_;

  http::Server listener_;  // last: destroyed first, while what its handlers use still exists
};

}  // namespace

int RunReplicated(const ReplicatedServe& serve) {
  // Leaked on purpose: the process ends with _Exit, and threads may still hold it.
  auto* server = new ReplicatedServer(serve);
  return server->Run();
}

}  // namespace ty::cli
