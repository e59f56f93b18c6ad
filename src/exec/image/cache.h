// The host's content-addressed image cache, <data_dir>/images/ (docs/images.md, "The cache"),
// made 0700 (the server's user alone may reach an unpacked image's files on the host):
//
//   layout/            one OCI layout that every copied image shares, so a layer is stored once;
//                      each reference is a tag of its own there (ref-<sha256 of the reference>)
//   rootfs/<digest>/   the image's root file system, unpacked once per manifest digest
//   config/<digest>.json  the image's config (Entrypoint, Cmd, Env, WorkingDir, User)
//   index.json         reference -> manifest digest, replaced whole (fsynced, renamed)
//   tmp/               unpacks under way; what a killed fetch left is removed by the next one
//   lock               held (flock) while a reference is copied and unpacked
//
// A reference the index knows whose rootfs is in place is resolved from the index alone: no
// skopeo, no umoci. rootfs/<digest> appears only by a rename of a finished unpack, so a
// concurrent start or a kill -9 never leaves a half tree that looks complete. skopeo and umoci
// run by argv (never a shell) with a deadline; their stderr is kept for the error.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/image/reference.h"

namespace ty::exec::image {

// What the image says about how it runs (the OCI image config's `config` object).
struct ImageConfig {
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::vector<std::string> env;  // "NAME=value", in order
  std::string working_dir;
  std::string user;

  bool operator==(const ImageConfig&) const = default;
};

// An OCI image config document (the whole blob, or its `config` object alone). Absent members
// are empty; a member of the wrong type is InvalidArgument.
StatusOr<ImageConfig> ParseImageConfig(std::string_view json);
std::string EncodeImageConfig(const ImageConfig& config);

struct CachedImage {
  std::string digest;    // the manifest's, "sha256:<hex>"
  std::string rootfs;    // absolute path of its root file system
  ImageConfig config;
  bool copied = false;   // this call ran skopeo
  bool unpacked = false; // this call ran umoci
};

struct CacheOptions {
  std::string skopeo = "skopeo";   // looked up on PATH when bare
  std::string umoci = "umoci";
  int timeout_seconds = 900;       // each run of either
};

// The index file: reference (ImageReference::Skopeo) -> digest. A missing file is an empty index;
// a file that is not a JSON object of strings is Internal.
StatusOr<std::map<std::string, std::string>> ReadIndex(const std::string& path);
// Writes a temporary file beside `path`, fsyncs it, renames it over `path` and fsyncs the directory.
Status WriteIndex(const std::string& path, const std::map<std::string, std::string>& index);

// Makes the directories (and the file /etc/hosts) the sandbox mounts over inside an unpacked root
// file system, and the image's WorkingDir when given (as Docker does), never following a link: a
// component that is a symbolic link or not a directory, or a WorkingDir with "..", is
// FailedPrecondition naming it. Exposed for the tests.
Status MakeMountPoints(const std::string& rootfs, const std::string& working_dir = "");

// Clears the set-user-ID and set-group-ID bits and drops the file capabilities
// (security.capability) of everything in an unpacked root file system, never following a link:
// an image's setuid-root binary must not become one on the host, where the cache lives. Inside
// the sandbox they would do nothing anyway (no_new_privs, nosuid binds). Exposed for the tests.
Status DropPrivilegeBits(const std::string& rootfs);

class ImageCache {
 public:
  explicit ImageCache(std::string root, CacheOptions options = {});

  // From the index alone; NotFound when the reference is not cached (or its rootfs is gone).
  StatusOr<CachedImage> Lookup(const ImageReference& ref) const;

  // Lookup, else copy the image into the layout and unpack it (under the cache's lock). A copy
  // that fails is Unavailable with skopeo's message; a bad image is FailedPrecondition.
  StatusOr<CachedImage> Get(const ImageReference& ref);

  const std::string& root() const { return root_; }

 private:
  StatusOr<CachedImage> FromDigest(const std::string& digest) const;
  std::string root_;
  CacheOptions options_;
};

// Runs argv (never a shell) with stdin and stdout on /dev/null, its stderr kept (at most 64 KiB)
// into *err; killed at the deadline. OK on exit status 0; otherwise Unavailable naming the
// program and carrying its stderr (also when it was killed at the deadline).
Status RunTool(const std::vector<std::string>& argv, int timeout_seconds, std::string* err);

}  // namespace ty::exec::image
