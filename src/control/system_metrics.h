// System metrics of training jobs (docs/metrics.md, "System metrics"): the samples the supervisor
// writes for each instance, as the controller keeps and stores them. Pure functions, no I/O.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"

namespace ty::control {

// At most this many samples are kept per host. When a host's series is full its samples are
// merged pairwise (each pair becomes one sample: the mean of their values at the later
// timestamp), so the series still spans the whole job, at half the resolution, and goes on
// at full resolution from there. 1440 samples are 4 hours at the default 10-second interval.
inline constexpr size_t kMaxSystemSamplesPerHost = 1440;

// Parses one line of a samples file: {"Timestamp": <epoch ms>, "<MetricName>": <number>, ...}.
// Unknown names are ignored. False for anything else (no Timestamp, not JSON).
bool ParseSystemSampleLine(std::string_view line, SystemSample* out);

// Appends `s` to `series` unless it is not newer than the last sample there (a file read again
// after a restart), merging pairwise first when the series holds `max` samples. REQUIRES: max >= 2.
// Returns whether it was appended.
bool AppendSystemSample(std::vector<SystemSample>& series, const SystemSample& s, size_t max = kMaxSystemSamplesPerHost);

// The store's document of a training job's series, and back (false when it is not one):
// {"algo-1": [[timestamp, CPU, Memory, Disk, GPU, GPUMemory], ...], ...}, null where not measured.
std::string EncodeSystemSeries(const SystemSeries& series);
bool DecodeSystemSeries(std::string_view doc, SystemSeries* out);

}  // namespace ty::control
