// Amazon EventBridge on the wire (X-Amz-Target AWSEvents.*, signed as "events"; docs/events.md,
// "EventBridge API"): rules, API-destination targets and their connections, PutEvents.
#pragma once

#include <string>
#include <vector>

#include "api/handlers.h"
#include "core/config.h"

namespace ty::api {

// Validates its own fields (the EventBridge model is not embedded). `caller`: the ARN of the
// principal making the call, the owner of a rule it creates and of the events it puts.
Response HandleEventBridge(control::Controller& c, const std::string& operation, const nlohmann::json& req,
                           const std::string& caller);
bool EventBridgeImplements(const std::string& operation);
// Every delivery there should be now: the configuration file's webhooks, then one per target of
// each enabled rule (named "eventbridge/<rule>/<target id>/<generation>", its cursor's name).
std::vector<WebhookConfig> EventBridgeDeliveries(control::Controller& c);

}  // namespace ty::api
