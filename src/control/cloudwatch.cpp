// PutMetricData's turn (docs/metrics.md, "The CloudWatch API"): users' own metrics into
// State::cloudwatch, the hours they land in written with the turn.
#include <set>

#include "control/controller.h"
#include "control/turn.h"

namespace ty::control {

Status Controller::PutMetricData(const std::vector<CwDatum>& data) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    CloudWatchMetrics& cw = state_.cloudwatch;
    // All or nothing: the series this put would add are counted before anything is stored.
    std::set<std::string> added;
    for (const CwDatum& d : data)
      if (std::string key = d.id.Key(); !cw.Find(key)) added.insert(std::move(key));
    if (cw.series().size() + added.size() > cw.max_series())
      return Status(Code::kLimitExceeded, "This server keeps at most " + std::to_string(cw.max_series()) +
                                              " CloudWatch metrics ([cloudwatch] max_series); this request would add " +
                                              std::to_string(added.size()) + " to the " +
                                              std::to_string(cw.series().size()) + " stored");
    for (const CwDatum& d : data) TY_RETURN_IF_ERROR(cw.Put(d.id, d.unit, d.timestamp, d.values, &t.cloudwatch));
    cw.Compact(t.now, &t.cloudwatch);
    return Status::Ok();
  });
}

}  // namespace ty::control
