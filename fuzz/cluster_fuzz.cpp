// The simulator's cluster files (sim/sim.h ParseCluster; examples/simulate/*.toml). Input: the
// file's text.
#include "fuzz_input.h"
#include "sim/sim.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto cluster = ty::sim::ParseCluster(std::string(ty::fuzz::AsText(data, size)), "cluster.toml");
  if (cluster.ok()) (void)cluster->TeamOf("(none)");
  return 0;
}
