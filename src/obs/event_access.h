// Who may read which stored event (docs/events.md, "Who receives which events"). An EventBridge
// rule's targets get only the events its owner may read, decided per event as the describe call
// on the event's resource would decide it. This file says which check an event stands for; the
// decision itself (policies, the resource's tags and owner) is the API layer's, behind
// EventAccess. Pure: no clock, no state, no I/O.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace ty::obs {

// The check that decides whether a principal may read one event.
struct EventReadCheck {
  // The IAM action: batch:DescribeServiceJob on a service job's ARN, batch:DescribeJobs on a
  // container job's, sagemaker:DescribeTrainingJob, sagemaker:DescribeHyperParameterTuningJob,
  // cloudwatch:DescribeAlarms, events:DescribeRule (a rule's Scheduled Event),
  // trainyard:LookupAuditEvents on "*" (an audit record), events:PutEvents on the event bus with
  // events:source and events:detail-type (a PutEvents event). "" : an event of a kind no rule
  // below names, which only the root's rules and the configuration file's webhooks receive.
  std::string action;
  std::string resource;  // the ARN checked, or "*"
  // PutEvents events: the principal that put it (its own rules receive it), and the condition keys.
  std::string put_by;
  std::string source;
  std::string detail_type;

  // Equal keys decide alike for one principal: what a delivery pass caches decisions under.
  std::string Key() const;
};

// The check for a stored event document ({"seq","at",...,"put_by"?,"event":{...}}). The event's
// first resource is the one checked (a service job's "Batch Job Queue Blocked" names the job, then
// its queue).
EventReadCheck ReadCheckOf(const nlohmann::json& stored);

// The decision, made by the API layer from the principals' current policies and the resources'
// current tags and owners (api::Authorizer::MayReadEvent). Called from delivery threads.
class EventAccess {
 public:
  virtual ~EventAccess() = default;
  // Whether `owner` (a principal's ARN) may read an event `check` stands for.
  virtual bool MayRead(const std::string& owner, const EventReadCheck& check) const = 0;
};

}  // namespace ty::obs
