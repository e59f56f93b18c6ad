// EventBridge rules, targets, connections and API destinations (docs/events.md, "EventBridge
// API"): what the controller keeps of them. Each is a kMeta document, "eventbus/rule/<name>",
// "eventbus/connection/<name>" or "eventbus/api-destination/<name>", written with the turn that
// changed it, so a restart keeps them. Delivery is obs/webhooks' (one per enabled rule's target);
// the API layer derives the deliveries from this state (DeliveriesOf).
//
// Field shapes (name patterns, lengths, enums) are the API layer's to check; the controller checks
// what needs the state: existence, references, and what may not be removed while in use. A
// change to a configuration-file webhook's rule is FailedPrecondition (EventBridge's
// ManagedRuleException), and nothing else here returns that code.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/model.h"

namespace ty::control {

// A rule's target: an API destination (the one kind served).
struct EventTarget {
  std::string id;          // Id, unique within the rule
  std::string arn;         // the API destination's ARN
  std::string input;       // Input: a constant JSON body ("" = the event)
  std::string input_path;  // InputPath ("" = the whole event)
  // InputTransformer (obs/input_transformer.h): variable -> path, and the template ("" = none).
  // At most one of input, input_path and input_template is set.
  std::map<std::string, std::string> input_paths_map;
  std::string input_template;
  // RetryPolicy: AWS's defaults unless the target gives its own.
  int maximum_retry_attempts = 185;
  int maximum_event_age_seconds = 86400;
  // Names this target's delivery cursor: a new value on each PutTargets and each EnableRule, so
  // a target re-added, or a rule enabled again, delivers only what happens from then on.
  uint64_t generation = 0;
};

struct EventRule {
  std::string name;
  std::string arn;
  std::string event_pattern;  // as given (JSON text), checked by obs::CheckEventPattern ("" = none)
  // ScheduleExpression: rate(N unit) only ("" = none). The rule fires a "Scheduled Event" every
  // period of the controller's clock, counted from schedule_since (when the expression was set).
  std::string schedule_expression;
  int64_t schedule_period_ms = 0;
  EpochMs schedule_since = 0;
  std::string description;
  bool enabled = true;        // State: ENABLED | DISABLED
  Tags tags;
  std::vector<EventTarget> targets;  // in the order added
  EpochMs created = 0;
  // The ARN of the principal that made the rule: its targets get only the events it may read, by
  // its policies at delivery (docs/events.md, "Who receives which events"). "" : a rule stored
  // before owners were, which delivers nothing until a PutRule names its owner.
  std::string owner;
};

// How an API destination authorizes itself. The secret parts are kept (they must be sent) but are
// never returned by an API call nor written to a log.
struct EventConnection {
  std::string name;
  std::string arn;
  std::string description;
  std::string authorization_type;  // API_KEY | BASIC
  std::string key_name;            // API_KEY: the header
  std::string key_value;           // API_KEY: secret
  std::string username;            // BASIC
  std::string password;            // BASIC: secret
  EpochMs created = 0;
  EpochMs modified = 0;
};

struct ApiDestination {
  std::string name;
  std::string arn;
  std::string description;
  std::string connection_arn;
  std::string invocation_endpoint;  // http:// or https://
  std::string http_method;          // POST | PUT
  int rate_limit_per_second = 0;    // kept and returned; delivery is one event at a time anyway
  EpochMs created = 0;
  EpochMs modified = 0;
};

struct EventBus {
  std::map<std::string, EventRule> rules;                     // by name
  std::map<std::string, EventConnection> connections;         // by name
  std::map<std::string, ApiDestination> api_destinations;     // by name
  uint64_t next_generation = 1;  // EventTarget::generation; restored as max + 1
  // Not stored: each enabled scheduled rule's last period handled (fired or skipped). A rule
  // without one (after a restart) starts at the current period without firing, so missed
  // periods never fire as a burst.
  std::map<std::string, EpochMs> schedule_slots;
};

// ---- Commands ----
struct PutRuleCommand {
  std::string name;
  std::string event_pattern;
  std::string schedule_expression;  // checked by the API layer, which gives its period
  int64_t schedule_period_ms = 0;
  std::string description;
  bool enabled = true;
  Tags tags;  // on create only, as AWS (tags of an existing rule change through TagResource)
  std::string principal;  // the caller's ARN: the owner of a rule it creates (or of one without)
};
struct PutTargetsCommand {
  std::string rule;
  std::vector<EventTarget> targets;  // generation is drawn by the controller
};
struct RemoveTargetsCommand {
  std::string rule;
  std::vector<std::string> ids;  // ids the rule lacks are ignored, as AWS does
};
struct CreateConnectionCommand {
  EventConnection connection;  // arn and times are the controller's
};
struct CreateApiDestinationCommand {
  ApiDestination destination;  // arn and times are the controller's
};
// PutEvents: whole events, rendered by the API layer (id, source, detail-type, detail, ...).
struct PutEventsCommand {
  std::vector<std::string> events;  // JSON objects
  std::vector<EpochMs> times;       // each event's time, for the log's retention
  std::string principal;            // the caller's ARN: its own rules receive these events
};

std::string EncodeDoc(const EventRule& v);
std::string EncodeDoc(const EventConnection& v);
std::string EncodeDoc(const ApiDestination& v);
bool DecodeDoc(const std::string& doc, EventRule* v);
bool DecodeDoc(const std::string& doc, EventConnection* v);
bool DecodeDoc(const std::string& doc, ApiDestination* v);

}  // namespace ty::control
