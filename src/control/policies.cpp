// Scheduling policies: fair-share and quota-share policies, validated and stored.
#include <cmath>
#include <nlohmann/json.hpp>

#include "control/controller.h"
#include "control/turn.h"
#include "core/strings.h"

namespace ty::control {

using nlohmann::json;

namespace {

bool ValidShareIdentifier(const std::string& id) {
  std::string core = EndsWith(id, "*") ? id.substr(0, id.size() - 1) : id;
  if (core.empty() || core.size() > 255) return false;
  for (char c : core)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// Two share identifiers overlap when one could match a job the other also matches.
bool Overlap(const std::string& a, const std::string& b) {
  bool wa = EndsWith(a, "*"), wb = EndsWith(b, "*");
  std::string pa = wa ? a.substr(0, a.size() - 1) : a;
  std::string pb = wb ? b.substr(0, b.size() - 1) : b;
  if (!wa && !wb) return pa == pb;
  if (wa && wb) return StartsWith(pa, pb) || StartsWith(pb, pa);
  return wa ? StartsWith(pb, pa) : StartsWith(pa, pb);
}

Status CheckFairshare(const json& fs) {
  int64_t decay = fs.value("shareDecaySeconds", int64_t{0});
  if (decay < 0 || decay > 604800)
    return InvalidArgument("fairsharePolicy.shareDecaySeconds must be between 0 and 604800, not " + std::to_string(decay));
  int64_t reservation = fs.value("computeReservation", int64_t{0});
  if (reservation < 0 || reservation > 99)
    return InvalidArgument("fairsharePolicy.computeReservation must be between 0 and 99, not " + std::to_string(reservation));
  json dist = fs.value("shareDistribution", json::array());
  if (dist.size() > 500) return InvalidArgument("fairsharePolicy.shareDistribution may hold at most 500 shares");
  for (size_t i = 0; i < dist.size(); ++i) {
    std::string where = "fairsharePolicy.shareDistribution[" + std::to_string(i) + "]";
    std::string id = dist[i].value("shareIdentifier", "");
    if (!ValidShareIdentifier(id))
      return InvalidArgument(where + ".shareIdentifier '" + id +
                             "' must be 1 to 255 letters, digits or underscores, optionally followed by '*'");
    double w = dist[i].value("weightFactor", 1.0);
    if (!(w >= 0.0001 && w <= 999.9999))
      return InvalidArgument(where + ".weightFactor must be between 0.0001 and 999.9999");
    for (size_t j = 0; j < i; ++j) {
      std::string other = dist[j].value("shareIdentifier", "");
      if (Overlap(id, other))
        return InvalidArgument(where + ".shareIdentifier '" + id + "' overlaps shareDistribution[" + std::to_string(j) +
                               "] '" + other + "': share identifiers and their '*' prefixes must not overlap");
    }
  }
  return Status::Ok();
}

bool Present(const json& req, const char* key) { return req.contains(key) && !req[key].is_null(); }

}  // namespace

const SchedulingPolicy* Controller::FindPolicy(const State& s, const std::string& arn) {
  auto slash = arn.rfind('/');
  auto it = s.policies.find(slash == std::string::npos ? arn : arn.substr(slash + 1));
  if (it == s.policies.end() || (StartsWith(arn, "arn:") && it->second.arn != arn)) return nullptr;
  return &it->second;
}

StatusOr<SchedulingPolicy> Controller::CreateSchedulingPolicy(const json& req) {
  SchedulingPolicy p;
  p.name = req.value("name", "");
  if (!IsBatchName(p.name))
    return InvalidArgument("name must be 1 to 128 letters, digits, hyphens or underscores");
  if (Present(req, "fairsharePolicy") && Present(req, "quotaSharePolicy"))
    return InvalidArgument("a scheduling policy holds either fairsharePolicy or quotaSharePolicy, not both");
  if (Present(req, "quotaSharePolicy")) {
    p.quotashare_policy_json = req["quotaSharePolicy"].dump();
  } else {
    json fs = Present(req, "fairsharePolicy") ? req["fairsharePolicy"] : json::object();
    TY_RETURN_IF_ERROR(CheckFairshare(fs));
    p.fairshare_policy_json = fs.dump();
  }
  if (req.contains("tags") && req["tags"].is_object())
    for (auto& [k, v] : req["tags"].items()) p.tags[k] = v.get<std::string>();
  p.arn = Arn("batch", "scheduling-policy/" + p.name);
  return Execute<SchedulingPolicy>([&](Turn& t) -> StatusOr<SchedulingPolicy> {
    if (state_.policies.count(p.name)) return AlreadyExists("Scheduling policy " + p.name + " already exists");
    p.seq = state_.next_seq++;
    state_.policies[p.name] = p;
    t.policies.insert(p.name);
    return p;
  });
}

StatusOr<SchedulingPolicy> Controller::UpdateSchedulingPolicy(const json& req) {
  std::string arn = req.value("arn", "");
  if (Present(req, "fairsharePolicy") && Present(req, "quotaSharePolicy"))
    return InvalidArgument("a scheduling policy holds either fairsharePolicy or quotaSharePolicy, not both");
  if (Present(req, "fairsharePolicy")) TY_RETURN_IF_ERROR(CheckFairshare(req["fairsharePolicy"]));
  return Execute<SchedulingPolicy>([&](Turn& t) -> StatusOr<SchedulingPolicy> {
    const SchedulingPolicy* found = FindPolicy(state_, arn);
    if (!found) return InvalidArgument("arn: scheduling policy " + arn + " does not exist");
    SchedulingPolicy p = *found;
    bool fairshare = !p.fairshare_policy_json.empty();
    if (Present(req, "quotaSharePolicy")) {
      if (fairshare) return InvalidArgument("quotaSharePolicy: the type of a scheduling policy can't be switched (it is fair share)");
      p.quotashare_policy_json = req["quotaSharePolicy"].dump();
    }
    if (Present(req, "fairsharePolicy")) {
      if (!fairshare) return InvalidArgument("fairsharePolicy: the type of a scheduling policy can't be switched (it is quota share)");
      p.fairshare_policy_json = req["fairsharePolicy"].dump();
    }
    state_.policies[p.name] = p;
    t.policies.insert(p.name);
    t.reschedule = true;
    return p;
  });
}

Status Controller::DeleteSchedulingPolicy(const json& req) {
  std::string arn = req.value("arn", "");
  return ExecuteStatus([&](Turn& t) -> Status {
    const SchedulingPolicy* p = FindPolicy(state_, arn);
    if (!p) return InvalidArgument("arn: scheduling policy " + arn + " does not exist");
    for (const auto& [qn, q] : state_.queues)
      if (q.scheduling_policy_arn == p->arn)
        return FailedPrecondition("Scheduling policy " + p->name + " is used by job queue " + qn);
    std::string name = p->name;
    state_.policies.erase(name);
    t.deleted_policies.insert(name);
    return Status::Ok();
  });
}

}  // namespace ty::control
