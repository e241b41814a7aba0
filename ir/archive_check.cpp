// Zip pre-check (see archive_check.h). Field offsets follow the zip format
// (PKWARE APPNOTE): every multi-byte field is little-endian.
#include "ir/archive_check.h"

#ifdef PTOPT_HAVE_ZLIB
#include <zlib.h>
#endif

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>
#include <unordered_set>

namespace ptopt::ir {

// ---------------------------------------------------------------- CRC-32

namespace {

// Slicing-by-8: table[0] is the classic byte-at-a-time table of the
// reflected polynomial 0xEDB88320; table[k][b] is the CRC of byte b followed
// by k zero bytes, so eight bytes are folded in with eight lookups.
struct Crc32Tables {
  uint32_t table[8][256];
  Crc32Tables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
      table[0][b] = c;
    }
    for (int k = 1; k < 8; ++k)
      for (uint32_t b = 0; b < 256; ++b)
        table[k][b] = (table[k - 1][b] >> 8) ^ table[0][table[k - 1][b] & 0xFF];
  }
};

const Crc32Tables& crcTables() {
  static const Crc32Tables tables;
  return tables;
}

uint32_t le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint16_t le16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }
uint64_t le64(const uint8_t* p) { return uint64_t(le32(p)) | uint64_t(le32(p + 4)) << 32; }

}  // namespace

uint32_t crc32(const void* data, size_t n, uint32_t crc) {
  const auto& t = crcTables().table;
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo = c ^ le32(p), hi = le32(p + 4);
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
        t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ t[0][(c ^ *p) & 0xFF];
  return ~c;
}

// ---------------------------------------------------------------- sources

namespace {

class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  bool read(uint64_t offset, void* out, size_t n) const override {
    if (offset > bytes_.size() || n > bytes_.size() - offset) return false;
    if (n) std::memcpy(out, bytes_.data() + offset, n);
    return true;
  }

 private:
  std::string_view bytes_;
};

class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "cannot open '" + path + "'");
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      int err = errno;
      ::close(fd_);
      throw std::system_error(err, std::generic_category(), "cannot stat '" + path + "'");
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  uint64_t size() const override { return size_; }
  bool read(uint64_t offset, void* out, size_t n) const override {
    if (offset > size_ || n > size_ - offset) return false;
    auto* dst = static_cast<char*>(out);
    while (n > 0) {
      ssize_t got = ::pread(fd_, dst, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;  // an error, or the file shrank
      dst += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
    return true;
  }

 private:
  int fd_;
  uint64_t size_ = 0;
};

// ---------------------------------------------------------------- the check

constexpr uint32_t kLocalHeaderSig = 0x04034b50;    // PK\3\4
constexpr uint32_t kCentralHeaderSig = 0x02014b50;  // PK\1\2
constexpr uint32_t kEndSig = 0x06054b50;            // PK\5\6
constexpr uint32_t kZip64EndSig = 0x06064b50;       // PK\6\6
constexpr uint32_t kZip64LocatorSig = 0x07064b50;   // PK\6\7
constexpr uint32_t kDataDescriptorSig = 0x08074b50; // PK\7\8
constexpr size_t kEndSize = 22, kZip64EndSize = 56, kZip64LocatorSize = 20;
constexpr size_t kCentralHeaderSize = 46, kLocalHeaderSize = 30;
constexpr uint16_t kStored = 0, kDeflated = 8;
// Deflate's best case is a 258-byte match in about two bits: at most about
// 1032 output bytes per input byte (zlib's documented limit), plus slack.
constexpr uint64_t kMaxDeflateRatio = 1032;

// The reason why the check stopped; caught in checkZipArchive().
struct Problem {
  std::string text;
};

[[noreturn]] void fail(std::string text) { throw Problem{std::move(text)}; }

std::string printable(const std::string& name) {
  std::string out = "'";
  for (unsigned char c : name.substr(0, 200)) {
    if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (name.size() > 200) out += "...";
  return out + "'";
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

struct EndRecords {
  uint64_t entries = 0;
  uint64_t cdSize = 0;
  uint64_t cdOffset = 0;
  uint64_t cdEnd = 0;  // where the first end record starts
};

class Checker {
 public:
  Checker(const ByteSource& src, const ArchiveLimits& limits) : src_(src), limits_(limits) {}

  std::vector<ArchiveEntry> run() {
    size_ = src_.size();
    if (size_ < kEndSize)
      fail("too short for a zip archive (" + std::to_string(size_) + " bytes)");
    EndRecords end = readEndRecords();
    std::vector<ArchiveEntry> entries = readCentralDirectory(end);
    checkEntries(entries, end);
    return entries;
  }

 private:
  void readAt(uint64_t offset, void* out, size_t n, const char* what) {
    if (!src_.read(offset, out, n))
      fail(std::string("cannot read ") + what + " at offset " + std::to_string(offset) + " (file is " +
           std::to_string(size_) + " bytes: truncated?)");
  }

  EndRecords readEndRecords() {
    // The end record is the last 22 bytes plus a comment of up to 65535.
    size_t window = static_cast<size_t>(std::min<uint64_t>(size_, kEndSize + 0xFFFF));
    uint64_t windowStart = size_ - window;
    std::vector<uint8_t> tail(window);
    readAt(windowStart, tail.data(), window, "the end of the archive");
    int64_t found = -1, anySignature = -1;
    for (int64_t i = static_cast<int64_t>(window - kEndSize); i >= 0; --i) {
      if (le32(&tail[i]) != kEndSig) continue;
      if (anySignature < 0) anySignature = i;
      if (i + kEndSize + le16(&tail[i + 20]) == window) {
        found = i;
        break;
      }
    }
    if (found < 0) {
      if (anySignature >= 0)
        fail("the end-of-central-directory record does not end the file (bytes after it, or a truncated comment)");
      fail("no end-of-central-directory record: the file is truncated or is not a zip archive");
    }
    const uint8_t* e = &tail[found];
    uint64_t endPos = windowStart + found;
    uint16_t disk = le16(e + 4), cdDisk = le16(e + 6);
    EndRecords r;
    r.entries = le16(e + 10);
    r.cdSize = le32(e + 12);
    r.cdOffset = le32(e + 16);
    r.cdEnd = endPos;
    bool needsZip64 = le16(e + 8) == 0xFFFF || r.entries == 0xFFFF || r.cdSize == 0xFFFFFFFF ||
                      r.cdOffset == 0xFFFFFFFF || disk == 0xFFFF || cdDisk == 0xFFFF;
    bool hasLocator = false;
    uint8_t loc[kZip64LocatorSize];
    if (endPos >= kZip64LocatorSize && src_.read(endPos - kZip64LocatorSize, loc, sizeof loc) &&
        le32(loc) == kZip64LocatorSig)
      hasLocator = true;
    if (!hasLocator) {
      if (needsZip64) fail("the end record asks for zip64 values but there is no zip64 locator before it");
      if (disk != 0 || cdDisk != 0 || le16(e + 8) != r.entries)
        fail("a multi-part (split) zip archive: not supported");
      return r;
    }
    uint64_t locatorPos = endPos - kZip64LocatorSize;
    uint64_t z64Pos = le64(loc + 8);
    if (le32(loc + 4) != 0 || le32(loc + 16) > 1) fail("a multi-part (split) zip64 archive: not supported");
    if (z64Pos > locatorPos || locatorPos - z64Pos < kZip64EndSize)
      fail("the zip64 locator points at offset " + std::to_string(z64Pos) + ", outside the archive");
    uint8_t z[kZip64EndSize];
    readAt(z64Pos, z, sizeof z, "the zip64 end record");
    if (le32(z) != kZip64EndSig) fail("no zip64 end record at offset " + std::to_string(z64Pos));
    uint64_t recordSize = le64(z + 4);
    if (recordSize < kZip64EndSize - 12 || recordSize > locatorPos - z64Pos - 12)
      fail("the zip64 end record declares a size of " + std::to_string(recordSize) + " bytes");
    // Writers put the zip64 end record right before its locator; anything
    // between them is another archive's tail or damage.
    if (z64Pos + 12 + recordSize != locatorPos)
      fail(std::to_string(locatorPos - z64Pos - 12 - recordSize) +
           " unexplained bytes between the zip64 end record and its locator (two archives concatenated?)");
    if (le32(z + 16) != 0 || le32(z + 20) != 0 || le64(z + 24) != le64(z + 32))
      fail("a multi-part (split) zip64 archive: not supported");
    EndRecords r64;
    r64.entries = le64(z + 32);
    r64.cdSize = le64(z + 40);
    r64.cdOffset = le64(z + 48);
    r64.cdEnd = z64Pos;
    // A 32-bit field is either the 0xFF.. marker or the same value.
    if ((r.entries != 0xFFFF && r.entries != r64.entries) ||
        (r.cdSize != 0xFFFFFFFF && r.cdSize != r64.cdSize) ||
        (r.cdOffset != 0xFFFFFFFF && r.cdOffset != r64.cdOffset))
      fail("the zip64 and 32-bit end records disagree (entries " + std::to_string(r64.entries) + " vs " +
           std::to_string(r.entries) + ", central directory at " + std::to_string(r64.cdOffset) + " vs " +
           std::to_string(r.cdOffset) + ")");
    return r64;
  }

  std::vector<ArchiveEntry> readCentralDirectory(const EndRecords& end) {
    if (end.cdOffset > end.cdEnd || end.cdSize > end.cdEnd - end.cdOffset)
      fail("the central directory (" + std::to_string(end.cdSize) + " bytes at offset " +
           std::to_string(end.cdOffset) + ") lies outside the file (" + std::to_string(size_) +
           " bytes: truncated?)");
    if (end.cdOffset + end.cdSize != end.cdEnd)
      fail(std::to_string(end.cdEnd - end.cdOffset - end.cdSize) +
           " unexplained bytes between the central directory and the end record");
    if (end.entries == 0) fail("the archive has no entries");
    if (end.entries > limits_.maxEntries)
      fail("declares " + std::to_string(end.entries) + " entries (limit " + std::to_string(limits_.maxEntries) + ")");
    if (end.cdSize > limits_.maxCentralDirectoryBytes)
      fail("a central directory of " + std::to_string(end.cdSize) + " bytes (limit " +
           std::to_string(limits_.maxCentralDirectoryBytes) + ")");
    if (end.entries > end.cdSize / kCentralHeaderSize)
      fail("declares " + std::to_string(end.entries) + " entries but its central directory holds at most " +
           std::to_string(end.cdSize / kCentralHeaderSize));

    std::vector<uint8_t> cd(static_cast<size_t>(end.cdSize));
    readAt(end.cdOffset, cd.data(), cd.size(), "the central directory");
    std::vector<ArchiveEntry> entries;
    entries.reserve(static_cast<size_t>(end.entries));
    std::unordered_set<std::string> names;
    size_t pos = 0;
    for (uint64_t i = 0; i < end.entries; ++i) {
      std::string which = "central directory entry " + std::to_string(i);
      if (cd.size() - pos < kCentralHeaderSize)
        fail(which + " is cut off (the directory ends after " + std::to_string(i) + " of " +
             std::to_string(end.entries) + " entries)");
      const uint8_t* h = &cd[pos];
      if (le32(h) != kCentralHeaderSig) fail(which + " has no central header signature");
      ArchiveEntry entry;
      entry.flags = le16(h + 8);
      entry.method = le16(h + 10);
      entry.crc32 = le32(h + 16);
      entry.compressedSize = le32(h + 20);
      entry.uncompressedSize = le32(h + 24);
      size_t nameLen = le16(h + 28), extraLen = le16(h + 30), commentLen = le16(h + 32);
      uint32_t diskStart = le16(h + 34);
      uint32_t externalAttributes = le32(h + 38);
      entry.headerOffset = le32(h + 42);
      if (cd.size() - pos - kCentralHeaderSize < nameLen + extraLen + commentLen)
        fail(which + " runs past the end of the central directory");
      entry.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), nameLen);
      which = "entry " + printable(entry.name);
      readZip64Extra(h + kCentralHeaderSize + nameLen, extraLen, entry, diskStart, which);
      pos += kCentralHeaderSize + nameLen + extraLen + commentLen;

      checkName(entry.name, which);
      if (!names.insert(entry.name).second) fail(which + " appears twice");
      if (diskStart != 0) fail(which + " is on another disk of a multi-part archive");
      if (entry.flags & 1) fail(which + " is encrypted");
      // LibTorch's reader treats an entry with the MS-DOS directory attribute
      // (0x10) as a folder and reads nothing from it; a real folder entry ends
      // with '/' and holds no data.
      const bool folderName = entry.name.back() == '/';
      if ((externalAttributes & 0x10) && !folderName)
        fail(which + " is marked as a folder in the central directory (a damaged attribute byte)");
      if (folderName && (entry.compressedSize != 0 || entry.uncompressedSize != 0))
        fail(which + " is a folder entry with data");
      if (entry.method != kStored && entry.method != kDeflated)
        fail(which + " uses compression method " + std::to_string(entry.method) +
             " (PyTorch writes only stored (0) and deflated (8) entries)");
      entries.push_back(std::move(entry));
    }
    if (pos != cd.size())
      fail("the central directory has " + std::to_string(cd.size() - pos) + " bytes after its last entry (" +
           std::to_string(end.entries) + " declared)");
    return entries;
  }

  // Sizes and offset at 0xFFFFFFFF are in the zip64 extra field (id 1), in
  // the order uncompressed, compressed, offset, disk; only those present.
  void readZip64Extra(const uint8_t* extra, size_t len, ArchiveEntry& entry, uint32_t& diskStart,
                      const std::string& which) {
    bool wantU = entry.uncompressedSize == 0xFFFFFFFF, wantC = entry.compressedSize == 0xFFFFFFFF,
         wantO = entry.headerOffset == 0xFFFFFFFF, wantD = diskStart == 0xFFFF;
    bool found = false;
    size_t pos = 0;
    while (pos < len) {
      if (len - pos < 4) fail(which + " has a malformed extra field");
      uint16_t id = le16(extra + pos), size = le16(extra + pos + 2);
      if (len - pos - 4 < size) fail(which + " has a malformed extra field");
      const uint8_t* data = extra + pos + 4;
      if (id == 0x0001 && !found) {
        found = true;
        size_t need = 8 * (wantU + wantC + wantO) + 4 * wantD;
        if (size < need) fail(which + " has a zip64 extra field too short for its sizes");
        if (wantU) entry.uncompressedSize = le64(data), data += 8;
        if (wantC) entry.compressedSize = le64(data), data += 8;
        if (wantO) entry.headerOffset = le64(data), data += 8;
        if (wantD) diskStart = le32(data);
      }
      pos += 4 + size;
    }
    if ((wantU || wantC || wantO || wantD) && !found)
      fail(which + " has 32-bit size fields at 0xFFFFFFFF but no zip64 extra field");
  }

  void checkName(const std::string& name, const std::string& which) {
    if (name.empty()) fail("an entry has an empty name");
    if (name.size() > limits_.maxNameBytes) fail(which + " has a name longer than " +
                                                 std::to_string(limits_.maxNameBytes) + " bytes");
    for (unsigned char c : name)
      if (c < 0x20 || c == 0x7F || c == '\\') fail(which + " has a control character or backslash in its name");
    if (name.front() == '/') fail(which + " is an absolute path");
    size_t start = 0;
    while (start <= name.size()) {
      size_t slash = name.find('/', start);
      if (slash == std::string::npos) slash = name.size();
      if (name.compare(start, slash - start, "..") == 0) fail(which + " has a '..' path component");
      start = slash + 1;
    }
  }

  void checkEntries(std::vector<ArchiveEntry>& entries, const EndRecords& end) {
    const uint64_t dataEnd = end.cdOffset;  // entries live before the central directory
    for (auto& entry : entries) {
      std::string which = "entry " + printable(entry.name);
      if (entry.headerOffset > dataEnd || dataEnd - entry.headerOffset < kLocalHeaderSize)
        fail(which + ": its local header offset " + std::to_string(entry.headerOffset) +
             " lies outside the archive's data (" + std::to_string(dataEnd) + " bytes)");
      uint8_t h[kLocalHeaderSize];
      readAt(entry.headerOffset, h, sizeof h, "a local header");
      if (le32(h) != kLocalHeaderSig)
        fail(which + ": no local header at offset " + std::to_string(entry.headerOffset));
      uint16_t localFlags = le16(h + 6), localMethod = le16(h + 8);
      uint32_t localCrc = le32(h + 14), localC = le32(h + 18), localU = le32(h + 22);
      size_t nameLen = le16(h + 26), extraLen = le16(h + 28);
      if (dataEnd - entry.headerOffset - kLocalHeaderSize < nameLen + extraLen)
        fail(which + ": its local header runs into the central directory");
      std::string localName(nameLen, '\0');
      readAt(entry.headerOffset + kLocalHeaderSize, localName.data(), nameLen, "a local header");
      if (localName != entry.name)
        fail(which + ": its local header names " + printable(localName));
      if (localMethod != entry.method)
        fail(which + ": local header says compression method " + std::to_string(localMethod) +
             ", central directory " + std::to_string(entry.method));
      if ((localFlags & 1) != (entry.flags & 1))
        fail(which + ": local header and central directory disagree on encryption");
      // Without a data descriptor (flag bit 3) the local header repeats the
      // CRC and sizes (0xFFFFFFFF when they are in a zip64 extra field).
      if (!(localFlags & 8)) {
        if (localCrc != entry.crc32 ||
            (localC != 0xFFFFFFFF && localC != entry.compressedSize) ||
            (localU != 0xFFFFFFFF && localU != entry.uncompressedSize))
          fail(which + ": local header and central directory disagree on its CRC or sizes");
      }
      entry.dataOffset = entry.headerOffset + kLocalHeaderSize + nameLen + extraLen;
      if (entry.compressedSize > dataEnd - entry.dataOffset)
        fail(which + " declares " + std::to_string(entry.compressedSize) + " bytes of data at offset " +
             std::to_string(entry.dataOffset) + ", past the end of the archive's data (" +
             std::to_string(dataEnd) + " bytes: truncated?)");
      entry.endOffset = entry.dataOffset + entry.compressedSize;
      if (localFlags & 8) entry.endOffset += dataDescriptorSize(entry, dataEnd, which);
      if (entry.method == kStored && entry.compressedSize != entry.uncompressedSize)
        fail(which + " is stored but declares " + std::to_string(entry.compressedSize) + " bytes stored and " +
             std::to_string(entry.uncompressedSize) + " bytes uncompressed");
      if (entry.method == kDeflated) {
        if (entry.uncompressedSize / kMaxDeflateRatio > entry.compressedSize + 1)
          fail(which + " declares " + std::to_string(entry.uncompressedSize) + " bytes uncompressed from " +
               std::to_string(entry.compressedSize) + " compressed, more than deflate can produce");
        if (entry.uncompressedSize > limits_.maxInflatedEntryBytes)
          fail(which + " declares " + std::to_string(entry.uncompressedSize) +
               " bytes uncompressed (limit " + std::to_string(limits_.maxInflatedEntryBytes) + ")");
      }
    }

    // No two entries share bytes: in file order, each entry's data ends
    // before the next local header starts.
    std::vector<const ArchiveEntry*> byOffset;
    byOffset.reserve(entries.size());
    for (const auto& e : entries) byOffset.push_back(&e);
    std::sort(byOffset.begin(), byOffset.end(),
              [](const ArchiveEntry* a, const ArchiveEntry* b) { return a->headerOffset < b->headerOffset; });
    for (size_t i = 1; i < byOffset.size(); ++i) {
      const ArchiveEntry& prev = *byOffset[i - 1];
      if (byOffset[i]->headerOffset < prev.endOffset)
        fail("entries " + printable(prev.name) + " and " + printable(byOffset[i]->name) + " overlap");
    }

    if (!limits_.checkCrc) return;
    for (const auto& entry : entries) {
      if (limits_.crcEntries != ArchiveLimits::CrcEntries::All &&
          isTensorRecord(entry.name) != (limits_.crcEntries == ArchiveLimits::CrcEntries::TensorRecords))
        continue;
#ifndef PTOPT_HAVE_ZLIB
      if (entry.method != kStored) continue;  // built without zlib: deflated entries go unchecked
#endif
      uint32_t crc = entry.method == kStored ? storedCrc(entry) : inflatedCrc(entry);
      if (crc != entry.crc32)
        fail("entry " + printable(entry.name) + ": CRC-32 mismatch (recorded " + hex32(entry.crc32) +
             ", data has " + hex32(crc) + "): its bytes are damaged");
    }
  }

  // The data descriptor after an entry's data (flag bit 3): an optional
  // signature, the CRC-32, then both sizes in 4 bytes each, or 8 in zip64.
  uint64_t dataDescriptorSize(const ArchiveEntry& entry, uint64_t dataEnd, const std::string& which) {
    uint64_t at = entry.dataOffset + entry.compressedSize;
    uint8_t d[24] = {};
    size_t n = static_cast<size_t>(std::min<uint64_t>(sizeof d, dataEnd - at));
    readAt(at, d, n, "a data descriptor");
    size_t p = n >= 4 && le32(d) == kDataDescriptorSig ? 4 : 0;
    if (n - p < 12) fail(which + ": its data descriptor is cut off by the central directory");
    if (le32(d + p) != entry.crc32)
      fail(which + ": its data descriptor records CRC-32 " + hex32(le32(d + p)) + ", the central directory " +
           hex32(entry.crc32));
    if (le32(d + p + 4) == entry.compressedSize && le32(d + p + 8) == entry.uncompressedSize) return p + 12;
    if (n - p >= 20 && le64(d + p + 4) == entry.compressedSize && le64(d + p + 12) == entry.uncompressedSize)
      return p + 20;
    fail(which + ": its data descriptor and the central directory disagree on its sizes");
  }

  static constexpr size_t kChunk = 1 << 20;

  uint32_t storedCrc(const ArchiveEntry& entry) {
    buffer_.resize(kChunk);
    uint32_t crc = 0;
    for (uint64_t done = 0; done < entry.compressedSize;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, entry.compressedSize - done));
      readAt(entry.dataOffset + done, buffer_.data(), n, "entry data");
      crc = crc32(buffer_.data(), n, crc);
      done += n;
    }
    return crc;
  }

#ifdef PTOPT_HAVE_ZLIB
  // Inflates (raw deflate) chunk by chunk into a fixed buffer, CRCing the
  // output; stops as soon as it exceeds the declared size.
  uint32_t inflatedCrc(const ArchiveEntry& entry) {
    std::string which = "entry " + printable(entry.name);
    z_stream zs{};
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail("zlib could not start inflating " + which);
    std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, inflateEnd);
    buffer_.resize(kChunk);
    std::vector<uint8_t> out(kChunk);
    uint32_t crc = 0;
    uint64_t consumed = 0, produced = 0;
    int status = Z_OK;
    while (status != Z_STREAM_END) {
      if (zs.avail_in == 0) {
        if (consumed == entry.compressedSize)
          fail(which + ": its deflate data ends early (the entry is truncated or damaged)");
        size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, entry.compressedSize - consumed));
        readAt(entry.dataOffset + consumed, buffer_.data(), n, "entry data");
        consumed += n;
        zs.next_in = buffer_.data();
        zs.avail_in = static_cast<uInt>(n);
      }
      zs.next_out = out.data();
      zs.avail_out = static_cast<uInt>(out.size());
      status = inflate(&zs, Z_NO_FLUSH);
      if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR)
        fail(which + ": its deflate data is damaged (zlib: " + (zs.msg ? zs.msg : "error " + std::to_string(status)) +
             ")");
      size_t got = out.size() - zs.avail_out;
      produced += got;
      if (produced > entry.uncompressedSize)
        fail(which + " inflates to more than its declared " + std::to_string(entry.uncompressedSize) + " bytes");
      crc = crc32(out.data(), got, crc);
      if (status == Z_BUF_ERROR && got == 0 && zs.avail_in != 0)
        fail(which + ": its deflate data is damaged (no progress)");
    }
    if (zs.avail_in != 0 || consumed != entry.compressedSize)
      fail(which + ": its deflate stream ends before its declared " + std::to_string(entry.compressedSize) +
           " compressed bytes");
    if (produced != entry.uncompressedSize)
      fail(which + " inflates to " + std::to_string(produced) + " bytes, not the declared " +
           std::to_string(entry.uncompressedSize));
    return crc;
  }
#else
  uint32_t inflatedCrc(const ArchiveEntry&) { return 0; }  // never called
#endif

  const ByteSource& src_;
  const ArchiveLimits& limits_;
  uint64_t size_ = 0;
  std::vector<uint8_t> buffer_;
};

}  // namespace

bool isTensorRecord(const std::string& entryName) {
  const size_t slash = entryName.find('/');
  const std::string record = slash == std::string::npos ? entryName : entryName.substr(slash + 1);
  for (const char* folder : {"data/", "constants/", "tensors/"})
    if (record.rfind(folder, 0) == 0) return true;
  return false;
}

ArchiveCheckResult checkZipArchive(const ByteSource& source, const ArchiveLimits& limits) {
  ArchiveCheckResult result;
  try {
    result.entries = Checker(source, limits).run();
  } catch (const Problem& p) {
    result.problem = p.text;
  }
  return result;
}

ArchiveCheckResult checkZipArchive(std::string_view bytes, const ArchiveLimits& limits) {
  return checkZipArchive(MemorySource(bytes), limits);
}

ArchiveCheckResult checkZipFile(const std::string& path, const ArchiveLimits& limits) {
  FileSource source(path);
  return checkZipArchive(source, limits);
}

}  // namespace ptopt::ir
