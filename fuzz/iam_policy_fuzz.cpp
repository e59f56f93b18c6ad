// IAM policies (iam/policy.h, iam/evaluate.h): parsing a policy document as a user or role's
// policy would be stored, then evaluating requests against it.
//
// Input: the policy document; optionally followed by a line "%%" and a request: a first line
// "ACTION RESOURCE", then condition keys one per line as "key=value" (a key given twice has two
// values). Without a request, a fixed set of requests is evaluated. Beyond "no crash", checked:
// the same document parses to the same outcome twice; the outcome does not depend on the order
// of the policies; a Deny-everything policy beside it always wins.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "iam/evaluate.h"

namespace {

using ty::iam::Outcome;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "iam_policy_fuzz: %s\n", what);
  std::abort();
}

std::vector<ty::iam::Request> Requests(std::string_view text) {
  std::vector<ty::iam::Request> out;
  if (!text.empty()) {
    auto [head, rest] = ty::fuzz::SplitFirstLine(text);
    ty::iam::Request r;
    size_t sp = head.find(' ');
    r.principal = "arn:aws:iam::000000000000:user/fuzz";
    r.action = std::string(head.substr(0, sp));
    r.resource = sp == std::string_view::npos ? "*" : std::string(head.substr(sp + 1));
    while (!rest.empty()) {
      auto [line, more] = ty::fuzz::SplitFirstLine(rest);
      rest = more;
      size_t eq = line.find('=');
      if (eq == std::string_view::npos) continue;
      const auto* have = r.Find(line.substr(0, eq));
      std::vector<std::string> values = have ? *have : std::vector<std::string>{};
      values.emplace_back(line.substr(eq + 1));
      r.Set(line.substr(0, eq), std::move(values));
    }
    out.push_back(std::move(r));
    return out;
  }
  for (const char* action : {"batch:SubmitServiceJob", "sagemaker:DescribeTrainingJob", "s3:GetObject"}) {
    ty::iam::Request r;
    r.principal = "arn:aws:iam::000000000000:user/alice";
    r.action = action;
    r.resource = "arn:aws:batch:us-east-1:000000000000:job-queue/shared";
    r.Set("aws:username", "alice");
    r.Set("aws:PrincipalTag/team", "a");
    r.Set("aws:ResourceTag/team", "a");
    r.Set("batch:ShareIdentifier", "a");
    r.Set("aws:SourceIp", "203.0.113.7");
    r.Set("aws:SecureTransport", "true");
    r.Set("aws:CurrentTime", "2026-06-01T12:00:00Z");
    r.Set("aws:TagKeys", std::vector<std::string>{"team", "owner"});
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = ty::fuzz::AsText(data, size);
  std::string_view request_text;
  if (size_t sep = in.find("\n%%\n"); sep != std::string_view::npos) {
    request_text = in.substr(sep + 4);
    in = in.substr(0, sep);
  }
  auto policy = ty::iam::ParsePolicy(in, "fuzz");
  auto again = ty::iam::ParsePolicy(in, "fuzz");
  if (policy.ok() != again.ok() || policy.status().message() != again.status().message()) {
    Fail("parsing the same document twice gave different answers");
  }
  if (!policy.ok()) return 0;

  static const ty::iam::Policy kDenyAll = *ty::iam::ParsePolicy(
      R"({"Version":"2012-10-17","Statement":{"Effect":"Deny","Action":"*","Resource":"*"}})", "deny");
  static const ty::iam::Policy kAllowAll = *ty::iam::ParsePolicy(
      R"({"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"*","Resource":"*"}})", "allow");
  for (const ty::iam::Request& r : Requests(request_text)) {
    std::vector<const ty::iam::Policy*> one{&*policy};
    ty::iam::Decision d = ty::iam::Evaluate(r, one);
    if (d.outcome != Outcome::kImplicitDeny &&
        (d.policy != &*policy || d.statement < 0 ||
         static_cast<size_t>(d.statement) >= policy->statements.size())) {
      Fail("a decision names no statement of the policy");
    }
    std::vector<const ty::iam::Policy*> fwd{&*policy, &kAllowAll}, back{&kAllowAll, &*policy};
    if (ty::iam::Evaluate(r, fwd).outcome != ty::iam::Evaluate(r, back).outcome) {
      Fail("the outcome depends on the order of the policies");
    }
    std::vector<const ty::iam::Policy*> denied{&*policy, &kDenyAll};
    if (ty::iam::Evaluate(r, denied).outcome != Outcome::kExplicitDeny) Fail("a Deny-everything policy lost");
    if (!d.allowed()) (void)ty::iam::DenialMessage(r, d);
  }
  return 0;
}
