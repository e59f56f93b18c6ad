// How an attempt's command and environment combine with its image's config (docs/images.md,
// "How an image runs"). Pure functions, pinned by tests/unit/image_test.cpp.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/attempt_spec.h"
#include "exec/image/cache.h"

namespace ty::exec::image {

// The argv an instance runs in `config`'s image: with ImageCommand::kTrain, `command` as it is
// when not empty, else Entrypoint + ["train"]; with kCmd, Entrypoint + (`command`, or Cmd when
// `command` is empty). InvalidArgument when that leaves nothing to run.
StatusOr<std::vector<std::string>> ImageArgv(const ImageConfig& config, ImageCommand mode,
                                             const std::vector<std::string>& command);

// The image's Env as a map (a later entry wins), with a default PATH when it sets none. The
// instance's own variables go over it: the job's win.
std::map<std::string, std::string> ImageEnvironment(const ImageConfig& config);

// The working directory in the image: its WorkingDir, or "/" (Docker's default).
std::string ImageWorkingDir(const ImageConfig& config);

}  // namespace ty::exec::image
