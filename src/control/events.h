// What makes an event (docs/events.md). The controller records a trigger where a state change
// happens; at the end of the turn each one is rendered (by the renderer the API layer installs,
// which owns the wire shapes) and committed with the state it describes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/model.h"

namespace ty::control {

struct State;

struct EventTrigger {
  enum class Kind {
    kServiceJobStateChange,   // aws.batch "Batch Service Job State Change"
    kJobQueueBlocked,         // aws.batch "Batch Job Queue Blocked"
    kTrainingJobStateChange,  // aws.sagemaker "SageMaker Training Job State Change"
    kTuningJobStateChange,    // aws.sagemaker "SageMaker HyperParameter Tuning Job State Change"
    kAlarmStateChange,        // aws.cloudwatch "CloudWatch Alarm State Change" (docs/alarms.md)
    kApiCall,                 // "AWS API Call via CloudTrail": an audit record (docs/security.md, "Audit")
    kCustom,                  // PutEvents: a user's own event, whole, in `data`
  };
  Kind kind = Kind::kServiceJobStateChange;
  uint64_t job_seq = 0;   // service job
  std::string name;       // training job, tuning job or alarm
  std::string status;     // the new status: Batch status, TrainingJobStatus, or OK | ALARM
  std::string secondary;  // training job: SecondaryStatus
  std::string reason;     // status reason, transition message, or why the alarm changed
  std::string previous;   // alarm: the state before
  std::string data;       // alarm: JSON object (the rule and what it found); API call: the audit record;
                          // custom: the event
  std::string principal;  // custom, from PutEvents: the ARN of the principal that put it ("" the server's)
  EpochMs at = 0;
};

// Renders one event as its stored document: {"seq","at","queue","share","tags","event":{...}}.
// Called on the controller thread with the state as it is at the end of the turn.
using EventRenderer = std::function<std::string(const State&, const EventTrigger&, uint64_t seq)>;

}  // namespace ty::control
