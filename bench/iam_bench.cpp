// Micro-benchmark of IAM policy evaluation (the pure iam/ library): what one access check costs
// a request. Ten users in three teams, each with two or three policies of three to five
// statements (the three-team set-up of docs/security.md, "Policies", plus a training policy and
// a network guard), and a mix of requests: submits to the caller's own share and to another's,
// describes of own and others' jobs, terminates (the explicit-deny path), list calls.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "iam/evaluate.h"

namespace {

using ty::iam::Policy;
using ty::iam::Request;

Policy MustParse(const std::string& doc, const std::string& name) {
  auto p = ty::iam::ParsePolicy(doc, name);
  if (!p.ok()) {
    std::fprintf(stderr, "iam_bench: %s: %s\n", name.c_str(), p.status().message().c_str());
    std::abort();
  }
  return std::move(*p);
}

const char* kTeamMember = R"({
  "Version": "2012-10-17",
  "Statement": [
    {"Sid": "SubmitToOwnShare", "Effect": "Allow", "Action": ["batch:SubmitServiceJob"],
     "Resource": ["arn:aws:batch:*:*:job-queue/shared", "arn:aws:batch:*:*:service-job/*"],
     "Condition": {"StringEquals": {"batch:ShareIdentifier": "${aws:PrincipalTag/team}"}}},
    {"Sid": "DescribeOwnJobs", "Effect": "Allow",
     "Action": ["batch:DescribeServiceJob", "batch:ListServiceJobs", "sagemaker:Describe*", "sagemaker:List*"],
     "Resource": "*",
     "Condition": {"StringEqualsIfExists": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}},
    {"Sid": "TerminateOwnJobs", "Effect": "Allow", "Action": "batch:TerminateServiceJob",
     "Resource": "arn:aws:batch:*:*:service-job/*",
     "Condition": {"StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}},
    {"Sid": "ReadOwnLogs", "Effect": "Allow", "Action": ["logs:GetLogEvents", "logs:FilterLogEvents"],
     "Resource": "arn:aws:logs:*:*:log-group:/aws/*:log-stream:*",
     "Condition": {"StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}}
  ]})";

const char* kGuard = R"({
  "Version": "2012-10-17",
  "Statement": [
    {"Sid": "DenyTerminateOthers", "Effect": "Deny",
     "Action": ["batch:TerminateServiceJob", "sagemaker:StopTrainingJob"], "Resource": "*",
     "Condition": {"StringNotEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}},
    {"Sid": "DenyWithoutTls", "Effect": "Deny", "Action": "*", "Resource": "*",
     "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
    {"Sid": "DenyOutsideNetwork", "Effect": "Deny", "Action": "*", "Resource": "*",
     "Condition": {"NotIpAddress": {"aws:SourceIp": ["10.0.0.0/8", "192.168.0.0/16", "2001:db8::/32"]}}}
  ]})";

const char* kTrainer = R"({
  "Version": "2012-10-17",
  "Statement": [
    {"Sid": "CreateSmallJobs", "Effect": "Allow", "Action": "sagemaker:CreateTrainingJob",
     "Resource": "arn:aws:sagemaker:*:*:training-job/${aws:username}-*",
     "Condition": {"NumericLessThanEquals": {"trainyard:InstanceCount": 8},
                   "ForAllValues:StringEquals": {"aws:TagKeys": ["team", "project"]}}},
    {"Sid": "TagOwnJobs", "Effect": "Allow", "Action": ["sagemaker:AddTags", "sagemaker:ListTags"],
     "Resource": "arn:aws:sagemaker:*:*:training-job/*",
     "Condition": {"StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}},
    {"Sid": "OnlyInWorkingHours", "Effect": "Deny", "Action": "sagemaker:CreateTrainingJob", "Resource": "*",
     "Condition": {"DateGreaterThan": {"aws:CurrentTime": "2027-01-01T00:00:00Z"}}}
  ]})";

struct User {
  std::string name, team;
  std::vector<const Policy*> policies;
};

struct World {
  Policy member = MustParse(kTeamMember, "TeamMember");
  Policy guard = MustParse(kGuard, "Guard");
  Policy trainer = MustParse(kTrainer, "Trainer");
  std::vector<User> users;
  std::vector<Request> requests;
  std::vector<size_t> owner;  // requests[i] is made by users[owner[i]]

  World() {
    const char* teams[] = {"a", "b", "c"};
    for (int i = 0; i < 10; ++i) {
      User u{"user" + std::to_string(i), teams[i % 3], {&member, &guard}};
      if (i % 2 == 0) u.policies.push_back(&trainer);  // five users train, five only submit
      users.push_back(std::move(u));
    }
    for (size_t i = 0; i < users.size(); ++i) {
      for (int k = 0; k < 8; ++k) {
        requests.push_back(Make(users[i], k));
        owner.push_back(i);
      }
    }
    // The mix is what it says: per user, own submit, own describe, list and own logs are
    // allowed, and a create for the five trainers; 4 x 10 + 5 = 45 of the 80.
    int allowed = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      allowed += ty::iam::Evaluate(requests[i], users[owner[i]].policies).allowed();
    }
    if (allowed != 45) {
      std::fprintf(stderr, "iam_bench: %d of the 80 requests allowed, not 45\n", allowed);
      std::abort();
    }
  }

  // The k-th request of a user's mix.
  static Request Make(const User& u, int k) {
    const std::string other = u.team == "a" ? "b" : "a";
    Request r;
    r.principal = "arn:aws:iam::000000000000:user/" + u.name;
    r.Set("aws:username", u.name);
    r.Set("aws:PrincipalTag/team", u.team);
    r.Set("aws:PrincipalArn", r.principal);
    r.Set("aws:SourceIp", "10.1.2.3");
    r.Set("aws:SecureTransport", "true");
    r.Set("aws:CurrentTime", "2026-06-01T12:00:00Z");
    const std::string job = "arn:aws:batch:us-east-1:000000000000:service-job/0123456789abcdef";
    switch (k) {
      case 0:  // submit to own share: allowed
      case 1:  // submit to another's share: implicit deny
        r.action = "batch:SubmitServiceJob";
        r.resource = "arn:aws:batch:us-east-1:000000000000:job-queue/shared";
        r.Set("batch:ShareIdentifier", k == 0 ? u.team : other);
        break;
      case 2:  // describe own job
      case 3:  // describe another team's job
        r.action = "batch:DescribeServiceJob";
        r.resource = job;
        r.Set("aws:ResourceTag/team", k == 2 ? u.team : other);
        break;
      case 4:  // terminate another team's job: explicit deny
        r.action = "batch:TerminateServiceJob";
        r.resource = job;
        r.Set("aws:ResourceTag/team", other);
        break;
      case 5:  // list
        r.action = "batch:ListServiceJobs";
        r.resource = "*";
        break;
      case 6:  // create a training job
        r.action = "sagemaker:CreateTrainingJob";
        r.resource = "arn:aws:sagemaker:us-east-1:000000000000:training-job/" + u.name + "-resnet";
        r.Set("trainyard:InstanceCount", "4");
        r.Set("aws:TagKeys", std::vector<std::string>{"team", "project"});
        break;
      default:  // read own logs
        r.action = "logs:GetLogEvents";
        r.resource = "arn:aws:logs:us-east-1:000000000000:log-group:/aws/batch/job:log-stream:x/default/0123";
        r.Set("aws:ResourceTag/team", u.team);
        break;
    }
    return r;
  }
};

const World& TheWorld() {
  static const World kWorld;
  return kWorld;
}

// One access check on a prepared request: the cost a request pays once the server knows who
// is calling and what the call touches.
void BM_Evaluate(benchmark::State& state) {
  const World& w = TheWorld();
  size_t i = 0, allowed = 0;
  for (auto _ : state) {
    const Request& r = w.requests[i];
    auto d = ty::iam::Evaluate(r, w.users[w.owner[i]].policies);
    allowed += d.allowed();
    benchmark::DoNotOptimize(d);
    if (++i == w.requests.size()) i = 0;
  }
  state.counters["allowed_share"] = static_cast<double>(allowed) / static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Evaluate)->Unit(benchmark::kMicrosecond);

// The same with the request's condition keys built each time (principal tags, source address,
// time, the call's own keys), as the server will per call.
void BM_BuildRequestAndEvaluate(benchmark::State& state) {
  const World& w = TheWorld();
  size_t i = 0;
  for (auto _ : state) {
    size_t u = i / 8;
    Request r = World::Make(w.users[u], static_cast<int>(i % 8));
    benchmark::DoNotOptimize(ty::iam::Evaluate(r, w.users[u].policies));
    if (++i == w.requests.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BuildRequestAndEvaluate)->Unit(benchmark::kMicrosecond);

// Parsing a policy (done when a policy is put or loaded, not per request).
void BM_ParseTeamPolicy(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ty::iam::ParsePolicy(kTeamMember, "TeamMember"));
}
BENCHMARK(BM_ParseTeamPolicy)->Unit(benchmark::kMicrosecond);

}  // namespace
