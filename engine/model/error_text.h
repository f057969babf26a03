// Text from files or requests that an error message quotes (tensor names,
// JSON values, feature names), bounded: a hostile input must not make a
// message megabytes long (unreadable to a default gRPC client, slow to log)
// or make producing it recurse without bound.
#ifndef RANKD_ENGINE_MODEL_ERROR_TEXT_H_
#define RANKD_ENGINE_MODEL_ERROR_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace rankd::engine {

// Most bytes of one quoted piece of text in an error message.
inline constexpr size_t kMaxQuotedBytes = 128;

// `text` itself when it has at most `max_bytes` bytes; else its first
// `max_bytes` bytes, cut back to the start of a UTF-8 character (messages
// travel in proto3 strings, which must be valid UTF-8), then
// "... (N bytes)".
inline std::string TruncateForError(absl::string_view text,
                                    size_t max_bytes = kMaxQuotedBytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  // 10xxxxxx is a continuation byte: the character started before it.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  return absl::StrCat(text.substr(0, cut), "... (", text.size(), " bytes)");
}

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_ERROR_TEXT_H_
