// The paged log readers behind GetLogEvents and FilterLogEvents: which lines a page holds and the
// offsets its tokens carry, with blocks far smaller than a line so every boundary is crossed.
#include "api/log_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace ty::api::logs {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/log_reader_test.XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  std::string Write(const std::string& name, const std::string& content) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  std::string Path(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::vector<std::string> Forward(const std::string& path, int64_t from, size_t block, int64_t* offset = nullptr) {
  ForwardReader r(path, from, block);
  std::vector<std::string> out;
  LogLine l;
  while (r.Next(&l)) out.push_back(std::to_string(l.begin) + "-" + std::to_string(l.end) + ":" + l.message);
  if (offset) *offset = r.offset();
  return out;
}

std::vector<std::string> Backward(const std::string& path, int64_t before, size_t block) {
  BackwardReader r(path, before, block);
  std::vector<std::string> out;
  LogLine l;
  while (r.Next(&l)) out.push_back(std::to_string(l.begin) + "-" + std::to_string(l.end) + ":" + l.message);
  return out;
}

// Offsets: "10 a\n" 0-5, "nospace\n" 5-13 (not an event), "20 bb b\n" 13-21, "30 \n" 21-25,
// then "40 partial" with no newline yet.
const std::string kLog = "10 a\nnospace\n20 bb b\n30 \n40 partial";

TEST(LogReader, ForwardReadsCompleteEventsAndStopsBeforeAnUnfinishedLine) {
  TempDir d;
  auto p = d.Write("a.log", kLog);
  for (size_t block : {1, 2, 3, 7, 64 * 1024}) {
    int64_t off = 0;
    EXPECT_EQ(Forward(p, 0, block, &off), (std::vector<std::string>{"0-5:a", "13-21:bb b", "21-25:"})) << block;
    EXPECT_EQ(off, 25) << "resumes at the unfinished line, block " << block;
  }
}

// A log held by an executor somewhere else than in a file of this host: the readers know it only
// through exec::LogFile, and see what it holds at each read (a log that grows reads further).
class MemoryLog final : public exec::LogFile {
 public:
  explicit MemoryLog(std::string bytes) : bytes_(std::move(bytes)) {}
  int64_t ReadAt(int64_t offset, char* buf, size_t n) const override {
    if (offset < 0) return -1;
    if (offset >= static_cast<int64_t>(bytes_.size())) return 0;
    size_t k = std::min(n, bytes_.size() - static_cast<size_t>(offset));
    std::copy_n(bytes_.data() + offset, k, buf);
    return static_cast<int64_t>(k);
  }
  int64_t Size() const override { return static_cast<int64_t>(bytes_.size()); }
  void Append(const std::string& more) { bytes_ += more; }

 private:
  std::string bytes_;
};

TEST(LogReader, ReadsAnExecutorsLogThroughItsInterfaceAsItGrows) {
  auto log = std::make_shared<MemoryLog>(kLog);
  for (size_t block : {1, 3, 64 * 1024}) {
    ForwardReader f(log, 0, block);
    std::vector<std::string> got;
    LogLine l;
    while (f.Next(&l)) got.push_back(l.message);
    EXPECT_EQ(got, (std::vector<std::string>{"a", "bb b", ""})) << block;
    BackwardReader b(log, -1, block);
    got.clear();
    while (b.Next(&l)) got.push_back(l.message);
    EXPECT_EQ(got, (std::vector<std::string>{"", "bb b", "a"})) << block;
  }
  ForwardReader resumed(log, 25);
  LogLine l;
  EXPECT_FALSE(resumed.Next(&l));  // "40 partial" is not complete yet
  log->Append(" line\n");
  ForwardReader later(log, 25);
  ASSERT_TRUE(later.Next(&l));
  EXPECT_EQ(l.message, "partial line");
  ScanResult r = ScanInterleaved({{"s", "", log}}, {}, [](const LogLine&) { return true; }, ScanLimits{});
  EXPECT_EQ(r.events.size(), 4u);
  // No log at all (an executor that has none for the instance) reads as empty.
  ForwardReader none(LogHandle{}, 0);
  EXPECT_FALSE(none.Next(&l));
  BackwardReader none_back(LogHandle{}, -1);
  EXPECT_FALSE(none_back.Next(&l));
}

TEST(LogReader, ForwardFromAnOffsetInsideALineStartsAtTheNextLine) {
  TempDir d;
  auto p = d.Write("a.log", kLog);
  for (size_t block : {1, 4, 64 * 1024}) {
    EXPECT_EQ(Forward(p, 13, block), (std::vector<std::string>{"13-21:bb b", "21-25:"})) << block;
    EXPECT_EQ(Forward(p, 14, block), (std::vector<std::string>{"21-25:"})) << block;
    EXPECT_EQ(Forward(p, 5, block), (std::vector<std::string>{"13-21:bb b", "21-25:"})) << block;
    int64_t off = 0;
    EXPECT_EQ(Forward(p, 26, block, &off), std::vector<std::string>{}) << block;
    EXPECT_EQ(off, 26) << "a token past every complete line stays where it is";
    EXPECT_EQ(Forward(p, 1000, block, &off), std::vector<std::string>{}) << block;
    EXPECT_EQ(off, 1000);
  }
}

TEST(LogReader, MissingFileReadsAsEmpty) {
  EXPECT_EQ(Forward("/nonexistent/a.log", 0, 16), std::vector<std::string>{});
  EXPECT_EQ(Backward("/nonexistent/a.log", -1, 16), std::vector<std::string>{});
}

TEST(LogReader, BackwardReadsNewestFirstAcrossBlocks) {
  TempDir d;
  auto p = d.Write("a.log", kLog);
  for (size_t block : {1, 2, 3, 5, 64 * 1024}) {
    EXPECT_EQ(Backward(p, -1, block), (std::vector<std::string>{"21-25:", "13-21:bb b", "0-5:a"})) << block;
    // Lines that end at or before the offset: 21 is the end of "20 bb b\n".
    EXPECT_EQ(Backward(p, 21, block), (std::vector<std::string>{"13-21:bb b", "0-5:a"})) << block;
    EXPECT_EQ(Backward(p, 20, block), (std::vector<std::string>{"0-5:a"})) << block;
    EXPECT_EQ(Backward(p, 5, block), (std::vector<std::string>{"0-5:a"})) << block;
    EXPECT_EQ(Backward(p, 4, block), std::vector<std::string>{}) << block;
    EXPECT_EQ(Backward(p, 0, block), std::vector<std::string>{}) << block;
    EXPECT_EQ(Backward(p, 1 << 20, block), (std::vector<std::string>{"21-25:", "13-21:bb b", "0-5:a"})) << block;
  }
}

TEST(LogReader, BackwardOverAFileWithNoCompleteLineIsEmpty) {
  TempDir d;
  EXPECT_EQ(Backward(d.Write("a.log", "10 still writing"), -1, 4), std::vector<std::string>{});
  EXPECT_EQ(Backward(d.Write("b.log", ""), -1, 4), std::vector<std::string>{});
}

TEST(LogReader, BackwardAndForwardAgreeOnALargeFile) {
  TempDir d;
  std::string content;
  for (int i = 0; i < 5000; ++i) content += std::to_string(1000 + i) + " line " + std::string(i % 97, 'x') + "\n";
  auto p = d.Write("big.log", content);
  auto fwd = Forward(p, 0, 4096);
  auto bwd = Backward(p, -1, 4096);
  ASSERT_EQ(fwd.size(), 5000u);
  std::reverse(bwd.begin(), bwd.end());
  EXPECT_EQ(fwd, bwd);
}

TEST(LogReader, OffsetTokensRoundTripAndRejectAnythingElse) {
  char dir = 0;
  int64_t off = 0;
  EXPECT_EQ(OffsetToken('f', 0x1234), "f/0000000000001234");
  ASSERT_TRUE(ParseOffsetToken("b/00000000000000ff", &dir, &off));
  EXPECT_EQ(dir, 'b');
  EXPECT_EQ(off, 255);
  ASSERT_TRUE(ParseOffsetToken(OffsetToken('f', INT64_MAX), &dir, &off));
  EXPECT_EQ(off, INT64_MAX);
  for (const char* bad : {"", "garbage", "f/123", "x/0000000000000000", "f-0000000000000000", "f/000000000000000g",
                          "f/ 000000000000000", "f/-000000000000001", "f/ffffffffffffffff", "f/00000000000000000"})
    EXPECT_FALSE(ParseOffsetToken(bad, &dir, &off)) << bad;
}

TEST(LogReader, ScanTokensRoundTripAndRejectAnythingElse) {
  ScanPositions in = {{"job/algo-1-100", 42}, {"job/algo-2-100", 0}, {"other/algo-1-5", 7}};
  ScanPositions out;
  ASSERT_TRUE(ParseScanToken(ScanToken(in), &out));
  EXPECT_EQ(out, (ScanPositions{{"job/algo-1-100", 42}, {"other/algo-1-5", 7}}));
  ASSERT_TRUE(ParseScanToken("n/", &out));
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(ParseScanToken("n/312061", &out));  // "1 a"
  EXPECT_EQ(out, (ScanPositions{{"a", 1}}));
  for (const char* bad : {"", "n", "x/00", "n/0", "n/zz",
                          "n/3432",         // "42": no stream
                          "n/2034322061",   // " 42 a": no offset
                          "n/3461206120",   // "4a a ": not a number
                          "n/3120"})        // "1 ": no stream
    EXPECT_FALSE(ParseScanToken(bad, &out)) << bad;
  EXPECT_FALSE(ParseScanToken("n/3120610a312061", &out)) << "the same stream twice";
  EXPECT_FALSE(ParseScanToken("n/" + std::string(40, '3') + "2061", &out)) << "an offset past 2^63";
}

std::vector<std::string> Names(const ScanResult& r) {
  std::vector<std::string> out;
  for (const auto& m : r.events) out.push_back(m.stream->name + ":" + m.line.message);
  return out;
}

TEST(LogReader, InterleavedScanMergesByTimestampThenStreamAndPagesWithoutGapsOrRepeats) {
  TempDir d;
  std::vector<StreamFile> streams = {
      {"a", d.Write("a.log", "1 a1\n3 a3\n3 a3b\n9 a9\n")},
      {"b", d.Write("b.log", "2 b2\n3 b3\n8 b8\n10 b10\n11 partial")},
      {"c", d.Path("missing.log")},
  };
  auto all = [](const LogLine&) { return true; };
  ScanLimits limits;
  auto r = ScanInterleaved(streams, {}, all, limits, 3);
  EXPECT_EQ(Names(r), (std::vector<std::string>{"a:a1", "b:b2", "a:a3", "a:a3b", "b:b3", "b:b8", "a:a9", "b:b10"}));
  EXPECT_FALSE(r.more);
  EXPECT_EQ(r.complete, (std::vector<bool>{true, true, true}));

  limits.max_events = 3;
  std::vector<std::string> paged;
  ScanPositions from;
  int pages = 0;
  for (;;) {
    auto p = ScanInterleaved(streams, from, all, limits, 3);
    auto names = Names(p);
    EXPECT_LE(names.size(), 3u);
    paged.insert(paged.end(), names.begin(), names.end());
    ++pages;
    if (!p.more) break;
    ASSERT_TRUE(ParseScanToken(ScanToken(p.resume), &from));
  }
  EXPECT_EQ(paged, Names(r));
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(from, (ScanPositions{{"a", 16}, {"b", 15}})) << "the last page starts at a9 and b10";
}

TEST(LogReader, InterleavedScanKeepsOnlyMatchesAndSaysWhenNoneIsLeft) {
  TempDir d;
  std::vector<StreamFile> streams = {{"a", d.Write("a.log", "1 x\n2 hit\n3 x\n4 x\n")}};
  auto hits = [](const LogLine& l) { return l.message == "hit"; };
  ScanLimits limits;
  limits.max_events = 1;
  auto r = ScanInterleaved(streams, {}, hits, limits, 2);
  EXPECT_EQ(Names(r), std::vector<std::string>{"a:hit"});
  EXPECT_FALSE(r.more) << "the page is full but no other line matches";
}

TEST(LogReader, InterleavedScanStopsAtTheByteBudgetWithAPositionToGoOnFrom) {
  TempDir d;
  std::string content;
  for (int i = 0; i < 1000; ++i) content += std::to_string(i) + " line\n";
  std::vector<StreamFile> streams = {{"a", d.Write("a.log", content)}};
  auto none = [](const LogLine& l) { return l.message == "never"; };
  ScanLimits limits;
  limits.max_scanned = 1000;
  ScanPositions from;
  int calls = 0;
  for (;;) {
    auto r = ScanInterleaved(streams, from, none, limits, 256);
    ++calls;
    EXPECT_TRUE(r.events.empty());
    if (!r.more) {
      EXPECT_TRUE(r.complete[0]);
      break;
    }
    EXPECT_FALSE(r.complete[0]);
    EXPECT_GT(r.resume.at("a"), from.count("a") ? from.at("a") : 0) << "each call moves on";
    from = r.resume;
    ASSERT_LT(calls, 100);
  }
  EXPECT_GE(calls, static_cast<int>(content.size() / 1000));
}

TEST(LogReader, InterleavedScanPageStopsNearTheByteLimitWithAtLeastOneEvent) {
  TempDir d;
  std::string big(1000, 'x');
  std::string content;
  for (int i = 0; i < 10; ++i) content += std::to_string(i) + " " + big + "\n";
  std::vector<StreamFile> streams = {{"a", d.Write("a.log", content)}};
  ScanLimits limits;
  limits.max_bytes = 3 * 1026;
  auto r = ScanInterleaved(streams, {}, [](const LogLine&) { return true; }, limits);
  EXPECT_EQ(r.events.size(), 3u);
  EXPECT_TRUE(r.more);
  limits.max_bytes = 10;
  r = ScanInterleaved(streams, {}, [](const LogLine&) { return true; }, limits);
  EXPECT_EQ(r.events.size(), 1u);
}

}  // namespace
}  // namespace ty::api::logs
