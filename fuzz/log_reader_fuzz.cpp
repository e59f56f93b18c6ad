// The CloudWatch Logs reads (api/log_reader.h): the GetLogEvents and FilterLogEvents tokens a
// caller sends back, and the readers over a log file a job wrote. Input: the first line is tried
// as both kinds of token; the whole input is also read as a log file.
//
// Checked besides "no crash": an accepted token, written again, parses to the same value (a stream at offset 0 is the same
// as one left out); the
// forward and backward readers, with a block size small enough to cross every boundary, return
// the same complete lines in opposite orders, each inside the file and ending in a newline.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "api/log_reader.h"
#include "fuzz_input.h"

namespace logs = ty::api::logs;

namespace {

void Fail(const char* what) {
  std::fprintf(stderr, "%s\n", what);
  abort();
}

void CheckTokens(std::string_view token) {
  char direction = 0;
  int64_t offset = 0;
  if (logs::ParseOffsetToken(token, &direction, &offset)) {
    if (offset < 0) Fail("an offset token parsed to a negative offset");
    char again_direction = 0;
    int64_t again = 0;
    if (!logs::ParseOffsetToken(logs::OffsetToken(direction, offset), &again_direction, &again) ||
        again_direction != direction || again != offset)
      Fail("an offset token does not survive being written again");
  }
  logs::ScanPositions positions;
  if (logs::ParseScanToken(token, &positions)) {
    // A stream at offset 0 is at its head, the same as one the token leaves out.
    std::erase_if(positions, [](const auto& entry) { return entry.second == 0; });
    logs::ScanPositions again;
    if (!logs::ParseScanToken(logs::ScanToken(positions), &again) || again != positions)
      Fail("a scan token does not survive being written again");
  }
}

void CheckReaders(std::string_view text) {
  static ty::fuzz::MemFile file("log_reader_fuzz");
  const std::string& path = file.Write(text);
  std::vector<logs::LogLine> forward, backward;
  logs::LogLine line;
  logs::ForwardReader fr(path, 0, 7);
  while (fr.Next(&line)) forward.push_back(line);
  logs::BackwardReader br(path, -1, 5);
  while (br.Next(&line)) backward.push_back(line);
  if (forward.size() != backward.size()) Fail("forward and backward readers disagree on the line count");
  for (size_t i = 0; i < forward.size(); ++i) {
    const logs::LogLine& f = forward[i];
    const logs::LogLine& b = backward[backward.size() - 1 - i];
    if (f.begin != b.begin || f.end != b.end || f.ts != b.ts || f.message != b.message)
      Fail("forward and backward readers disagree on a line");
    if (f.begin < 0 || f.end > static_cast<int64_t>(text.size()) || f.begin >= f.end || text[f.end - 1] != '\n')
      Fail("a line lies outside the file or does not end in a newline");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input = ty::fuzz::AsText(data, size);
  CheckTokens(ty::fuzz::SplitFirstLine(input).first);
  CheckReaders(input);
  return 0;
}
