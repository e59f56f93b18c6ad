// The server's TOML configuration (core/config.h LoadConfigFile over the embedded defaults).
// Input: the file's text. An accepted file's instance catalogue is then looked up as the
// scheduler does.
#include <cstdlib>

#include "core/config.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ty::fuzz::MemFile file("config.toml");
  const std::string& path = file.Write(ty::fuzz::AsText(data, size));
  auto loaded = ty::LoadConfigFile(path, ty::DefaultConfig());
  if (!loaded.ok()) return 0;
  (void)loaded->FindInstanceType("ml.m5.large");
  for (const auto& t : loaded->instance_types) (void)loaded->CapacityOf(t.name);
  return 0;
}
