// Placement across regions (docs/regions.md, "Placement"): which of a job's candidate regions it
// is submitted to. A pure function: it reads what each region reported (PeerSummary, gathered by
// the api layer) and returns the candidates in the order to try them, each with its score and the
// reasons, in words, that the job records. No clock, no I/O.
//
// The score of a reachable region, higher is better (integers: the order is exact and total):
//   data     +1000 for each of the job's input buckets the region's object store holds
//   capacity  +100 when the region has the job's instance count free for its instance type
//   wait       -10 for each job already waiting (SUBMITTED..RUNNABLE) in the job's queue there
//   price       -1 per cent per hour of the job's instances (instance price x instance count)
// A region that cannot run the instance type at all, has no queue of the job's name, or is
// unreachable, is not a candidate; a
// full region (no free capacity) is tried after every region with capacity. Ties keep the order
// the candidates were listed in.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace ty::control {

// What one candidate region said about itself (or why it said nothing).
struct PeerSummary {
  std::string region;
  bool reachable = true;
  std::string unreachable_reason;  // the transport's words ("connection refused", "timed out")
  std::set<std::string> buckets;   // the buckets its object store holds
  bool has_queue = true;             // the job's queue exists there
  bool offers_instance_type = true;  // the job's instance type is in its catalogue
  int64_t free_instances = 0;        // of the job's instance type, now
  int64_t waiting_jobs = 0;          // jobs waiting in the job's queue there
  double price_per_hour = 0;         // of one instance of the type (USD), from its catalogue
};

struct PlacementRequest {
  std::vector<std::string> input_buckets;  // the buckets the job reads (distinct, in order)
  std::string instance_type;
  int64_t instance_count = 1;
};

struct RankedRegion {
  std::string region;
  int64_t score = 0;
  bool full = false;
  std::string why;  // "holds input data-b / 2 free of ml.m5.large / 0 waiting / 0.12 USD/h"
};

struct Placement {
  std::vector<RankedRegion> order;   // the regions to try, best first
  std::vector<std::string> skipped;  // "b: unreachable: <cause>", "c: offers no ml.p4d.24xlarge"
};

Placement RankRegions(const PlacementRequest& request, const std::vector<PeerSummary>& candidates);

// The reason a job records when it went to `chosen`: "placed in eu-west-1 score=1090: holds input
// data-b / ... -- us-east-1 score=90: input elsewhere: data-b / ... -- ap-south-1: unreachable: ...".
// `failed` ("region: why") names better-ranked regions that were tried and did not take the job.
// Written with the characters an AWS tag value may hold (the job keeps it as a tag), except
// where a cause from elsewhere is quoted.
std::string PlacementReason(const Placement& placement, const std::string& chosen,
                            const std::vector<std::string>& failed);

}  // namespace ty::control
