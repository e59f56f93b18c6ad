// The RE2 a MetricDefinitions Regex compiles to: the same options when the request is checked
// (api/training_request.cpp) and when the log is read (training.cpp), so a regex accepted at
// creation is the one that runs.
#pragma once

#include <re2/re2.h>

#include <memory>
#include <string>

namespace ty::control {

inline std::unique_ptr<RE2> CompileMetricRegex(const std::string& regex) {
  RE2::Options opts;
  opts.set_log_errors(false);
  return std::make_unique<RE2>(regex, opts);
}

}  // namespace ty::control
