// s3:// URIs, bucket names and object keys (core/object_key.h CheckBucketName, CheckObjectKey,
// ParseS3Uri; objstore/objstore.h ParseS3Uri, the store's wrapper). Input: a URI, also checked
// as a bare key.
//
// Checked besides "no crash", against an independent reading of the rules, since an accepted key
// becomes a path beneath a bucket's directory: an accepted key or prefix has no leading '/', no
// empty, "." or ".." segment, no control character and at most 1024 bytes, and an object key is
// not empty and does not end with '/'; an accepted URI is "s3://" + bucket + "/" + key with the
// bucket and key passing their own checks; the store's wrapper accepts what kPrefix accepts.
#include <cstdio>
#include <cstdlib>

#include "core/object_key.h"
#include "fuzz_input.h"
#include "objstore/objstore.h"

namespace {

void Fail(const char* what, std::string_view input) {
  std::fprintf(stderr, "%s: '%.*s'\n", what, static_cast<int>(input.size()), input.data());
  abort();
}

bool SafeRelative(std::string_view key, ty::KeyUse use) {
  if (key.size() > 1024) return false;
  for (unsigned char c : key)
    if (c < 0x20 || c == 0x7f) return false;
  if (use == ty::KeyUse::kObject && (key.empty() || key.back() == '/')) return false;
  if (key.empty()) return true;
  if (use == ty::KeyUse::kPrefix && key.back() == '/') key.remove_suffix(1);
  while (true) {
    size_t slash = key.find('/');
    std::string_view segment = key.substr(0, slash);
    if (segment.empty() || segment == "." || segment == "..") return false;
    if (slash == std::string_view::npos) return true;
    key.remove_prefix(slash + 1);
  }
}

void CheckUri(std::string_view uri, ty::KeyUse use) {
  auto loc = ty::ParseS3Uri(uri, use);
  if (!loc.ok()) return;
  if (!ty::CheckBucketName(loc->bucket).ok()) Fail("accepted URI with a bad bucket", uri);
  if (!loc->key.empty() || use == ty::KeyUse::kObject) {
    if (!ty::CheckObjectKey(loc->key, use).ok()) Fail("accepted URI with a bad key", uri);
  }
  if (!SafeRelative(loc->key, use)) Fail("accepted URI whose key is not a safe relative path", uri);
  std::string joined = "s3://" + loc->bucket;
  if (uri.size() > joined.size()) joined += "/" + loc->key;
  if (joined != uri) Fail("URI does not split without loss", uri);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(ty::fuzz::AsText(data, size));
  for (ty::KeyUse use : {ty::KeyUse::kObject, ty::KeyUse::kPrefix}) {
    if (ty::CheckObjectKey(input, use).ok() && !SafeRelative(input, use)) Fail("accepted an unsafe key", input);
    CheckUri(input, use);
  }
  (void)ty::CheckBucketName(input);

  std::string bucket, key;
  bool wrapper = ty::objstore::ParseS3Uri(input, &bucket, &key);
  auto prefix = ty::ParseS3Uri(input, ty::KeyUse::kPrefix);
  if (wrapper != prefix.ok()) Fail("objstore::ParseS3Uri and ParseS3Uri(kPrefix) disagree", input);
  if (wrapper && (bucket != prefix->bucket || key != prefix->key)) Fail("the two parsers split differently", input);
  return 0;
}
