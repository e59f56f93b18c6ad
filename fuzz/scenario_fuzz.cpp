// Scenario files (sim/sim.h RunScenario; tests/scenarios/, docs/simulate.md "Scenarios"): a
// cluster header, then submits, capacity events and expectations, run through the simulator.
// Input: the file's text.
#include "fuzz_input.h"
#include "sim/sim.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)ty::sim::RunScenario(std::string(ty::fuzz::AsText(data, size)), "fuzz.scenario");
  return 0;
}
