// EventBridge event patterns (obs/event_filter.h): parsing and checking a pattern as the
// WatchEvents / webhook settings take it, then matching it against events.
//
// Input: the pattern text; optionally followed by a line "%%" and a JSON object that replaces the
// fixed event's "detail" (the part of an event that carries what callers sent: names, tags). An
// accepted pattern is matched against the fixed training-job state-change event in any case. The
// envelope (source, detail-type, ...) is written by the server itself and stays well-formed.
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "fuzz_input.h"
#include "obs/event_filter.h"

namespace {

const nlohmann::json& FixedEvent() {
  static const nlohmann::json kEvent = nlohmann::json::parse(R"({
    "seq": 7, "at": 1767323045000, "queue": "q1", "share": "teamA", "tags": {"team": "a"},
    "event": {"version": "0", "id": "7", "source": "aws.sagemaker",
              "detail-type": "SageMaker Training Job State Change", "account": "000000000000",
              "time": "2026-01-02T03:04:05Z", "region": "us-east-1", "resources": ["arn:x"],
              "detail": {"TrainingJobName": "job-1", "TrainingJobStatus": "Completed",
                         "ResourceConfig": {"InstanceCount": 2, "VolumeSizeInGB": 1.5},
                         "Tags": [{"Key": "team", "Value": "a"}], "FailureReason": null}}})");
  return kEvent;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = ty::fuzz::AsText(data, size);
  std::string_view event_text;
  if (size_t sep = in.find("\n%%\n"); sep != std::string_view::npos) {
    event_text = in.substr(sep + 4);
    in = in.substr(0, sep);
  }
  ty::obs::EventFilter filter;
  if (!filter.SetPattern(std::string(in)).ok()) return 0;
  (void)filter.Matches(FixedEvent());
  if (!event_text.empty()) {
    nlohmann::json detail = nlohmann::json::parse(event_text, nullptr, /*allow_exceptions=*/false);
    if (detail.is_object()) {
      nlohmann::json stored = FixedEvent();
      stored["event"]["detail"] = std::move(detail);
      (void)filter.Matches(stored);
    }
  }
  return 0;
}
