// Deciding a job's own accesses to the embedded object store (docs/security.md, "Jobs' data"):
// the S3 action, resource and condition keys of each access, evaluated by src/iam against the
// policies the attempt spec carries (AttemptSpec::data_access). Pure: no I/O, the time is an
// argument. The supervisor asks before each list, read, write and delete (exec/local/data.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "exec/attempt_spec.h"
#include "iam/policy.h"

namespace ty::exec {

class DataAccessPolicy {
 public:
  // A document that does not parse (each did when it was accepted) is left out: it allows nothing.
  explicit DataAccessPolicy(const DataAccess& access);
  DataAccessPolicy(const DataAccessPolicy&) = delete;  // refs_ points into policies_
  DataAccessPolicy& operator=(const DataAccessPolicy&) = delete;

  // s3:GetObject, s3:PutObject or s3:DeleteObject on arn:aws:s3:::BUCKET/KEY. AccessDenied, in
  // IAM's words (naming the action and the object), when the policies do not allow it.
  Status CheckObject(std::string_view action, const std::string& bucket, const std::string& key, EpochMs now) const;
  // s3:ListBucket on arn:aws:s3:::BUCKET with the condition key s3:prefix.
  Status CheckList(const std::string& bucket, const std::string& prefix, EpochMs now) const;

 private:
  Status Decide(iam::Request request, EpochMs now) const;

  // ---- constant after construction ----
  iam::PrincipalKeys principal_;
  std::vector<iam::Policy> policies_;
  std::vector<const iam::Policy*> refs_;  // into policies_, what iam::Evaluate takes
};

}  // namespace ty::exec
