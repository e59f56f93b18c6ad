#include "exec/local/outputs.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <tuple>
#include <vector>

#include "exec/local/archive.h"
#include "exec/local/attempt_files.h"
#include "exec/local/data.h"
#include "exec/local/job_tree.h"

namespace ty::exec::local {

namespace fs = std::filesystem;

Status UploadOutput(DataMover& mover, const OutputUpload& out, const OutputSkipFn& skipped) {
  const std::string& sub = out.sub;
  if (!out.compress) {
    // CompressionType NONE: the files themselves, under output/model/ and output/data/.
    std::string target = out.out_prefix + (sub == "model" ? "model/" : "data/");
    for (int n = 1; n <= out.count; ++n) {
      Status st = mover.UploadTree({HostDir(out.attempt_dir, n), sub}, target,
                                   [&](const std::string& rel, const std::string& why) { skipped(n, rel, why); });
      if (!st.ok()) return Status(st.code(), "cannot upload " + sub + " to " + target + ": " + st.message());
    }
    return Status::Ok();
  }
  // Packed in this process (no tar or gzip process per job); an instance without the directory
  // adds nothing, so an empty output is a valid empty archive. Packed under its own name, not a
  // temporary one: nothing but the upload below reads it, and a supervisor killed meanwhile leaves
  // a partial archive only where the attempt's end removes it.
  const std::string& name = out.name;
  std::vector<JobDir> dirs;
  for (int n = 1; n <= out.count; ++n) dirs.push_back({HostDir(out.attempt_dir, n), sub});
  std::vector<std::string> places;
  if (!out.pack_dir.empty()) places.push_back(out.pack_dir);
  places.push_back(out.attempt_dir);
  std::string dest;
  Status packed;
  // What was left out, reported once, for the packing that is kept.
  std::vector<std::tuple<int, std::string, std::string>> left_out;
  for (const std::string& place : places) {
    dest = place + "/" + name;
    left_out.clear();
    packed = CreateTarGz(dest, dirs, WalkOptions{}, [&](size_t i, const std::string& rel, const std::string& why) {
      left_out.emplace_back(static_cast<int>(i) + 1, rel, why);
    });
    if (packed.ok()) break;
    std::error_code ec;
    fs::remove(dest, ec);  // a partial archive would keep the disk full
  }
  for (const auto& [n, rel, why] : left_out) skipped(n, rel, why);
  if (!packed.ok()) {
    // A full disk is the host's failure (InternalServerError, retried where allowed).
    if (packed.message().find(std::strerror(ENOSPC)) != std::string::npos)
      return Internal("cannot pack " + name + " at " + dest + ": " + std::strerror(ENOSPC));
    return Internal("cannot pack " + name + ": " + packed.message());
  }
  Status st = mover.UploadFile(dest, out.out_prefix + name);
  std::error_code ec;
  fs::remove(dest, ec);
  if (!st.ok()) return Status(st.code(), "cannot upload " + name + ": " + st.message());
  return Status::Ok();
}

}  // namespace ty::exec::local
