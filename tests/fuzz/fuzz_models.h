// The small in-memory models the fuzz targets run against, and their seed
// inputs. Shared by the fuzzers and write_seeds (which writes the committed
// seed corpora), so a seed always matches the model it was made for: the
// same spec and random seed give the same rows and dynamic keys.
#ifndef RANKD_TESTS_FUZZ_FUZZ_MODELS_H_
#define RANKD_TESTS_FUZZ_FUZZ_MODELS_H_

#include <memory>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/testing/test_models.h"

namespace rankd::fuzz {

// Models that ScoreRequest bytes are converted, validated and scored
// against: static tables (DOT, a request-level feature); dynamic tables
// with id_policy ERROR (DCN_V2, mean pooling); a dynamic table with ZERO
// policy and a default vector (CAT, fp16 rows, max pooling).
std::vector<engine::testing::RandomModelSpec> ScoreModelSpecs();

// The model update messages are applied to: t0 static, t1 dynamic (room
// for kUpdateMaxKeys keys, LRU), t2 dynamic (LFU); ZERO id policy so
// any key scores.
inline constexpr int64_t kUpdateMaxKeys = 64;
std::shared_ptr<engine::Model> MakeUpdateModel();

// A small valid model.pbtxt with a static and a dynamic table (its weights
// file: FuzzWeightsBytes), and its name.
const std::string& FuzzModelConfigText();
// The valid weights.safetensors of FuzzModelConfigText (generated, seed 1).
std::string FuzzWeightsBytes();

}  // namespace rankd::fuzz

#endif  // RANKD_TESTS_FUZZ_FUZZ_MODELS_H_
