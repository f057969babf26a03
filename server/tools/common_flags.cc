// Flags several `rankd` tools share (declared where they are used).
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, model, "",
          "gen-requests / score / inspect: model version directory (holding model.pbtxt)");
ABSL_FLAG(uint64_t, seed, 1, "gen-model / gen-requests: random seed (same seed, same bytes)");
ABSL_FLAG(std::string, output, "-", "gen-requests / score: output file, - = stdout");
