// CloudWatch metric math (docs/metrics.md, "The CloudWatch API"): the expressions GetMetricData
// evaluates over the series its MetricStat queries returned. Pure functions, no I/O.
//
// Grammar: numbers, query ids, + - * / and parentheses, [id, id, ...] (an array of series),
// METRICS() (every MetricStat query's series), SUM / AVG / MIN / MAX (of an array: one series,
// point by point over the timestamps any member has; of one series: one number, over its
// points), FILL(x, number | REPEAT) (missing points of the period grid filled with the number, or
// with the latest earlier value). Arithmetic between series keeps the timestamps both have; with
// a number, every point. A result that is a number is the same value at every grid timestamp.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace ty::control {

using CwTimeSeries = std::map<EpochMs, double>;

// Evaluates `expression` over `vars` (query id -> series; `metric_ids` are the MetricStat ones,
// in request order, for METRICS()). `grid`: the period's timestamps over the request's window.
// InvalidArgument naming the position and the rule for an expression that does not parse, an
// unknown id or function, or a result that is not one series.
StatusOr<CwTimeSeries> EvaluateCwExpression(std::string_view expression, const std::map<std::string, CwTimeSeries>& vars,
                                            const std::vector<std::string>& metric_ids, const std::vector<EpochMs>& grid);

}  // namespace ty::control
