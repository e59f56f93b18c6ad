// Reading and writing the files of a job's tree (its /opt/ml directory) from the supervisor, which
// runs with the server's privileges while every name in that tree is the job's. So: no symbolic
// link is ever followed (each directory is opened relative to its parent with O_NOFOLLOW), only
// regular files are opened for reading (O_NONBLOCK, so a FIFO or a device cannot hold the
// supervisor up), names come from the directories walked and never from a link's target, and
// sizes are capped.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"

namespace ty::exec::local {

// A directory of a job's tree: `base` is the supervisor's own (its path may be followed), `sub`
// ('/'-separated, "" for base itself) and everything below it are the job's.
struct JobDir {
  std::string base;
  std::string sub;
  std::string Path() const { return sub.empty() ? base : base + "/" + sub; }
};

// A regular file (or, when asked for, a directory) WalkJobTree found, open while the visitor runs.
struct JobFile {
  std::string rel;  // '/'-separated path under the walked directory, made of the names walked
  int fd = -1;      // O_RDONLY; owned by the walk
  struct stat st {};
  bool directory() const { return S_ISDIR(st.st_mode); }
};

// Told about each entry a walk or a read leaves out: its relative path and the reason.
using SkipFn = std::function<void(const std::string& rel, const std::string& why)>;
using VisitFn = std::function<Status(const JobFile&)>;

struct WalkOptions {
  int64_t max_entries = 1'000'000;  // entries looked at (files, directories, anything else)
  int max_depth = 128;              // directories below the root
  bool visit_directories = false;   // also visit each directory below the root (before its contents)
};

struct WalkResult {
  int64_t files = 0;     // regular files visited
  int64_t bytes = 0;     // their sizes
  bool complete = true;  // false: a limit or an unreadable directory left part of the tree out
};

// Opens `dir` as a directory, every component of dir.sub with O_NOFOLLOW. NotFound when a
// component does not exist; InvalidArgument naming the component when it is a link or not a
// directory. On success *fd is an O_DIRECTORY descriptor the caller closes.
Status OpenJobDir(const JobDir& dir, int* fd);

// Calls `visit` for every regular file under `dir`, depth first in name order. Symbolic links,
// FIFOs, sockets and devices are not opened: `skip` hears of each (as it does of directories
// beyond the limits). A `dir` that does not exist is empty; one that is a link is skipped whole
// (rel ""). The first error of `visit` ends the walk and is returned.
Status WalkJobTree(const JobDir& dir, const WalkOptions& options, const VisitFn& visit, const SkipFn& skip,
                   WalkResult* result = nullptr);

// The regular file `name` in `dir`, its first `max_bytes` at most. NotFound when there is none;
// FailedPrecondition saying why when it is there but not read (a link, a FIFO, a device, ...).
Status ReadJobFile(const JobDir& dir, const std::string& name, size_t max_bytes, std::string* out);

// Replaces `name` in `dir` with a new regular file holding `text` (a temporary file beside it,
// created with O_EXCL|O_NOFOLLOW, then renamed over it): whatever the job left at `name` or at
// the temporary name, a link included, is replaced, never written through.
Status WriteJobFile(const JobDir& dir, const std::string& name, const std::string& text);

}  // namespace ty::exec::local
