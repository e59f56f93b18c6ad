// An image reference as a job names it (TrainingImage, a container's `image`): which of skopeo's
// transports it uses and what it names there. Pure: nothing here touches the file system or runs
// a process (docs/images.md, "References").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ty::exec::image {

struct ImageReference {
  enum class Transport {
    kDocker,         // a registry: docker://host/repo:tag, host/repo:tag, repo@sha256:...
    kOci,            // an OCI layout directory: oci:/path[:tag]
    kOciArchive,     // a tar of an OCI layout: oci-archive:/path.tar[:tag]
    kDockerArchive,  // `docker save` output: docker-archive:/path.tar[:ref]
  };
  Transport transport = Transport::kDocker;
  // kDocker: the registry reference (repo[:tag][@digest], ":latest" added when neither is given);
  // otherwise the absolute path, and `tag` what follows it (may be "").
  std::string name;
  std::string tag;

  // skopeo's form of the reference (`docker://...`, `oci:/path:tag`, ...). It is also the cache's
  // key: two spellings of one image (`busybox`, `docker://busybox:latest`) have the same one.
  std::string Skopeo() const;

  bool operator==(const ImageReference&) const = default;
};

// Parses `text`. Accepted: docker://NAME, oci:PATH[:TAG], oci-archive:PATH[:TAG],
// docker-archive:PATH[:REF] (PATH absolute, without ".." segments), and a bare registry reference
// (host/repo:tag, repo@sha256:<64 hex>). Anything else is InvalidArgument naming the rule it broke
// (skopeo's other transports, such as dir: or containers-storage:, are refused by name).
StatusOr<ImageReference> ParseImageReference(std::string_view text);

// Whether this host lets a job name `ref`: a registry reference always; a path (oci:,
// oci-archive:, docker-archive:) only inside one of `image_dirs` (executor.image_dirs: absolute
// directories). Decided from the text alone, so the answer never depends on whether the path
// exists: skopeo reads it as the server's user, and its errors would tell a job which host files
// exist and what they hold. A refusal is InvalidArgument naming the reference and the rule.
Status CheckImageLocation(const ImageReference& ref, const std::vector<std::string>& image_dirs);

}  // namespace ty::exec::image
