#include "control/metric_series.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace ty::control {

using nlohmann::json;

void MetricSeries::Append(std::string_view name, double value, EpochMs timestamp) {
  auto it = std::find_if(tracks_.begin(), tracks_.end(), [&](const MetricTrack& t) { return t.name == name; });
  if (it == tracks_.end()) {
    tracks_.push_back(MetricTrack{std::string(name), 0, 1, {}});
    it = std::prev(tracks_.end());
  }
  MetricTrack& t = *it;
  const uint64_t k = t.seen++;
  // The newest value is kept off the stride only while it is the newest.
  if (!t.points.empty() && t.points.back().index % t.stride != 0) t.points.pop_back();
  t.points.push_back({k, timestamp, value});
  if (t.points.size() <= cap_) return;
  t.stride *= 2;
  const MetricPoint newest = t.points.back();
  std::erase_if(t.points, [&](const MetricPoint& p) { return p.index % t.stride != 0; });
  if (t.points.empty() || t.points.back().index != newest.index) t.points.push_back(newest);
}

const MetricTrack* MetricSeries::Find(std::string_view name) const {
  for (const auto& t : tracks_)
    if (t.name == name) return &t;
  return nullptr;
}

std::string EncodeMetricSeries(const MetricSeries& series) {
  json metrics = json::array();
  for (const auto& t : series.tracks()) {
    json points = json::array();
    for (const auto& p : t.points) points.push_back({p.index, p.timestamp, p.value});
    metrics.push_back({{"name", t.name}, {"seen", t.seen}, {"stride", t.stride}, {"points", std::move(points)}});
  }
  return json{{"metrics", std::move(metrics)}}.dump();
}

bool DecodeMetricSeries(std::string_view doc, MetricSeries* out) {
  json j = json::parse(doc, nullptr, false);
  if (j.is_discarded()) return false;
  try {
    if (j.is_array()) {  // the earlier shape: every value, [[name, value, timestamp], ...]
      for (const auto& m : j) out->Append(m.at(0).get<std::string>(), m.at(1).get<double>(), m.at(2).get<EpochMs>());
      return true;
    }
    for (const auto& m : j.at("metrics")) {
      MetricTrack t;
      t.name = m.at("name").get<std::string>();
      t.seen = m.at("seen").get<uint64_t>();
      t.stride = m.at("stride").get<uint64_t>();
      for (const auto& p : m.at("points"))
        t.points.push_back({p.at(0).get<uint64_t>(), p.at(1).get<EpochMs>(), p.at(2).get<double>()});
      if (t.stride == 0 || out->Find(t.name)) return false;
      out->Restore(std::move(t));
    }
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

std::string MetricCursorToken(const MetricCursor& c) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "m/%zx/%" PRIx64, c.metric, c.after_index);
  return buf;
}

std::optional<MetricCursor> ParseMetricCursorToken(std::string_view token) {
  if (token.size() < 5 || token.size() > 40 || token.substr(0, 2) != "m/") return std::nullopt;
  std::string s(token.substr(2));
  auto slash = s.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == s.size()) return std::nullopt;
  if (s.find_first_not_of("0123456789abcdef/") != std::string::npos || s.find('/', slash + 1) != std::string::npos)
    return std::nullopt;
  if (slash > 8 || s.size() - slash - 1 > 16) return std::nullopt;
  MetricCursor c;
  c.metric = static_cast<size_t>(std::strtoull(s.substr(0, slash).c_str(), nullptr, 16));
  c.after_index = std::strtoull(s.substr(slash + 1).c_str(), nullptr, 16);
  return c;
}

MetricPage PageMetricSeries(const MetricSeries* series, const std::vector<std::string>& order, EpochMs from, EpochMs to,
                            const MetricCursor& start, size_t max_points) {
  MetricPage page;
  size_t taken = 0;
  for (size_t m = start.metric; m < order.size(); ++m) {
    if (taken == max_points) {  // full, and this metric is still to come
      page.next = MetricCursor{m, 0};
      return page;
    }
    MetricPage::Series& out = page.series.emplace_back();
    out.name = order[m];
    const MetricTrack* track = series ? series->Find(order[m]) : nullptr;
    if (!track) continue;
    const uint64_t after = m == start.metric ? start.after_index : 0;
    auto it = std::lower_bound(track->points.begin(), track->points.end(), after,
                               [](const MetricPoint& p, uint64_t i) { return p.index < i; });
    for (; it != track->points.end(); ++it) {
      if (it->timestamp < from || it->timestamp > to) continue;
      if (taken == max_points) {  // full, and this point is still to come
        page.next = MetricCursor{m, it->index};
        return page;
      }
      out.points.push_back(*it);
      ++taken;
    }
  }
  return page;
}

}  // namespace ty::control
