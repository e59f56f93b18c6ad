// The normalized trace CSV: job_id,submit_time_s,duration_s,num_gpus,user,team,status.
#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "sim/sim.h"

namespace ty::sim {

namespace {

std::vector<std::string_view> Split(std::string_view line) {
  std::vector<std::string_view> out;
  size_t from = 0;
  while (true) {
    size_t comma = line.find(',', from);
    out.push_back(line.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
    if (comma == std::string_view::npos) return out;
    from = comma + 1;
  }
}

bool ParseInt(std::string_view s, int64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

StatusOr<std::vector<TraceJob>> ReadTrace(const std::string& path, int64_t start_s, int64_t end_s) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read trace " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::string_view rest(text);
  std::vector<TraceJob> jobs;
  size_t line_no = 0;
  constexpr std::string_view kHeader = "job_id,submit_time_s,duration_s,num_gpus,user,team,status";
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_no == 1) {
      if (line != kHeader)
        return InvalidArgument(path + ":1: the header must be '" + std::string(kHeader) + "' (see traces/README.md)");
      continue;
    }
    if (line.empty()) continue;
    auto f = Split(line);
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    if (f.size() != 7) return InvalidArgument(where + "expected 7 fields, found " + std::to_string(f.size()));
    TraceJob j;
    j.id = std::string(f[0]);
    if (!ParseInt(f[1], &j.submit_s) || j.submit_s < 0) return InvalidArgument(where + "bad submit_time_s");
    if (!ParseInt(f[2], &j.duration_s) || j.duration_s < 0) return InvalidArgument(where + "bad duration_s");
    if (!ParseInt(f[3], &j.gpus) || j.gpus < 1) return InvalidArgument(where + "bad num_gpus (must be >= 1)");
    j.team = f[5].empty() ? "(none)" : std::string(f[5]);
    if (j.submit_s < start_s || (end_s >= 0 && j.submit_s >= end_s)) continue;
    jobs.push_back(std::move(j));
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const TraceJob& a, const TraceJob& b) { return a.submit_s < b.submit_s; });
  return jobs;
}

}  // namespace ty::sim
