// GET /metrics: Prometheus text exposition of the controller's counters and of gauges computed
// from its state (reference: docs/metrics.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "obs/webhooks.h"

namespace ty::control {
class Controller;
}

namespace ty::api {

// The exposition (text format 0.0.4), taken under the controller's shared lock.
std::string RenderMetrics(const control::Controller& c);
// The event log's and the webhooks' families (appended to the above).
std::string RenderEventMetrics(uint64_t latest_seq, const std::vector<obs::WebhookStats>& webhooks);

}  // namespace ty::api
