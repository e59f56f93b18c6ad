// GET /metrics: Prometheus text exposition of the controller's counters and of gauges computed
// from its state (reference: docs/metrics.md).
#pragma once

#include <string>

namespace ty::control {
class Controller;
}

namespace ty::api {

// The exposition (text format 0.0.4), taken under the controller's shared lock.
std::string RenderMetrics(const control::Controller& c);

}  // namespace ty::api
