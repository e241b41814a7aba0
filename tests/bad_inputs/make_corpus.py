#!/usr/bin/python3
"""Generate the bad-input corpus: files ptopt must refuse with exit code 2.

Usage:
    /usr/bin/python3 tests/bad_inputs/make_corpus.py OUT_DIR

Writes OUT_DIR/good/model.pt (a small scripted conv model every bad file is
derived from; ptopt must accept it) and OUT_DIR/bad/*, one file per case:

  truncated-*     the model cut at many offsets (local headers, tensor data,
                  the central directory, the zip64 records, the end record)
  flip-*          one byte inverted in a field that matters (signatures,
                  names, sizes, offsets, CRCs, tensor data, deflated code,
                  data.pkl, the end records)
  size-*          entry sizes beyond the file, 2^32-2, 2^40 (zip64), a
                  deflated entry declaring a zip-bomb size, a real 1.1 GiB
                  bomb of zeros
  archive-*       other archives and files: a zip of text files, a bzip2
                  entry, a tar, a gzip, random bytes, text, a zip with no
                  entries (32-bit and zip64), trailing bytes after the archive
  torch-save-*    torch.save of a state_dict, of a pickled nn.Module, legacy
                  (non-zip) pickles of both
  script-*        TorchScript without forward, and archives with intact CRCs
                  but broken content (code that does not compile, an unknown
                  operator, a cut data.pkl, a missing tensor, an unsupported
                  version): these reach LibTorch, whose errors must be shown
  empty.pt, a-directory.pt

OUT_DIR/corpus.json lists every bad file with a one-line description.
"""

import io
import json
import os
import random
import shutil
import struct
import sys
import tarfile
import gzip
import zipfile
import zlib

import torch
import torch.nn as nn

# Zip record signatures and the offsets of the fields we damage (PKWARE APPNOTE).
LOCAL_SIG, CENTRAL_SIG = 0x04034B50, 0x02014B50
END_SIG, ZIP64_END_SIG, ZIP64_LOCATOR_SIG = 0x06054B50, 0x06064B50, 0x07064B50


class Corpus:
    def __init__(self, out_dir):
        self.bad_dir = os.path.join(out_dir, "bad")
        self.manifest = {}

    def add(self, name, data, what):
        assert name not in self.manifest, name
        with open(os.path.join(self.bad_dir, name), "wb") as fh:
            fh.write(data)
        self.manifest[name] = what


def parse_zip(data):
    """Offsets of every record of an archive torch.jit.save wrote."""
    end = data.rindex(struct.pack("<I", END_SIG))
    entries, cd_offset = [], None
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        infos = z.infolist()
    pos = data.index(struct.pack("<I", CENTRAL_SIG))
    cd_offset = pos
    for info in infos:
        assert struct.unpack_from("<I", data, pos)[0] == CENTRAL_SIG
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, pos + 28)
        local = info.header_offset
        lname, lextra = struct.unpack_from("<HH", data, local + 26)
        data_offset = local + 30 + lname + lextra
        entries.append(dict(name=info.filename, central=pos, local=local, data=data_offset,
                            size=info.compress_size, method=info.compress_type,
                            descriptor=data_offset + info.compress_size))
        pos += 46 + name_len + extra_len + comment_len
    zip64_end = data.rfind(struct.pack("<I", ZIP64_END_SIG), 0, end)
    locator = data.rfind(struct.pack("<I", ZIP64_LOCATOR_SIG), 0, end)
    return dict(entries=entries, cd_offset=cd_offset, end=end, zip64_end=zip64_end, locator=locator)


def flip(data, at):
    b = bytearray(data)
    b[at] ^= 0xFF
    return bytes(b)


def patch(data, at, fmt, value):
    b = bytearray(data)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


def short(name):
    return name.split("/", 1)[1].replace("/", "_").replace(".", "_")


def write_zip(entries, zip64=False, sizes=None):
    """A minimal zip writer (no data descriptors) that can lie about sizes.
    entries: [(name, payload, method, crc, compressed_size, uncompressed_size)];
    with zip64 every size and offset goes to a zip64 extra field."""
    out, central = bytearray(), bytearray()
    for name, payload, method, crc, csize, usize in entries:
        offset = len(out)
        nb = name.encode()
        extra = struct.pack("<HHQQ", 1, 16, usize, csize) if zip64 else b""
        c32 = 0xFFFFFFFF if zip64 else csize
        u32 = 0xFFFFFFFF if zip64 else usize
        out += struct.pack("<IHHHHHIIIHH", LOCAL_SIG, 45, 0, method, 0, 0, crc, c32, u32, len(nb), len(extra))
        out += nb + extra + payload
        cextra = struct.pack("<HHQQQ", 1, 24, usize, csize, offset) if zip64 else b""
        central += struct.pack("<IHHHHHHIIIHHHHHII", CENTRAL_SIG, 45, 45, 0, method, 0, 0, crc, c32, u32,
                               len(nb), len(cextra), 0, 0, 0, 0, 0xFFFFFFFF if zip64 else offset)
        central += nb + cextra
    cd_offset = len(out)
    out += central
    n = len(entries)
    if zip64:
        z64 = len(out)
        out += struct.pack("<IQHHIIQQQQ", ZIP64_END_SIG, 44, 45, 45, 0, 0, n, n, len(central), cd_offset)
        out += struct.pack("<IIQI", ZIP64_LOCATOR_SIG, 0, z64, 1)
        out += struct.pack("<IHHHHIIH", END_SIG, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    else:
        out += struct.pack("<IHHHHIIH", END_SIG, 0, 0, n, n, len(central), cd_offset, 0)
    return bytes(out)


def repack(model_bytes, change=None, drop=None, zip64=False, lie=None):
    """The model's entries re-written with write_zip (stored), optionally
    with one entry's content changed (CRC recomputed), one dropped, or one
    entry's declared sizes replaced: lie = (name_suffix, csize, usize)."""
    entries = []
    with zipfile.ZipFile(io.BytesIO(model_bytes)) as z:
        for info in z.infolist():
            data = z.read(info)
            if drop and info.filename.endswith(drop):
                continue
            if change and info.filename.endswith(change[0]):
                data = change[1](data)
            csize = usize = len(data)
            if lie and info.filename.endswith(lie[0]):
                csize, usize = lie[1], lie[2]
            entries.append((info.filename, data, 0, zlib.crc32(data), csize, usize))
    return write_zip(entries, zip64=zip64)


class ConvModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class OnlyExported(nn.Module):
    """A module whose only method is exported: TorchScript without forward."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(3))

    @torch.jit.export
    def scaled(self, x):
        return x * self.scale


def torch_save_bytes(obj, **kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf, **kwargs)
    return buf.getvalue()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(os.path.join(out_dir, "good"))
    os.makedirs(os.path.join(out_dir, "bad"))
    torch.manual_seed(0)
    rng = random.Random(0)

    model = ConvModel().eval()
    good_path = os.path.join(out_dir, "good", "model.pt")
    torch.jit.script(model).save(good_path)
    base = open(good_path, "rb").read()
    zp = parse_zip(base)
    corpus = Corpus(out_dir)

    # Sanity: a repack without changes is a valid model (so the repacked
    # cases below are bad only for the reason they name).
    torch.jit.load(io.BytesIO(repack(base)))

    # Every field is damaged in a few entries (a tensor, data.pkl, deflated
    # code, the last entry), a few fields in all the others.
    deflated = [e for e in zp["entries"] if e["method"] == zipfile.ZIP_DEFLATED]
    tensors = [e for e in zp["entries"] if "/data/" in e["name"]]
    pickles = [e for e in zp["entries"] if e["name"].endswith("/data.pkl")]
    representative = [tensors[0], pickles[0], deflated[0], zp["entries"][-1]]

    # ---------------------------------------------------------- truncations
    cuts = {1, 2, 3, 4, 10, 29, 30, 31, 45, 63, 64, 65}
    cuts.update(range(100, len(base), max(1, len(base) // 25)))
    for e in representative:
        cuts.update({e["local"] + 1, e["data"], e["data"] + e["size"] // 2, e["descriptor"] + 8})
    cuts.update(zp["cd_offset"] + k for k in (0, 1, 46, 100))
    cuts.update(range(zp["cd_offset"], zp["zip64_end"], max(1, (zp["zip64_end"] - zp["cd_offset"]) // 10)))
    cuts.update({zp["zip64_end"], zp["zip64_end"] + 30, zp["locator"], zp["locator"] + 10, zp["end"],
                 zp["end"] + 10, len(base) - 1})
    for n in sorted(c for c in cuts if 0 < c < len(base)):
        corpus.add("truncated-%06d.pt" % n, base[:n], "the model cut to %d of %d bytes" % (n, len(base)))

    # ------------------------------------------------------------ byte flips
    for e in zp["entries"]:
        s = short(e["name"])
        where = {
            "local-signature": e["local"], "local-method": e["local"] + 8,
            "local-name-length": e["local"] + 26, "local-extra-length": e["local"] + 28,
            "local-name": e["local"] + 30 + 3,
            "central-signature": e["central"], "central-method": e["central"] + 10,
            "central-crc": e["central"] + 16, "central-compressed-size": e["central"] + 20,
            "central-size": e["central"] + 24, "central-name-length": e["central"] + 28,
            "central-extra-length": e["central"] + 30, "central-comment-length": e["central"] + 32,
            "central-offset": e["central"] + 42, "central-name": e["central"] + 46 + 5,
            "descriptor-crc": e["descriptor"] + 4,
        }
        if e["size"] > 0:
            where.update({"data-first": e["data"], "data-middle": e["data"] + e["size"] // 2,
                          "data-last": e["data"] + e["size"] - 1})
        if e not in representative:
            where = {k: v for k, v in where.items()
                     if k in ("local-signature", "central-crc", "central-offset", "data-middle")}
        for field, at in where.items():
            corpus.add("flip-%s-%s.pt" % (s, field), flip(base, at),
                       "one byte inverted: %s of entry %s" % (field, e["name"]))
    for label, at in [("end-signature", zp["end"]), ("end-entries", zp["end"] + 10),
                      ("end-cd-size", zp["end"] + 12), ("end-cd-offset", zp["end"] + 16),
                      ("end-comment-length", zp["end"] + 20),
                      ("zip64-end-signature", zp["zip64_end"]), ("zip64-end-entries", zp["zip64_end"] + 32),
                      ("zip64-end-cd-size", zp["zip64_end"] + 40), ("zip64-end-cd-offset", zp["zip64_end"] + 48),
                      ("zip64-locator-signature", zp["locator"]), ("zip64-locator-offset", zp["locator"] + 8)]:
        corpus.add("flip-%s.pt" % label, flip(base, at), "one byte inverted: %s" % label)
    for i in range(20):  # random single-byte flips in the tensor data
        e = tensors[i % 2]
        at = e["data"] + rng.randrange(e["size"])
        corpus.add("flip-random-tensor-%02d.pt" % i, flip(base, at),
                   "one byte inverted at offset %d in tensor data %s" % (at, e["name"]))

    # -------------------------------------------------------- declared sizes
    first_data, code = tensors[0], deflated[0]
    for label, value in [("file-size-plus-one", len(base) + 1), ("4g-minus-2", 0xFFFFFFFE)]:
        b = patch(base, first_data["central"] + 20, "<I", value)
        corpus.add("size-compressed-%s.pt" % label, patch(b, first_data["central"] + 24, "<I", value),
                   "entry %s declares %d bytes" % (first_data["name"], value))
    corpus.add("size-uncompressed-only.pt", patch(base, first_data["central"] + 24, "<I", 7),
               "a stored entry whose two sizes differ")
    corpus.add("size-zip64-2pow40.pt", repack(base, zip64=True, lie=("data/0", 1 << 40, 1 << 40)),
               "zip64: a tensor entry declares 2^40 bytes")
    corpus.add("size-zip64-2pow63.pt", repack(base, zip64=True, lie=("data.pkl", 1 << 63, 1 << 63)),
               "zip64: data.pkl declares 2^63 bytes")
    corpus.add("size-deflate-bomb-declared.pt",
               patch(base, code["central"] + 24, "<I", 0xFFFFFFF0),
               "deflated %s declares 4 GiB from %d bytes" % (code["name"], code["size"]))
    # A real bomb: 1.1 GiB of zeros deflates to about 1 MiB.
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk, total, crc, parts = bytes(1 << 20), 1100 << 20, 0, []
    for _ in range(total // len(chunk)):
        parts.append(comp.compress(chunk))
        crc = zlib.crc32(chunk, crc)
    parts.append(comp.flush())
    bomb = b"".join(parts)
    entries = []
    with zipfile.ZipFile(io.BytesIO(base)) as z:
        for info in z.infolist():
            data = z.read(info)
            entries.append((info.filename, data, 0, zlib.crc32(data), len(data), len(data)))
    prefix = entries[0][0].split("/")[0]
    entries.append((prefix + "/code/__torch__/bomb.py", bomb, 8, crc, len(bomb), total))
    corpus.add("size-deflate-bomb-real.pt", write_zip(entries, zip64=True),
               "a code entry of 1.1 GiB zeros deflated to %d bytes" % len(bomb))

    # ------------------------------------------------------ other archives
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("notes/readme.txt", "hello\n" * 50)
        z.writestr("notes/data.csv", "a,b\n1,2\n")
    corpus.add("archive-zip-of-text.pt", buf.getvalue(), "a zip of two text files")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_BZIP2) as z:
        with zipfile.ZipFile(io.BytesIO(base)) as src:
            for info in src.infolist():
                z.writestr(info.filename, src.read(info))
    corpus.add("archive-bzip2-entries.pt", buf.getvalue(), "the model's entries compressed with bzip2")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("model.pt")
        info.size = len(base)
        t.addfile(info, io.BytesIO(base))
    corpus.add("archive-tar.pt", buf.getvalue(), "a tar holding the model")
    corpus.add("archive-gzip.pt", gzip.compress(base), "the model gzipped")
    corpus.add("archive-random-bytes.pt", bytes(rng.randrange(256) for _ in range(4096)), "4 KiB of random bytes")
    corpus.add("archive-text.pt", b"this is not a model\n", "a text file")
    corpus.add("archive-pk-then-random.pt", b"PK\x03\x04" + bytes(rng.randrange(256) for _ in range(4096)),
               "a zip local-header signature followed by random bytes")
    corpus.add("archive-no-entries.pt", struct.pack("<IHHHHIIH", END_SIG, 0, 0, 0, 0, 0, 0, 0),
               "a zip with no entries (just an end record)")
    corpus.add("archive-no-entries-zip64.pt", write_zip([], zip64=True), "a zip64 archive with no entries")
    corpus.add("archive-trailing-bytes.pt", base + b"\0" * 100, "100 zero bytes after the model's end record")
    corpus.add("archive-concatenated.pt", base + base, "the model twice, one after the other")
    corpus.add("archive-duplicate-entry.pt",
               write_zip([(n, d, 0, zlib.crc32(d), len(d), len(d)) for n, d in
                          [("m/data.pkl", b"x"), ("m/code/a.py", b"y"), ("m/code/a.py", b"z")]]),
               "a zip with a duplicated entry name")
    corpus.add("archive-parent-path.pt",
               write_zip([(n, d, 0, zlib.crc32(d), len(d), len(d)) for n, d in
                          [("m/data.pkl", b"x"), ("m/../../etc/code/a.py", b"y")]]),
               "a zip with a '..' entry name")

    # ---------------------------------------------------------- torch.save
    corpus.add("torch-save-state-dict.pt", torch_save_bytes(model.state_dict()), "torch.save(model.state_dict())")
    corpus.add("torch-save-module.pt", torch_save_bytes(model), "torch.save(model): a pickled nn.Module")
    corpus.add("torch-save-state-dict-legacy.pt",
               torch_save_bytes(model.state_dict(), _use_new_zipfile_serialization=False),
               "torch.save(state_dict) in the legacy (non-zip) format")
    corpus.add("torch-save-module-legacy.pt", torch_save_bytes(model, _use_new_zipfile_serialization=False),
               "torch.save(model) in the legacy (non-zip) format")
    corpus.add("torch-save-tensor.pt", torch_save_bytes(torch.ones(3)), "torch.save(tensor)")

    # --------------------------------- TorchScript the pre-check lets through
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(OnlyExported()), buf)
    corpus.add("script-no-forward.pt", buf.getvalue(), "TorchScript whose only method is @torch.jit.export'ed")
    main_code = [e["name"] for e in zp["entries"] if e["name"].endswith("code/__torch__.py")]
    assert main_code, [e["name"] for e in zp["entries"]]
    corpus.add("script-code-does-not-compile.pt",
               repack(base, change=("code/__torch__.py", lambda c: c.replace(b"def forward(", b"def forward(("))),
               "valid zip, CRCs intact, forward's code does not compile")
    corpus.add("script-unknown-operator.pt",
               repack(base, change=("code/__torch__.py", lambda c: c.replace(b"torch.relu(", b"ops.nobody.nothing("))),
               "valid zip, forward calls an operator no library registers")
    corpus.add("script-cut-data-pkl.pt", repack(base, change=("/data.pkl", lambda d: d[: len(d) // 2])),
               "valid zip, CRCs intact, data.pkl cut in half")
    corpus.add("script-garbage-data-pkl.pt",
               repack(base, change=("/data.pkl", lambda d: bytes(rng.randrange(256) for _ in d))),
               "valid zip, CRCs intact, data.pkl replaced by random bytes")
    corpus.add("script-missing-tensor.pt", repack(base, drop="/data/0"), "valid zip without the tensor data/0")
    corpus.add("script-short-tensor.pt", repack(base, change=("/data/0", lambda d: d[:8])),
               "valid zip, CRCs intact, tensor data/0 holds 8 bytes instead of %d" % first_data["size"])
    corpus.add("script-version-999.pt", repack(base, change=("/version", lambda v: b"999\n")),
               "valid zip, format version 999")
    corpus.add("script-no-data-pkl.pt", repack(base, drop="/data.pkl"), "valid zip without data.pkl")

    # ------------------------------------------------------------- the rest
    corpus.add("empty.pt", b"", "an empty file, 0 bytes")
    os.makedirs(os.path.join(corpus.bad_dir, "a-directory.pt"))
    shutil.copy(good_path, os.path.join(corpus.bad_dir, "a-directory.pt", "model.pt"))
    corpus.manifest["a-directory.pt"] = "a directory (holding a model)"

    with open(os.path.join(out_dir, "corpus.json"), "w") as fh:
        json.dump(corpus.manifest, fh, indent=1, sort_keys=True)
    print("bad-input corpus: %d files in %s" % (len(corpus.manifest), corpus.bad_dir))


if __name__ == "__main__":
    main()
