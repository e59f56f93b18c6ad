// Bucket names, object keys and s3:// URIs: the one set of rules every API field, manifest entry
// and object-store call checks them against.
//
// S3 allows almost any UTF-8 in a key ("a//b", "../x", "/abs", control characters). trainyard's
// embedded store maps a key onto a file beneath its bucket's directory, and jobs see keys as
// relative paths under /opt/ml/input/data/<channel>/, so only keys that are safe relative paths
// are accepted: the rules below are S3's, narrowed to that. Keys are refused rather than rewritten
// ("a//b" is not quietly made "a/b"): a rewritten key would name another object than the caller's.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace ty {

// How a key is used. An object key names one object; a prefix selects the objects whose keys
// start with it, so it may be empty and may end with '/'.
enum class KeyUse { kObject, kPrefix };

// S3's rules for general purpose bucket names: 3 to 63 characters of lower-case letters, digits,
// '.' and '-', starting and ending with a letter or digit; no "..", not an IPv4 address, none of
// the prefixes and suffixes S3 reserves. InvalidArgument (naming the bucket and the rule) if not.
Status CheckBucketName(std::string_view bucket);

// An object key (or prefix, per `use`) that is a safe relative path: valid UTF-8 of at most 1024
// bytes (S3's limit); no NUL or other control characters; no leading '/'; no empty segment ("//")
// and no "." or ".." segment; each segment at most 255 bytes (a file name). An object key is not
// empty and does not end with '/'. InvalidArgument (naming the key and the rule) if not.
Status CheckObjectKey(std::string_view key, KeyUse use);

struct S3Location {
  std::string bucket;
  std::string key;  // "" for the whole bucket (a prefix only)
};

// "s3://bucket/key" split into bucket and key, both checked as above. "s3://bucket" and
// "s3://bucket/" name the whole bucket (key ""), which only a prefix may. The error quotes the URI
// and says which rule it breaks; callers put the field's name in front.
StatusOr<S3Location> ParseS3Uri(std::string_view uri, KeyUse use);

}  // namespace ty
