// Reading instance log files ("<epoch_ms> <text>\n" lines, see docs/logs.md) a page at a time:
// forward from a byte offset, backward from one, and interleaved across streams in timestamp
// order. Every reader holds a bounded buffer (a block plus at most one line), never a whole file,
// so what a read costs in memory is what its page holds. No controller, no clock: logs in (an
// executor's exec::LogFile, or a file by path), lines out, which is what lets the unit tests pin
// the offsets that the API's tokens carry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "exec/log_file.h"

namespace ty::api::logs {

// A log shared by the readers that page through it; null reads as an empty log.
using LogHandle = std::shared_ptr<const exec::LogFile>;
// The file at `path` (null when it cannot be opened).
LogHandle OpenPath(const std::string& path);

// One event: a complete line of a log file. A line without a space is not an event (readers skip
// it); a last line without its newline is not complete yet (readers stop before it).
struct LogLine {
  int64_t begin = 0;  // byte offset of the line
  int64_t end = 0;    // byte offset after its newline
  int64_t ts = 0;
  std::string message;
};

// Splits "<epoch_ms> <text>" (no newline); false when there is no space.
bool ParseLine(std::string_view line, int64_t* ts, std::string_view* message);

constexpr size_t kDefaultBlock = 64 * 1024;

// Complete lines from the first one that begins at or after `from` (an offset inside a line skips
// to the next line), oldest first. A missing file reads as empty.
class ForwardReader {
 public:
  ForwardReader(LogHandle log, int64_t from, size_t block = kDefaultBlock);
  ForwardReader(const std::string& path, int64_t from, size_t block = kDefaultBlock)
      : ForwardReader(OpenPath(path), from, block) {}
  ~ForwardReader();
  ForwardReader(ForwardReader&& other) noexcept;
  ForwardReader(const ForwardReader&) = delete;
  ForwardReader& operator=(const ForwardReader&) = delete;
  ForwardReader& operator=(ForwardReader&&) = delete;

  // The next event; false at the end of the complete lines.
  bool Next(LogLine* out);
  // The offset of the first line not yet returned or skipped (where a later read resumes).
  int64_t offset() const { return buf_off_ + static_cast<int64_t>(pos_); }
  // Bytes read from the file so far.
  int64_t scanned() const { return scanned_; }

 private:
  bool Fill();  // appends one block; false at the end of the file

  LogHandle log_;
  size_t block_;
  std::string buf_;      // file bytes [buf_off_, buf_off_ + buf_.size())
  int64_t buf_off_ = 0;
  size_t pos_ = 0;       // next unread byte in buf_
  int64_t scanned_ = 0;
  bool eof_ = false;
};

// Complete lines that end at or before `before` (all complete lines when `before` < 0), newest
// first, read in blocks from that point towards the head.
class BackwardReader {
 public:
  BackwardReader(LogHandle log, int64_t before, size_t block = kDefaultBlock);
  BackwardReader(const std::string& path, int64_t before, size_t block = kDefaultBlock)
      : BackwardReader(OpenPath(path), before, block) {}
  ~BackwardReader();
  BackwardReader(const BackwardReader&) = delete;
  BackwardReader& operator=(const BackwardReader&) = delete;

  bool Next(LogLine* out);

 private:
  bool Prepend();  // reads the block before buf_off_; false at the head of the file

  LogHandle log_;
  size_t block_;
  std::string buf_;  // file bytes [buf_off_, buf_off_ + buf_.size()); ends with a newline or is empty
  int64_t buf_off_ = 0;
};

// GetLogEvents tokens: "f/" or "b/" and 16 hex digits of a byte offset.
std::string OffsetToken(char direction, int64_t offset);
// False unless `token` is exactly such a token (offset below 2^63).
bool ParseOffsetToken(std::string_view token, char* direction, int64_t* offset);

// Where an interleaved scan resumes: stream name -> offset of its next unread line. A stream not
// named starts at its head.
using ScanPositions = std::map<std::string, int64_t>;

// FilterLogEvents tokens: "n/" and the hex of "<offset> <stream>" entries joined by newlines
// (streams still at their head are left out).
std::string ScanToken(const ScanPositions& positions);
bool ParseScanToken(std::string_view token, ScanPositions* positions);

struct StreamFile {
  std::string name;
  std::string path;  // read when `log` is null
  LogHandle log;
};

struct ScanLimits {
  size_t max_events = 10000;
  int64_t max_bytes = 1 << 20;        // per page: message bytes plus 26 per event, as AWS counts
  int64_t max_scanned = 64LL << 20;   // file bytes read per call before stopping with a token
};

struct ScanMatch {
  const StreamFile* stream;
  LogLine line;
};

struct ScanResult {
  std::vector<ScanMatch> events;      // in (timestamp, stream, offset) order of the merge
  bool more = false;                  // stopped early: `resume` continues where this left off
  ScanPositions resume;               // every stream's position when it stopped
  std::vector<bool> complete;         // per stream: read to its last complete line
};

// Merges the streams (given in name order) by (timestamp, stream, offset), each read forward
// from its position in `from`, and keeps the lines `keep` accepts until the page is full
// (`max_events`, or `max_bytes` with at least one event) or `max_scanned` bytes were read. When
// the page fills it reads on to the next kept line, so `more` is false only when none is left.
// Each stream is read forward once, so every line is seen once across pages even where a
// stream's timestamps step backwards (then the order across streams is the merge's, not a sort).
ScanResult ScanInterleaved(const std::vector<StreamFile>& streams, const ScanPositions& from,
                           const std::function<bool(const LogLine&)>& keep, const ScanLimits& limits,
                           size_t block = 32 * 1024);

}  // namespace ty::api::logs
