// Job traces (sim/sim.h ReadTrace: the normalised CSV of ../shared/traces/README.md). Input: the
// file's text. Checked besides "no crash": the jobs come back ordered by submit time, each with
// the bounds ReadTrace promises.
#include <cstdlib>

#include "fuzz_input.h"
#include "sim/sim.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ty::fuzz::MemFile file("trace.csv");
  const std::string& path = file.Write(ty::fuzz::AsText(data, size));
  auto jobs = ty::sim::ReadTrace(path, 0, -1);
  if (!jobs.ok()) return 0;
  for (size_t i = 0; i < jobs->size(); ++i) {
    const ty::sim::TraceJob& j = (*jobs)[i];
    if (j.submit_s < 0 || j.duration_s < 0 || j.gpus < 1 || j.team.empty()) abort();
    if (i > 0 && (*jobs)[i - 1].submit_s > j.submit_s) abort();
  }
  return 0;
}
