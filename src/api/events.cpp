// Events (docs/events.md): the EventBridge shapes of state changes, their replay from a cursor
// (POST /trainyard/v1/events, with long polling) and their stream over server-sent events.
#include <atomic>
#include <chrono>
#include <thread>

#include "api/encode.h"
#include "api/events.h"
#include "control/controller.h"
#include "core/strings.h"
#include "obs/event_filter.h"
#include "store/event_log.h"

namespace ty::api {

using nlohmann::json;
using control::EventTrigger;
using control::State;

std::string RenderEvent(const Config& config, const State& s, const EventTrigger& e, uint64_t seq) {
  json event = {{"version", "0"},
                {"id", NewUuid()},
                {"detail-type", ""},
                {"source", ""},
                {"account", config.account_id},
                {"time", FormatIso8601(e.at)},
                {"region", config.region},
                {"resources", json::array()},
                {"detail", json::object()}};
  json stored = {{"seq", seq}, {"at", e.at}, {"queue", ""}, {"share", ""}, {"tags", json::object()}};
  switch (e.kind) {
    case EventTrigger::Kind::kServiceJobStateChange:
    case EventTrigger::Kind::kJobQueueBlocked: {
      auto found = s.jobs.find(e.job_seq);
      if (found == s.jobs.end()) break;  // jobs are never deleted; kept safe all the same
      const control::ServiceJobState& js = found->second;
      json detail = EncodeServiceJobEventDetail(s, js);
      detail["status"] = e.status;
      if (!e.reason.empty()) detail["statusReason"] = e.reason;
      const bool blocked = e.kind == EventTrigger::Kind::kJobQueueBlocked;
      event["source"] = "aws.batch";
      event["detail-type"] = blocked ? "Batch Job Queue Blocked" : "Batch Service Job State Change";
      event["resources"].push_back(js.job.arn);
      if (blocked) event["resources"].push_back(detail.value("jobQueue", js.job.queue));
      event["detail"] = std::move(detail);
      stored["queue"] = js.job.queue;
      stored["share"] = control::ShareOf(js.job);
      stored["tags"] = EncodeTags(js.job.tags);
      break;
    }
    case EventTrigger::Kind::kTrainingJobStateChange: {
      const TrainingJob* tj = s.FindTrainingJob(e.name);
      json detail = tj ? EncodeTrainingJobEventDetail(*tj, e.at) : json{{"TrainingJobName", e.name}};
      detail["TrainingJobStatus"] = e.status;
      detail["SecondaryStatus"] = e.secondary;
      event["source"] = "aws.sagemaker";
      event["detail-type"] = "SageMaker Training Job State Change";
      if (tj) {
        event["resources"].push_back(tj->arn);
        for (const auto& tag : detail.value("Tags", json::array()))
          if (tag.is_object()) stored["tags"][tag.value("Key", "")] = tag.value("Value", "");
        if (const control::ServiceJobState* js = s.FindJob(tj->service_job_id)) {
          stored["queue"] = js->job.queue;
          stored["share"] = control::ShareOf(js->job);
        }
      }
      event["detail"] = std::move(detail);
      break;
    }
    case EventTrigger::Kind::kTuningJobStateChange: {
      // DescribeHyperParameterTuningJob's shape with the Tags, as SageMaker sends it.
      const control::TuningJob* tuning = s.FindTuningJob(e.name);
      json detail = tuning ? EncodeTuningJobEventDetail(s, *tuning, e.at) : json{{"HyperParameterTuningJobName", e.name}};
      detail["HyperParameterTuningJobStatus"] = e.status;
      event["source"] = "aws.sagemaker";
      event["detail-type"] = "SageMaker HyperParameter Tuning Job State Change";
      if (tuning) {
        event["resources"].push_back(tuning->arn);
        for (const auto& [k, v] : tuning->tags) stored["tags"][k] = v;
      }
      event["detail"] = std::move(detail);
      break;
    }
    case EventTrigger::Kind::kAlarmStateChange: {
      // CloudWatch's alarm state-change shape, so rules written for it apply.
      json data = json::parse(e.data, nullptr, false);
      if (!data.is_object()) data = json::object();
      const std::string arn = "arn:aws:cloudwatch:" + config.region + ":" + config.account_id + ":alarm:" + e.name;
      event["source"] = "aws.cloudwatch";
      event["detail-type"] = "CloudWatch Alarm State Change";
      event["resources"].push_back(arn);
      json previous = {{"value", e.previous}};
      if (data.contains("previous") && data["previous"].is_object()) {
        previous["reason"] = data["previous"].value("reason", "");
        if (EpochMs at = data["previous"].value("timestamp", EpochMs{0}); at > 0) previous["timestamp"] = FormatIso8601(at);
      }
      event["detail"] = {{"alarmName", e.name},
                         {"state", {{"value", e.status}, {"reason", e.reason}, {"reasonData", data.value("reasonData", "{}")},
                                    {"timestamp", FormatIso8601(e.at)}}},
                         {"previousState", previous},
                         {"configuration", data.value("configuration", json::object())}};
      stored["queue"] = data.value("queue", "");
      break;
    }
    case EventTrigger::Kind::kApiCall: {
      // An audit record (api/audit.h), as EventBridge delivers CloudTrail's: the record is the detail.
      json record = json::parse(e.data, nullptr, false);
      if (!record.is_object()) record = json::object();
      const std::string source = record.value("eventSource", "");
      event["source"] = EndsWith(source, ".amazonaws.com") ? "aws." + source.substr(0, source.size() - 14) : source;
      event["detail-type"] = "AWS API Call via CloudTrail";
      for (const auto& r : record.value("resources", json::array()))
        if (r.is_object() && StartsWith(r.value("name", ""), "arn:")) event["resources"].push_back(r["name"]);
      for (const auto& r : record.value("resources", json::array()))
        if (r.is_object() && r.value("type", "") == "AWS::Batch::JobQueue") {
          stored["queue"] = r.value("name", "");
          break;
        }
      event["detail"] = std::move(record);
      break;
    }
    case EventTrigger::Kind::kCustom: {
      // PutEvents (api/eventbridge_api.cpp) rendered the whole event and answered with its id.
      json given = json::parse(e.data, nullptr, false);
      if (given.is_object()) event = std::move(given);
      // Who put it decides who receives it (obs/event_access.h); the server's own have no "put_by".
      if (!e.principal.empty()) stored["put_by"] = e.principal;
      break;
    }
  }
  stored["event"] = std::move(event);
  return stored.dump();
}

StatusOr<obs::EventFilter> EventFilterFrom(const json& req) {
  obs::EventFilter f;
  auto strings = [&](const char* key, std::vector<std::string>* out) -> Status {
    if (!req.contains(key)) return Status::Ok();
    const json& v = req[key];
    if (v.is_string()) {
      out->push_back(v);
      return Status::Ok();
    }
    if (!v.is_array()) return InvalidArgument(std::string(key) + " must be a string or an array of strings");
    for (const auto& e : v) {
      if (!e.is_string()) return InvalidArgument(std::string(key) + " must be a string or an array of strings");
      out->push_back(e);
    }
    return Status::Ok();
  };
  TY_RETURN_IF_ERROR(strings("Sources", &f.sources));
  TY_RETURN_IF_ERROR(strings("DetailTypes", &f.detail_types));
  TY_RETURN_IF_ERROR(strings("JobQueues", &f.queues));
  TY_RETURN_IF_ERROR(strings("Shares", &f.shares));
  if (req.contains("Tags")) {
    if (!req["Tags"].is_object()) return InvalidArgument("Tags must be an object of string values");
    for (const auto& [k, v] : req["Tags"].items()) {
      if (!v.is_string()) return InvalidArgument("Tags." + k + " must be a string");
      f.tags.emplace_back(k, v.get<std::string>());
    }
  }
  if (req.contains("EventPattern")) {
    const json& p = req["EventPattern"];
    if (!p.is_string() && !p.is_object()) return InvalidArgument("EventPattern must be a JSON object or a string holding one");
    TY_RETURN_IF_ERROR(f.SetPattern(p.is_string() ? p.get<std::string>() : p.dump()));
  }
  return f;
}

namespace {

StatusOr<uint64_t> CursorArg(const json& req) {
  if (!req.contains("After")) return uint64_t{0};
  const json& a = req["After"];
  if (a.is_number_unsigned()) return a.get<uint64_t>();
  if (a.is_number_integer() && a.get<int64_t>() >= 0) return static_cast<uint64_t>(a.get<int64_t>());
  if (a.is_string()) {
    if (a.get<std::string>() == "latest") return uint64_t{UINT64_MAX};
    char* end = nullptr;
    const std::string text = a;
    uint64_t v = std::strtoull(text.c_str(), &end, 10);
    if (!text.empty() && end && *end == '\0') return v;
  }
  return InvalidArgument("After must be a sequence number >= 0 (or \"latest\")");
}

}  // namespace

// Reads matching events after `after`: at most `limit`, scanning at most `scan` stored events.
// Returns the cursor to continue from.
uint64_t ReadMatching(store::EventLog& log, const obs::EventFilter& f, uint64_t after, size_t limit, size_t scan,
                      std::vector<json>* out, Status* error) {
  std::vector<store::StoredEvent> batch;
  size_t scanned = 0;
  while (out->size() < limit && scanned < scan) {
    batch.clear();
    Status st = log.Read(after, std::min<size_t>(500, scan - scanned), &batch);
    if (!st.ok()) {
      *error = st;
      return after;
    }
    if (batch.empty()) break;
    for (auto& e : batch) {
      ++scanned;
      after = e.seq;
      json doc = json::parse(e.doc, nullptr, false);
      if (!doc.is_discarded() && f.Matches(doc)) {
        out->push_back(std::move(doc));
        if (out->size() >= limit) break;
      }
    }
  }
  return after;
}

std::atomic<int>& EventWaiters() {
  static std::atomic<int> waiters{0};
  return waiters;
}

Response HandleEvents(control::Controller& c, const json& req) {
  store::EventLog* log = c.events();
  if (!log) return FailedPrecondition("events are not enabled on this server");
  auto filter = EventFilterFrom(req);
  if (!filter.ok()) return filter.status();
  auto after = CursorArg(req);
  if (!after.ok()) return after.status();
  if (req.contains("Limit") && (!req["Limit"].is_number_integer() || req["Limit"].get<int64_t>() < 1 || req["Limit"].get<int64_t>() > 1000))
    return InvalidArgument("Limit must be an integer from 1 to 1000");
  if (req.contains("WaitSeconds") &&
      (!req["WaitSeconds"].is_number_integer() || req["WaitSeconds"].get<int64_t>() < 0 || req["WaitSeconds"].get<int64_t>() > 20))
    return InvalidArgument("WaitSeconds must be an integer from 0 to 20");
  const size_t limit = static_cast<size_t>(req.value("Limit", int64_t{100}));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(req.value("WaitSeconds", int64_t{0}));
  uint64_t cursor = *after == UINT64_MAX ? log->LastPublished() : *after;
  std::vector<json> found;
  Status error = Status::Ok();
  // A waiting call holds an HTTP worker: waiters (with the event streams) are capped at
  // [events] max_streams; over that, the call answers at once and says it did not wait.
  bool may_wait = req.value("WaitSeconds", int64_t{0}) > 0;
  if (may_wait && EventWaiters().fetch_add(1) >= c.config().events_max_streams) {
    EventWaiters().fetch_sub(1);
    may_wait = false;
  }
  struct Release {
    bool held;
    ~Release() {
      if (held) EventWaiters().fetch_sub(1);
    }
  } release{may_wait};
  while (true) {
    cursor = ReadMatching(*log, *filter, cursor, limit, 10000, &found, &error);
    if (!error.ok()) return error;
    if (!found.empty() || log->closed() || !may_wait || std::chrono::steady_clock::now() >= deadline) break;
    if (cursor < log->LastPublished()) continue;  // scanned a full slice of unwanted events
    log->WaitNewer(cursor, deadline);
  }
  json events = json::array();
  for (auto& d : found) events.push_back({{"Seq", d["seq"]}, {"Queue", d["queue"]}, {"Share", d["share"]}, {"Event", std::move(d["event"])}});
  auto oldest = log->OldestStored();
  json out = {{"Events", std::move(events)}, {"NextCursor", cursor}, {"LatestSeq", log->LastPublished()}};
  if (req.value("WaitSeconds", int64_t{0}) > 0 && !release.held) out["Waited"] = false;
  if (oldest.ok()) out["OldestSeq"] = *oldest;
  return out;
}

}  // namespace ty::api
