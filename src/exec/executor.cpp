#include "exec/executor.h"

#include <algorithm>
#include <filesystem>

namespace ty::exec {

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kPreparing: return "Preparing";
    case Phase::kTraining: return "Training";
    case Phase::kUploading: return "Uploading";
    case Phase::kExited: return "Exited";
    case Phase::kLost: return "Lost";
    case Phase::kCheckpointed: return "Checkpointed";
  }
  return "?";
}

const char* FailureKindName(FailureKind k) {
  switch (k) {
    case FailureKind::kNone: return "None";
    case FailureKind::kAlgorithm: return "Algorithm";
    case FailureKind::kClient: return "Client";
    case FailureKind::kInternal: return "Internal";
    case FailureKind::kCapacity: return "Capacity";
  }
  return "None";
}

FailureKind ParseFailureKind(std::string_view name) {
  for (FailureKind k : {FailureKind::kAlgorithm, FailureKind::kClient, FailureKind::kInternal, FailureKind::kCapacity})
    if (name == FailureKindName(k)) return k;
  return FailureKind::kNone;
}

std::string RedactPaths(std::string text, std::vector<RedactedPath> paths) {
  std::stable_sort(paths.begin(), paths.end(),
                   [](const RedactedPath& a, const RedactedPath& b) { return a.path.size() > b.path.size(); });
  for (RedactedPath& p : paths)
    while (p.path.size() > 1 && p.path.back() == '/') p.path.pop_back();
  for (const RedactedPath& p : paths) {
    if (p.path.size() < 2) continue;
    for (size_t at = text.find(p.path); at != std::string::npos; at = text.find(p.path, at + p.label.size()))
      text.replace(at, p.path.size(), p.label);
  }
  return text;
}

void AddRedactedPath(std::vector<RedactedPath>* paths, const std::string& path, const std::string& label) {
  namespace fs = std::filesystem;
  if (path.empty()) return;
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec).lexically_normal();
  paths->push_back({abs.string(), label});
  if (fs::path canonical = fs::weakly_canonical(abs, ec); !ec && canonical != abs) paths->push_back({canonical.string(), label});
}

}  // namespace ty::exec
