#include "exec/local/outputs.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
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
  // adds nothing, so an empty output is a valid empty archive.
  const std::string& name = out.name;
  std::string dest = out.attempt_dir + "/" + name;
  std::string tmp = dest + ".tmp";
  std::vector<JobDir> dirs;
  for (int n = 1; n <= out.count; ++n) dirs.push_back({HostDir(out.attempt_dir, n), sub});
  Status packed = CreateTarGz(tmp, dirs, WalkOptions{}, [&](size_t i, const std::string& rel, const std::string& why) {
    skipped(static_cast<int>(i) + 1, rel, why);
  });
  if (!packed.ok()) {
    std::error_code ec;
    fs::remove(tmp, ec);  // a partial archive would keep the disk full
    // A full disk is the host's failure (InternalServerError, retried where allowed).
    if (packed.message().find(std::strerror(ENOSPC)) != std::string::npos)
      return Internal("cannot pack " + name + " at " + dest + ": " + std::strerror(ENOSPC));
    return Internal("cannot pack " + name + ": " + packed.message());
  }
  if (::rename(tmp.c_str(), dest.c_str()) != 0) return Internal("cannot pack " + name + ": " + std::strerror(errno));
  Status st = mover.UploadFile(dest, out.out_prefix + name);
  std::error_code ec;
  fs::remove(dest, ec);
  if (!st.ok()) return Status(st.code(), "cannot upload " + name + ": " + st.message());
  return Status::Ok();
}

}  // namespace ty::exec::local
