// s3:// URIs as the object store splits them (objstore/objstore.h ParseS3Uri). Input: the URI.
// Checked besides "no crash": an accepted URI names a non-empty bucket without '/', and
// "s3://" + bucket + "/" + key gives the URI back (nothing is lost or rewritten).
#include <cstdio>
#include <cstdlib>

#include "fuzz_input.h"
#include "objstore/objstore.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string uri(ty::fuzz::AsText(data, size));
  std::string bucket, key;
  if (!ty::objstore::ParseS3Uri(uri, &bucket, &key)) return 0;
  if (bucket.empty() || bucket.find('/') != std::string::npos) abort();
  const std::string joined = "s3://" + bucket + (uri.size() > 5 + bucket.size() ? "/" : "") + key;
  if (joined != uri) {
    std::fprintf(stderr, "ParseS3Uri(%s) -> (%s, %s)\n", uri.c_str(), bucket.c_str(), key.c_str());
    abort();
  }
  return 0;
}
