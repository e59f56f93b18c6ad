// Milliseconds of the monotonic clock, for timeouts and intervals within one process (never a
// time of day, never stored): the wall clock can jump, this one cannot.
#pragma once

#include <chrono>
#include <cstdint>

namespace ty {

inline int64_t SteadyMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace ty
