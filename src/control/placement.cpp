#include "control/placement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ty::control {

namespace {

std::string Money(double usd) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f USD/h", usd);
  return b;
}

}  // namespace

Placement RankRegions(const PlacementRequest& request, const std::vector<PeerSummary>& candidates) {
  Placement out;
  std::vector<std::pair<size_t, RankedRegion>> ranked;  // candidate index: the tie-breaker
  for (size_t i = 0; i < candidates.size(); ++i) {
    const PeerSummary& c = candidates[i];
    if (!c.reachable) {
      out.skipped.push_back(c.region + ": unreachable: " + c.unreachable_reason);
      continue;
    }
    if (!c.has_queue) {
      out.skipped.push_back(c.region + ": has no such job queue");
      continue;
    }
    if (!c.offers_instance_type) {
      out.skipped.push_back(c.region + ": offers no " + request.instance_type);
      continue;
    }
    RankedRegion r;
    r.region = c.region;
    std::vector<std::string> held, missing;
    for (const std::string& b : request.input_buckets) (c.buckets.count(b) ? held : missing).push_back(b);
    r.score += 1000 * static_cast<int64_t>(held.size());
    r.full = c.free_instances < request.instance_count;
    if (!r.full) r.score += 100;
    r.score -= 10 * c.waiting_jobs;
    const int64_t cents = std::llround(c.price_per_hour * static_cast<double>(request.instance_count) * 100);
    r.score -= cents;
    std::string why;
    auto join = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& x : v) s += (s.empty() ? "" : " + ") + x;
      return s;
    };
    if (!held.empty()) why += "holds input " + join(held);
    if (!missing.empty()) why += std::string(why.empty() ? "" : " / ") + "input elsewhere: " + join(missing);
    if (request.input_buckets.empty()) why += "no input data";
    why += " / " + std::to_string(c.free_instances) + " free of " + request.instance_type + (r.full ? " = full" : "") +
           " / " + std::to_string(c.waiting_jobs) + " waiting / " +
           Money(c.price_per_hour * static_cast<double>(request.instance_count));
    r.why = std::move(why);
    ranked.emplace_back(i, std::move(r));
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    if (a.second.full != b.second.full) return !a.second.full;
    if (a.second.score != b.second.score) return a.second.score > b.second.score;
    return a.first < b.first;
  });
  for (auto& [i, r] : ranked) out.order.push_back(std::move(r));
  return out;
}

std::string PlacementReason(const Placement& placement, const std::string& chosen,
                            const std::vector<std::string>& failed) {
  std::string s = "placed in " + chosen;
  std::string others;
  for (const RankedRegion& r : placement.order) {
    const std::string line = " score=" + std::to_string(r.score) + ": " + r.why;
    if (r.region == chosen) s += line;
    else if (std::none_of(failed.begin(), failed.end(), [&](const std::string& f) { return f.rfind(r.region + ":", 0) == 0; }))
      others += " -- " + r.region + line;
  }
  for (const std::string& f : failed) others += " -- " + f;
  for (const std::string& k : placement.skipped) others += " -- " + k;
  return s + others;
}

}  // namespace ty::control
