// The S3 REST endpoint of `trainyard serve` for the embedded buckets (<data_dir>/buckets, through
// objstore::BucketStore). A request whose SigV4 scope names service `s3` comes here (server.cpp's
// Route); docs/object-store.md, "The S3 endpoint", is the user-facing reference.
//
// Addressing: path style (/bucket/key) or virtual-host style (Host: bucket.DOMAIN[:port] for a
// DOMAIN in [s3] virtual_host_domains). The bucket and key are percent-decoded from the path
// exactly once; the store checks them (core/object_key.h) and never resolves one outside its bucket.
//
// Who may do what: each operation is one s3: action on arn:aws:s3:::bucket or
// arn:aws:s3:::bucket/key (Authorizer::CheckS3); root skips evaluation. Audit: bucket-level
// writes (CreateBucket, DeleteBucket) and every refusal are recorded; object reads and writes are
// not (they would put a commit on every PUT).
//
// Errors are S3's XML (<Error><Code/><Message/><Resource/><RequestId/></Error>) with S3's status
// for the code (errors.cpp, Protocol::kS3RestXml); a HEAD's error has no body.
// Thread-safety: Handle may run on every worker at once; the endpoint holds no mutable state.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "api/authorize.h"
#include "api/sigv4.h"
#include "core/status.h"

namespace ty {
struct S3Config;
}
namespace ty::control {
class Controller;
}
namespace ty::http {
struct Request;
struct Response;
}  // namespace ty::http
namespace ty::objstore {
class BucketStore;
}

namespace ty::api {

struct AuditRecord;

// The service a request's SigV4 credential scope names (the Authorization header's Credential=,
// or a presigned URL's X-Amz-Credential): "s3", "sts", "sagemaker", ...; "" when it names none.
// A request signed with Signature Version 2 (`Authorization: AWS ...`, or AWSAccessKeyId and
// Signature in the query) is S3's: "s3".
std::string ScopeService(const http::Request& req);

// The bucket a virtual-host-style request names in its Host (bucket.DOMAIN[:port] for a DOMAIN in
// [s3] virtual_host_domains), lower-cased; "" for a path-style request.
std::string VirtualHostBucket(const http::Request& req, const S3Config& config);

// An S3 error reply (XML; none for HEAD) for `st`, as the endpoint writes its own.
http::Response S3ErrorResponse(const http::Request& req, const Status& st, const std::string& request_id);

class S3Endpoint {
 public:
  // Verifies a request's signature (server.cpp's Authenticate with service "s3"), names the caller
  // in the record and says what the signature covers of the body in *verified.
  using Authenticator =
      std::function<StatusOr<Principal>(const http::Request& req, AuditRecord* who, VerifiedCaller* verified)>;

  S3Endpoint(control::Controller& controller, const Authorizer& authz, std::unique_ptr<objstore::BucketStore> store,
             Authenticator authenticate);
  ~S3Endpoint();

  http::Response Handle(const http::Request& req);

  // Whether a request's head is an upload of object data (PutObject, UploadPart), whose body may
  // be up to [s3] max_upload_bytes rather than the server's default limit.
  bool IsUpload(const http::Request& head) const;

  // The buckets it answers for (their housekeeping, objstore/bucket_sweeper.h, runs beside it).
  objstore::BucketStore& store() const { return *store_; }

 private:
  control::Controller& controller_;
  const Authorizer& authz_;
  std::unique_ptr<objstore::BucketStore> store_;
  Authenticator authenticate_;
};

}  // namespace ty::api
