// Fuzz target: weights.safetensors bytes -> header parse and checks
// (SafetensorsFile::Open), tensor reads, then a full LoadModel of a small
// model (tests/fuzz/fuzz_models.h: a static and a dynamic fp16 table) whose
// weights file is the input, which runs every tensor check the loader has
// (names, dtypes, shapes, NaN / Inf rows, dynamic keys). The bytes are
// written to a file in a private temporary directory, since both read
// files (pread, regular files only) as the server does.
//
// Checked beyond "no crash": every tensor Open accepted is found by Get with
// its own dtype and shape and reads in full; a read past its end is
// OUT_OF_RANGE; a model that loads has the config's tables and shapes.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/model_loader.h"
#include "engine/model/safetensors.h"
#include "tests/fuzz/fuzz_models.h"

namespace {

// The temporary model directory (model.pbtxt written once), removed with
// what the executions wrote into it at exit.
const std::string& ModelDir() {
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string templ = std::string(tmp != nullptr ? tmp : "/tmp") + "/rankd_st_fuzz_XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) std::abort();
    std::atexit([] {
      std::error_code ignored;  // best effort: the process is exiting
      std::filesystem::remove_all(ModelDir(), ignored);
    });
    const std::string config = templ + "/model.pbtxt";
    FILE* f = std::fopen(config.c_str(), "w");
    if (f == nullptr) std::abort();
    const std::string& text = rankd::fuzz::FuzzModelConfigText();
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    return new std::string(templ);
  }();
  return *dir;
}

void WriteFile(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  size_t done = 0;
  while (done < size) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  close(fd);
}

void Fail(const char* what, const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  std::abort();
}

void CheckTensors(const rankd::engine::SafetensorsFile& file) {
  for (const auto& [name, info] : file.tensors()) {
    auto got = file.Get(name, info.dtype, info.shape);
    if (!got.ok()) Fail("Get of a listed tensor failed", got.status());
    if (*got != &info) std::abort();
    // Read it whole (tensors are inside the file, which is small here).
    std::vector<uint8_t> buf(static_cast<size_t>(info.size_bytes));
    absl::Status read = file.ReadTensor(info, 0, info.size_bytes, buf.data());
    if (!read.ok()) Fail("reading a listed tensor failed", read);
    uint8_t one;
    absl::Status past = file.ReadTensor(info, info.size_bytes, 1, &one);
    if (past.code() != absl::StatusCode::kOutOfRange) Fail("read past a tensor's end", past);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = ModelDir();
  const std::string weights = dir + "/weights.safetensors";
  WriteFile(weights, data, size);

  auto file = rankd::engine::SafetensorsFile::Open(weights);
  // LoadModel opens the file with the same Open, so a refused header fails
  // it the same way: skip the load then (most mutated inputs), which keeps
  // the target several times faster.
  if (!file.ok()) return 0;
  CheckTensors(**file);

  rankd::engine::LoadOptions options;
  options.num_threads = 1;
  options.mem_available_bytes = int64_t{1} << 30;
  auto model = rankd::engine::LoadModel(dir, 1, "fuzz", options);
  if (model.ok()) {
    const rankd::engine::Model& m = **model;
    if (m.tables.size() != 2 || m.tables[0].num_rows != 5 || m.tables[0].dim != 2 ||
        !m.tables[1].dynamic || m.tables[1].dim != 2) {
      std::fprintf(stderr, "a loaded model does not match its config\n");
      std::abort();
    }
  }
  return 0;
}
