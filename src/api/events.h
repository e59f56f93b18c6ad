// Event reads shared by the replay handler and the server-sent-event stream (docs/events.md).
#pragma once

#include <atomic>
#include <nlohmann/json.hpp>
#include <vector>

#include "api/handlers.h"
#include "obs/event_filter.h"

namespace ty::store {
class EventLog;
}

namespace ty::api {

// The filters of a request: Sources, DetailTypes, JobQueues, Shares (strings or arrays), Tags
// (object) and EventPattern (EventBridge pattern, object or string).
StatusOr<obs::EventFilter> EventFilterFrom(const nlohmann::json& req);

// Appends up to `limit` stored events after `after` that pass `f` (scanning at most `scan`) and
// returns the sequence number to continue after.
uint64_t ReadMatching(store::EventLog& log, const obs::EventFilter& f, uint64_t after, size_t limit, size_t scan,
                      std::vector<nlohmann::json>* out, Status* error);

// Calls and streams waiting for events now (each holds an HTTP worker thread); capped at
// [events] max_streams.
std::atomic<int>& EventWaiters();

// POST /trainyard/v1/events: {"After"?, "Limit"?, "WaitSeconds"?, filters...} ->
// {"Events": [{"Seq","Queue","Share","Event"}], "NextCursor", "LatestSeq", "OldestSeq"}.
Response HandleEvents(control::Controller& c, const nlohmann::json& req);

}  // namespace ty::api
