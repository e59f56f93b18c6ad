// Share standings: the one computation behind GET /metrics' share gauges, QueueStandings and the
// share history (share_standings.h).
#include "control/share_standings.h"

#include <algorithm>

#include "control/controller.h"
#include "sched/sched.h"

namespace ty::control {

namespace {

constexpr JobStatus kUnfinished[] = {JobStatus::kSubmitted, JobStatus::kPending,  JobStatus::kRunnable,
                                     JobStatus::kScheduled, JobStatus::kStarting, JobStatus::kRunning};

int64_t Held(const Holdings& held, const std::string& queue, const std::string& share) {
  auto it = held.by_share.find({queue, share});
  return it == held.by_share.end() ? 0 : it->second;
}

// Fair shares: usage, weight and entitlement as the scheduler sees them; what a share holds
// above its entitlement is borrowed, and the queue's borrowing is lent by the shares holding
// less than theirs, in proportion to what they leave idle.
void FairShares(const State& s, const Holdings& held, const JobQueue& q, std::map<std::string, ShareStanding>* out) {
  std::vector<ShareAttributes> distribution;
  int64_t decay_seconds = 0;
  if (const SchedulingPolicy* p = Controller::FindPolicy(s, q.scheduling_policy_arn); p && p->fairshare) {
    distribution = p->fairshare->share_distribution;
    decay_seconds = p->fairshare->share_decay_seconds;
  }
  auto standing = [&](const std::string& share) -> ShareStanding& {
    ShareStanding& st = (*out)[share];
    if (!st.fair) {
      st.share = share;
      st.fair.emplace();
      st.fair->weight_factor = Controller::ShareWeight(distribution, share);
      st.in_use = Held(held, q.name, share);
    }
    return st;
  };
  if (auto u = s.share_usage.find(q.name); u != s.share_usage.end())
    for (const auto& [share, usage] : u->second) {
      ShareStanding& st = standing(share);
      st.fair->usage = usage.usage;
      st.fair->weighted_usage = sched::ShareOrderKey(usage.usage, st.in_use, 0, st.fair->weight_factor, decay_seconds);
    }
  // Entitlement: an active share's (one with unfinished jobs) inverse weight over the sum of the
  // inverse weights of the queue's active shares. weightFactor is validated to 0.0001..999.9999,
  // so the inverse is finite.
  std::map<std::string, double> inverse;
  double sum = 0;
  if (auto a = s.unfinished_by_share.find(q.name); a != s.unfinished_by_share.end())
    for (const auto& [share, n] : a->second)
      if (n > 0 && !share.empty()) {
        inverse[share] = 1.0 / standing(share).fair->weight_factor;
        sum += inverse[share];
      }
  int64_t capacity = 0;
  for (const auto& o : q.service_environment_order)
    if (auto e = s.environments.find(o.service_environment); e != s.environments.end())
      for (const auto& l : e->second.capacity_limits)
        if (l.capacity_unit == "NUM_INSTANCES") capacity += l.max_capacity;
  double borrowed = 0, idle = 0;
  for (auto& [share, st] : *out) {
    auto inv = inverse.find(share);
    st.fair->entitlement_ratio = inv != inverse.end() && sum > 0 ? inv->second / sum : 0;
    st.fair->entitlement_instances = st.fair->entitlement_ratio * static_cast<double>(capacity);
    st.entitlement = st.fair->entitlement_instances;
    st.borrowed = std::max(0.0, static_cast<double>(st.in_use) - st.entitlement);
    borrowed += st.borrowed;
    idle += std::max(0.0, st.entitlement - static_cast<double>(st.in_use));
  }
  const double lent = std::min(borrowed, idle);
  if (lent > 0)
    for (auto& [share, st] : *out) st.lent = lent * std::max(0.0, st.entitlement - static_cast<double>(st.in_use)) / idle;
  if (auto r = s.runnable_by_share.find(q.name); r != s.runnable_by_share.end())
    for (const auto& [share, jobs] : r->second) standing(share).waiting = static_cast<int64_t>(jobs.size());
}

// Quota shares: per instance type, each share's limit against what it holds; borrowing is
// attributed to the lending shares' idle limits (QuotaTypeLedger::lent).
void QuotaShares(const State& s, const Holdings& held, const JobQueue& q, std::map<std::string, ShareStanding>* out,
                 std::map<std::string, int64_t>* unassigned) {
  auto standing = [&](const std::string& share) -> ShareStanding& {
    ShareStanding& st = (*out)[share];
    if (st.share.empty()) {
      st.share = share;
      st.in_use = Held(held, q.name, share);
    }
    return st;
  };
  std::map<std::string, bool> lends;  // share -> LEND or LEND_AND_BORROW (RESERVE keeps its idle limit)
  const std::string prefix = q.name + "/";
  for (auto it = s.quota_shares.lower_bound(prefix); it != s.quota_shares.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    const QuotaShare& qs = it->second;
    ShareStanding& st = standing(qs.name);
    lends[qs.name] = qs.strategy != ShareStrategy::kReserve;
    for (const auto& l : qs.capacity_limits) st.quota_types[l.capacity_unit].limit = l.max_capacity;
  }
  for (auto it = held.by_quota_type.lower_bound({q.name, "", ""});
       it != held.by_quota_type.end() && std::get<0>(it->first) == q.name; ++it)
    standing(std::get<1>(it->first)).quota_types[std::get<2>(it->first)].in_use = it->second;
  if (auto a = s.unfinished_by_share.find(q.name); a != s.unfinished_by_share.end())
    for (const auto& [share, n] : a->second)
      if (n > 0 && !share.empty()) standing(share);
  // Per type, in share-name order (the order of *out).
  std::map<std::string, std::vector<std::pair<ShareStanding*, QuotaTypeLedger*>>> by_type;
  for (auto& [share, st] : *out)
    for (auto& [type, e] : st.quota_types) {
      e.borrowed = std::max<int64_t>(0, e.in_use - e.limit);
      by_type[type].push_back({&st, &e});
    }
  for (auto& [type, shares] : by_type) {
    auto idle_of = [&](const std::pair<ShareStanding*, QuotaTypeLedger*>& p) {
      return lends[p.first->share] ? std::max<int64_t>(0, p.second->limit - p.second->in_use) : 0;
    };
    int64_t borrowed = 0, idle = 0;
    for (const auto& p : shares) {
      borrowed += p.second->borrowed;
      idle += idle_of(p);
    }
    const int64_t lent = std::min(borrowed, idle);
    std::vector<std::pair<int64_t, size_t>> remainders;  // (remainder, position in name order)
    int64_t given = 0;
    for (size_t i = 0; i < shares.size(); ++i) {
      const int64_t share_idle = idle_of(shares[i]);
      if (share_idle == 0) continue;
      shares[i].second->lent = lent * share_idle / idle;
      given += shares[i].second->lent;
      remainders.push_back({lent * share_idle % idle, i});
    }
    std::stable_sort(remainders.begin(), remainders.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t i = 0; given < lent; ++i, ++given) ++shares[remainders[i].second].second->lent;
    (*unassigned)[type] = borrowed - lent;
  }
  for (auto& [share, st] : *out)
    for (const auto& [type, e] : st.quota_types) {
      st.entitlement += static_cast<double>(e.limit);
      st.borrowed += static_cast<double>(e.borrowed);
      st.lent += static_cast<double>(e.lent);
    }
  if (auto r = s.quota_runnable.find(q.name); r != s.quota_runnable.end())
    for (const auto& [share, classes] : r->second) {
      ShareStanding& st = standing(share);
      for (const auto& [c, jobs] : classes) st.waiting += static_cast<int64_t>(jobs.seqs.size());
    }
}

QueueStanding StandingOf(const State& s, const Holdings& held, const JobQueue& q) {
  QueueStanding out;
  out.queue = q.name;
  out.kind = q.kind;
  out.state = q.state;
  auto count = [&](const std::map<std::string, std::map<JobStatus, std::set<uint64_t>>>& index) {
    auto it = index.find(q.name);
    if (it == index.end()) return;
    for (JobStatus st : kUnfinished)
      if (auto j = it->second.find(st); j != it->second.end()) out.counts[st] += static_cast<int64_t>(j->second.size());
  };
  for (JobStatus st : kUnfinished) out.counts[st] = 0;
  count(s.by_queue_status);
  count(s.container_by_queue_status);  // a container queue's (ECS) jobs
  std::map<std::string, ShareStanding> shares;
  if (q.kind == QueueKind::kFairShare) FairShares(s, held, q, &shares);
  if (q.kind == QueueKind::kQuotaShare) QuotaShares(s, held, q, &shares, &out.unassigned_lent);
  out.shares.reserve(shares.size());
  for (auto& [name, st] : shares) out.shares.push_back(std::move(st));
  return out;
}

}  // namespace

Holdings ActiveHoldings(const State& s) {
  Holdings h;
  for (const auto& [queue, by_status] : s.by_queue_status)
    for (JobStatus st : {JobStatus::kScheduled, JobStatus::kStarting, JobStatus::kRunning}) {
      auto it = by_status.find(st);
      if (it == by_status.end()) continue;
      for (uint64_t seq : it->second) {
        const ServiceJobState& js = s.jobs.at(seq);
        const ServiceJob& j = js.job;
        const std::string key =
            j.attempt_capacity_key.empty() ? CapacityKey(j.instance_type, j.managed_spot) : j.attempt_capacity_key;
        h.by_environment[{js.service_environment, key}] += j.instance_count;
        if (!ShareOf(j).empty()) h.by_share[{queue, ShareOf(j)}] += j.instance_count;
        if (!j.quota_share_name.empty()) h.by_quota_type[{queue, j.quota_share_name, j.instance_type}] += j.instance_count;
      }
    }
  return h;
}

std::vector<QueueStanding> ShareStandings(const State& s, const Holdings& held, const std::string* only) {
  std::vector<QueueStanding> out;
  if (only) {
    if (auto it = s.queues.find(*only); it != s.queues.end()) out.push_back(StandingOf(s, held, it->second));
    return out;
  }
  out.reserve(s.queues.size());
  for (const auto& [name, q] : s.queues) out.push_back(StandingOf(s, held, q));
  return out;
}

const char* QueueKindName(QueueKind kind) {
  switch (kind) {
    case QueueKind::kFifo: return "FIFO";
    case QueueKind::kFairShare: return "FAIR_SHARE";
    case QueueKind::kQuotaShare: return "QUOTA_SHARE";
  }
  return "FIFO";
}

QueueSample SampleOf(const QueueStanding& q, EpochMs at) {
  QueueSample out;
  out.at = at;
  out.shares.reserve(q.shares.size());
  for (const ShareStanding& st : q.shares) out.shares.push_back({st.share, st.in_use, st.entitlement, st.borrowed, st.lent});
  return out;
}

}  // namespace ty::control
