#include "api/server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/errors.h"
#include "api/events.h"
#include "api/handlers.h"
#include "api/metrics.h"
#include "api/service_model.h"
#include "api/sigv4.h"
#include "control/controller.h"
#include "core/strings.h"
#include "obs/webhooks.h"
#include "store/event_log.h"

namespace ty::api {

using nlohmann::json;

struct ApiServer::Impl {
  control::Controller& controller;
  RootCredential root;
  httplib::Server http;
  std::unique_ptr<obs::WebhookDispatcher> webhooks;

  Impl(control::Controller& c, RootCredential r) : controller(c), root(std::move(r)) {}

  void Reply(httplib::Response& res, Protocol protocol, const Status& st) {
    WireError e = ToWireError(protocol, st);
    res.status = e.http_status;
    res.set_header("x-amzn-ErrorType", e.type);
    res.set_header("x-amzn-RequestId", NewRequestId());
    res.set_content(ErrorBody(protocol, e),
                    protocol != Protocol::kBatchRestJson ? "application/x-amz-json-1.1" : "application/json");
  }

  void Reply(httplib::Response& res, Protocol protocol, const json& body) {
    res.status = 200;
    res.set_header("x-amzn-RequestId", NewRequestId());
    res.set_content(body.dump(), protocol != Protocol::kBatchRestJson ? "application/x-amz-json-1.1" : "application/json");
  }

  static std::string NewRequestId() { return NewUuid(); }

  void Stream(const httplib::Request& req, httplib::Response& res);

  Status Authenticate(const httplib::Request& req, const std::string& service) {
    HttpRequestView view;
    view.method = req.method;
    auto q = req.target.find('?');
    view.path = q == std::string::npos ? req.target : req.target.substr(0, q);
    view.query = q == std::string::npos ? "" : req.target.substr(q + 1);
    for (const auto& [k, v] : req.headers) view.headers.emplace_back(k, v);
    view.body = req.body;
    SecretLookup lookup = [this](std::string_view key) -> std::optional<std::string> {
      if (key == root.access_key_id) return root.secret_access_key;
      return std::nullopt;
    };
    auto caller = VerifySigV4(view, lookup, controller.config().region, {service}, SystemClock::instance().now_ms());
    return caller.status();
  }

  StatusOr<json> ParseBody(const httplib::Request& req) {
    if (static_cast<int64_t>(req.body.size()) > controller.config().max_request_bytes)
      return Status(Code::kPayloadTooLarge, "Request body of " + std::to_string(req.body.size()) +
                                                " bytes exceeds the limit of " +
                                                std::to_string(controller.config().max_request_bytes) + " bytes");
    if (req.body.empty()) return json::object();
    json j = json::parse(req.body, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return InvalidArgument("The request body is not a JSON object");
    return j;
  }

  void Handle(const httplib::Request& req, httplib::Response& res, Protocol protocol, const std::string& service,
              const ServiceModel* model, const std::string& operation) {
    auto t0 = std::chrono::steady_clock::now();
    Status auth = Authenticate(req, service);
    if (!auth.ok()) return Reply(res, protocol, auth);
    auto body = ParseBody(req);
    if (!body.ok()) return Reply(res, protocol, body.status());
    Response out = Status(Code::kUnknownOperation, "");
    if (model) {
      const ServiceModel::Operation* op = model->FindOperation(operation);
      bool implemented = protocol == Protocol::kBatchRestJson ? BatchImplements(operation) : SageMakerImplements(operation);
      if (!op || !implemented)
        return Reply(res, protocol, Status(Code::kUnknownOperation, "Operation " + operation + " is not supported by this server"));
      Status valid = model->ValidateInput(*op, *body);
      if (!valid.ok()) return Reply(res, protocol, valid);
      out = protocol == Protocol::kBatchRestJson ? HandleBatch(controller, operation, *body)
                                                  : HandleSageMaker(controller, operation, *body);
    } else if (protocol == Protocol::kLogsJson) {
      if (!LogsImplements(operation))
        return Reply(res, protocol, Status(Code::kUnknownOperation, "Operation " + operation + " is not supported by this server"));
      out = HandleLogs(controller, operation, *body);
    } else if (operation == "AdvanceClock") {
      out = HandleAdvanceClock(controller, *body);
    } else if (operation == "Interrupt") {
      out = HandleInterrupt(controller, *body);
    } else if (operation == "CostReport") {
      out = HandleCostReport(controller, *body);
    } else if (operation == "MetricSeries") {
      out = HandleMetricSeries(controller, *body);
    } else if (operation == "Events") {
      out = HandleEvents(controller, *body);
    } else if (operation == "SystemMetrics") {
      out = HandleSystemMetrics(controller, *body);
    } else {
      out = HandleGetLogs(controller, *body);
    }
    if (!out.ok()) {
      if (out.status().code() == Code::kInternal) spdlog::error("{}: {}", operation, out.status().message());
      Reply(res, protocol, out.status());
    } else {
      Reply(res, protocol, *out);
    }
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    spdlog::debug("{} {} -> {} in {} us", service, operation, res.status, us);
  }
};

// GET /trainyard/v1/events/stream: server-sent events (docs/events.md). Query parameters: after
// (a sequence number; default: the newest, or the Last-Event-ID header), source, detail-type,
// queue, share (each may repeat) and pattern (an EventBridge pattern).
void ApiServer::Impl::Stream(const httplib::Request& req, httplib::Response& res) {
  Status auth = Authenticate(req, "events");
  if (!auth.ok()) return Reply(res, Protocol::kSageMakerJson, auth);
  store::EventLog* log = controller.events();
  if (!log || !controller.config().events_enabled)
    return Reply(res, Protocol::kSageMakerJson, FailedPrecondition("events are not enabled on this server"));
  json q = json::object();
  auto many = [&](const char* param, const char* key) {
    if (!req.has_param(param)) return;
    json v = json::array();
    for (size_t i = 0; i < req.get_param_value_count(param); ++i) v.push_back(req.get_param_value(param, i));
    q[key] = v;
  };
  many("source", "Sources");
  many("detail-type", "DetailTypes");
  many("queue", "JobQueues");
  many("share", "Shares");
  if (req.has_param("pattern")) q["EventPattern"] = req.get_param_value("pattern");
  auto filter = EventFilterFrom(q);
  if (!filter.ok()) return Reply(res, Protocol::kSageMakerJson, filter.status());
  std::string from = req.has_header("Last-Event-ID") ? req.get_header_value("Last-Event-ID") : req.get_param_value("after");
  uint64_t cursor = log->LastPublished();
  if (!from.empty()) {
    char* end = nullptr;
    cursor = std::strtoull(from.c_str(), &end, 10);
    if (!end || *end != '\0')
      return Reply(res, Protocol::kSageMakerJson, InvalidArgument("after (or Last-Event-ID) must be a sequence number"));
  }
  if (EventWaiters().fetch_add(1) >= controller.config().events_max_streams) {
    EventWaiters().fetch_sub(1);
    return Reply(res, Protocol::kSageMakerJson,
                 Status(Code::kLimitExceeded, "Too many event streams are open (events.max_streams = " +
                                               std::to_string(controller.config().events_max_streams) + ")"));
  }
  auto state = std::make_shared<std::pair<obs::EventFilter, uint64_t>>(std::move(*filter), cursor);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, log, state](size_t, httplib::DataSink& sink) {
        if (log->closed()) {
          sink.done();
          return true;
        }
        std::vector<json> found;
        Status error = Status::Ok();
        const uint64_t before = state->second;
        state->second = ReadMatching(*log, state->first, state->second, 100, 10000, &found, &error);
        if (!error.ok()) return false;
        std::string out;
        for (const auto& d : found) {
          const json& e = d["event"];
          out += "id: " + std::to_string(d["seq"].get<uint64_t>()) + "\nevent: " + e.value("detail-type", "") +
                 "\ndata: " + e.dump() + "\n\n";
        }
        if (!out.empty()) return sink.write(out.data(), out.size());
        if (state->second != before) return true;  // skipped unwanted events: read on
        if (log->WaitNewer(state->second, std::chrono::steady_clock::now() + std::chrono::seconds(15)) <= state->second &&
            !log->closed()) {
          static const std::string kKeepAlive = ": keep-alive\n\n";  // finds clients that left
          return sink.write(kKeepAlive.data(), kKeepAlive.size());
        }
        return true;
      },
      [](bool) { EventWaiters().fetch_sub(1); });
}

ApiServer::ApiServer(control::Controller& controller, RootCredential root)
    : impl_(std::make_unique<Impl>(controller, std::move(root))) {
  auto& http = impl_->http;
  Impl* impl = impl_.get();
  http.set_keep_alive_max_count(100000);
  http.set_keep_alive_timeout(5);
  http.set_payload_max_length(static_cast<size_t>(controller.config().max_request_bytes) + 1);
  http.set_tcp_nodelay(true);
  int threads = controller.config().http_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };

  // Batch: POST /v1/<operation>, routed by the model's requestUri.
  http.Post(R"(/v1/[a-z]+)", [impl](const httplib::Request& req, httplib::Response& res) {
    const ServiceModel& m = ServiceModel::Batch();
    const ServiceModel::Operation* op = m.FindByHttp("POST", req.path);
    impl->Handle(req, res, Protocol::kBatchRestJson, "batch", &m, op ? op->name : req.path);
  });
  // SageMaker: POST / with X-Amz-Target: SageMaker.<Operation>.
  http.Post("/", [impl](const httplib::Request& req, httplib::Response& res) {
    std::string target = req.get_header_value("X-Amz-Target");
    // CloudWatch Logs shares the JSON 1.1 shape; its operations are told apart by the prefix.
    static const std::string kLogsPrefix = "Logs_20140328.";
    if (target.rfind(kLogsPrefix, 0) == 0) {
      impl->Handle(req, res, Protocol::kLogsJson, "logs", nullptr, target.substr(kLogsPrefix.size()));
      return;
    }
    const ServiceModel& m = ServiceModel::SageMaker();
    std::string prefix = m.target_prefix() + ".";
    if (target.rfind(prefix, 0) != 0) {
      impl->Reply(res, Protocol::kSageMakerJson,
                  Status(Code::kUnknownOperation, "X-Amz-Target must name a SageMaker operation, not '" + target + "'"));
      return;
    }
    impl->Handle(req, res, Protocol::kSageMakerJson, "sagemaker", &m, target.substr(prefix.size()));
  });
  http.Post("/trainyard/v1/logs", [impl](const httplib::Request& req, httplib::Response& res) {
    impl->Handle(req, res, Protocol::kSageMakerJson, "sagemaker", nullptr, "GetLogs");
  });
  http.Post("/trainyard/v1/admin/advance-clock", [impl](const httplib::Request& req, httplib::Response& res) {
    impl->Handle(req, res, Protocol::kSageMakerJson, "sagemaker", nullptr, "AdvanceClock");
  });
  http.Post("/trainyard/v1/admin/interrupt", [impl](const httplib::Request& req, httplib::Response& res) {
    impl->Handle(req, res, Protocol::kSageMakerJson, "sagemaker", nullptr, "Interrupt");
  });
  http.Post("/trainyard/v1/metric-series", [impl](const httplib::Request& req, httplib::Response& res) {
    impl->Handle(req, res, Protocol::kSageMakerJson, "sagemaker", nullptr, "MetricSeries");
  });
  http.Post("/trainyard/v1/system-metrics", [impl](const httplib::Request& req, httplib::Response& res) {
    impl->Handle(req, res, Protocol::kSageMakerJson, "sagemaker", nullptr, "SystemMetrics");
  });
  http.Post("/trainyard/v1/costs", [impl](const httplib::Request& req, httplib::Response& res) {
    impl->Handle(req, res, Protocol::kSageMakerJson, "sagemaker", nullptr, "CostReport");
  });
  // Events (docs/events.md): replay from a cursor, with long polling, signed as "events".
  http.Post("/trainyard/v1/events", [impl](const httplib::Request& req, httplib::Response& res) {
    impl->Handle(req, res, Protocol::kSageMakerJson, "events", nullptr, "Events");
  });
  http.Get("/trainyard/v1/events/stream", [impl](const httplib::Request& req, httplib::Response& res) {
    impl->Stream(req, res);
  });
  // Prometheus scrape endpoint: unauthenticated, read-only (docs/metrics.md).
  http.Get("/metrics", [impl](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    std::string text = RenderMetrics(impl->controller);
    if (store::EventLog* log = impl->controller.events())
      text += RenderEventMetrics(log->LastPublished(), impl->webhooks ? impl->webhooks->Stats() : std::vector<obs::WebhookStats>{});
    res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
  });
  http.set_error_handler([impl](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    Protocol p = req.has_header("X-Amz-Target") ? Protocol::kSageMakerJson : Protocol::kBatchRestJson;
    if (res.status == 413) {
      impl->Reply(res, p, Status(Code::kPayloadTooLarge, "Request body exceeds the limit of " +
                                                             std::to_string(impl->controller.config().max_request_bytes) + " bytes"));
      res.status = 413;
    } else if (res.status == 404) {
      impl->Reply(res, p, Status(Code::kUnknownOperation, "No operation at " + req.method + " " + req.path));
      res.status = 404;
    }
  });
}

ApiServer::~ApiServer() {
  if (impl_->webhooks) impl_->webhooks->Stop();
}

StatusOr<int> ApiServer::Bind(const std::string& host, int port) {
  const Config& config = impl_->controller.config();
  if (!config.webhooks.empty() && impl_->controller.events() && config.events_enabled && !impl_->webhooks) {
    auto d = std::make_unique<obs::WebhookDispatcher>(*impl_->controller.events(), config.webhooks);
    Status st = d->Start();
    if (!st.ok()) return st;
    impl_->webhooks = std::move(d);
  }
  int bound = port == 0 ? impl_->http.bind_to_any_port(host) : (impl_->http.bind_to_port(host, port) ? port : -1);
  if (bound < 0) return Unavailable("cannot listen on " + host + ":" + std::to_string(port));
  return bound;
}

void ApiServer::Run() { impl_->http.listen_after_bind(); }

void ApiServer::Stop() {
  if (impl_->webhooks) impl_->webhooks->Stop();
  if (store::EventLog* log = impl_->controller.events()) log->Close();  // ends the streams
  impl_->http.stop();
}

}  // namespace ty::api
