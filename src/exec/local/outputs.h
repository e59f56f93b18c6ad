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
  std::string attempt_dir;  // the archive is packed here, then removed
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
