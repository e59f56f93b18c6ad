// Names shared by the directory store and the S3 client (internal to objstore/).
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace ty::objstore {

// A temporary name beside `path`, unique per process and call (downloads run in parallel).
inline std::string TempName(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".part." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

// How errors name an object.
inline std::string Where(const std::string& bucket, const std::string& key) { return "s3://" + bucket + "/" + key; }

}  // namespace ty::objstore
