// Container jobs (AWS Batch SubmitJob on ECS-style queues): which RUNNABLE job starts next on
// which compute environment, a pure pass over a value snapshot (docs/batch-jobs.md,
// "Scheduling container jobs").
//
// Queues go by descending priority, then creation order, each on its compute environments in
// computeEnvironmentOrder; a job starts on the first ENABLED environment with room for its vCPUs,
// memory and GPUs. Within a fair-share queue the next job comes from the share with the lowest
// dominant share (Ghodsi et al., "Dominant Resource Fairness"; Mesos's DRFSorter): for each
// resource, what the share holds and held (decayed over shareDecaySeconds) as a fraction of the
// queue's capacity of it, the largest of the three, times weightFactor (lower gets more, as AWS
// has it). A share of 8-vCPU jobs so gets about an eighth of the starts of a share of 1-vCPU jobs
// on the same weight: equal vCPUs, not equal counts. Ties go to the share whose name sorts first.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ty::sched {

// What a container job asks for, a compute environment has, or attempts hold.
struct ContainerResources {
  int64_t vcpus = 0;
  int64_t memory_mib = 0;
  int64_t gpus = 0;

  ContainerResources& operator+=(const ContainerResources& o) {
    vcpus += o.vcpus;
    memory_mib += o.memory_mib;
    gpus += o.gpus;
    return *this;
  }
  ContainerResources& operator-=(const ContainerResources& o) {
    vcpus -= o.vcpus;
    memory_mib -= o.memory_mib;
    gpus -= o.gpus;
    return *this;
  }
  friend bool operator==(const ContainerResources&, const ContainerResources&) = default;
  // Every resource of this is at most the other's.
  bool FitsIn(const ContainerResources& room) const {
    return vcpus <= room.vcpus && memory_mib <= room.memory_mib && gpus <= room.gpus;
  }
};

// A share's past use: per resource the decayed integral of what its attempts held, in
// resource-seconds (vCPU-seconds, MiB-seconds, GPU-seconds), as DecayedUsage (sched.h) keeps
// instance-seconds for a service share. Callers keep it between passes.
struct ContainerUsage {
  double vcpu_seconds = 0;
  double memory_mib_seconds = 0;
  double gpu_seconds = 0;
};

// `usage` after `dt_ms` more milliseconds during which the share held `held`: DecayedUsage per
// resource, time constant `decay_seconds` (0 means 600).
ContainerUsage DecayedContainerUsage(const ContainerUsage& usage, const ContainerResources& held, int64_t dt_ms,
                                     int64_t decay_seconds);

// A share's dominant share, its place in its queue's order (lower goes first):
//   weightFactor x max over r of ShareOrderKey(usage_r, held_r, next_r / 2, 1, decay) / capacity_r
// for r in vCPU, memory and GPU, leaving out a resource the queue has none of. ShareOrderKey is
// the service-job fair share's key (4 x the average held over the decay window, plus what is held
// now, plus the candidate), so both kinds of queue weigh history against the present alike. The
// share's next job counts for half its size (the Sainte-Lague rule, as for service shares): a
// share of small jobs is not passed over for one job's rounding. With `next` zero it is the
// share's weighted dominant share.
double DominantShare(const ContainerUsage& usage, const ContainerResources& held, const ContainerResources& next,
                     const ContainerResources& capacity, double weight_factor, int64_t decay_seconds);

struct ComputeEnvironmentState {
  std::string name;
  bool enabled = true;
  ContainerResources capacity;  // maxvCpus (or the host's), memory and GPUs
  ContainerResources in_use;    // held by the attempts running on it
};

// A job that may start: a RUNNABLE job, or a released array parent with children left to make,
// standing for `count` children of its size (each start makes one: NextChild in the controller).
struct ContainerCandidate {
  uint64_t seq = 0;
  ContainerResources size;
  int64_t count = 1;
};

struct ContainerShare {
  std::string identifier;       // shareIdentifier; "" in a queue without a fair-share policy
  double weight_factor = 1.0;   // from shareDistribution; lower gets more
  ContainerUsage usage;         // decayed up to the pass's time
  ContainerResources held;      // what its attempts hold now
  std::vector<ContainerCandidate> runnable;  // a prefix of its jobs, in dispatch order
};

struct ContainerQueue {
  std::string name;
  int priority = 0;
  uint64_t seq = 0;               // creation order, between equal priorities
  bool enabled = true;
  std::vector<int> environments;  // indices into ContainerSnapshot::environments, in order
  // A fair-share queue orders its shares by dominant share; otherwise it has one share ("")
  // whose jobs go in dispatch order.
  bool fair_share = false;
  int64_t decay_seconds = 0;      // shareDecaySeconds; 0 means 600
  // computeReservation (percent): (r/100)^activeShares of each environment's vCPUs is held back
  // for shares that have no job yet, as AWS reserves "the maximum available vCPU".
  int compute_reservation = 0;
  std::vector<ContainerShare> shares;
};

struct ContainerSnapshot {
  std::vector<ComputeEnvironmentState> environments;
  std::vector<ContainerQueue> queues;
};

// A start the pass proposes: job (or array parent) `seq` of `snapshot.queues[queue].shares[share]`
// on `snapshot.environments[environment]`.
struct ContainerStart {
  uint64_t seq = 0;
  size_t queue = 0;
  size_t share = 0;
  int environment = -1;
  friend bool operator==(const ContainerStart&, const ContainerStart&) = default;
};

// One pass, step by step, so that the caller may find a proposed start impossible (an array's
// next child waits for its predecessor, or fails on a dependency and ends the array):
//
//   ContainerPass pass(snapshot);
//   while (auto s = pass.Next()) if (!CanStart(*s)) pass.Skip();
//
// Next() proposes the next start and counts it as made (the environment's room and the share's
// holding). Skip() takes the latest proposal back and passes over its candidate for the rest of
// the pass. Within a pass room only shrinks (a Skip() gives back no more than its proposal took),
// so a candidate that did not fit once is not looked at again. Pure: the same snapshot and the same Skip() calls give the same proposals.
class ContainerPass {
 public:
  explicit ContainerPass(ContainerSnapshot snapshot);

  std::optional<ContainerStart> Next();
  // REQUIRES: the latest Next() returned a start, and Skip() was not called for it yet.
  void Skip();

  const ContainerSnapshot& snapshot() const { return s_; }

 private:
  struct ShareCursor {
    size_t next = 0;     // first candidate not started out or passed over
    int64_t made = 0;    // starts from candidate `next` (an array parent's children)
  };
  // The environment of queue `q` candidate `c` fits in now, or -1.
  int RoomFor(size_t q, const ContainerCandidate& c) const;
  // Moves share `sh`'s cursor to its first candidate that fits somewhere; false: none is left.
  bool Advance(size_t q, size_t sh);
  void BeginQueue();

  ContainerSnapshot s_;
  std::vector<size_t> order_;       // queue indices in scheduling order
  size_t at_ = 0;                   // into order_
  bool began_ = false;              // order_[at_]'s cursors and reservation are set up
  std::vector<ShareCursor> cursors_;
  std::vector<int64_t> reserve_;    // per environment: vCPUs held back in the current queue
  ContainerResources capacity_;     // the current queue's environments together
  struct Taken {
    size_t queue, share, candidate;
    int environment;
  };
  std::optional<Taken> last_;
};

// A whole pass with every proposal made: what the simulator and the tests read.
std::vector<ContainerStart> ScheduleContainers(const ContainerSnapshot& snapshot);

}  // namespace ty::sched
