// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78), the
// checksum of iSCSI, ext4 metadata and LevelDB/RocksDB logs. Debian's
// abseil (20220623) predates absl/crc, so this is a portable slicing-by-8
// implementation (about 1-2 GB/s per core: far below an fdatasync's cost
// for the update log it protects).
#ifndef RANKD_ENGINE_UPDATES_CRC32C_H_
#define RANKD_ENGINE_UPDATES_CRC32C_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace rankd::engine {

// The CRC-32C of `data` continued from `crc` (the CRC of the bytes before
// it; 0 for none): Crc32c(a + b) == Crc32c(b, Crc32c(a)).
uint32_t Crc32c(absl::string_view data, uint32_t crc = 0);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_UPDATES_CRC32C_H_
