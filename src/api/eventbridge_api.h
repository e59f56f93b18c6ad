// Amazon EventBridge on the wire (X-Amz-Target AWSEvents.*, signed as "events"; docs/events.md,
// "EventBridge API"): rules, API-destination targets and their connections, PutEvents.
#pragma once

#include <string>
#include <vector>

#include "api/handlers.h"
#include "core/config.h"

namespace ty::api {

// The operations are the rows of EventBridgeOperations() (api/operations.h); each validates its own
// fields (the EventBridge model is not embedded) and records its caller as the owner of a rule it
// creates and of the events it puts.
// Every delivery there should be now: the configuration file's webhooks, then one per target of
// each enabled rule (named "eventbridge/<rule>/<target id>/<generation>", its cursor's name).
std::vector<WebhookConfig> EventBridgeDeliveries(control::Controller& c);

}  // namespace ty::api
