#include "api/log_reader.h"

#include <cerrno>
#include <cstdio>
#include <queue>
#include <tuple>
#include <utility>

#include "core/strings.h"

namespace ty::api::logs {

namespace {

// A read that fails reads as the end of the log.
int64_t ReadAt(const LogHandle& log, char* buf, size_t n, int64_t off) { return log ? log->ReadAt(off, buf, n) : -1; }

}  // namespace

LogHandle OpenPath(const std::string& path) { return exec::OpenLocalLogFile(path); }

bool ParseLine(std::string_view line, int64_t* ts, std::string_view* message) {
  size_t sp = line.find(' ');
  if (sp == std::string_view::npos) return false;
  // strtoll semantics on the digits before the space (a malformed stamp reads as 0, as before).
  std::string stamp(line.substr(0, sp));
  *ts = std::strtoll(stamp.c_str(), nullptr, 10);
  *message = line.substr(sp + 1);
  return true;
}

ForwardReader::ForwardReader(LogHandle log, int64_t from, size_t block) : log_(std::move(log)), block_(block) {
  if (!log_ || from <= 0) return;
  // Start one byte early: if that byte is the newline ending the previous line, `from` is a line
  // start; otherwise everything up to the next newline belongs to a line that began before it.
  buf_off_ = from - 1;
  for (;;) {
    size_t nl = buf_.find('\n', pos_);
    if (nl != std::string::npos) {
      pos_ = nl + 1;
      return;
    }
    buf_off_ += static_cast<int64_t>(buf_.size());
    buf_.clear();
    pos_ = 0;
    if (!Fill()) {
      buf_off_ = from;  // no line starts at or after `from` yet: a later read resumes there
      return;
    }
  }
}

ForwardReader::ForwardReader(ForwardReader&& o) noexcept
    : log_(std::move(o.log_)), block_(o.block_), buf_(std::move(o.buf_)), buf_off_(o.buf_off_),
      pos_(o.pos_), scanned_(o.scanned_), eof_(o.eof_) {}

ForwardReader::~ForwardReader() = default;

bool ForwardReader::Fill() {
  if (!log_ || eof_) return false;
  size_t had = buf_.size();
  buf_.resize(had + block_);
  int64_t n = ReadAt(log_, buf_.data() + had, block_, buf_off_ + static_cast<int64_t>(had));
  buf_.resize(had + static_cast<size_t>(n > 0 ? n : 0));
  if (n <= 0) {
    eof_ = true;
    return false;
  }
  scanned_ += n;
  return true;
}

bool ForwardReader::Next(LogLine* out) {
  for (;;) {
    size_t nl = buf_.find('\n', pos_);
    if (nl == std::string::npos) {
      // Keep only the unfinished line, then read on.
      buf_off_ += static_cast<int64_t>(pos_);
      buf_.erase(0, pos_);
      pos_ = 0;
      if (!Fill()) return false;
      continue;
    }
    std::string_view line(buf_.data() + pos_, nl - pos_);
    int64_t begin = offset();
    pos_ = nl + 1;
    std::string_view message;
    if (!ParseLine(line, &out->ts, &message)) continue;
    out->begin = begin;
    out->end = offset();
    out->message.assign(message);
    return true;
  }
}

BackwardReader::BackwardReader(LogHandle log, int64_t before, size_t block) : log_(std::move(log)), block_(block) {
  if (!log_) return;
  int64_t size = log_->Size();
  buf_off_ = before < 0 ? size : std::min(before, size);
  // Drop the bytes after the last newline before `before`: a line that does not end by then.
  while (Prepend()) {
    size_t nl = buf_.rfind('\n');
    if (nl != std::string::npos) {
      buf_.resize(nl + 1);
      return;
    }
    buf_.clear();
  }
  buf_.clear();
}

BackwardReader::~BackwardReader() = default;

bool BackwardReader::Prepend() {
  if (!log_ || buf_off_ <= 0) return false;
  int64_t start = std::max<int64_t>(0, buf_off_ - static_cast<int64_t>(block_));
  std::string block(static_cast<size_t>(buf_off_ - start), '\0');
  int64_t n = ReadAt(log_, block.data(), block.size(), start);
  if (n != static_cast<int64_t>(block.size())) {  // the file shrank under us: stop here
    buf_off_ = 0;
    buf_.clear();
    return false;
  }
  buf_.insert(0, block);
  buf_off_ = start;
  return true;
}

bool BackwardReader::Next(LogLine* out) {
  while (!buf_.empty()) {
    size_t prev = buf_.size() >= 2 ? buf_.rfind('\n', buf_.size() - 2) : std::string::npos;
    if (prev == std::string::npos && buf_off_ > 0) {
      if (!Prepend()) return false;
      continue;
    }
    size_t start = prev == std::string::npos ? 0 : prev + 1;
    std::string_view line(buf_.data() + start, buf_.size() - 1 - start);
    out->begin = buf_off_ + static_cast<int64_t>(start);
    out->end = buf_off_ + static_cast<int64_t>(buf_.size());
    std::string_view message;
    bool event = ParseLine(line, &out->ts, &message);
    if (event) out->message.assign(message);
    buf_.resize(start);
    if (event) return true;
  }
  return false;
}

std::string OffsetToken(char direction, int64_t offset) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%c/%016llx", direction, static_cast<unsigned long long>(offset));
  return buf;
}

bool ParseOffsetToken(std::string_view token, char* direction, int64_t* offset) {
  if (token.size() != 18 || (token[0] != 'f' && token[0] != 'b') || token[1] != '/') return false;
  uint64_t v = 0;
  for (char ch : token.substr(2)) {
    int d = HexDigitValue(ch);
    if (d < 0) return false;
    v = v * 16 + static_cast<uint64_t>(d);
  }
  if (v > static_cast<uint64_t>(INT64_MAX)) return false;
  *direction = token[0];
  *offset = static_cast<int64_t>(v);
  return true;
}

std::string ScanToken(const ScanPositions& positions) {
  std::string raw;
  for (const auto& [stream, off] : positions) {
    if (off <= 0) continue;
    if (!raw.empty()) raw += '\n';
    raw += std::to_string(off) + " " + stream;
  }
  return "n/" + ToHex(raw);
}

bool ParseScanToken(std::string_view token, ScanPositions* positions) {
  if (token.substr(0, 2) != "n/" || token.size() % 2 != 0) return false;
  std::string raw;
  for (size_t i = 2; i < token.size(); i += 2) {
    int hi = HexDigitValue(token[i]), lo = HexDigitValue(token[i + 1]);
    if (hi < 0 || lo < 0) return false;
    raw.push_back(static_cast<char>(hi * 16 + lo));
  }
  positions->clear();
  if (raw.empty()) return true;
  for (const auto& entry : Split(raw, '\n')) {
    size_t sp = entry.find(' ');
    if (sp == 0 || sp == std::string::npos || sp > 18 || sp + 1 == entry.size()) return false;
    int64_t off = 0;
    for (size_t i = 0; i < sp; ++i) {
      if (entry[i] < '0' || entry[i] > '9') return false;
      off = off * 10 + (entry[i] - '0');
    }
    if (!positions->emplace(entry.substr(sp + 1), off).second) return false;
  }
  return true;
}

ScanResult ScanInterleaved(const std::vector<StreamFile>& streams, const ScanPositions& from,
                           const std::function<bool(const LogLine&)>& keep, const ScanLimits& limits,
                           size_t block) {
  ScanResult r;
  std::vector<ForwardReader> readers;
  std::vector<LogLine> heads(streams.size());
  readers.reserve(streams.size());
  for (const auto& s : streams) {
    auto it = from.find(s.name);
    readers.emplace_back(s.log ? s.log : OpenPath(s.path), it == from.end() ? 0 : it->second, block);
  }
  // Streams are given in name order, so the index stands in for the name in the order.
  auto later = [&](size_t a, size_t b) {
    return std::tie(heads[a].ts, a, heads[a].begin) > std::tie(heads[b].ts, b, heads[b].begin);
  };
  std::priority_queue<size_t, std::vector<size_t>, decltype(later)> queue(later);
  std::vector<bool> queued(streams.size(), false);
  int64_t scanned = 0;
  // Moves stream i to its next kept-or-not line, counting what that read from the file.
  auto advance = [&](size_t i) {
    int64_t had = readers[i].scanned();
    queued[i] = readers[i].Next(&heads[i]);
    scanned += readers[i].scanned() - had;
    if (queued[i]) queue.push(i);
  };
  for (size_t i = 0; i < streams.size(); ++i) advance(i);
  int64_t bytes = 0;
  while (!queue.empty()) {
    size_t i = queue.top();
    LogLine& line = heads[i];
    if (keep(line)) {
      int64_t cost = static_cast<int64_t>(line.message.size()) + 26;
      if (r.events.size() >= limits.max_events || (!r.events.empty() && bytes + cost > limits.max_bytes)) {
        r.more = true;  // this line opens the next page
        break;
      }
      bytes += cost;
      r.events.push_back({&streams[i], std::move(line)});
    }
    queue.pop();
    advance(i);
    if (!queue.empty() && scanned >= limits.max_scanned) {
      r.more = true;
      break;
    }
  }
  r.complete.resize(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    r.resume[streams[i].name] = queued[i] ? heads[i].begin : readers[i].offset();
    r.complete[i] = !queued[i];
  }
  return r;
}

}  // namespace ty::api::logs
