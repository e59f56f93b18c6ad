#include "exec/image/reference.h"

#include <re2/re2.h>

#include <array>

namespace ty::exec::image {

namespace {

// The distribution reference grammar (github.com/distribution/reference): an optional domain,
// lowercase path components, an optional tag and an optional digest.
const RE2& DockerName() {
  static const RE2 re(
      "((?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
      "(?::[0-9]+)?/)?"
      "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
      "(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
      "(@sha256:[a-f0-9]{64})?");
  return re;
}

const RE2& TagRe() {
  static const RE2 re("[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}");
  return re;
}

constexpr std::array<std::string_view, 7> kRefusedTransports = {
    "dir", "containers-storage", "docker-daemon", "ostree", "sif", "tarball", "atomic"};

constexpr const char* kRules =
    "use docker://host/repo:tag, host/repo:tag, repo@sha256:<digest>, oci:/path[:tag], "
    "oci-archive:/path.tar[:tag] or docker-archive:/path.tar";

Status Bad(std::string_view text, const std::string& why) {
  return InvalidArgument("image reference '" + std::string(text) + "': " + why + " (" + kRules + ")");
}

StatusOr<ImageReference> Docker(std::string_view text, std::string_view name) {
  std::string n(name);
  std::string repo, tag, digest;
  if (n.empty() || !RE2::FullMatch(n, DockerName(), &repo, &tag, &digest))
    return Bad(text, "'" + n + "' is not a registry reference (lowercase repository path, optional :tag, optional @sha256:<64 hex digits>)");
  if (repo.size() > 255) return Bad(text, "the repository name is longer than 255 characters");
  ImageReference r;
  r.transport = ImageReference::Transport::kDocker;
  r.name = repo + (tag.empty() && digest.empty() ? std::string(":latest") : tag) + digest;
  return r;
}

// PATH[:SUFFIX]: the suffix is what follows the last ':' when that has no '/'.
StatusOr<ImageReference> Local(std::string_view text, ImageReference::Transport t, std::string_view rest,
                               bool suffix_is_tag) {
  std::string path(rest), suffix;
  if (size_t colon = path.rfind(':'); colon != std::string::npos && path.find('/', colon) == std::string::npos) {
    suffix = path.substr(colon + 1);
    path.resize(colon);
  }
  if (path.empty() || path[0] != '/') return Bad(text, "the path must be absolute");
  for (size_t i = 0; i <= path.size();) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (path.compare(i, j - i, "..") == 0) return Bad(text, "the path must not contain '..'");
    i = j + 1;
  }
  if (path.find('\0') != std::string::npos || path.find('\n') != std::string::npos)
    return Bad(text, "the path holds a control character");
  if (!suffix.empty() && suffix_is_tag && !RE2::FullMatch(suffix, TagRe()))
    return Bad(text, "the tag '" + suffix + "' must be letters, digits, '_', '.' and '-' (at most 128)");
  if (!suffix.empty() && !suffix_is_tag && !Docker(text, suffix).ok())
    return Bad(text, "'" + suffix + "' after the archive's path is not a registry reference");
  ImageReference r;
  r.transport = t;
  r.name = std::move(path);
  r.tag = std::move(suffix);
  return r;
}

}  // namespace

std::string ImageReference::Skopeo() const {
  switch (transport) {
    case Transport::kDocker: return "docker://" + name;
    case Transport::kOci: return "oci:" + name + (tag.empty() ? "" : ":" + tag);
    case Transport::kOciArchive: return "oci-archive:" + name + (tag.empty() ? "" : ":" + tag);
    case Transport::kDockerArchive: return "docker-archive:" + name + (tag.empty() ? "" : ":" + tag);
  }
  return name;
}

Status CheckImageLocation(const ImageReference& ref, const std::vector<std::string>& image_dirs) {
  if (ref.transport == ImageReference::Transport::kDocker) return Status::Ok();
  // ParseImageReference refused '..': a lexical prefix of whole components is containment.
  for (std::string dir : image_dirs) {
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (dir.size() > 1 && ref.name.size() > dir.size() && ref.name.compare(0, dir.size(), dir) == 0 &&
        ref.name[dir.size()] == '/')
      return Status::Ok();
  }
  std::string dirs;
  for (const std::string& d : image_dirs) dirs += (dirs.empty() ? "" : ", ") + d;
  return InvalidArgument("image reference '" + ref.Skopeo() + "': " +
                          (dirs.empty() ? std::string("this host takes no image by path (executor.image_dirs is empty); "
                                                      "use a registry reference")
                                        : "a path reference must name a file inside one of this host's image "
                                          "directories (executor.image_dirs: " + dirs + ")"));
}

StatusOr<ImageReference> ParseImageReference(std::string_view text) {
  if (text.empty()) return Bad(text, "empty");
  if (text.size() > 4096) return Bad(text.substr(0, 64), "longer than 4096 characters");
  for (char c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return Bad("", "it holds a control character");
  using T = ImageReference::Transport;
  auto starts = [&](std::string_view p) { return text.substr(0, p.size()) == p; };
  if (starts("docker://")) return Docker(text, text.substr(9));
  if (starts("oci:")) return Local(text, T::kOci, text.substr(4), true);
  if (starts("oci-archive:")) return Local(text, T::kOciArchive, text.substr(12), true);
  if (starts("docker-archive:")) return Local(text, T::kDockerArchive, text.substr(15), false);
  if (size_t colon = text.find(':'); colon != std::string_view::npos) {
    std::string_view scheme = text.substr(0, colon);
    for (std::string_view refused : kRefusedTransports)
      if (scheme == refused) return Bad(text, "the transport '" + std::string(scheme) + ":' is not supported");
    if (text.substr(colon + 1, 2) == "//") return Bad(text, "the scheme '" + std::string(scheme) + "://' is not supported");
  }
  return Docker(text, text);
}

}  // namespace ty::exec::image
