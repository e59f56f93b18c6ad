#include "control/cloudwatch_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/strings.h"

namespace ty::control {

using json = nlohmann::json;

std::string CwMetricId::Key() const {
  // Unit separators cannot appear in a valid name (AWS's names are printable), so the key is unique.
  std::string k = ns + '\x1f' + name;
  for (const auto& [n, v] : dims) k += '\x1f' + n + '\x1e' + v;
  return k;
}

CwSample::CwSample(std::initializer_list<double> values) {
  for (double v : values)
    if (size_ < kCloudWatchValuesPerBucket) push_back(v);
}

CwSample::CwSample(const std::vector<double>& values) {
  for (double v : values)
    if (size_ < kCloudWatchValuesPerBucket) push_back(v);
}

void CwBucket::Add(double v, double n) {
  if (n <= 0) return;
  const double seen = count;
  count += n;
  sum += v * n;
  min = std::min(min, v);
  max = std::max(max, v);
  if (values.size() < kCloudWatchValuesPerBucket) values.push_back(v);
  else values.set(static_cast<size_t>(seen) % kCloudWatchValuesPerBucket, v);  // a rolling sample of the rest
}

void CwBucket::Merge(const CwBucket& o) {
  if (o.count <= 0) return;
  const double seen = count;
  count += o.count;
  sum += o.sum;
  min = std::min(min, o.min);
  max = std::max(max, o.max);
  for (size_t i = 0; i < o.values.size(); ++i) {
    if (values.size() < kCloudWatchValuesPerBucket) values.push_back(o.values[i]);
    else values.set((static_cast<size_t>(seen) + i) % kCloudWatchValuesPerBucket, o.values[i]);
  }
}

EpochMs CwResolutionAt(EpochMs t, EpochMs now) {
  const EpochMs age = now - t;
  if (age < kCwMinuteRetention) return kCwMinute;
  if (age < kCwFiveMinuteRetention) return kCwFiveMinutes;
  if (age < kCwHourRetention) return kCwHour;
  return 0;
}

namespace {

EpochMs Floor(EpochMs t, EpochMs step) { return t - (((t % step) + step) % step); }

}  // namespace

size_t CloudWatchMetrics::SeriesBytes(const CwMetricId& id) {
  size_t n = kCwSeriesBytes + 2 * (id.ns.size() + id.name.size());  // the id's names, and the key's copy
  for (const auto& [k, v] : id.dims) n += 2 * (k.size() + v.size()) + 2 * sizeof(std::string);
  return n;
}

bool CloudWatchMetrics::HasMinute(const std::string& key, EpochMs t) const {
  const CwSeries* s = Find(key);
  return s && s->buckets.count(Floor(t, kCwMinute));
}

Status CloudWatchMetrics::Put(const CwMetricId& id, const std::string& unit, EpochMs t, const CwBucket& b,
                              std::set<std::pair<std::string, EpochMs>>* dirty) {
  const std::string key = id.Key();
  const EpochMs start = Floor(t, kCwMinute);
  auto it = series_.find(key);
  const size_t adds = (it == series_.end() ? SeriesBytes(id) + kCwBucketBytes
                                           : it->second.buckets.count(start) ? 0 : kCwBucketBytes);
  if (it == series_.end() && series_.size() >= max_series_)
    return Status(Code::kLimitExceeded, "This server keeps at most " + std::to_string(max_series_) +
                                            " CloudWatch metrics ([cloudwatch] max_series); " + id.ns + " " + id.name +
                                            " would be one more");
  if (adds && bytes_ + adds > max_bytes_)
    return Status(Code::kLimitExceeded, "This server keeps at most " + std::to_string(max_bytes_) +
                                            " bytes of CloudWatch data ([cloudwatch] max_series_bytes); a new minute of " +
                                            id.ns + " " + id.name + " would pass it");
  if (it == series_.end()) it = series_.emplace(key, CwSeries{id, unit.empty() ? "None" : unit, {}}).first;
  bytes_ += adds;
  if (!unit.empty()) it->second.unit = unit;
  it->second.buckets[start].Merge(b);
  dirty->insert({key, Floor(start, kCwHour)});
  return Status::Ok();
}

void CloudWatchMetrics::Compact(EpochMs now, std::set<std::pair<std::string, EpochMs>>* dirty) {
  for (auto s = series_.begin(); s != series_.end();) {
    auto& buckets = s->second.buckets;
    const size_t before = buckets.size();
    // Only buckets older than the minute retention change; they are the map's first ones.
    for (auto b = buckets.begin(); b != buckets.end() && now - b->first >= kCwMinuteRetention;) {
      const EpochMs step = CwResolutionAt(b->first, now);
      const EpochMs into = step ? Floor(b->first, step) : b->first;
      if (step && into == b->first) { ++b; continue; }
      dirty->insert({s->first, Floor(b->first, kCwHour)});
      if (step) {
        CwBucket moved = std::move(b->second);
        b = buckets.erase(b);
        buckets[into].Merge(moved);  // `into` <= the erased key: already passed, never visited again
        dirty->insert({s->first, Floor(into, kCwHour)});
      } else {
        b = buckets.erase(b);
      }
    }
    bytes_ -= (before - buckets.size()) * kCwBucketBytes;  // a roll-up only ever removes buckets
    if (buckets.empty()) {
      bytes_ -= SeriesBytes(s->second.id);
      s = series_.erase(s);
    } else {
      ++s;
    }
  }
}

const CwSeries* CloudWatchMetrics::Find(const std::string& key) const {
  auto it = series_.find(key);
  return it == series_.end() ? nullptr : &it->second;
}

std::string CloudWatchMetrics::DocKey(const std::string& series_key, EpochMs hour) {
  char h[24];
  std::snprintf(h, sizeof h, "%015lld", static_cast<long long>(hour));
  return "cloudwatch/" + Sha256Hex(series_key).substr(0, 32) + "/" + h;
}

std::string CloudWatchMetrics::EncodeHour(const std::string& series_key, EpochMs hour) const {
  const CwSeries* s = Find(series_key);
  if (!s) return "";
  json points = json::array();
  for (auto b = s->buckets.lower_bound(hour); b != s->buckets.end() && b->first < hour + kCwHour; ++b)
    points.push_back({b->first, b->second.count, b->second.sum, b->second.min, b->second.max, b->second.values.ToVector()});
  if (points.empty()) return "";
  json dims = json::array();
  for (const auto& [n, v] : s->id.dims) dims.push_back({n, v});
  return json{{"ns", s->id.ns}, {"name", s->id.name}, {"dims", dims}, {"unit", s->unit}, {"points", points}}.dump();
}

bool CloudWatchMetrics::LoadHour(std::string_view doc) {
  json j = json::parse(doc, nullptr, false);
  if (!j.is_object() || !j.contains("points") || !j["points"].is_array()) return false;
  try {
    CwMetricId id{j.at("ns").get<std::string>(), j.at("name").get<std::string>(), {}};
    for (const auto& d : j.at("dims")) id.dims.emplace_back(d.at(0).get<std::string>(), d.at(1).get<std::string>());
    std::vector<std::pair<EpochMs, CwBucket>> buckets;  // read whole before anything changes
    for (const auto& p : j["points"])
      buckets.emplace_back(p.at(0).get<EpochMs>(),
                           CwBucket{p.at(1).get<double>(), p.at(2).get<double>(), p.at(3).get<double>(),
                                    p.at(4).get<double>(), CwSample(p.at(5).get<std::vector<double>>())});
    auto [it, added] = series_.try_emplace(id.Key());
    CwSeries& s = it->second;
    if (added) bytes_ += SeriesBytes(id);
    s.id = id;
    s.unit = j.value("unit", "None");
    const size_t before = s.buckets.size();
    for (const auto& [t, b] : buckets) s.buckets[t].Merge(b);
    bytes_ += (s.buckets.size() - before) * kCwBucketBytes;
  } catch (const json::exception&) {
    return false;
  }
  return true;
}

double CwPercentile(const CwSample& values, double p) { return CwPercentile(values.ToVector(), p); }

double CwPercentile(std::vector<double> values, double p) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  const size_t i = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(values.size()))) - 1;
  return values[i];
}

}  // namespace ty::control
