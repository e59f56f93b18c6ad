#include "exec/local/archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "core/strings.h"

namespace ty::exec::local {

namespace {

// Owns a libarchive reader or writer.
class Archive {
 public:
  enum Kind { kRead, kWrite, kWriteDisk };
  explicit Archive(Kind kind)
      : kind_(kind), a_(kind == kRead ? archive_read_new() : kind == kWrite ? archive_write_new() : archive_write_disk_new()) {}
  Archive(const Archive&) = delete;
  Archive& operator=(const Archive&) = delete;
  ~Archive() {
    if (!a_) return;
    if (kind_ == kRead) {
      archive_read_free(a_);
    } else {
      archive_write_free(a_);
    }
  }
  archive* get() const { return a_; }
  std::string Error() const {
    const char* e = archive_error_string(a_);
    return e ? e : "unknown error";
  }
  bool DiskFull() const { return archive_errno(a_) == ENOSPC; }

 private:
  Kind kind_;
  archive* a_;
};

struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};
using Entry = std::unique_ptr<archive_entry, EntryFree>;

// ---- packing ----

Status WriteFailed(const Archive& a, const std::string& archive_path) {
  if (a.DiskFull()) return Internal("cannot write " + archive_path + ": " + std::strerror(ENOSPC));
  return Internal("cannot write " + archive_path + ": " + a.Error());
}

Status AddEntry(const Archive& a, const std::string& archive_path, const std::string& name, const JobFile& f) {
  Entry e(archive_entry_new());
  archive_entry_copy_pathname(e.get(), name.c_str());
  archive_entry_set_filetype(e.get(), f.directory() ? AE_IFDIR : AE_IFREG);
  archive_entry_set_perm(e.get(), f.st.st_mode & 0777);
  archive_entry_set_size(e.get(), f.directory() ? 0 : f.st.st_size);
  archive_entry_set_mtime(e.get(), f.st.st_mtim.tv_sec, f.st.st_mtim.tv_nsec);
  archive_entry_set_uid(e.get(), 0);
  archive_entry_set_gid(e.get(), 0);
  if (archive_write_header(a.get(), e.get()) < ARCHIVE_WARN) return WriteFailed(a, archive_path);
  if (f.directory()) return Status::Ok();
  // Exactly the size in the header: a file that grew is cut there, one that shrank is padded
  // with zeros (by archive_write_finish_entry).
  int64_t left = f.st.st_size;
  char buf[1 << 16];
  while (left > 0) {
    ssize_t n = ::read(f.fd, buf, static_cast<size_t>(std::min<int64_t>(left, sizeof buf)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal("cannot read " + name + ": " + std::strerror(errno));
    if (n == 0) break;
    if (archive_write_data(a.get(), buf, static_cast<size_t>(n)) < 0) return WriteFailed(a, archive_path);
    left -= n;
  }
  if (archive_write_finish_entry(a.get()) < ARCHIVE_WARN) return WriteFailed(a, archive_path);
  return Status::Ok();
}

// ---- unpacking ----

// `name` without "./" prefixes and "." components, or why it is refused ("" when it is fine).
std::string Normalize(const std::string& name, std::string* out) {
  if (name.empty()) return "has an empty name";
  if (name.front() == '/') return "has an absolute name";
  std::string norm;
  for (const auto& part : Split(name, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") return "has a '..' component (it would climb out of the directory)";
    norm += (norm.empty() ? "" : "/") + part;
  }
  *out = norm;
  return "";
}

// Why the symbolic link `name` (normalized) to `target` would lead out of the tree, or "".
// Each entry's directory is a real directory (nothing is unpacked through a link), so a target
// whose ".." components all come first, no more of them than the link's depth, ends inside the
// tree; a ".." after a name could climb out of a link-to-a-directory, so it is refused.
std::string LinkLeavesTree(const std::string& name, const std::string& target) {
  if (target.empty()) return "is a symbolic link with an empty target";
  if (target.front() == '/') return "is a symbolic link to the absolute path " + target;
  size_t depth = 0;
  for (char c : name) depth += c == '/';
  size_t up = 0;
  bool named = false;
  for (const auto& part : Split(target, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (named) return "is a symbolic link to " + target + ", with '..' after a name";
      if (++up > depth) return "is a symbolic link to " + target + ", which leads out of the directory";
    } else {
      named = true;
    }
  }
  return "";
}

const char* TypeName(mode_t type) {
  switch (type) {
    case AE_IFIFO:
      return "a FIFO";
    case AE_IFCHR:
      return "a character device";
    case AE_IFBLK:
      return "a block device";
    case AE_IFSOCK:
      return "a socket";
    default:
      return "of an unknown type";
  }
}

// Restores the working directory on scope exit.
class WorkingDirectory {
 public:
  WorkingDirectory() : saved_(::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {}
  WorkingDirectory(const WorkingDirectory&) = delete;
  WorkingDirectory& operator=(const WorkingDirectory&) = delete;
  ~WorkingDirectory() {
    if (saved_ >= 0) {
      if (::fchdir(saved_) != 0) {
      }
      ::close(saved_);
    } else if (::chdir("/") != 0) {
    }
  }

 private:
  int saved_;
};

}  // namespace

Status CreateTarGz(const std::string& archive_path, const std::vector<JobDir>& dirs, const WalkOptions& options,
                   const ArchiveSkipFn& skip) {
  Archive a(Archive::kWrite);
  if (!a.get()) return Internal("cannot make an archive writer");
  if (archive_write_add_filter_gzip(a.get()) != ARCHIVE_OK || archive_write_set_format_pax_restricted(a.get()) != ARCHIVE_OK)
    return Internal("cannot set up " + archive_path + ": " + a.Error());
  if (archive_write_open_filename(a.get(), archive_path.c_str()) != ARCHIVE_OK) return WriteFailed(a, archive_path);
  WalkOptions walk = options;
  walk.visit_directories = true;
  for (size_t i = 0; i < dirs.size(); ++i) {
    int raw = -1;
    Status st = OpenJobDir(dirs[i], &raw);
    if (st.code() == Code::kNotFound) continue;
    if (!st.ok()) {
      if (skip) skip(i, "", st.message());
      continue;
    }
    JobFile root;
    root.fd = raw;
    bool stat_ok = ::fstat(raw, &root.st) == 0;
    ::close(raw);
    if (stat_ok) TY_RETURN_IF_ERROR(AddEntry(a, archive_path, "./", root));
    TY_RETURN_IF_ERROR(WalkJobTree(
        dirs[i], walk,
        [&](const JobFile& f) { return AddEntry(a, archive_path, "./" + f.rel + (f.directory() ? "/" : ""), f); },
        [&](const std::string& rel, const std::string& why) {
          if (skip) skip(i, rel, why);
        }));
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK) return WriteFailed(a, archive_path);
  return Status::Ok();
}

Status ExtractTarGz(const std::string& archive_path, const std::string& dest, const ExtractLimits& limits) {
  // Declared first, so destroyed last: the writer's deferred fix-ups, should they run in its
  // destructor, still find the entries' relative names in `dest`.
  WorkingDirectory restore;
  Archive in(Archive::kRead);
  Archive out(Archive::kWriteDisk);
  if (!in.get() || !out.get()) return Internal("cannot make an archive reader");
  archive_read_support_filter_gzip(in.get());
  archive_read_support_format_tar(in.get());  // ustar, pax and GNU tar
  if (archive_read_open_filename(in.get(), archive_path.c_str(), 1 << 16) != ARCHIVE_OK)
    return InvalidArgument("not a gzip-compressed tar archive: " + in.Error());
  // No ARCHIVE_EXTRACT_OWNER, _PERM (so no setuid bits), _ACL, _XATTR or _FFLAGS.
  archive_write_disk_set_options(out.get(), ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                                ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
  int destfd = ::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (destfd < 0) return Internal("cannot open " + dest + ": " + std::strerror(errno));
  int cd = ::fchdir(destfd);
  int cd_errno = errno;
  ::close(destfd);
  if (cd != 0) return Internal("cannot enter " + dest + ": " + std::strerror(cd_errno));

  std::set<std::string> files;  // regular files unpacked so far (hard links may point at these)
  int64_t entries = 0, bytes = 0;
  auto refuse = [&](const std::string& name, const std::string& why) {
    archive_write_close(out.get());  // the deferred directory fix-ups, while still in `dest`
    return InvalidArgument("entry '" + name + "' " + why);
  };
  // A failure to write: the host's disk being full is Internal, anything else (the secure
  // checks among them) the archive's fault.
  auto write_error = [&](const std::string& name) {
    const bool full = out.DiskFull();
    const std::string what = full ? std::string(std::strerror(ENOSPC)) : out.Error();
    archive_write_close(out.get());
    if (full) return Internal("cannot unpack '" + name + "' into " + dest + ": " + what);
    return InvalidArgument("entry '" + name + "' cannot be unpacked: " + what);
  };
  archive_entry* e = nullptr;
  while (true) {
    int r = archive_read_next_header(in.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      archive_write_close(out.get());
      return InvalidArgument("not a valid gzip-compressed tar archive: " + in.Error());
    }
    const char* raw_name = archive_entry_pathname(e);
    const std::string name = raw_name ? raw_name : "";
    if (++entries > limits.max_entries)
      return refuse(name, "is past the limit of " + std::to_string(limits.max_entries) + " entries");
    std::string norm;
    if (std::string why = Normalize(name, &norm); !why.empty()) return refuse(name, why);
    const mode_t type = archive_entry_filetype(e);
    const char* hardlink = archive_entry_hardlink(e);
    if (hardlink) {
      std::string target;
      if (std::string why = Normalize(hardlink, &target); !why.empty())
        return refuse(name, "is a hard link to '" + std::string(hardlink) + "', which " + why);
      if (!files.count(target))
        return refuse(name, "is a hard link to '" + std::string(hardlink) +
                                "', which is not a regular file unpacked before it");
      archive_entry_copy_hardlink(e, target.c_str());
    } else if (type == AE_IFLNK) {
      const char* target = archive_entry_symlink(e);
      if (std::string why = LinkLeavesTree(norm, target ? target : ""); !why.empty()) return refuse(name, why);
    } else if (type != AE_IFREG && type != AE_IFDIR) {
      return refuse(name, std::string("is ") + TypeName(type) + ": only files, directories and links are unpacked");
    }
    if (norm.empty()) {
      if (type == AE_IFDIR) continue;  // "./": the destination itself
      return refuse(name, "names the destination directory itself");
    }
    archive_entry_copy_pathname(e, norm.c_str());
    const mode_t perm = archive_entry_perm(e) & 0755;
    archive_entry_set_perm(e, type == AE_IFDIR ? (perm | 0700) : perm);
    const int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
    if (size > limits.max_bytes - bytes)
      return refuse(name, "is past the limit of " + std::to_string(limits.max_bytes) + " bytes unpacked");
    if (archive_write_header(out.get(), e) < ARCHIVE_WARN) return write_error(name);
    if (type == AE_IFREG && !hardlink) {
      const void* block;
      size_t len;
      la_int64_t offset;
      while ((r = archive_read_data_block(in.get(), &block, &len, &offset)) == ARCHIVE_OK) {
        bytes += static_cast<int64_t>(len);
        if (bytes > limits.max_bytes)
          return refuse(name, "is past the limit of " + std::to_string(limits.max_bytes) + " bytes unpacked");
        if (archive_write_data_block(out.get(), block, len, offset) < ARCHIVE_WARN) return write_error(name);
      }
      if (r != ARCHIVE_EOF) {
        archive_write_close(out.get());
        return InvalidArgument("entry '" + name + "' cannot be read: " + in.Error());
      }
      files.insert(norm);
    }
    if (archive_write_finish_entry(out.get()) < ARCHIVE_WARN) return write_error(name);
  }
  if (archive_write_close(out.get()) != ARCHIVE_OK) return write_error("(directory fix-ups)");
  return Status::Ok();
}

}  // namespace ty::exec::local
