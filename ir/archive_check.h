// A structural check of a zip archive before LibTorch reads it.
//
// `torch.jit.save` writes a zip archive: tensor data and pickles as stored
// entries (aligned to 64 bytes by padding in an extra field), code and debug
// info deflated, always with zip64 end records, local headers whose sizes
// live in a data descriptor (general-purpose flag bit 3), and the real sizes
// and CRC-32s in the central directory. LibTorch's reader trusts that
// structure: it does not check CRCs (a flipped byte in a weight loads
// silently) and its errors ("invalid header or archive is corrupted") do not
// say which entry is wrong.
//
// checkZipArchive() reads the archive through bounds-checked reads only and
// checks, in order:
//   - the end-of-central-directory record ends the file (no truncation, no
//     trailing bytes), the zip64 locator and record when present, and that
//     the 32-bit and zip64 records agree;
//   - the central directory lies exactly between the entries and the end
//     records, holds the declared number of entries (at least one) and
//     nothing else;
//   - each entry: a sane name (not empty, no control characters, no absolute
//     path or `..`), no duplicate names, not encrypted, stored or deflated
//     (PyTorch writes nothing else), a local header at its offset that
//     agrees with the central directory, its data (and data descriptor,
//     which must agree too) inside the file before the central directory, stored sizes equal, a deflated size that
//     deflate can produce (at most 1032:1) within a limit, no two entries
//     overlapping;
//   - the CRC-32 of every entry's data (deflated entries are inflated with
//     zlib into a small buffer, never more than their declared size).
// The first problem found is returned as one line naming the entry. A
// 100 MB model checks in a fraction of a second (bench/archive_check.sh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ptopt::ir {

struct ArchiveLimits {
  uint64_t maxEntries = 1'000'000;
  uint64_t maxCentralDirectoryBytes = 256ull << 20;
  // Deflated entries are code and debug info: kilobytes, not gigabytes.
  uint64_t maxInflatedEntryBytes = 1ull << 30;
  size_t maxNameBytes = 4096;
  bool checkCrc = true;
  // Which entries' CRC-32s to check: all, only tensor records (raw bytes that
  // LibTorch copies without interpreting them, so they can be checked while
  // it loads), or all but those.
  enum class CrcEntries { All, TensorRecords, AllButTensorRecords };
  CrcEntries crcEntries = CrcEntries::All;
};

// A tensor record of a TorchScript archive (`ARCHIVE/data/0`,
// `ARCHIVE/constants/3`, `ARCHIVE/tensors/...`): raw storage bytes.
bool isTensorRecord(const std::string& entryName);

struct ArchiveEntry {
  std::string name;
  uint64_t headerOffset = 0;  // of the local header
  uint64_t dataOffset = 0;
  uint64_t endOffset = 0;  // past its data and its data descriptor
  uint64_t compressedSize = 0;
  uint64_t uncompressedSize = 0;
  uint32_t crc32 = 0;
  uint16_t method = 0;  // 0 stored, 8 deflated
  uint16_t flags = 0;
};

struct ArchiveCheckResult {
  std::string problem;  // one line naming the entry; empty when the archive is sound
  std::vector<ArchiveEntry> entries;  // in central-directory order (all of them only when ok())
  bool ok() const { return problem.empty(); }
};

// Random access to the bytes under check. read() returns false, and reads
// nothing, when [offset, offset + n) is not entirely inside the source.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  virtual bool read(uint64_t offset, void* out, size_t n) const = 0;
};

ArchiveCheckResult checkZipArchive(const ByteSource& source, const ArchiveLimits& limits = {});
ArchiveCheckResult checkZipArchive(std::string_view bytes, const ArchiveLimits& limits = {});
// Reads the file with pread (a file that shrinks meanwhile gives a problem,
// never a SIGBUS). Throws std::system_error when it cannot be opened.
ArchiveCheckResult checkZipFile(const std::string& path, const ArchiveLimits& limits = {});

// CRC-32 (ISO-HDLC, the zip and zlib one), chainable:
// crc32(b, nb, crc32(a, na)) == crc32(a + b).
uint32_t crc32(const void* data, size_t n, uint32_t crc = 0);

}  // namespace ptopt::ir
