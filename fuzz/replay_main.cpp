// Runs a fuzz target's LLVMFuzzerTestOneInput once over each input named on the command line (a
// file, or a directory whose regular files are taken in name order), without libFuzzer: the
// ordinary build's CTest check that the corpus and every past crash input still pass. A missing
// directory is skipped (a target may have no regressions yet). Exit status 0 when every input ran.
//
// Each input runs on a thread with a 1 MiB stack, a fraction of a main thread's usual 8 MiB: a
// parser whose stack use grows with its input (recursion over nesting) fails here on a small
// input, the size of a request body, rather than only on one large enough to exhaust 8 MiB.
#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

constexpr size_t kStackBytes = size_t{1} << 20;

void* RunInput(void* arg) {
  const auto& bytes = *static_cast<const std::vector<char>*>(arg);
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return nullptr;
}

bool RunFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
    return false;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::fprintf(stderr, "replay: %s (%zu bytes)\n", p.c_str(), bytes.size());
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kStackBytes);
  pthread_t thread;
  int err = pthread_create(&thread, &attr, RunInput, &bytes);
  pthread_attr_destroy(&attr);
  if (err != 0 || pthread_join(thread, nullptr) != 0) {
    std::fprintf(stderr, "replay: cannot run a thread for %s\n", p.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  int ran = 0;
  for (int i = 1; i < argc; ++i) {
    fs::path arg(argv[i]);
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(arg))
        if (e.is_regular_file() && e.path().filename() != "README.md") files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        if (!RunFile(f)) return 1;
        ++ran;
      }
    } else if (fs::exists(arg, ec)) {
      if (!RunFile(arg)) return 1;
      ++ran;
    }
  }
  std::fprintf(stderr, "replay: %d inputs ran\n", ran);
  return 0;
}
