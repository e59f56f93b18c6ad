#include "exec/local/attempt_status.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "exec/local/attempt_files.h"

namespace ty::exec::local {

using nlohmann::json;

namespace {

// Typed reads of a status.json that tolerate anything (no exceptions).
int64_t IntField(const json& o, const char* key, int64_t def) {
  auto it = o.find(key);
  return it != o.end() && it->is_number_integer() ? it->get<int64_t>() : def;
}
bool BoolField(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_boolean() && it->get<bool>();
}
std::string StringField(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

// The parsed status file, or a discarded value when it is missing or not JSON.
json ReadStatus(const std::string& path) {
  std::string text;
  if (!ReadFile(path, &text)) return json(json::value_t::discarded);
  return json::parse(text, nullptr, false);
}

Phase ParsePhase(const std::string& s) {
  if (s == "Training") return Phase::kTraining;
  if (s == "Uploading") return Phase::kUploading;
  if (s == "Exited") return Phase::kExited;
  return Phase::kPreparing;
}

// The failure kind the supervisor recorded. A supervisor of the previous version (still running
// across a server upgrade) wrote none: its reason's prefix says it.
FailureKind FailureKindOf(const json& st, const std::string& reason) {
  if (auto it = st.find("failure_kind"); it != st.end() && it->is_string()) return ParseFailureKind(it->get<std::string>());
  if (reason.rfind("InternalServerError:", 0) == 0) return FailureKind::kInternal;
  if (reason.rfind("ClientError:", 0) == 0) return FailureKind::kClient;
  if (reason.rfind("CapacityError", 0) == 0) return FailureKind::kCapacity;
  return reason.empty() && IntField(st, "exit_code", 0) == 0 ? FailureKind::kNone : FailureKind::kAlgorithm;
}

// Appends the transitions of `st` (a parsed status.json) past *seen, advancing it; true when
// they include Exited.
bool EmitTransitions(const std::string& id, const json& st, size_t* seen, EpochMs* last_checkpoint,
                     std::vector<AttemptEvent>* events) {
  if (EpochMs ckpt = IntField(st, "last_checkpoint_ms", 0); ckpt > *last_checkpoint) {
    *last_checkpoint = ckpt;
    AttemptEvent e;
    e.attempt_id = id;
    e.phase = Phase::kCheckpointed;
    e.at = ckpt;
    events->push_back(std::move(e));
  }
  auto it = st.find("transitions");
  if (it == st.end() || !it->is_array()) return false;
  const json& transitions = *it;
  bool exited = false;
  for (size_t i = *seen; i < transitions.size(); ++i) {
    const json& tr = transitions[i];
    if (!tr.is_object()) continue;
    AttemptEvent e;
    e.attempt_id = id;
    e.phase = ParsePhase(StringField(tr, "phase"));
    e.at = IntField(tr, "at", 0);
    e.message = StringField(tr, "message");
    e.detail = StringField(tr, "detail");
    if (e.phase == Phase::kExited) {
      e.exit_code = static_cast<int>(IntField(st, "exit_code", 0));
      e.stopped = BoolField(st, "stopped");
      e.max_runtime_exceeded = BoolField(st, "max_runtime_exceeded");
      e.failure_reason = StringField(st, "failure_reason");
      e.failure_kind = FailureKindOf(st, e.failure_reason);
      e.model_uploaded = BoolField(st, "model_uploaded");
      exited = true;
    }
    events->push_back(std::move(e));
  }
  *seen = std::max(*seen, transitions.size());
  return exited;
}
}  // namespace

bool ReadStatusEvents(const std::string& id, const std::string& dir, StatusCursor* c, bool force,
                      std::vector<AttemptEvent>* events, bool* exists_out) {
  std::string path = StatusPath(dir);
  struct stat sb {};
  bool exists = ::stat(path.c_str(), &sb) == 0;
  if (exists_out) *exists_out = exists;
  if (!exists) return false;
  int64_t mtime_ns = static_cast<int64_t>(sb.st_mtim.tv_sec) * 1'000'000'000 + sb.st_mtim.tv_nsec;
  if (!force && sb.st_ino == c->ino && mtime_ns == c->mtime_ns && sb.st_size == c->size) return false;
  json st = ReadStatus(path);
  if (!st.is_object()) return false;
  c->ino = sb.st_ino;
  c->mtime_ns = mtime_ns;
  c->size = sb.st_size;
  return EmitTransitions(id, st, &c->transitions_seen, &c->last_checkpoint, events);
}

std::vector<int> RecordedInstanceGroups(const std::string& dir) {
  std::vector<int> groups;
  json st = ReadStatus(StatusPath(dir));
  if (st.is_object() && st["instance_pgids"].is_array())
    for (const auto& pgid : st["instance_pgids"])
      if (pgid.is_number_integer() && pgid.get<int64_t>() > 1) groups.push_back(pgid.get<int>());
  return groups;
}

// The longest line a supervisor writes: 64 KiB of text plus its timestamp.
constexpr int64_t kMaxLineBytes = 64 * 1024 + 32;

// The complete lines of a file that begin in [offset, offset + max_bytes) (so at least one when
// one begins there, however long).
Executor::LogChunk ReadLines(const std::string& path, int64_t offset, int64_t max_bytes) {
  Executor::LogChunk chunk{"", std::max<int64_t>(0, offset)};
  if (max_bytes <= 0) return chunk;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return chunk;
  chunk.bytes.resize(static_cast<size_t>(max_bytes + kMaxLineBytes));
  size_t got = 0;
  while (got < chunk.bytes.size()) {
    ssize_t n = ::pread(fd, chunk.bytes.data() + got, chunk.bytes.size() - got, chunk.next_offset + static_cast<int64_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  chunk.bytes.resize(got);
  size_t end = 0;  // after the last line taken
  while (end < chunk.bytes.size() && static_cast<int64_t>(end) < max_bytes) {
    size_t nl = chunk.bytes.find('\n', end);
    if (nl == std::string::npos) break;  // being written
    end = nl + 1;
  }
  chunk.bytes.resize(end);
  chunk.next_offset += static_cast<int64_t>(chunk.bytes.size());
  return chunk;
}

std::string AttemptDirectoryExecutor::LogPath(const std::string& id, int instance) const {
  return LogDir(Dir(id)) + "/algo-" + std::to_string(instance) + ".log";
}

std::string AttemptDirectoryExecutor::SystemMetricsPath(const std::string& id, int instance) const {
  return local::SystemMetricsPath(Dir(id), instance);
}

std::unique_ptr<LogFile> AttemptDirectoryExecutor::OpenLog(const std::string& id, int instance) const {
  return OpenLocalLogFile(LogPath(id, instance));
}

Executor::LogChunk AttemptDirectoryExecutor::ReadLog(const std::string& id, int instance, int64_t offset,
                                                     int64_t max_bytes) const {
  return ReadLines(LogPath(id, instance), offset, max_bytes);
}

Executor::LogChunk AttemptDirectoryExecutor::ReadSystemMetrics(const std::string& id, int instance, int64_t offset,
                                                               int64_t max_bytes) const {
  return ReadLines(SystemMetricsPath(id, instance), offset, max_bytes);
}

void AttemptDirectoryExecutor::DiscardLogs(const std::string& id) {
  std::error_code ec;
  std::filesystem::remove_all(LogDir(Dir(id)), ec);
}

}  // namespace ty::exec::local
