// The console's queue data (api/console_data.cpp, control/share_standings.h): QueueStandings
// reports the figures GET /metrics reports, the share history takes one sample per interval on
// the controller's clock and keeps the newest ShareHistory::kMaxSamples, and ListServiceJobs'
// trainyard:tag filter keeps exactly the tagged jobs. The controller is stepped on a manual
// clock over in-memory ports.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <set>
#include <string>
#include <tuple>

#include "api/operations.h"
#include "api/handlers.h"
#include "api/metrics.h"
#include "control/controller.h"
#include "control/share_history.h"
#include "testing/controller_fixture.h"

namespace ty::api {
namespace {

using nlohmann::json;
using exec::Phase;

json TrainingPayload(const std::string& name) {
  return {{"TrainingJobName", name},
          {"RoleArn", "arn:aws:iam::000000000000:role/R"},
          {"AlgorithmSpecification", {{"TrainingImage", "x"}, {"TrainingInputMode", "File"}, {"ContainerEntrypoint", {"true"}}}},
          {"OutputDataConfig", {{"S3OutputPath", "s3://bucket/out"}}},
          {"ResourceConfig", {{"InstanceType", "ml.m5.large"}, {"InstanceCount", 1}, {"VolumeSizeInGB", 1}}},
          {"StoppingCondition", {{"MaxRuntimeInSeconds", 3600}}}};
}

// GET /metrics' samples: "name{a=\"x\",b=\"y\"}" -> value.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

class ConsoleDataTest : public testing::ControllerFixture {
 protected:
  ConsoleDataTest() : ControllerFixture("console-data") {}

  json Ok(const Response& r) {
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : json();
  }
  json Batch(const std::string& op, const json& req) { return Ok(BatchOperations().Serve(*c_, op, req)); }
  void Environment(int64_t instances, const std::string& unit) {
    Batch("CreateServiceEnvironment", {{"serviceEnvironmentName", "env"}, {"serviceEnvironmentType", "SAGEMAKER_TRAINING"},
                                       {"capacityLimits", {{{"capacityUnit", unit}, {"maxCapacity", instances}}}}});
  }
  void Queue(const std::string& policy) {
    Batch("CreateJobQueue", {{"jobQueueName", "q"}, {"jobQueueType", "SAGEMAKER_TRAINING"}, {"priority", 1},
                             {"schedulingPolicyArn", c_->Arn("batch", "scheduling-policy/" + policy)},
                             {"serviceEnvironmentOrder", {{{"order", 1}, {"serviceEnvironment", "env"}}}}});
  }
  // A fair-share queue over 4 instances: share A weighs 1, B 3 (B is entitled to a third of A).
  void FairShareQueue() {
    Batch("CreateSchedulingPolicy",
          {{"name", "fair"},
           {"fairsharePolicy", {{"shareDecaySeconds", 3600},
                                {"shareDistribution", {{{"shareIdentifier", "A"}, {"weightFactor", 1.0}},
                                                       {{"shareIdentifier", "B"}, {"weightFactor", 3.0}}}}}}});
    Environment(4, "NUM_INSTANCES");
    Queue("fair");
  }
  std::string Submit(const std::string& name, json extra) {
    json req = {{"jobName", name}, {"jobQueue", "q"}, {"serviceJobType", "SAGEMAKER_TRAINING"},
                {"serviceRequestPayload", TrainingPayload(name).dump()}};
    req.update(extra);
    return Batch("SubmitServiceJob", req).value("jobId", "");
  }
  // Turns until the queue's arrival batch has closed and every placed attempt reports running.
  void Settle() {
    c_->Step();
    clock_.advance_ms(1000);  // [scheduler] batch_ms
    c_->Step();
    for (const std::string& a : exec_->started()) {
      exec_->Push(a, Phase::kPreparing, clock_.now_ms());
      exec_->Push(a, Phase::kTraining, clock_.now_ms());
    }
    c_->Step();
  }
  json Standings(json req = json::object()) { return Ok(HandleQueueStandings(*c_, req)); }
  json History(json req) { return Ok(HandleShareHistory(*c_, req)); }
  json ShareOf(const json& queue, const std::string& share) {
    for (const auto& s : queue["Shares"])
      if (s["Share"] == share) return s;
    ADD_FAILURE() << "no share " << share << " in " << queue.dump();
    return json();
  }
};

// shares: A running 4 of 4, entitled to 3 (1/1 over 1/1 + 1/3); B waiting with 1, entitled to 1.
// A borrows 1; B lends it.
TEST_F(ConsoleDataTest, FairShareStandingsAreTheMetricsGauges) {
  FairShareQueue();
  for (int i = 0; i < 4; ++i) Submit("a" + std::to_string(i), {{"shareIdentifier", "A"}});
  Settle();
  Submit("b0", {{"shareIdentifier", "B"}});
  Settle();
  const json q = Standings({{"JobQueue", "q"}})["Queues"][0];
  EXPECT_EQ(q["Kind"], "FAIR_SHARE");
  EXPECT_EQ(q["State"], "ENABLED");
  EXPECT_EQ(q["Counts"], (json{{"SUBMITTED", 0}, {"PENDING", 0}, {"RUNNABLE", 1}, {"SCHEDULED", 0}, {"STARTING", 0},
                               {"RUNNING", 4}}));
  const json a = ShareOf(q, "A"), b = ShareOf(q, "B");
  EXPECT_EQ(a["InUse"], 4);
  EXPECT_EQ(a["Entitlement"], 3);
  EXPECT_EQ(a["Borrowed"], 1);
  EXPECT_EQ(a["Lent"], 0);
  EXPECT_EQ(a["Waiting"], 0);
  EXPECT_EQ(b["InUse"], 0);
  EXPECT_EQ(b["Entitlement"], 1);
  EXPECT_EQ(b["Borrowed"], 0);
  EXPECT_EQ(b["Lent"], 1);
  EXPECT_EQ(b["Waiting"], 1);
  EXPECT_EQ(b["WeightFactor"], 3.0);

  const auto m = Samples(RenderMetrics(*c_));
  for (const json& s : {a, b}) {
    const std::string l = "{queue=\"q\",share=\"" + s["Share"].get<std::string>() + "\"}";
    EXPECT_DOUBLE_EQ(m.count("trainyard_share_instances_in_use" + l) ? m.at("trainyard_share_instances_in_use" + l) : 0,
                     s["InUse"].get<double>());
    EXPECT_DOUBLE_EQ(m.at("trainyard_fairshare_entitlement_instances" + l), s["Entitlement"].get<double>());
    EXPECT_DOUBLE_EQ(m.at("trainyard_fairshare_entitlement_ratio" + l), s["EntitlementRatio"].get<double>());
    if (s.contains("WeightedUsage")) {
      EXPECT_DOUBLE_EQ(m.at("trainyard_fairshare_weighted_usage_instances" + l), s["WeightedUsage"].get<double>());
      EXPECT_DOUBLE_EQ(m.at("trainyard_fairshare_weight_factor" + l), s["WeightFactor"].get<double>());
    }
  }
  EXPECT_TRUE(a.contains("WeightedUsage"));  // A was weighed by a pass
  EXPECT_DOUBLE_EQ(m.at("trainyard_jobs{queue=\"q\",status=\"RUNNABLE\"}"), q["Counts"]["RUNNABLE"].get<double>());
}

// shares (ml.m5.large): S1 limit 2 runs 3, borrowing 1; S2 limit 2 (LEND_AND_BORROW) idle, lends
// it; S3 limit 1 (RESERVE) idle, lends nothing.
TEST_F(ConsoleDataTest, QuotaShareStandingsAreTheMetricsGauges) {
  Batch("CreateSchedulingPolicy", {{"name", "quota"}, {"quotaSharePolicy", {{"idleResourceAssignmentStrategy", "FIFO"}}}});
  Environment(4, "ml.m5.large");
  Queue("quota");
  for (auto [name, limit, strategy] : {std::tuple{"S1", 2, "LEND_AND_BORROW"}, std::tuple{"S2", 2, "LEND_AND_BORROW"},
                                       std::tuple{"S3", 1, "RESERVE"}})
    Batch("CreateQuotaShare", {{"jobQueue", "q"}, {"quotaShareName", name},
                               {"capacityLimits", {{{"capacityUnit", "ml.m5.large"}, {"maxCapacity", limit}}}},
                               {"resourceSharingConfiguration", {{"strategy", strategy}}},
                               {"preemptionConfiguration", {{"inSharePreemption", "DISABLED"}}}});
  for (int i = 0; i < 4; ++i) Submit("s" + std::to_string(i), {{"quotaShareName", "S1"}});
  Settle();
  const json q = Standings({{"JobQueue", c_->Arn("batch", "job-queue/q")}})["Queues"][0];  // by ARN too
  EXPECT_EQ(q["Kind"], "QUOTA_SHARE");
  EXPECT_EQ(q["Counts"]["RUNNING"], 3);
  EXPECT_EQ(q["Counts"]["RUNNABLE"], 1);
  const json s1 = ShareOf(q, "S1"), s2 = ShareOf(q, "S2"), s3 = ShareOf(q, "S3");
  EXPECT_EQ(s1, (json{{"Share", "S1"}, {"InUse", 3}, {"Entitlement", 2}, {"Borrowed", 1}, {"Lent", 0}, {"Waiting", 1},
                      {"InstanceTypes", {{{"InstanceType", "ml.m5.large"}, {"Limit", 2}, {"InUse", 3}, {"Borrowed", 1}, {"Lent", 0}}}}}));
  EXPECT_EQ(s2["Lent"], 1);
  EXPECT_EQ(s2["Borrowed"], 0);
  EXPECT_EQ(s3["Lent"], 0);  // RESERVE keeps its idle limit
  EXPECT_EQ(q["UnassignedLent"], (json{{"ml.m5.large", 0}}));

  const auto m = Samples(RenderMetrics(*c_));
  for (const json& s : {s1, s2, s3}) {
    const std::string l = "{queue=\"q\",share=\"" + s["Share"].get<std::string>() + "\",instance_type=\"ml.m5.large\"}";
    const json& t = s["InstanceTypes"][0];
    EXPECT_DOUBLE_EQ(m.at("trainyard_quota_share_instances_in_use" + l), t["InUse"].get<double>()) << l;
    EXPECT_DOUBLE_EQ(m.at("trainyard_quota_share_borrowed_instances" + l), t["Borrowed"].get<double>()) << l;
    EXPECT_DOUBLE_EQ(m.at("trainyard_quota_share_lent_instances" + l), t["Lent"].get<double>()) << l;
    EXPECT_DOUBLE_EQ(m.at("trainyard_quota_share_limit_instances" + l), t["Limit"].get<double>()) << l;
  }
  EXPECT_DOUBLE_EQ(m.at("trainyard_share_instances_in_use{queue=\"q\",share=\"S1\"}"), 3);
}

TEST_F(ConsoleDataTest, QueueStandingsRefusesWhatItDoesNotTake) {
  FairShareQueue();
  auto unknown = HandleQueueStandings(*c_, {{"Queue", "q"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), Code::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("Queue"), std::string::npos);
  auto not_string = HandleQueueStandings(*c_, {{"JobQueue", 7}});
  ASSERT_FALSE(not_string.ok());
  EXPECT_EQ(not_string.status().code(), Code::kInvalidArgument);
  auto missing = HandleQueueStandings(*c_, {{"JobQueue", "nope"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  // Without a filter, every queue.
  EXPECT_EQ(Standings()["Queues"].size(), 1u);
}

// [console] share_history_interval_seconds = 60 (the default).
TEST_F(ConsoleDataTest, ShareHistoryTakesOneSamplePerIntervalOnTheControllersClock) {
  FairShareQueue();
  Submit("a0", {{"shareIdentifier", "A"}});
  Settle();  // the turns so far are within the first interval: at most the first sample
  const size_t first = History({{"JobQueue", "q"}})["Points"].size();
  ASSERT_LE(first, 1u);
  auto points = [&] { return History({{"JobQueue", "q"}})["Points"]; };
  clock_.advance_ms(60'000);
  c_->Step();
  ASSERT_EQ(points().size(), first + 1);
  EXPECT_EQ(points().back()["Shares"]["A"], (json{{"InUse", 1}, {"Entitlement", 4}, {"Borrowed", 0}, {"Lent", 0}}));
  EXPECT_DOUBLE_EQ(points().back()["Timestamp"].get<double>(), static_cast<double>(clock_.now_ms()) / 1000.0);
  clock_.advance_ms(30'000);
  c_->Step();
  EXPECT_EQ(points().size(), first + 1);  // half an interval: none
  clock_.advance_ms(30'000);
  c_->Step();
  EXPECT_EQ(points().size(), first + 2);
  clock_.advance_ms(600'000);  // a jump over ten intervals: one sample, not ten
  c_->Step();
  EXPECT_EQ(points().size(), first + 3);

  // StartTime / EndTime select by Timestamp (epoch seconds, inclusive).
  const double last = points().back()["Timestamp"].get<double>();
  EXPECT_EQ(History({{"JobQueue", "q"}, {"StartTime", last}})["Points"].size(), 1u);
  EXPECT_EQ(History({{"JobQueue", "q"}, {"EndTime", last - 1}})["Points"].size(), first + 2);
  auto backwards = HandleShareHistory(*c_, {{"JobQueue", "q"}, {"StartTime", last}, {"EndTime", last - 1}});
  ASSERT_FALSE(backwards.ok());
  EXPECT_NE(backwards.status().message().find("StartTime"), std::string::npos);
  auto no_queue = HandleShareHistory(*c_, json::object());
  ASSERT_FALSE(no_queue.ok());
  EXPECT_EQ(no_queue.status().code(), Code::kInvalidArgument);
  auto unknown = HandleShareHistory(*c_, {{"JobQueue", "nope"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), Code::kNotFound);
}

TEST_F(ConsoleDataTest, ShareHistoryKeepsTheNewestSamplesOnly) {
  FairShareQueue();
  Submit("a0", {{"shareIdentifier", "A"}});
  Settle();
  const size_t n = control::ShareHistory::kMaxSamples + 60;
  for (size_t i = 0; i < n; ++i) {
    clock_.advance_ms(60'000);
    c_->Step();
  }
  const json points = History({{"JobQueue", "q"}})["Points"];
  ASSERT_EQ(points.size(), control::ShareHistory::kMaxSamples);
  EXPECT_DOUBLE_EQ(points.back()["Timestamp"].get<double>(), static_cast<double>(clock_.now_ms()) / 1000.0);
  EXPECT_DOUBLE_EQ(points.front()["Timestamp"].get<double>(),
                   static_cast<double>(clock_.now_ms() - 60'000 * static_cast<int64_t>(control::ShareHistory::kMaxSamples - 1)) /
                       1000.0);
}

TEST_F(ConsoleDataTest, TheTagFilterKeepsExactlyTheJobsCarryingEveryTag) {
  FairShareQueue();
  const std::string both = Submit("both", {{"shareIdentifier", "A"}, {"tags", {{"team", "a"}, {"env", "prod"}}}});
  const std::string team = Submit("team", {{"shareIdentifier", "A"}, {"tags", {{"team", "a"}}}});
  Submit("other", {{"shareIdentifier", "B"}, {"tags", {{"team", "b"}, {"env", "prod"}}}});
  Submit("none", {{"shareIdentifier", "B"}});
  c_->Step();
  auto ids = [&](json filters, json extra = json::object()) {
    json req = {{"jobQueue", "q"}, {"filters", filters}};
    req.update(extra);
    std::set<std::string> out;
    const json reply = Batch("ListServiceJobs", req);
    for (const auto& j : reply["jobSummaryList"]) out.insert(j["jobId"].get<std::string>());
    return out;
  };
  const json tag_a = {{{"name", "trainyard:tag"}, {"values", {"team=a"}}}};
  EXPECT_EQ(ids(tag_a), (std::set<std::string>{both, team}));
  EXPECT_EQ(ids({{{"name", "trainyard:tag"}, {"values", {"team=a", "env=prod"}}}}), (std::set<std::string>{both}));
  EXPECT_EQ(ids({{{"name", "trainyard:tag"}, {"values", {"team=c"}}}}), std::set<std::string>{});
  // Beside an AWS filter: both apply.
  EXPECT_EQ(ids({{{"name", "JOB_NAME"}, {"values", {"te*"}}}, tag_a[0]}), (std::set<std::string>{team}));
  // jobStatus applies, as with SHARE_IDENTIFIER.
  EXPECT_EQ(ids(tag_a, {{"jobStatus", "SUCCEEDED"}}), std::set<std::string>{});

  for (const char* bad : {"team", "=a", ""}) {
    auto r = BatchOperations().Serve(*c_, "ListServiceJobs", {{"jobQueue", "q"}, {"filters", {{{"name", "trainyard:tag"}, {"values", {bad}}}}}});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("trainyard:tag"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("key=value"), std::string::npos) << r.status().message();
  }
  auto twice = BatchOperations().Serve(*c_, "ListServiceJobs", {{"jobQueue", "q"}, {"filters", {tag_a[0], tag_a[0]}}});
  EXPECT_FALSE(twice.ok());
}

}  // namespace
}  // namespace ty::api
