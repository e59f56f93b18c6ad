#include "sched/quota.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "sched/sched.h"

namespace ty::sched {

namespace {

constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max() / 4;

int64_t Get(const std::map<std::string, int64_t>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

bool Lends(SharingStrategy s) { return s != SharingStrategy::kReserve; }

class QuotaPass {
 public:
  explicit QuotaPass(const QuotaSnapshot& snap) : snap_(snap), used_(snap.shares.size()), running_(snap.running) {
    for (const auto& r : running_) {
      in_use_[r.instance_type] += r.instance_count;
      if (r.preempting) {
        leaving_[r.instance_type] += r.instance_count;
      } else {
        used_[static_cast<size_t>(r.share)][r.instance_type] += r.instance_count;
      }
    }
  }

  // Two rounds in offer order: first every job that fits inside its share's own quota (these may
  // reclaim lent capacity), then the rest (in-share preemption, borrowing). Borrowers thus never
  // take capacity that an owner is waiting to get back.
  QuotaDecisions Run() {
    auto order = Order();
    std::vector<bool> done(order.size(), false);
    for (size_t i = 0; i < order.size(); ++i) {
      const auto& [s, j] = order[i];
      if (Used(s, j->instance_type) + j->instance_count <= Limit(s, j->instance_type)) {
        Consider(s, *j);
        done[i] = true;
      }
    }
    for (size_t i = 0; i < order.size(); ++i)
      if (!done[i]) Consider(order[i].first, *order[i].second);
    Estimate();
    return std::move(d_);
  }

 private:
  // Jobs in the order they are offered capacity: inside a share by schedulingPriority (higher
  // first) then submit order; across shares, the share whose next job was submitted first
  // (FIFO assignment of idle capacity).
  std::vector<std::pair<size_t, const QuotaJob*>> Order() const {
    std::vector<std::vector<const QuotaJob*>> lists;
    size_t total = 0;
    for (const auto& s : snap_.shares) {
      std::vector<const QuotaJob*> jobs;
      jobs.reserve(s.runnable.size());
      for (const QuotaJob& j : s.runnable) jobs.push_back(&j);
      std::sort(jobs.begin(), jobs.end(), [](const QuotaJob* a, const QuotaJob* b) {
        return a->priority != b->priority ? a->priority > b->priority : a->seq < b->seq;
      });
      total += jobs.size();
      lists.push_back(std::move(jobs));
    }
    std::vector<size_t> next(lists.size(), 0);
    std::vector<std::pair<size_t, const QuotaJob*>> out;
    out.reserve(total);
    while (true) {
      int best = -1;
      for (size_t i = 0; i < lists.size(); ++i)
        if (next[i] < lists[i].size() &&
            (best < 0 || lists[i][next[i]]->seq < lists[static_cast<size_t>(best)][next[static_cast<size_t>(best)]]->seq))
          best = static_cast<int>(i);
      if (best < 0) return out;
      size_t b = static_cast<size_t>(best);
      out.emplace_back(b, lists[b][next[b]++]);
    }
  }

  int64_t Limit(size_t s, const std::string& t) const { return Get(snap_.shares[s].limit, t); }
  int64_t Used(size_t s, const std::string& t) const { return Get(used_[s], t); }
  int64_t Ceiling(const std::string& t) const {
    auto it = snap_.ceiling.find(t);
    return it == snap_.ceiling.end() ? Get(snap_.capacity, t) : it->second;
  }
  int64_t Free(const std::string& t) const { return Get(snap_.capacity, t) - Get(in_use_, t); }

  // What later jobs see has changed: remembered outcomes no longer hold.
  void Changed() {
    ++epoch_;
    memo_.clear();
  }

  // Reasons are shared: a million waiting jobs carry a handful of distinct texts.
  uint32_t ReasonId(std::string reason) {
    auto [it, added] = reason_ids_.try_emplace(std::move(reason), static_cast<uint32_t>(d_.reasons.size()));
    if (added) d_.reasons.push_back(it->first);
    return it->second;
  }
  void Wait(const QuotaJob& j, std::string reason) { d_.waits.push_back({j.seq, last_reason_ = ReasonId(std::move(reason))}); }

  void Start(size_t s, const QuotaJob& j, bool borrowing) {
    Changed();
    if (j.max_runtime_ms > 0) started_.push_back({snap_.now_ms + j.max_runtime_ms, s, &j});
    used_[s][j.instance_type] += j.instance_count;
    in_use_[j.instance_type] += j.instance_count;
    d_.starts.push_back({j.seq, borrowing});
  }

  // Sets aside for a job that waits on preemptions what it was promised: its place in its
  // share's quota, and the idle capacity counted towards its need, so that no job later in the
  // pass takes either (and the preemptions are not wasted).
  void Promise(size_t s, const QuotaJob& j, int64_t idle) {
    Changed();
    used_[s][j.instance_type] += j.instance_count;
    in_use_[j.instance_type] += std::min(idle, j.instance_count);
  }

  // Marks victims as leaving; their capacity is promised to `for_job`.
  void Preempt(const std::vector<size_t>& victims, const QuotaJob& for_job, bool in_share) {
    Changed();
    for (size_t v : victims) {
      QuotaRunningJob& r = running_[v];
      r.preempting = true;
      used_[static_cast<size_t>(r.share)][r.instance_type] -= r.instance_count;
      d_.preemptions.push_back({r.seq, for_job.seq, in_share});
    }
  }

  // Victims in preference order: lowest priority, then most recently started, then submit order.
  std::vector<size_t> Candidates(const std::function<bool(const QuotaRunningJob&)>& eligible) const {
    std::vector<size_t> c;
    for (size_t i = 0; i < running_.size(); ++i)
      if (!running_[i].preempting && running_[i].preemptible && eligible(running_[i])) c.push_back(i);
    std::sort(c.begin(), c.end(), [&](size_t a, size_t b) {
      const auto& x = running_[a];
      const auto& y = running_[b];
      if (x.priority != y.priority) return x.priority < y.priority;
      if (x.start_order != y.start_order) return x.start_order > y.start_order;
      return x.seq < y.seq;
    });
    return c;
  }

  // A job fares as the last one of its share, instance type and size that waited for the same
  // cause, when nothing has started or been preempted since and it has no higher priority: the
  // answer would be the same, so a queue a million deep costs one map lookup per job.
  struct MemoKey {
    size_t share;
    const std::string* type;
    int64_t count;
    bool within_quota;
    bool operator==(const MemoKey& o) const {
      return share == o.share && *type == *o.type && count == o.count && within_quota == o.within_quota;
    }
  };
  struct MemoHash {
    size_t operator()(const MemoKey& k) const {
      return std::hash<std::string>()(*k.type) ^ (k.share * 0x9e3779b97f4a7c15ULL) ^ (static_cast<size_t>(k.count) << 1) ^
             static_cast<size_t>(k.within_quota);
    }
  };
  struct Memo {
    int priority;
    uint32_t reason;
  };

  void Consider(size_t s, const QuotaJob& j) {
    const QuotaShareSpec& share = snap_.shares[s];
    const std::string& t = j.instance_type;
    const int64_t n = j.instance_count;
    const int64_t limit = Limit(s, t);
    const bool borrows = share.strategy == SharingStrategy::kLendAndBorrow;

    // Jobs that can never run, with AWS's reasons.
    if (n > Ceiling(t)) return Wait(j, kMaxResourceReason);
    if (!borrows && n > limit) return Wait(j, kQuotaLimitReason);
    if (borrows && n > MaxWithBorrow(s, t)) return Wait(j, kQuotaBorrowLimitReason);
    if (borrows && n > Borrowable(s, t)) return Wait(j, kQuotaBorrowableReason);

    MemoKey key{s, &t, n, Used(s, t) + n <= limit};
    size_t waits_before = d_.waits.size();
    if (auto m = memo_.find(key); m != memo_.end() && j.priority <= m->second.priority) {
      d_.waits.push_back({j.seq, m->second.reason});
    } else {
      uint64_t epoch = epoch_;
      Decide(s, j);
      if (epoch == epoch_ && d_.waits.size() > waits_before) memo_[key] = {j.priority, last_reason_};
    }
    if (d_.waits.size() > waits_before && front_.size() < kFront) front_.push_back({s, &j, waits_before});
  }

  // Whether `j` of share `s` may start on the estimate's timeline.
  bool SimFits(size_t s, const QuotaJob& j, const std::map<std::string, int64_t>& free,
               const std::vector<std::map<std::string, int64_t>>& used) const {
    const std::string& t = j.instance_type;
    int64_t n = j.instance_count, u = Get(used[s], t);
    if (Get(free, t) < n) return false;
    if (u + n <= Limit(s, t)) return true;
    if (snap_.shares[s].strategy != SharingStrategy::kLendAndBorrow || u + n > MaxWithBorrow(s, t)) return false;
    return Get(free, t) - ReservedByOthers(s, t, used) >= n;
  }

  void Estimate() {
    // Releases: what runs (a leaving job's capacity is already off its share's books) and what
    // this pass started, by end time.
    struct Release {
      int64_t end;
      size_t share;
      const std::string* type;
      int64_t count;
      bool counted;  // still in its share's usage
    };
    std::vector<Release> releases;
    for (const auto& r : running_)
      if (r.end_ms > 0) releases.push_back({r.end_ms, static_cast<size_t>(r.share), &r.instance_type, r.instance_count, !r.preempting});
    for (const auto& st : started_) releases.push_back({st.end, st.share, &st.job->instance_type, st.job->instance_count, true});
    std::sort(releases.begin(), releases.end(), [](const Release& a, const Release& b) { return a.end < b.end; });
    std::map<std::string, int64_t> free;
    for (const auto& [t, cap] : snap_.capacity) free[t] = cap - Get(in_use_, t);
    auto used = used_;
    std::vector<size_t> pending;
    for (size_t k = 0; k < front_.size(); ++k) {
      d_.front.push_back({front_[k].job->seq, front_[k].wait, 0});
      if (d_.reasons[d_.waits[front_[k].wait].reason].rfind("MISCONFIGURATION:", 0) != 0) pending.push_back(k);
    }
    std::priority_queue<std::pair<int64_t, size_t>, std::vector<std::pair<int64_t, size_t>>, std::greater<>> mine;
    size_t p = 0;
    int64_t now = snap_.now_ms;
    while (!pending.empty()) {
      std::vector<size_t> still;
      for (size_t k : pending) {
        const Front& f = front_[k];
        if (!SimFits(f.share, *f.job, free, used)) {
          still.push_back(k);
          continue;
        }
        d_.front[k].estimated_start_ms = now;
        free[f.job->instance_type] -= f.job->instance_count;
        used[f.share][f.job->instance_type] += f.job->instance_count;
        if (f.job->max_runtime_ms > 0) mine.push({now + f.job->max_runtime_ms, k});
      }
      pending.swap(still);
      if (pending.empty()) break;
      int64_t a = p < releases.size() ? releases[p].end : std::numeric_limits<int64_t>::max();
      int64_t b = mine.empty() ? std::numeric_limits<int64_t>::max() : mine.top().first;
      if (a == std::numeric_limits<int64_t>::max() && b == std::numeric_limits<int64_t>::max()) break;
      if (a <= b) {
        const Release& r = releases[p++];
        free[*r.type] += r.count;
        if (r.counted) used[r.share][*r.type] -= r.count;
        now = std::max(now, a);
      } else {
        const Front& f = front_[mine.top().second];
        mine.pop();
        free[f.job->instance_type] += f.job->instance_count;
        used[f.share][f.job->instance_type] -= f.job->instance_count;
        now = std::max(now, b);
      }
    }
  }

  // Idle capacity the other RESERVE shares hold back for their own quota, given what each share
  // uses (the pass's books, or the estimate's timeline).
  int64_t ReservedByOthers(size_t s, const std::string& t) const { return ReservedByOthers(s, t, used_); }
  int64_t ReservedByOthers(size_t s, const std::string& t, const std::vector<std::map<std::string, int64_t>>& used) const {
    int64_t reserved = 0;
    for (size_t o = 0; o < snap_.shares.size(); ++o)
      if (o != s && !Lends(snap_.shares[o].strategy)) reserved += std::max<int64_t>(0, Limit(o, t) - Get(used[o], t));
    return reserved;
  }

  // The most a share may use of a type, borrowing included (its limit when it does not borrow).
  int64_t MaxWithBorrow(size_t s, const std::string& t) const {
    const QuotaShareSpec& share = snap_.shares[s];
    int64_t limit = Limit(s, t);
    if (share.strategy != SharingStrategy::kLendAndBorrow) return limit;
    return share.borrow_limit_percent < 0 ? kUnlimited : limit + limit * share.borrow_limit_percent / 100;
  }

  // What a share may use of a type at most, borrowing included: its own limit plus what lending
  // shares may lend.
  int64_t Borrowable(size_t s, const std::string& t) {
    auto [it, added] = borrowable_.try_emplace({s, t}, 0);
    if (added) {
      it->second = Limit(s, t);
      for (size_t o = 0; o < snap_.shares.size(); ++o)
        if (o != s && Lends(snap_.shares[o].strategy)) it->second += Limit(o, t);
    }
    return it->second;
  }

  // Starts `j`, preempts for it, or makes it wait.
  void Decide(size_t s, const QuotaJob& j) {
    const QuotaShareSpec& share = snap_.shares[s];
    const std::string& t = j.instance_type;
    const int64_t n = j.instance_count;
    const int64_t limit = Limit(s, t);
    const bool borrows = share.strategy == SharingStrategy::kLendAndBorrow;

    if (Used(s, t) + n <= limit) {
      // Inside its own quota: idle capacity that no RESERVE share holds back for itself, else
      // capacity already on its way back, else reclaim.
      int64_t idle = std::max<int64_t>(0, Free(t) - ReservedByOthers(s, t));
      if (idle >= n) return Start(s, j, false);
      int64_t need = n - idle;
      int64_t& leaving = leaving_[t];
      if (leaving >= need) {
        leaving -= need;
        Promise(s, j, idle);
        return Wait(j, "waiting for preempted jobs to give capacity back");
      }
      need -= leaving;
      // Cross-share reclaim: only from shares running above their own quota, never below it.
      std::map<size_t, int64_t> over;
      for (size_t o = 0; o < snap_.shares.size(); ++o)
        if (o != s) over[o] = Used(o, t) - Limit(o, t);
      std::vector<size_t> victims;
      int64_t freed = 0;
      for (size_t v : Candidates([&](const QuotaRunningJob& r) {
             return r.instance_type == t && static_cast<size_t>(r.share) != s;
           })) {
        if (freed >= need) break;
        size_t o = static_cast<size_t>(running_[v].share);
        if (over[o] <= 0) continue;
        over[o] -= running_[v].instance_count;
        freed += running_[v].instance_count;
        victims.push_back(v);
      }
      if (freed < need) return Wait(j, "waiting for capacity: the share is within its quota, but the capacity is in use and not borrowed");
      leaving = 0;
      leaving_[t] += freed - need;  // what the victims free beyond this job's need
      Preempt(victims, j, false);
      Promise(s, j, idle);
      return Wait(j, "reclaiming capacity lent to other shares (" + std::to_string(victims.size()) + " job(s) preempted)");
    }

    // Above its own quota: in-share priority preemption, then borrowing.
    if (share.in_share_preemption) {
      std::vector<size_t> victims;
      int64_t freed = 0;
      int64_t excess = Used(s, t) + n - limit;
      for (size_t v : Candidates([&](const QuotaRunningJob& r) {
             return r.instance_type == t && static_cast<size_t>(r.share) == s && r.priority < j.priority;
           })) {
        if (freed >= excess) break;
        freed += running_[v].instance_count;
        victims.push_back(v);
      }
      if (freed >= excess) {
        Preempt(victims, j, true);
        Promise(s, j, 0);
        return Wait(j, "preempting " + std::to_string(victims.size()) + " lower-priority job(s) of share '" +
                           share.name + "'");
      }
    }
    if (borrows && Used(s, t) + n <= MaxWithBorrow(s, t)) {
      if (Free(t) - ReservedByOthers(s, t) >= n) return Start(s, j, true);
      return Wait(j, "waiting to borrow: share '" + share.name + "' is at its quota and no idle capacity can be lent");
    }
    return Wait(j, "waiting: share '" + share.name + "' is at its quota (" + std::to_string(Used(s, t)) + " of " +
                       std::to_string(limit) + " " + t + ")");
  }

  const QuotaSnapshot& snap_;
  std::vector<std::map<std::string, int64_t>> used_;  // per share, without jobs that are leaving
  std::vector<QuotaRunningJob> running_;
  std::map<std::string, int64_t> in_use_;   // everything running, leaving jobs included
  std::map<std::string, int64_t> leaving_;  // capacity of preempted jobs not yet promised
  QuotaDecisions d_;
  std::unordered_map<std::string, uint32_t> reason_ids_;
  uint32_t last_reason_ = 0;
  static constexpr size_t kFront = 100;
  struct Front {
    size_t share;
    const QuotaJob* job;
    size_t wait;
  };
  std::vector<Front> front_;
  struct Started {
    int64_t end;
    size_t share;
    const QuotaJob* job;
  };
  std::vector<Started> started_;
  uint64_t epoch_ = 0;
  std::unordered_map<MemoKey, Memo, MemoHash> memo_;
  std::map<std::pair<size_t, std::string>, int64_t> borrowable_;
};

}  // namespace

QuotaDecisions ScheduleQuotaShares(const QuotaSnapshot& snapshot) { return QuotaPass(snapshot).Run(); }

}  // namespace ty::sched
