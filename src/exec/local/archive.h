// gzip-compressed tar archives, made and unpacked in the supervisor's own process (libarchive):
// model.tar.gz and output.tar.gz from what a job wrote, and the user's source directory
// (sagemaker_submit_directory). Both sides are hostile input: the job's tree is walked without
// following links (job_tree.h), and an archive is unpacked only when every entry stays inside
// the destination.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/local/job_tree.h"

namespace ty::exec::local {

// Told about each entry of dirs[dir] that CreateTarGz leaves out, and why.
using ArchiveSkipFn = std::function<void(size_t dir, const std::string& rel, const std::string& why)>;

// Writes a gzip-compressed tar at `archive_path` holding the tree of each of `dirs` in turn,
// named "./<relative path>" as `tar -czf <archive> -C <dir> .` names them. Only directories and
// regular files go in (links are not followed, FIFOs and devices never opened); `skip` hears of
// the rest. Directories that do not exist add nothing; with none, the archive is a valid empty
// one. Errors are Internal; a full disk says strerror(ENOSPC).
Status CreateTarGz(const std::string& archive_path, const std::vector<JobDir>& dirs, const WalkOptions& options,
                   const ArchiveSkipFn& skip);

struct ExtractLimits {
  int64_t max_entries = 100'000;
  int64_t max_bytes = int64_t{8} << 30;  // the files' contents, unpacked
};

// Unpacks the gzip-compressed tar `archive_path` into the directory `dest` (which must exist and
// must not be a link). Everything is refused (InvalidArgument naming the entry and the rule, with
// what was unpacked so far left in `dest` for the caller to remove) when an entry:
//  - has an absolute name or a ".." component,
//  - is not a regular file, a directory, a symbolic link or a hard link (FIFOs, devices, sockets),
//  - is a symbolic link whose target is absolute or leads out of `dest` (".." components are
//    allowed only at the start of the target and no further up than the link's own directory),
//  - is a hard link to anything but a regular file unpacked before it,
//  - would be written through a symbolic link (the "symlink, then write through it" trick),
//  - goes past `limits`.
// Files belong to the caller (no ownership is restored); setuid, setgid and sticky bits and
// write permission for group and others are dropped. A corrupt archive is InvalidArgument; a full
// disk is Internal saying strerror(ENOSPC).
// REQUIRES: no other thread of the process depends on the working directory meanwhile
// (libarchive resolves the entries' relative names against it; it is restored on return).
Status ExtractTarGz(const std::string& archive_path, const std::string& dest, const ExtractLimits& limits);

}  // namespace ty::exec::local
