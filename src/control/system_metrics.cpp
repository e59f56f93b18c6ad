#include "control/system_metrics.h"

#include <nlohmann/json.hpp>

namespace ty::control {

using nlohmann::json;

bool ParseSystemSampleLine(std::string_view line, SystemSample* out) {
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("Timestamp") || !j["Timestamp"].is_number_integer()) return false;
  SystemSample s;
  s.timestamp = j["Timestamp"].get<EpochMs>();
  for (size_t k = 0; k < kSystemMetricNames.size(); ++k)
    if (auto it = j.find(kSystemMetricNames[k]); it != j.end() && it->is_number()) s.values[k] = it->get<double>();
  *out = s;
  return true;
}

bool AppendSystemSample(std::vector<SystemSample>& series, const SystemSample& s, size_t max) {
  if (!series.empty() && s.timestamp <= series.back().timestamp) return false;
  if (series.size() >= max) {
    std::vector<SystemSample> merged;
    merged.reserve(series.size() / 2 + 1);
    for (size_t i = 0; i < series.size(); i += 2) {
      if (i + 1 == series.size()) {
        merged.push_back(series[i]);
        break;
      }
      const SystemSample &a = series[i], &b = series[i + 1];
      SystemSample m;
      m.timestamp = b.timestamp;
      for (size_t k = 0; k < m.values.size(); ++k) {
        if (a.values[k] && b.values[k]) {
          m.values[k] = (*a.values[k] + *b.values[k]) / 2;
        } else {
          m.values[k] = a.values[k] ? a.values[k] : b.values[k];
        }
      }
      merged.push_back(m);
    }
    series = std::move(merged);
  }
  series.push_back(s);
  return true;
}

std::string EncodeSystemSeries(const SystemSeries& series) {
  json doc = json::object();
  for (const auto& [host, samples] : series) {
    json rows = json::array();
    for (const auto& s : samples) {
      json row = json::array({s.timestamp});
      for (const auto& v : s.values) row.push_back(v ? json(*v) : json(nullptr));
      rows.push_back(std::move(row));
    }
    doc[host] = std::move(rows);
  }
  return doc.dump();
}

bool DecodeSystemSeries(std::string_view doc, SystemSeries* out) {
  json j = json::parse(doc, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  SystemSeries series;
  for (const auto& [host, rows] : j.items()) {
    if (!rows.is_array()) return false;
    auto& samples = series[host];
    for (const auto& row : rows) {
      if (!row.is_array() || row.empty() || !row[0].is_number_integer()) return false;
      SystemSample s;
      s.timestamp = row[0].get<EpochMs>();
      for (size_t k = 0; k < s.values.size() && k + 1 < row.size(); ++k)
        if (row[k + 1].is_number()) s.values[k] = row[k + 1].get<double>();
      samples.push_back(s);
    }
  }
  *out = std::move(series);
  return true;
}

}  // namespace ty::control
