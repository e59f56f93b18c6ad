// What an attempt leaves behind: /opt/ml/model and /opt/ml/output/data of every instance, packed
// into one archive each (model.tar.gz, output.tar.gz) or, with CompressionType NONE, uploaded
// file by file. What the job wrote is walked without following links (exec/local/job_tree.h):
// only its regular files and directories go out; the rest is reported through `skipped`.
#pragma once

#include <functional>
#include <string>

#include "core/status.h"

namespace ty::exec::local {

class DataMover;

struct OutputUpload {
  std::string attempt_dir;  // each instance's tree is under it; the archive is packed here when not in pack_dir
  // Where the archive is packed first, then removed: a directory off the host's file system that
  // the job cannot reach (the root of the first instance's storage volume), so that an upload
  // creates and deletes no file on the host's disk; "": attempt_dir. Packing falls back to
  // attempt_dir when it fails there (the job filled its volume).
  std::string pack_dir;
  int count = 1;            // instances, each with its tree at HostDir(attempt_dir, n)
  std::string sub;          // under /opt/ml: "model" or "output/data"
  std::string name;         // the archive's name: "model.tar.gz" or "output.tar.gz"
  std::string out_prefix;   // <S3OutputPath>/<job>/output/
  bool compress = true;     // false: CompressionType NONE, files under <out_prefix>model/ or data/
};

// An entry of instance n's tree left out, by its path relative to /opt/ml/<sub>.
using OutputSkipFn = std::function<void(int n, const std::string& rel, const std::string& why)>;

// Packs and uploads one output. An error's message says what failed ("cannot pack ...",
// "cannot upload ..."), its code whose failure it is: kInternal for the host (its disk), the
// store's own code for an upload.
Status UploadOutput(DataMover& mover, const OutputUpload& out, const OutputSkipFn& skipped);

}  // namespace ty::exec::local
