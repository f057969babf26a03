// A main for fuzz targets outside --config=fuzz (tools/fuzz.bzl): runs
// LLVMFuzzerTestOneInput once on each file named on the command line, and on
// every file (recursively) in each directory named. Arguments starting with
// '-' are libFuzzer flags and ignored, so the same command line
// (`x_fuzzer -runs=0 corpus/`) replays a corpus with either main. Exits 1
// when no input was found (an empty corpus would pass silently otherwise);
// a failing input aborts inside the target, which fails the run.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

bool RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  // A fresh heap copy of exactly the input's size, as libFuzzer passes it,
  // so ASan catches reads past the end.
  std::vector<uint8_t> copy(bytes.begin(), bytes.end());
  LLVMFuzzerTestOneInput(copy.empty() ? nullptr : copy.data(), copy.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  int runs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!arg.empty() && arg[0] == '-') continue;
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::recursive_directory_iterator(arg)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) runs += RunFile(f) ? 1 : 0;
    } else if (RunFile(arg)) {
      ++runs;
    } else {
      return 1;
    }
  }
  std::fprintf(stderr, "replay: %d inputs ran\n", runs);
  return runs > 0 ? 0 : 1;
}
