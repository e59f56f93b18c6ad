// MetricDefinitions regexes: a caller's Regex compiled with RE2 and applied to a job's log lines,
// with the options of CompileMetricRegex and the calls and value parsing of
// Controller::TailJobMetrics (control/training.cpp), which have no entry point of their own that
// runs without a controller, store and executor. Keep the two in step.
//
// Input: the Regex on the first line, then log lines as the supervisor writes them
// ("<epoch ms> <text>"). RE2 runs in linear time and bounded memory: the fuzzer's -timeout and
// -rss_limit_mb turn a pattern that breaks either promise into a failure.
#include <cstdlib>
#include <string>

#include <re2/re2.h>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [regex, log] = ty::fuzz::SplitFirstLine(ty::fuzz::AsText(data, size));
  RE2::Options opts;
  opts.set_log_errors(false);
  RE2 re(regex, opts);
  if (!re.ok() || re.NumberOfCapturingGroups() < 1) return 0;
  while (!log.empty()) {
    auto [line, rest] = ty::fuzz::SplitFirstLine(log);
    log = rest;
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos) continue;
    (void)std::strtoll(std::string(line.substr(0, sp)).c_str(), nullptr, 10);
    std::string_view text = line.substr(sp + 1);
    std::string value;
    if (RE2::PartialMatch(text, re, &value)) {
      char* end = nullptr;
      (void)std::strtod(value.c_str(), &end);
    }
  }
  return 0;
}
