// The zip pre-check (ir/archive_check.h): archives LibTorch writes pass;
// truncated, flipped and hand-made bad archives fail with a reason that names
// the entry; loadTorchScript turns that into an InputError.
#include "ir/archive_check.h"
#include "ir/model.h"

#include <catch2/catch.hpp>
#include <torch/script.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace ptopt;
namespace fs = std::filesystem;

namespace {

// A real TorchScript archive, written by LibTorch's own serializer (the one
// torch.jit.save uses): stored tensors and pickles, deflated code.
torch::jit::Module makeModule(bool withForward = true) {
  torch::jit::Module m("m");
  m.register_parameter("weight", torch::randn({16, 3}), false);
  m.register_buffer("offset", torch::arange(4.0));
  m.define(std::string("def ") + (withForward ? "forward" : "scale") +
           "(self, x):\n    return torch.relu(x * self.weight.sum() + self.offset.sum())\n");
  return m;
}

std::string saveToString(const torch::jit::Module& m) {
  std::ostringstream os;
  m.save(os);
  return os.str();
}

// A minimal zip writer for hand-made cases: no data descriptors, optionally
// zip64 end records and zip64 extra fields on every entry.
struct ZipEntrySpec {
  std::string name;
  std::string data;
  bool deflate = false;
};

struct BuiltZip {
  std::string bytes;
  std::vector<size_t> localHeader;    // offset of each local header
  std::vector<size_t> centralHeader;  // offset of each central header
  size_t end = 0;                     // offset of the 32-bit end record
};

void put16(std::string& s, uint16_t v) { s += char(v & 0xFF), s += char(v >> 8); }
void put32(std::string& s, uint32_t v) { put16(s, uint16_t(v)), put16(s, uint16_t(v >> 16)); }
void put64(std::string& s, uint64_t v) { put32(s, uint32_t(v)), put32(s, uint32_t(v >> 32)); }
void set32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = char((v >> (8 * i)) & 0xFF);
}
void set64(std::string& s, size_t at, uint64_t v) {
  set32(s, at, uint32_t(v));
  set32(s, at + 4, uint32_t(v >> 32));
}

std::string rawDeflate(const std::string& in) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, in.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = uInt(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = uInt(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

BuiltZip buildZip(const std::vector<ZipEntrySpec>& specs, bool zip64 = false) {
  BuiltZip z;
  std::string central;
  for (const auto& e : specs) {
    std::string payload = e.deflate ? rawDeflate(e.data) : e.data;
    // zlib's crc32 as the independent reference for ours.
    uint32_t crc = uint32_t(::crc32(0, reinterpret_cast<const Bytef*>(e.data.data()), uInt(e.data.size())));
    uint16_t method = e.deflate ? 8 : 0;
    size_t offset = z.bytes.size();
    z.localHeader.push_back(offset);
    std::string extra;
    if (zip64) put16(extra, 1), put16(extra, 16), put64(extra, e.data.size()), put64(extra, payload.size());
    put32(z.bytes, 0x04034b50), put16(z.bytes, 45), put16(z.bytes, 0), put16(z.bytes, method);
    put32(z.bytes, 0), put32(z.bytes, crc);
    put32(z.bytes, zip64 ? 0xFFFFFFFF : uint32_t(payload.size()));
    put32(z.bytes, zip64 ? 0xFFFFFFFF : uint32_t(e.data.size()));
    put16(z.bytes, uint16_t(e.name.size())), put16(z.bytes, uint16_t(extra.size()));
    z.bytes += e.name + extra + payload;

    std::string cextra;
    if (zip64)
      put16(cextra, 1), put16(cextra, 24), put64(cextra, e.data.size()), put64(cextra, payload.size()),
          put64(cextra, offset);
    std::string c;
    put32(c, 0x02014b50), put16(c, 45), put16(c, 45), put16(c, 0), put16(c, method);
    put32(c, 0), put32(c, crc);
    put32(c, zip64 ? 0xFFFFFFFF : uint32_t(payload.size()));
    put32(c, zip64 ? 0xFFFFFFFF : uint32_t(e.data.size()));
    put16(c, uint16_t(e.name.size())), put16(c, uint16_t(cextra.size())), put16(c, 0);
    put16(c, 0), put16(c, 0), put32(c, 0), put32(c, zip64 ? 0xFFFFFFFF : uint32_t(offset));
    z.centralHeader.push_back(central.size());  // relative for now
    central += c + e.name + cextra;
  }
  size_t cdOffset = z.bytes.size();
  for (auto& c : z.centralHeader) c += cdOffset;
  z.bytes += central;
  if (zip64) {
    size_t z64 = z.bytes.size();
    put32(z.bytes, 0x06064b50), put64(z.bytes, 44), put16(z.bytes, 45), put16(z.bytes, 45);
    put32(z.bytes, 0), put32(z.bytes, 0), put64(z.bytes, specs.size()), put64(z.bytes, specs.size());
    put64(z.bytes, central.size()), put64(z.bytes, cdOffset);
    put32(z.bytes, 0x07064b50), put32(z.bytes, 0), put64(z.bytes, z64), put32(z.bytes, 1);
  }
  z.end = z.bytes.size();
  put32(z.bytes, 0x06054b50), put16(z.bytes, 0), put16(z.bytes, 0);
  put16(z.bytes, zip64 ? 0xFFFF : uint16_t(specs.size())), put16(z.bytes, zip64 ? 0xFFFF : uint16_t(specs.size()));
  put32(z.bytes, zip64 ? 0xFFFFFFFF : uint32_t(central.size()));
  put32(z.bytes, zip64 ? 0xFFFFFFFF : uint32_t(cdOffset));
  put16(z.bytes, 0);
  return z;
}

std::vector<ZipEntrySpec> twoEntries() {
  return {{"archive/data.pkl", std::string(100, 'a')}, {"archive/code/m.py", std::string(300, 'b'), true}};
}

std::string problemOf(const std::string& bytes, const ir::ArchiveLimits& limits = {}) {
  auto r = ir::checkZipArchive(bytes, limits);
  return r.problem;
}

// Offsets of central-header fields (PKWARE APPNOTE).
constexpr size_t kCdFlags = 8, kCdMethod = 10, kCdCompressed = 20, kCdUncompressed = 24, kCdOffset = 42;
constexpr size_t kCdName = 46, kCdExternalAttributes = 38;
constexpr size_t kLocalCompressed = 18, kLocalUncompressed = 22;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "ptopt-archive-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path / name, std::ios::binary) << bytes;
    return (path / name).string();
  }
};

}  // namespace

TEST_CASE("crc32 gives the standard check value and chains") {
  CHECK(ir::crc32("123456789", 9) == 0xCBF43926u);
  CHECK(ir::crc32("", 0) == 0u);
  std::string data;
  for (int i = 0; i < 1000; ++i) data += char((i * 7919) & 0xFF);
  for (size_t n : {1, 7, 8, 9, 63, 64, 65, 999, 1000}) {
    auto expected = uint32_t(::crc32(0, reinterpret_cast<const Bytef*>(data.data()), uInt(n)));
    CHECK(ir::crc32(data.data(), n) == expected);
    CHECK(ir::crc32(data.data() + n / 3, n - n / 3, ir::crc32(data.data(), n / 3)) == expected);
  }
}

TEST_CASE("archives LibTorch writes pass the check") {
  std::string bytes = saveToString(makeModule());
  auto r = ir::checkZipArchive(bytes);
  INFO(r.problem);
  REQUIRE(r.ok());
  bool stored = false, deflated = false, code = false, data = false;
  for (const auto& e : r.entries) {
    stored |= e.method == 0;
    deflated |= e.method == 8;
    code |= e.name.find("/code/") != std::string::npos;
    data |= e.name.find("/data.pkl") != std::string::npos;
  }
  CHECK(stored);
  CHECK(deflated);
  CHECK(code);
  CHECK(data);
}

TEST_CASE("hand-made archives pass, with and without zip64") {
  CHECK(problemOf(buildZip(twoEntries()).bytes) == "");
  CHECK(problemOf(buildZip(twoEntries(), true).bytes) == "");
}

TEST_CASE("every truncation of a real archive is rejected") {
  std::string bytes = saveToString(makeModule());
  for (size_t n = 0; n < bytes.size(); ++n) {
    INFO("truncated to " << n << " of " << bytes.size() << " bytes");
    CHECK_FALSE(ir::checkZipArchive(std::string_view(bytes).substr(0, n)).ok());
  }
}

TEST_CASE("every byte flip in an entry's data is caught and names the entry") {
  std::string bytes = saveToString(makeModule());
  auto r = ir::checkZipArchive(bytes);
  REQUIRE(r.ok());
  for (const auto& e : r.entries) {
    for (uint64_t at = e.dataOffset; at < e.dataOffset + e.compressedSize; ++at) {
      std::string flipped = bytes;
      flipped[at] = char(flipped[at] ^ 0x01);
      INFO("bit 0 flipped at offset " << at << " in " << e.name);
      CHECK_THAT(problemOf(flipped), Catch::Contains(e.name));
    }
  }
}

TEST_CASE("a flip the check lets through leaves an archive LibTorch loads and runs the same") {
  // Timestamps, version fields, attributes and alignment padding are not
  // checked: flipping them must be harmless.
  torch::jit::Module original = makeModule();
  std::string bytes = saveToString(original);
  auto x = torch::randn({16, 3});
  auto expected = original.forward({x}).toTensor();
  size_t caught = 0, harmless = 0;
  for (size_t at = 0; at < bytes.size(); ++at) {
    std::string flipped = bytes;
    flipped[at] = char(flipped[at] ^ 0x10);
    if (!ir::checkZipArchive(flipped).ok()) {
      ++caught;
      continue;
    }
    ++harmless;
    INFO("flip at offset " << at << " passed the check");
    std::istringstream in(flipped);
    torch::jit::Module reloaded;
    REQUIRE_NOTHROW(reloaded = torch::jit::load(in));
    CHECK(torch::equal(reloaded.forward({x}).toTensor(), expected));
  }
  WARN(caught << " flips caught, " << harmless << " harmless");
  CHECK(caught > harmless);
}

TEST_CASE("hand-made damage is named") {
  SECTION("duplicate names") {
    CHECK_THAT(problemOf(buildZip({{"a/x", "1"}, {"a/x", "2"}}).bytes), Catch::Contains("'a/x' appears twice"));
  }
  SECTION("unsafe or odd names") {
    CHECK_THAT(problemOf(buildZip({{"a/../x", "1"}}).bytes), Catch::Contains("'..'"));
    CHECK_THAT(problemOf(buildZip({{"/etc/x", "1"}}).bytes), Catch::Contains("absolute path"));
    CHECK_THAT(problemOf(buildZip({{std::string("a/\x01x"), "1"}}).bytes), Catch::Contains("'a/\\x01x'"));
    CHECK_THAT(problemOf(buildZip({{"", "1"}}).bytes), Catch::Contains("empty name"));
  }
  SECTION("other compression methods, encryption") {
    auto z = buildZip(twoEntries());
    z.bytes[z.centralHeader[0] + kCdMethod] = 12;  // bzip2
    CHECK_THAT(problemOf(z.bytes), Catch::Contains("compression method 12") && Catch::Contains("PyTorch writes only"));
    z = buildZip(twoEntries());
    z.bytes[z.centralHeader[1] + kCdFlags] |= 1;
    CHECK_THAT(problemOf(z.bytes), Catch::Contains("'archive/code/m.py' is encrypted"));
  }
  SECTION("a file marked as a folder (LibTorch would read nothing from it)") {
    auto z = buildZip(twoEntries());
    z.bytes[z.centralHeader[0] + kCdExternalAttributes] |= 0x10;
    CHECK_THAT(problemOf(z.bytes), Catch::Contains("'archive/data.pkl' is marked as a folder"));
    CHECK(problemOf(buildZip({{"archive/", ""}, {"archive/data.pkl", "x"}}).bytes) == "");
  }
  SECTION("no entries") {
    std::string empty;
    put32(empty, 0x06054b50), put16(empty, 0), put16(empty, 0), put16(empty, 0), put16(empty, 0);
    put32(empty, 0), put32(empty, 0), put16(empty, 0);
    CHECK_THAT(problemOf(empty), Catch::Contains("no entries"));
  }
  SECTION("bytes after the end record") {
    CHECK_THAT(problemOf(buildZip(twoEntries()).bytes + "junk"), Catch::Contains("does not end the file"));
  }
  SECTION("overlapping entries") {
    auto z = buildZip(twoEntries());
    // The first entry claims 20 more bytes: they are the second's header.
    for (size_t at : {z.centralHeader[0] + kCdCompressed, z.centralHeader[0] + kCdUncompressed,
                      z.localHeader[0] + kLocalCompressed, z.localHeader[0] + kLocalUncompressed})
      set32(z.bytes, at, 120);
    CHECK_THAT(problemOf(z.bytes), Catch::Contains("overlap"));
  }
  SECTION("huge declared sizes") {
    auto z = buildZip(twoEntries(), true);
    // zip64 extra of the first central header: id, size, uncompressed, compressed, offset.
    size_t extra = z.centralHeader[0] + kCdName + twoEntries()[0].name.size();
    set64(z.bytes, extra + 4, 1ull << 40);
    set64(z.bytes, extra + 12, 1ull << 40);
    CHECK_THAT(problemOf(z.bytes), Catch::Contains("'archive/data.pkl' declares 1099511627776 bytes") &&
                                       Catch::Contains("past the end"));
    z = buildZip(twoEntries(), true);
    set64(z.bytes, extra + 20, 1ull << 62);  // local header offset
    CHECK_THAT(problemOf(z.bytes), Catch::Contains("local header offset"));
  }
  SECTION("a deflated entry declaring a zip-bomb size") {
    auto z = buildZip(twoEntries(), true);
    size_t extra = z.centralHeader[1] + kCdName + twoEntries()[1].name.size();
    set64(z.bytes, extra + 4, 1ull << 40);
    CHECK_THAT(problemOf(z.bytes), Catch::Contains("more than deflate can produce"));
    ir::ArchiveLimits small;
    small.maxInflatedEntryBytes = 100;
    CHECK_THAT(problemOf(buildZip(twoEntries()).bytes, small), Catch::Contains("(limit 100)"));
    z = buildZip(twoEntries());
    set32(z.bytes, z.centralHeader[1] + kCdUncompressed, 200);  // really 300
    set32(z.bytes, z.localHeader[1] + kLocalUncompressed, 200);
    CHECK_THAT(problemOf(z.bytes), Catch::Contains("inflates to more than its declared 200 bytes"));
  }
  SECTION("a central directory that does not match its end record") {
    auto z = buildZip(twoEntries());
    z.bytes[z.end + 8] = z.bytes[z.end + 10] = 3;  // three entries declared, two present
    CHECK_THAT(problemOf(z.bytes), Catch::Contains("entries"));
    z = buildZip(twoEntries());
    z.bytes[z.end + 8] = z.bytes[z.end + 10] = 1;
    CHECK_THAT(problemOf(z.bytes), Catch::Contains("bytes after its last entry"));
  }
  SECTION("a local header in the wrong place") {
    auto z = buildZip(twoEntries());
    set32(z.bytes, z.centralHeader[1] + kCdOffset, uint32_t(z.localHeader[1] + 1));
    CHECK_THAT(problemOf(z.bytes), Catch::Contains("'archive/code/m.py': no local header"));
  }
}

TEST_CASE("loadTorchScript rejects bad files with a reason and a hint") {
  TempDir dir;
  std::string good = saveToString(makeModule());
  CHECK_NOTHROW(ir::loadTorchScript(dir.write("good.pt", good)));
  CHECK_THROWS_WITH(ir::loadTorchScript(dir.write("empty.pt", "")), Catch::Contains("empty file, 0 bytes"));
  CHECK_THROWS_WITH(ir::loadTorchScript(dir.path.string()), Catch::Contains("is a directory"));
  CHECK_THROWS_WITH(ir::loadTorchScript(dir.write("cut.pt", good.substr(0, good.size() - 30))),
                    Catch::Contains("damaged or truncated") && Catch::Contains("re-export"));
  std::string flipped = good;
  auto r = ir::checkZipArchive(good);
  REQUIRE(r.ok());
  flipped[r.entries[0].dataOffset] ^= 1;
  CHECK_THROWS_WITH(ir::loadTorchScript(dir.write("flipped.pt", flipped)),
                    Catch::Contains("CRC-32 mismatch") && Catch::Contains(r.entries[0].name));
  CHECK_THROWS_WITH(ir::loadTorchScript(dir.write("noforward.pt", saveToString(makeModule(false)))),
                    Catch::Contains("without a forward() method"));
  CHECK_THROWS_WITH(ir::loadTorchScript(dir.write("checkpoint.pt", buildZip({{"archive/data.pkl", "x"},
                                                                             {"archive/version", "3\n"}}).bytes)),
                    Catch::Contains("torch.save() checkpoint") && Catch::Contains("torch.jit.script"));
  CHECK_THROWS_WITH(ir::loadTorchScript(dir.write("plain.zip", buildZip({{"notes/readme.txt", "hi"}}).bytes)),
                    Catch::Contains("not a TorchScript file"));
  CHECK_THROWS_AS(ir::loadTorchScript("/dev/null"), ir::InputError);
}
