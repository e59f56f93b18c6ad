#include "exec/data_access.h"

#include "core/strings.h"
#include "iam/evaluate.h"

namespace ty::exec {

DataAccessPolicy::DataAccessPolicy(const DataAccess& access) : principal_(access.principal) {
  for (const auto& p : access.policies)
    if (auto parsed = iam::ParsePolicy(p.document, p.name); parsed.ok()) policies_.push_back(std::move(*parsed));
  for (const auto& p : policies_) refs_.push_back(&p);
}

Status DataAccessPolicy::CheckObject(std::string_view action, const std::string& bucket, const std::string& key,
                                     EpochMs now) const {
  iam::Request r;
  r.action = std::string(action);
  r.resource = "arn:aws:s3:::" + bucket + "/" + key;
  return Decide(std::move(r), now);
}

Status DataAccessPolicy::CheckList(const std::string& bucket, const std::string& prefix, EpochMs now) const {
  iam::Request r;
  r.action = "s3:ListBucket";
  r.resource = "arn:aws:s3:::" + bucket;
  r.Set("s3:prefix", prefix);
  return Decide(std::move(r), now);
}

Status DataAccessPolicy::Decide(iam::Request r, EpochMs now) const {
  iam::SetPrincipalKeys(&r, principal_);
  r.Set("aws:CurrentTime", FormatIso8601(now));
  r.Set("aws:EpochTime", std::to_string(now / 1000));
  const iam::Decision d = iam::Evaluate(r, refs_);
  if (d.allowed()) return Status::Ok();
  return Status(Code::kAccessDenied, iam::DenialMessage(r, d));
}

}  // namespace ty::exec
