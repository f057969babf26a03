// The table `rankctl models` (and load, unload, label) prints: one row per
// model version with its state, labels, timings, memory and failure reason.
#ifndef RANKD_CLIENT_RANKCTL_MODEL_TABLE_H_
#define RANKD_CLIENT_RANKCTL_MODEL_TABLE_H_

#include <cstdint>
#include <string>

#include "google/protobuf/repeated_ptr_field.h"
#include "rankd/v1/model_control.pb.h"

namespace rankd::rankctl {

// Columns MODEL VERSION STATE LABELS LOAD_S WARMUP_S HBM HOST REASON,
// aligned, one line per version (a model with none gets one row of "-").
// A model's serving.pbtxt error follows the table, one line per model.
// Ends with a newline.
std::string ModelTable(const google::protobuf::RepeatedPtrField<rankd::v1::ModelStatus>& models);
// The same for one model.
std::string ModelTable(const rankd::v1::ModelStatus& model);
// After the table, per version that has them: "  mini 2: dynamic table
// t_item: 3 of 100 keys, 0 evicted" and "  mini 2: updates from trainer-0 to
// t_user: last sequence 17 at 2024-05-01T12:00:00Z" (indented, so a line
// starting with the model's name is always a version row).

// What rankctl update prints per replica: columns VERSION TABLE MESSAGES
// DUPLICATES ROWS INSERTED UPDATED DELETED NOT_FOUND EVICTED, one line per
// model version and table of `summary`. Ends with a newline.
std::string UpdateSummaryTable(const rankd::v1::UpdateSummary& summary);

// 0 -> "0 B", 1536 -> "1.5 KiB", 64 << 20 -> "64.0 MiB" (binary units).
std::string HumanBytes(int64_t bytes);

}  // namespace rankd::rankctl

#endif  // RANKD_CLIENT_RANKCTL_MODEL_TABLE_H_
