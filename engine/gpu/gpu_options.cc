// Flag parsing shared by both builds of the GPU backend (gpu_backend.h).
#include "absl/strings/str_cat.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/model/error_text.h"

namespace rankd::engine::gpu {

absl::StatusOr<Math> ParseMath(absl::string_view text) {
  if (text == "fp32") return Math::kFp32;
  if (text == "tf32") return Math::kTf32;
  return absl::InvalidArgumentError(absl::StrCat("--gpu_math: expected fp32 or tf32, got \"",
                                                 TruncateForError(text), "\""));
}

absl::StatusOr<CrossMath> ParseCrossMath(absl::string_view text) {
  if (text == "auto") return CrossMath::kAuto;
  if (text == "fp32") return CrossMath::kFp32;
  if (text == "tf32x3") return CrossMath::kTf32x3;
  if (text == "bf16x3") return CrossMath::kBf16x3;
  if (text == "tf32") return CrossMath::kTf32;
  return absl::InvalidArgumentError(
      absl::StrCat("--gpu_cross_math: expected auto, fp32, tf32x3, bf16x3 or tf32, got \"",
                   TruncateForError(text), "\""));
}

}  // namespace rankd::engine::gpu
