#include "sched/quota.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include "sched/sched.h"

namespace ty::sched {

namespace {

constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max() / 4;
constexpr int64_t kNotKnown = -1;

// A short string compare without a call (instance type names are a few bytes each).
bool SameText(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k] != b[k]) return false;
  return true;
}

bool Lends(SharingStrategy s) { return s != SharingStrategy::kReserve; }

// The order of offers inside a share: higher schedulingPriority first, then submit order.
bool OfferedBefore(int priority_a, uint64_t seq_a, int priority_b, uint64_t seq_b) {
  return priority_a != priority_b ? priority_a > priority_b : seq_a < seq_b;
}

// Instance types are numbered once per pass (a handful of names), so that the pass's books are
// arrays indexed by (share, type) rather than maps keyed by strings.
using Type = uint32_t;

class QuotaPass {
 public:
  explicit QuotaPass(const QuotaSnapshot& snap) : snap_(snap), running_(snap.running) {
    for (const auto& [t, n] : snap.capacity) Intern(t);
    for (const auto& [t, n] : snap.ceiling) Intern(t);
    // The shares' limits as (share, type, instances): each share's map is walked once.
    std::vector<std::tuple<size_t, Type, int64_t>> limits;
    limits.reserve(snap.shares.size());
    for (size_t s = 0; s < snap.shares.size(); ++s)
      for (const auto& [t, n] : snap.shares[s].limit) limits.emplace_back(s, Intern(t), n);
    job_types_at_.reserve(snap.shares.size());
    for (const auto& sh : snap.shares) {
      job_types_at_.push_back(job_type_.size());
      for (const QuotaJob& j : sh.runnable) job_type_.push_back(Intern(j.instance_type));
    }
    // Running jobs: the books start from what they hold. A type only running jobs name is
    // numbered here (the books of (share, type) are laid out type after type, so it appends).
    const size_t ns = snap.shares.size();
    used_.assign(ns * types_.size(), 0);
    in_use_.assign(types_.size(), 0);
    leaving_.assign(types_.size(), 0);
    running_type_.reserve(running_.size());
    preempting_.reserve(running_.size());
    for (const auto& r : running_) {
      const Type t = Intern(r.instance_type);
      if (t == in_use_.size()) {
        used_.resize(used_.size() + ns, 0);
        in_use_.push_back(0);
        leaving_.push_back(0);
      }
      running_type_.push_back(t);
      preempting_.push_back(r.preempting);
      in_use_[t] += r.instance_count;
      if (r.preempting) {
        leaving_[t] += r.instance_count;
      } else {
        used_[Key(static_cast<size_t>(r.share), t)] += r.instance_count;
      }
    }
    const size_t nt = types_.size();
    capacity_.assign(nt, 0);
    for (const auto& [t, n] : snap.capacity) capacity_[Intern(t)] = n;
    ceiling_ = capacity_;
    for (const auto& [t, n] : snap.ceiling) ceiling_[Intern(t)] = n;
    limit_.assign(ns * nt, 0);
    lent_.assign(nt, 0);
    for (const auto& [s, t, n] : limits) limit_[Key(s, t)] = n;
    for (size_t s = 0; s < ns; ++s) {
      if (Lends(snap.shares[s].strategy)) {
        for (Type t = 0; t < nt; ++t) lent_[t] += limit_[Key(s, t)];
      } else {
        reserving_.push_back(s);
      }
    }
    deficit_covered_.assign(nt, 0);
    returning_.assign(ns * nt, 0);
    no_borrow_.assign(ns * nt, false);
    first_over_.assign(ns * nt, nullptr);
    smallest_waiting_.assign(ns * nt, kNotKnown);
    memo_head_.assign(ns * nt, kNoEntry);
    for (auto& named : named_reasons_) named.assign(ns * nt, {0, kNoReason});
    size_t runnable = 0;
    for (const auto& sh : snap.shares) runnable += sh.runnable.size();
    d_.waits.reserve(runnable);
    claims_.resize(nt);
  }

  // Three rounds in offer order: first every job that fits inside its share's own quota (these
  // may reclaim lent capacity), then in-share priority preemption (which brings a job back inside
  // its share's quota), then the rest (owners first, then borrowing or waiting). Borrowers thus
  // never take capacity that an owner, or a higher-priority job of a full share, is waiting for.
  // Jobs nominated by the previous pass go first in every round.
  QuotaDecisions Run() {
    auto order = Order();
    std::stable_partition(order.begin(), order.end(), [](const auto& e) { return e.second->nominated; });
    std::vector<bool> done(order.size(), false);
    OwnQuotaRound(order, done);
    InShareRound(order, done);
    for (int owners = 1; owners >= 0; --owners)
      for (size_t i = 0; i < order.size(); ++i) {
        const auto& [s, j] = order[i];
        if (done[i] || (owners && Used(s, TypeOf(s, *j)) + j->instance_count > Limit(s, TypeOf(s, *j)))) continue;
        Consider(s, *j, Round::kRest);
        done[i] = true;
      }
    Estimate();
    return std::move(d_);
  }

 private:
  enum class Round { kOwnQuota, kInShare, kRest };

  using OfferOrder = std::vector<std::pair<size_t, const QuotaJob*>>;

  // The first round. It goes again while it brought more jobs inside their quota (a reclaim
  // takes a share down towards its quota). Notes for the in-share round the first job of each
  // (share, type) above its quota that could preempt in-share, and the jobs that wait.
  void OwnQuotaRound(const OfferOrder& order, std::vector<bool>& done) {
    std::vector<bool> tried(order.size(), false);
    for (bool again = true; again;) {
      again = false;
      for (size_t i = 0; i < order.size(); ++i) {
        const auto& [s, j] = order[i];
        if (tried[i]) continue;
        const Type t = TypeOf(s, *j);
        if (Used(s, t) + j->instance_count <= Limit(s, t)) {
          tried[i] = true;
          placed_ = never_ = false;
          const size_t preemptions = d_.preemptions.size();
          done[i] = Consider(s, *j, Round::kOwnQuota);
          again |= d_.preemptions.size() > preemptions;
          if (!placed_ && !never_ && snap_.shares[s].in_share_preemption) {
            auto& w = waiting_before_[{s, t}];
            if (w.empty() || i < w.rbegin()->first || j->instance_count < w.rbegin()->second) w.emplace(i, j->instance_count);
          }
        } else if (snap_.shares[s].in_share_preemption && !first_over_[Key(s, t)] && MayPreemptInShare(s, *j)) {
          first_over_[Key(s, t)] = j;
          Changed();
        }
      }
    }
    // Per (share, type), keep only the waiting jobs smaller than every one offered before them.
    for (auto& [key, w] : waiting_before_) {
      int64_t smallest = kUnlimited;
      for (auto it = w.begin(); it != w.end();)
        if (it->second < smallest) {
          smallest = it->second;
          ++it;
        } else {
          it = w.erase(it);
        }
    }
  }

  // The in-share round, for shares with in-share preemption. Each job learns the smallest job of
  // its share and type that waits before it (smallest_before_).
  void InShareRound(const OfferOrder& order, std::vector<bool>& done) {
    std::map<std::pair<size_t, Type>, int64_t> waiting_in_round;
    for (size_t i = 0; i < order.size(); ++i) {
      const auto& [s, j] = order[i];
      if (done[i] || !snap_.shares[s].in_share_preemption) continue;
      const std::pair<size_t, Type> key{s, TypeOf(s, *j)};
      auto it = waiting_in_round.find(key);
      smallest_before_ = it == waiting_in_round.end() ? kUnlimited : it->second;
      if (auto w = waiting_before_.find(key); w != waiting_before_.end()) {
        auto e = w->second.lower_bound(i);
        if (e != w->second.begin()) smallest_before_ = std::min(smallest_before_, std::prev(e)->second);
      }
      placed_ = never_ = false;
      done[i] = Consider(s, *j, Round::kInShare);
      if (!placed_ && !never_) {
        auto [m, added] = waiting_in_round.try_emplace(key, j->instance_count);
        if (!added) m->second = std::min(m->second, j->instance_count);
      }
    }
  }

  // Jobs in the order they are offered capacity: inside a share by schedulingPriority (higher
  // first) then submit order; across shares, the share whose next job was submitted first
  // (FIFO assignment of idle capacity).
  OfferOrder Order() const {
    // Every share's jobs in its own order, one share after another: share s from at[s] to at[s + 1].
    std::vector<const QuotaJob*> jobs;
    jobs.reserve(job_type_.size());
    std::vector<size_t> at;
    at.reserve(snap_.shares.size() + 1);
    for (const auto& sh : snap_.shares) {
      at.push_back(jobs.size());
      for (const QuotaJob& j : sh.runnable) jobs.push_back(&j);
      std::sort(jobs.begin() + static_cast<std::ptrdiff_t>(at.back()), jobs.end(), [](const QuotaJob* a, const QuotaJob* b) {
        return OfferedBefore(a->priority, a->seq, b->priority, b->seq);
      });
    }
    at.push_back(jobs.size());
    // A k-way merge: the heads of the shares' lists by (submit order, share index), packed into
    // one integer when they fit (a cheaper heap).
    const size_t ns = snap_.shares.size();
    uint64_t max_seq = 0;
    for (const QuotaJob* j : jobs) max_seq = std::max(max_seq, j->seq);
    return max_seq < (uint64_t{1} << 40) && ns < (size_t{1} << 24)
               ? Merge<uint64_t>(jobs, at, [](uint64_t seq, size_t s) { return seq << 24 | s; },
                                 [](uint64_t head) { return static_cast<size_t>(head & ((1u << 24) - 1)); })
               : Merge<std::pair<uint64_t, size_t>>(jobs, at, [](uint64_t seq, size_t s) { return std::make_pair(seq, s); },
                                                    [](const std::pair<uint64_t, size_t>& head) { return head.second; });
  }
  template <class Head, class MakeHead, class ShareOf>
  OfferOrder Merge(const std::vector<const QuotaJob*>& jobs, const std::vector<size_t>& at, MakeHead make, ShareOf share_of) const {
    // A binary min-heap of the heads; the head taken is replaced by its share's next job in
    // place (one sift down instead of a pop and a push).
    std::vector<Head> heap;
    for (size_t s = 0; s + 1 < at.size(); ++s)
      if (at[s] < at[s + 1]) heap.push_back(make(jobs[at[s]]->seq, s));
    std::make_heap(heap.begin(), heap.end(), std::greater<>());
    std::vector<size_t> next(at.begin(), at.end() - 1);
    OfferOrder out;
    out.reserve(jobs.size());
    while (!heap.empty()) {
      const size_t s = share_of(heap.front());
      out.emplace_back(s, jobs[next[s]++]);
      Head head;
      if (next[s] < at[s + 1]) {
        head = make(jobs[next[s]]->seq, s);
      } else {
        head = heap.back();
        heap.pop_back();
        if (heap.empty()) break;
      }
      size_t k = 0;  // sift `head` down from the root
      const size_t n = heap.size();
      for (size_t c = 1; c < n; c = 2 * k + 1) {
        if (c + 1 < n && heap[c + 1] < heap[c]) ++c;
        if (!(heap[c] < head)) break;
        heap[k] = heap[c];
        k = c;
      }
      heap[k] = head;
    }
    return out;
  }

  // The number of an instance type, given it one when it is new (only while the pass is built).
  Type Intern(const std::string& name) {
    for (Type t = 0; t < types_.size(); ++t)
      if (SameText(*types_[t], name)) return t;
    types_.push_back(&name);
    return static_cast<Type>(types_.size() - 1);
  }
  Type TypeNamed(const std::string& name) const {
    Type t = 0;
    while (*types_[t] != name) ++t;
    return t;
  }
  Type TypeOf(size_t s, const QuotaJob& j) const {
    return job_type_[job_types_at_[s] + static_cast<size_t>(&j - snap_.shares[s].runnable.data())];
  }
  size_t Key(size_t s, Type t) const { return t * snap_.shares.size() + s; }  // index of (share, type)

  int64_t Limit(size_t s, Type t) const { return limit_[Key(s, t)]; }
  int64_t Used(size_t s, Type t) const { return used_[Key(s, t)]; }
  int64_t Ceiling(Type t) const { return ceiling_[t]; }
  int64_t Free(Type t) const { return capacity_[t] - in_use_[t]; }

  // What later jobs see has changed: remembered outcomes no longer hold.
  void Changed() { ++epoch_; }

  // Reasons are shared: a million waiting jobs carry a handful of distinct texts.
  uint32_t ReasonId(std::string reason) {
    auto [it, added] = reason_ids_.try_emplace(std::move(reason), static_cast<uint32_t>(d_.reasons.size()));
    if (added) d_.reasons.push_back(it->first);
    return it->second;
  }
  void Wait(const QuotaJob& j, std::string reason) { Wait(j, ReasonId(std::move(reason))); }
  void Wait(const QuotaJob& j, uint32_t reason) { d_.waits.push_back({j.seq, last_reason_ = reason}); }
  // A fixed text: its id is looked up by address, with no string built.
  void Wait(const QuotaJob& j, const char* fixed) {
    for (const auto& [text, id] : fixed_reasons_)
      if (text == fixed) return Wait(j, id);
    const uint32_t id = ReasonId(fixed);
    fixed_reasons_.emplace_back(fixed, id);
    Wait(j, id);
  }
  // A text that names a share (and a figure): built once per pass for each (kind, share, type,
  // figure), as hundreds of shares wait each pass.
  enum Named { kBorrow, kInSharePreempts, kAtQuota, kNamedKinds };
  template <class Text>
  void Wait(const QuotaJob& j, Named kind, size_t s, Type t, int64_t figure, Text text) {
    auto& last = named_reasons_[kind][Key(s, t)];  // (figure, id) of the last one
    if (last.second == kNoReason || last.first != figure) last = {figure, ReasonId(text())};
    Wait(j, last.second);
  }

  void Start(size_t s, const QuotaJob& j, bool borrowing) {
    Changed();
    placed_ = true;
    if (j.max_runtime_ms > 0) started_.push_back({snap_.now_ms + j.max_runtime_ms, s, &j});
    const Type t = TypeOf(s, j);
    used_[Key(s, t)] += j.instance_count;
    in_use_[t] += j.instance_count;
    d_.starts.push_back({j.seq, borrowing});
  }

  // Sets aside for a job that waits on preemptions what it was promised: its place in its
  // share's quota, and the idle capacity counted towards its need, so that no job later in the
  // pass takes either (and the preemptions are not wasted).
  void Promise(size_t s, const QuotaJob& j, int64_t from_idle) {
    Changed();
    placed_ = true;
    const Type t = TypeOf(s, j);
    used_[Key(s, t)] += j.instance_count;
    in_use_[t] += from_idle;
    d_.promised.push_back(j.seq);
  }

  // Marks victims as leaving; their capacity is promised to `for_job`.
  void Preempt(const std::vector<size_t>& victims, const QuotaJob& for_job, bool in_share) {
    Changed();
    for (size_t v : victims) {
      const QuotaRunningJob& r = running_[v];
      preempting_[v] = true;
      const size_t s = static_cast<size_t>(r.share);
      const Type t = running_type_[v];
      smallest_waiting_[Key(s, t)] = std::min(SmallestWaiting(s, t), r.instance_count);  // it comes back
      used_[Key(s, t)] -= r.instance_count;
      d_.preemptions.push_back({r.seq, for_job.seq, in_share});
    }
  }

  // Victims in preference order: lowest priority, then least work lost since the last checkpoint
  // (instances × time), then most recently started, then submit order. Drawn from a heap as the
  // victim search asks for them (it usually stops after the first few of thousands).
  struct Rank {
    int priority;
    int64_t lost;
    uint64_t start_order;
    uint64_t seq;
    size_t index;  // into running_
  };
  static bool Preferred(const Rank& x, const Rank& y) {
    if (x.priority != y.priority) return x.priority < y.priority;
    if (x.lost != y.lost) return x.lost < y.lost;
    if (x.start_order != y.start_order) return x.start_order > y.start_order;
    return x.seq < y.seq;
  }
  class CandidateList {
   public:
    explicit CandidateList(std::vector<Rank> heap) : heap_(std::move(heap)) {
      std::make_heap(heap_.begin(), heap_.end(), After);
    }
    bool Has(size_t k) {  // whether there are more than k candidates
      while (out_.size() <= k && !heap_.empty()) {
        std::pop_heap(heap_.begin(), heap_.end(), After);
        out_.push_back(heap_.back().index);
        heap_.pop_back();
      }
      return k < out_.size();
    }
    size_t operator[](size_t k) const { return out_[k]; }

   private:
    static bool After(const Rank& x, const Rank& y) { return Preferred(y, x); }
    std::vector<Rank> heap_;
    std::vector<size_t> out_;
  };
  // The running jobs that `eligible(index)` accepts, not leaving and preemptible.
  template <class Eligible>
  CandidateList Candidates(Eligible eligible) {
    if (ranks_.empty())
      for (size_t i = 0; i < running_.size(); ++i) {
        const auto& r = running_[i];
        ranks_.push_back({r.priority, WorkLostMs(r, snap_.now_ms), r.start_order, r.seq, i});
      }
    std::vector<Rank> c;
    for (const Rank& r : ranks_)
      if (!preempting_[r.index] && running_[r.index].preemptible && eligible(r.index)) c.push_back(r);
    return CandidateList(std::move(c));
  }

  // Victims from `candidates` (in preference order) until they free `need`: `gain(v)` is what v
  // would free now (0: passed over) and `take(v)` books it. The pick that completes the set is
  // the one of the same priority that frees the least while still enough, so that a big job is
  // not stopped where a small one would do. Returns what the victims free.
  template <class Gain, class Take>
  int64_t PickVictims(CandidateList c, int64_t need, Gain gain, Take take, std::vector<size_t>& victims) const {
    int64_t freed = 0;
    for (size_t k = 0; freed < need && c.Has(k); ++k) {
      int64_t g = gain(c[k]);
      if (g <= 0) continue;
      size_t pick = k;
      if (freed + g > need)
        for (size_t m = k + 1; c.Has(m) && running_[c[m]].priority == running_[c[k]].priority; ++m) {
          int64_t gm = gain(c[m]);
          if (freed + gm >= need && gm < g) pick = m, g = gm;
        }
      freed += g;
      take(c[pick], g);
      victims.push_back(c[pick]);
    }
    return freed;
  }

  // A job fares as the last one of its share, instance type and size that waited for the same
  // cause, when nothing has started or been preempted since and it has no higher priority: the
  // answer would be the same, so a queue a million deep costs one short lookup per job. The
  // entries of a (share, type) are chained from memo_head_; one holds while the pass's epoch is
  // the one it was written in.
  struct Memo {
    int64_t count;
    bool within_quota;
    Round round;
    int priority;
    uint32_t reason;  // kUndecided: left to a later round
    uint64_t epoch;
    uint32_t next;    // the next entry of the same (share, type); kNoEntry: none
  };
  static constexpr uint32_t kNoEntry = std::numeric_limits<uint32_t>::max();
  Memo* FindMemo(size_t key, int64_t count, bool within_quota, Round round) {
    for (uint32_t e = memo_head_[key]; e != kNoEntry; e = memo_[e].next) {
      Memo& m = memo_[e];
      if (m.count == count && m.within_quota == within_quota && m.round == round) return &m;
    }
    return nullptr;
  }
  static constexpr uint32_t kUndecided = std::numeric_limits<uint32_t>::max();

  // Decides for `j` in this round; false: left to a later round (nothing recorded).
  bool Consider(size_t s, const QuotaJob& j, Round round) {
    const QuotaShareSpec& share = snap_.shares[s];
    const Type t = TypeOf(s, j);
    const int64_t n = j.instance_count;
    const int64_t limit = Limit(s, t);
    const bool borrows = share.strategy == SharingStrategy::kLendAndBorrow;

    // Jobs that can never run, with AWS's reasons.
    const char* never = n > Ceiling(t)                              ? kMaxResourceReason
                        : !borrows && n > limit                     ? kQuotaLimitReason
                        : borrows && n > MaxWithBorrow(s, t)        ? kQuotaBorrowLimitReason
                        : borrows && n > Borrowable(s, t)           ? kQuotaBorrowableReason
                                                                    : nullptr;
    if (never) {
      never_ = true;
      if (round == Round::kInShare) return false;
      Wait(j, never);
      return true;
    }

    const bool within_quota = Used(s, t) + n <= limit;
    size_t waits_before = d_.waits.size();
    if (Memo* m = FindMemo(Key(s, t), n, within_quota, round); m && m->epoch == epoch_ && j.priority <= m->priority) {
      if (m->reason == kUndecided) return false;
      d_.waits.push_back({j.seq, m->reason});
    } else {
      uint64_t epoch = epoch_;
      bool decided = Decide(s, j, round);
      if (epoch == epoch_ && (!decided || d_.waits.size() > waits_before)) {
        Memo* e = FindMemo(Key(s, t), n, within_quota, round);
        if (!e) {
          memo_.push_back({n, within_quota, round, 0, 0, 0, memo_head_[Key(s, t)]});
          memo_head_[Key(s, t)] = static_cast<uint32_t>(memo_.size() - 1);
          e = &memo_.back();
        }
        e->priority = j.priority;
        e->reason = decided ? last_reason_ : kUndecided;
        e->epoch = epoch_;
      }
      if (!decided) return false;
    }
    if (d_.waits.size() > waits_before && front_.size() < kFront) front_.push_back({s, &j, waits_before});
    return true;
  }

  // Whether `j` of share `s` may start on the estimate's timeline.
  bool SimFits(size_t s, const QuotaJob& j, const std::vector<int64_t>& free, const std::vector<int64_t>& used) const {
    const Type t = TypeOf(s, j);
    int64_t n = j.instance_count, u = used[Key(s, t)];
    if (free[t] < n) return false;
    if (u + n <= Limit(s, t)) return true;
    if (snap_.shares[s].strategy != SharingStrategy::kLendAndBorrow || u + n > MaxWithBorrow(s, t)) return false;
    return free[t] - ReservedByOthers(s, t, used) >= n;
  }

  void Estimate() {
    // Releases: what runs (a leaving job's capacity is already off its share's books) and what
    // this pass started, by end time.
    if (front_.empty()) return;
    struct Release {
      int64_t end;
      size_t share;
      Type type;
      int64_t count;
      bool counted;  // still in its share's usage
    };
    std::vector<Release> releases;
    for (size_t k = 0; k < running_.size(); ++k) {
      const auto& r = running_[k];
      if (r.end_ms > 0) releases.push_back({r.end_ms, static_cast<size_t>(r.share), running_type_[k], r.instance_count, !preempting_[k]});
    }
    for (const auto& st : started_) releases.push_back({st.end, st.share, TypeOf(st.share, *st.job), st.job->instance_count, true});
    std::sort(releases.begin(), releases.end(), [](const Release& a, const Release& b) { return a.end < b.end; });
    // Per type: idle capacity (none for a type the snapshot gives no capacity).
    std::vector<int64_t> free(types_.size(), 0);
    for (const auto& [name, cap] : snap_.capacity) {
      const Type t = TypeNamed(name);
      free[t] = cap - in_use_[t];
    }
    std::vector<int64_t> used = used_;
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
        free[TypeOf(f.share, *f.job)] -= f.job->instance_count;
        used[Key(f.share, TypeOf(f.share, *f.job))] += f.job->instance_count;
        if (f.job->max_runtime_ms > 0) mine.push({now + f.job->max_runtime_ms, k});
      }
      pending.swap(still);
      if (pending.empty()) break;
      int64_t a = p < releases.size() ? releases[p].end : std::numeric_limits<int64_t>::max();
      int64_t b = mine.empty() ? std::numeric_limits<int64_t>::max() : mine.top().first;
      if (a == std::numeric_limits<int64_t>::max() && b == std::numeric_limits<int64_t>::max()) break;
      if (a <= b) {
        const Release& r = releases[p++];
        free[r.type] += r.count;
        if (r.counted) used[Key(r.share, r.type)] -= r.count;
        now = std::max(now, a);
      } else {
        const Front& f = front_[mine.top().second];
        mine.pop();
        free[TypeOf(f.share, *f.job)] += f.job->instance_count;
        used[Key(f.share, TypeOf(f.share, *f.job))] -= f.job->instance_count;
        now = std::max(now, b);
      }
    }
  }

  // Idle capacity the other RESERVE shares hold back for their own quota, given what each share
  // uses (the pass's books, or the estimate's timeline).
  int64_t ReservedByOthers(size_t s, Type t) const { return ReservedByOthers(s, t, used_); }
  int64_t ReservedByOthers(size_t s, Type t, const std::vector<int64_t>& used) const {
    int64_t reserved = 0;
    for (size_t o : reserving_)
      if (o != s) reserved += std::max<int64_t>(0, Limit(o, t) - used[Key(o, t)]);
    return reserved;
  }

  // The most a share may use of a type, borrowing included (its limit when it does not borrow).
  int64_t MaxWithBorrow(size_t s, Type t) const {
    const QuotaShareSpec& share = snap_.shares[s];
    int64_t limit = Limit(s, t);
    if (share.strategy != SharingStrategy::kLendAndBorrow) return limit;
    return share.borrow_limit_percent < 0 ? kUnlimited : limit + limit * share.borrow_limit_percent / 100;
  }

  // What a share may use of a type at most, borrowing included: its own limit plus what lending
  // shares may lend.
  int64_t Borrowable(size_t s, Type t) const {
    return Limit(s, t) + lent_[t] - (Lends(snap_.shares[s].strategy) ? Limit(s, t) : 0);
  }

  // Finds capacity for `j` of share `s`, which is inside its quota once `own` (lower-priority jobs
  // of its share, `own_freed` instances) have left: their capacity, idle capacity that no RESERVE
  // share holds back, capacity already on its way back, then lent capacity reclaimed from shares
  // above their quota. Starts `j`, or preempts and promises it the capacity (returning why it
  // waits); nullopt, with nothing changed, when that would still not be enough, or when (for
  // in-share preemption) an earlier job that waits inside its own quota would take it first.
  std::optional<std::string> Acquire(size_t s, const QuotaJob& j, const std::vector<size_t>& own, int64_t own_freed) {
    const Type t = TypeOf(s, j);
    const int64_t n = j.instance_count;
    // Negative spare: capacity that a RESERVE share holds back for itself is in use (its limit
    // was raised, or the limits add up to more than there is); that deficit is freed too.
    const int64_t reserved = ReservedByOthers(s, t);
    const int64_t spare = Free(t) - reserved + std::min(reserved, deficit_covered_[t]);
    const int64_t idle = std::max<int64_t>(0, spare);
    const int64_t deficit = std::max<int64_t>(0, -spare);
    if (own.empty() && idle >= n) {
      Start(s, j, false);
      return std::string();
    }
    int64_t need = n - own_freed + deficit;
    const int64_t from_idle = std::clamp<int64_t>(need, 0, idle);
    need -= from_idle;
    int64_t& returning = returning_[Key(s, t)];
    const int64_t from_returning = std::clamp<int64_t>(need, 0, returning);
    need -= from_returning;
    int64_t& leaving = leaving_[t];
    const int64_t from_leaving = std::clamp<int64_t>(need, 0, leaving);
    need -= from_leaving;
    // Cross-share reclaim: only from shares running above their own quota, never below it.
    std::vector<size_t> victims;
    int64_t freed = 0;
    std::map<size_t, int64_t> back;  // per lending share: what its victims free that it takes back
    if (need > 0) {
      std::vector<int64_t> over(snap_.shares.size(), 0);  // per share but `s`
      for (size_t o = 0; o < snap_.shares.size(); ++o)
        if (o != s) over[o] = Used(o, t) - Limit(o, t);
      // What the victims leave below their share's limit is not for `j`: a RESERVE share holds it
      // back, and another share takes it back once one of its jobs (the victims come back as
      // runnable jobs) fits in it. A victim gains what it frees beyond that.
      // Per share: its smallest waiting job or victim so far (kNotKnown: not looked up yet).
      std::vector<int64_t> smallest(snap_.shares.size(), kNotKnown);
      auto claimed = [&](size_t o, int64_t over_o, int64_t small) {
        int64_t room = std::max<int64_t>(0, -over_o);
        return !Lends(snap_.shares[o].strategy) || room >= small ? room : 0;
      };
      auto gain = [&](size_t v) {
        size_t o = static_cast<size_t>(running_[v].share);
        if (over[o] <= 0) return int64_t{0};
        const int64_t count = running_[v].instance_count;
        if (smallest[o] == kNotKnown) smallest[o] = SmallestWaiting(o, t);
        return count - (claimed(o, over[o] - count, std::min(smallest[o], count)) - claimed(o, over[o], smallest[o]));
      };
      auto take = [&](size_t v, int64_t g) {
        size_t o = static_cast<size_t>(running_[v].share);
        over[o] -= running_[v].instance_count;
        smallest[o] = std::min(smallest[o] == kNotKnown ? 0 : smallest[o], running_[v].instance_count);
        if (Lends(snap_.shares[o].strategy)) back[o] += running_[v].instance_count - g;
      };
      freed = PickVictims(Candidates([&](size_t v) {
                            return running_type_[v] == t && static_cast<size_t>(running_[v].share) != s;
                          }),
                          need, gain, take, victims);
      if (freed < need) return std::nullopt;
    }
    // Once the victims have left, all they held is idle for a moment: an earlier job that waits
    // inside its own quota and fits in it would take it first.
    if (!own.empty() || !victims.empty()) {
      int64_t released = idle + leaving + own_freed;
      for (size_t v : victims) released += running_[v].instance_count;
      if (ClaimedAhead(s, j, released)) return std::nullopt;
    }
    leaving += own_freed + from_idle + from_returning + freed - n - deficit;  // what is left over
    returning -= from_returning;
    deficit_covered_[t] += deficit;
    for (const auto& [o, count] : back) returning_[Key(o, t)] += count;
    Preempt(own, j, true);
    Preempt(victims, j, false);
    Promise(s, j, from_idle);
    std::string reclaim = "reclaiming capacity lent to other shares (" + std::to_string(victims.size()) + " job(s) preempted)";
    if (!own.empty())
      return "preempting " + std::to_string(own.size()) + " lower-priority job(s) of share '" + snap_.shares[s].name +
             "'" + (victims.empty() ? "" : ", and " + reclaim);
    if (!victims.empty()) return reclaim;
    return std::string("waiting for preempted jobs to give capacity back");
  }

  // The smallest runnable job of a share and type (kUnlimited: none), counting the jobs this
  // pass preempted.
  int64_t SmallestWaiting(size_t s, Type t) {
    int64_t& smallest = smallest_waiting_[Key(s, t)];
    if (smallest == kNotKnown) smallest = SmallestRunnable(s, t);
    return smallest;
  }
  int64_t SmallestRunnable(size_t s, Type t) const {
    int64_t smallest = kUnlimited;
    const auto& runnable = snap_.shares[s].runnable;
    for (size_t k = 0; k < runnable.size(); ++k)
      if (job_type_[job_types_at_[s] + k] == t) smallest = std::min(smallest, runnable[k].instance_count);
    return smallest;
  }

  // Whether the share's running jobs of lower priority than `j` hold enough to bring it inside
  // the share's quota.
  bool MayPreemptInShare(size_t s, const QuotaJob& j) {
    const Type t = TypeOf(s, j);
    auto [it, added] = lower_.try_emplace({s, t});
    auto& held = it->second;  // (priority, instances held by preemptible jobs of lower or equal priority)
    if (added) {
      for (size_t k = 0; k < running_.size(); ++k) {
        const auto& r = running_[k];
        if (static_cast<size_t>(r.share) == s && running_type_[k] == t && r.preemptible && !preempting_[k])
          held.push_back({r.priority, r.instance_count});
      }
      std::sort(held.begin(), held.end());
      for (size_t k = 1; k < held.size(); ++k) held[k].second += held[k - 1].second;
    }
    auto below = std::lower_bound(held.begin(), held.end(), std::make_pair(j.priority, std::numeric_limits<int64_t>::min()));
    int64_t preemptible = below == held.begin() ? 0 : std::prev(below)->second;
    return preemptible >= Used(s, t) + j.instance_count - Limit(s, t);
  }

  // Whether a job that waits inside its own quota for capacity of j's type would fit in
  // `available` instances and may be offered them before j in the next pass: any such job of
  // another share (the order across shares shifts as jobs start), or one of j's share that comes
  // before it (higher priority, or the same and submitted earlier).
  bool ClaimedAhead(size_t s, const QuotaJob& j, int64_t available) const {
    for (const auto& [count, by_share] : claims_[TypeOf(s, j)]) {
      if (count > available) break;
      for (const auto& [o, first] : by_share)
        if (o != s || OfferedBefore(first.first, first.second, j.priority, j.seq)) return true;
    }
    return false;
  }

  // Starts `j`, preempts for it, or makes it wait; false: left to a later round.
  bool Decide(size_t s, const QuotaJob& j, Round round) {
    const QuotaShareSpec& share = snap_.shares[s];
    const Type t = TypeOf(s, j);
    const int64_t n = j.instance_count;
    const int64_t limit = Limit(s, t);
    const bool borrows = share.strategy == SharingStrategy::kLendAndBorrow;

    if (Used(s, t) + n <= limit) {
      if (round == Round::kInShare) return false;
      // In the first round, behind a job of its share that is above the quota and may preempt
      // in-share, a job takes only idle capacity: preempting for it would be undone when that job's
      // turn comes. Otherwise it is left for the last round, when that job has had its turn.
      const QuotaJob* over = first_over_[Key(s, t)];
      if (round == Round::kOwnQuota && over && OfferedBefore(over->priority, over->seq, j.priority, j.seq)) {
        if (std::max<int64_t>(0, Free(t) - ReservedByOthers(s, t)) < n) return false;
        Start(s, j, false);
        return true;
      }
      if (auto reason = Acquire(s, j, {}, 0)) {
        if (!reason->empty()) Wait(j, std::move(*reason));
        return true;
      }
      auto [it, added] = claims_[t][n].try_emplace(s, j.priority, j.seq);
      if (!added && OfferedBefore(j.priority, j.seq, it->second.first, it->second.second)) it->second = {j.priority, j.seq};
      Wait(j, "waiting for capacity: the share is within its quota, but the capacity is in use and not borrowed");
      return true;
    }

    // Above its own quota: in-share priority preemption (its own round), then borrowing. A job
    // that can borrow idle capacity now preempts nobody; it borrows in the last round, after the
    // owners (and later jobs of its share do not preempt in-share for the quota it then holds).
    const bool can_borrow = borrows && Used(s, t) + n <= MaxWithBorrow(s, t) && !no_borrow_[Key(s, t)];
    if (round == Round::kInShare) {
      if (can_borrow && Free(t) - ReservedByOthers(s, t) >= n) return false;
      std::vector<size_t> victims;
      int64_t freed = 0;
      int64_t excess = Used(s, t) + n - limit;
      freed = PickVictims(Candidates([&](size_t v) {
                            const QuotaRunningJob& r = running_[v];
                            return running_type_[v] == t && static_cast<size_t>(r.share) == s && r.priority < j.priority;
                          }),
                          excess, [&](size_t v) { return running_[v].instance_count; }, [](size_t, int64_t) {}, victims);
      // Keep no victim the others make unnecessary (the most preferred ones stay).
      for (size_t k = victims.size(); k-- > 0;) {
        if (freed - running_[victims[k]].instance_count < excess) continue;
        freed -= running_[victims[k]].instance_count;
        victims.erase(victims.begin() + static_cast<std::ptrdiff_t>(k));
      }
      if (freed < excess) return false;
      // A waiting job of the share offered capacity before this one would take the quota the
      // victims leave, if it fits there: the preemption would be for nothing.
      if (smallest_before_ <= limit - Used(s, t) + freed) return false;
      auto reason = Acquire(s, j, victims, freed);
      if (!reason) return false;
      // Its lower-priority jobs may not borrow this type now: the share would be above its quota
      // again when the victims have left, and the job would preempt once more.
      no_borrow_[Key(s, t)] = true;
      Wait(j, std::move(*reason));
      return true;
    }
    if (can_borrow) {
      if (Free(t) - ReservedByOthers(s, t) >= n) {
        Start(s, j, true);
        return true;
      }
      Wait(j, kBorrow, s, t, 0, [&] {
        return "waiting to borrow: share '" + share.name + "' is at its quota and no idle capacity can be lent";
      });
      return true;
    }
    if (no_borrow_[Key(s, t)]) {
      Wait(j, kInSharePreempts, s, t, 0, [&] {
        return "waiting: share '" + share.name + "' is at its quota and preempts for a higher-priority job";
      });
      return true;
    }
    Wait(j, kAtQuota, s, t, Used(s, t), [&] {
      return "waiting: share '" + share.name + "' is at its quota (" + std::to_string(Used(s, t)) + " of " +
             std::to_string(limit) + " " + *types_[t] + ")";
    });
    return true;
  }

  const QuotaSnapshot& snap_;
  const std::vector<QuotaRunningJob>& running_;
  std::vector<const std::string*> types_;     // by Type: the names, in the snapshot
  std::vector<Type> running_type_;             // per running job
  std::vector<Type> job_type_;                 // per runnable job, the shares' jobs one after another
  std::vector<size_t> job_types_at_;           // per share: where its jobs start in job_type_
  std::vector<char> preempting_;               // per running job: told to stop (before or by this pass)
  std::vector<Rank> ranks_;                    // per running job, once a victim search needs them
  std::vector<int64_t> capacity_, ceiling_;    // per type
  std::vector<int64_t> limit_;                 // per (share, type)
  std::vector<int64_t> lent_;                  // per type: the limits of the shares that lend, summed
  std::vector<size_t> reserving_;              // the shares that do not lend (RESERVE)
  std::vector<int64_t> used_;     // per (share, type), without jobs that are leaving
  std::vector<int64_t> in_use_;   // per type: everything running, leaving jobs included
  std::vector<int64_t> leaving_;  // per type: capacity of preempted jobs not yet promised
  // Per type: capacity of preempted jobs set aside for RESERVE shares whose held-back quota was in use.
  std::vector<int64_t> deficit_covered_;
  // Per (share, type): capacity of preempted jobs that goes back to its own lending share (below
  // its limit): for that share's jobs only.
  std::vector<int64_t> returning_;
  // Jobs that wait inside their own quota for capacity: per type, size -> share -> the first of
  // them in the share's order (priority, submit order).
  std::vector<std::map<int64_t, std::map<size_t, std::pair<int, uint64_t>>>> claims_;
  // Per (share, type): it preempted in-share in this pass, so its jobs do not borrow that type.
  std::vector<bool> no_borrow_;
  // Per (share, type) with in-share preemption: its first job in offer order that was above the
  // share's quota in the first round (nullptr: none).
  std::vector<const QuotaJob*> first_over_;
  std::map<std::pair<size_t, Type>, std::vector<std::pair<int, int64_t>>> lower_;
  std::vector<int64_t> smallest_waiting_;  // per (share, type); kNotKnown: not looked up yet
  // (share, type) with in-share preemption -> the jobs that waited in the first round, as (offer
  // index, size) where the size is smaller than all before it; and for the job now in the
  // in-share round, the smallest waiting job of its share and type offered before it.
  std::map<std::pair<size_t, Type>, std::map<size_t, int64_t>> waiting_before_;
  int64_t smallest_before_ = kUnlimited;
  bool placed_ = false;  // the job now decided started, or was promised capacity
  bool never_ = false;   // the job now decided can never run
  QuotaDecisions d_;
  std::unordered_map<std::string, uint32_t> reason_ids_;
  uint32_t last_reason_ = 0;
  std::vector<std::pair<const char*, uint32_t>> fixed_reasons_;
  static constexpr uint32_t kNoReason = std::numeric_limits<uint32_t>::max();
  std::vector<std::pair<int64_t, uint32_t>> named_reasons_[kNamedKinds];  // per kind, per (share, type)
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
  std::vector<Memo> memo_;
  std::vector<uint32_t> memo_head_;  // per (share, type): its latest entry in memo_
};

}  // namespace

int64_t WorkLostMs(const QuotaRunningJob& r, int64_t now_ms) {
  const int64_t since = std::max(r.started_ms, r.last_checkpoint_ms);
  if (since <= 0 || now_ms <= since || r.instance_count <= 0) return 0;
  const int64_t span = now_ms - since;
  if (span > std::numeric_limits<int64_t>::max() / r.instance_count) return std::numeric_limits<int64_t>::max();
  return span * r.instance_count;
}

namespace {

// The idle holds that hold capacity in this pass (IdleHold), as running jobs of the lowest
// priority that started after every attempt.
void AddIdleHolds(QuotaSnapshot& snap) {
  std::vector<bool> waiting(snap.shares.size()), borrowing(snap.shares.size());
  for (size_t s = 0; s < snap.shares.size(); ++s) {
    waiting[s] = !snap.shares[s].runnable.empty();
    borrowing[s] = waiting[s] && snap.shares[s].strategy == SharingStrategy::kLendAndBorrow;
  }
  for (const IdleHold& h : snap.idle_holds) {
    const size_t s = static_cast<size_t>(h.share);
    if (h.wanted || waiting[s]) continue;
    if (Lends(snap.shares[s].strategy)) {
      bool borrower = false;
      for (size_t o = 0; o < borrowing.size(); ++o) borrower = borrower || (o != s && borrowing[o]);
      if (borrower) continue;
    }
    QuotaRunningJob r;
    r.seq = h.seq;
    r.share = h.share;
    r.instance_type = h.instance_type;
    r.instance_count = h.instance_count;
    r.priority = -1;                              // below every job (schedulingPriority is 0..9999)
    r.start_order = (uint64_t{1} << 62) + h.seq;  // newer than any attempt: the first victim
    r.end_ms = h.expires_ms;
    snap.running.push_back(r);
  }
}

}  // namespace

QuotaDecisions ScheduleQuotaShares(const QuotaSnapshot& snapshot) {
  if (snapshot.idle_holds.empty()) return QuotaPass(snapshot).Run();
  QuotaSnapshot with_holds = snapshot;
  AddIdleHolds(with_holds);
  return QuotaPass(with_holds).Run();
}

}  // namespace ty::sched
