#!/usr/bin/env python3
"""Lists the GPU architectures compiled into a binary, object or archive.

This machine has nvcc but no cuobjdump. nvcc puts every device image in the
ELF section `.nv_fatbin`: a sequence of fat binaries, each a 16-byte header
(magic 0xBA55ED50, version u16, header size u16, payload size u64) followed
by entries. Each entry starts with its own header: kind u16 (1 = PTX,
2 = cubin), u16, header size u32, payload size u64, ..., and the SM version
(e.g. 90) as u32 at byte 28. A cubin is runnable on that exact SM family; PTX
is compiled by the driver for that SM version or any newer GPU.

Usage: fatbin_archs.py FILE...   (ELF binaries, .o or .a archives)
Prints one line, e.g. "compute_90 sm_80 sm_90", the sorted union over FILEs;
exits 1 when a file holds no device code at all.
"""
import os
import struct
import subprocess
import sys
import tempfile

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX = 1
KIND_CUBIN = 2


def parse_fatbin_section(data):
    """Returns {"sm_90", "compute_90", ...} for a .nv_fatbin section."""
    archs = set()
    off = 0
    while off + 16 <= len(data):
        magic, _version, header_size, payload = struct.unpack_from("<IHHQ", data, off)
        if magic != FATBIN_MAGIC:
            off += 8  # fat binaries are 8-byte aligned; skip padding
            continue
        entry = off + header_size
        end = min(len(data), entry + payload)
        while entry + 32 <= end:
            kind, _, entry_header, entry_payload = struct.unpack_from("<HHIQ", data, entry)
            (sm,) = struct.unpack_from("<I", data, entry + 28)
            if kind == KIND_PTX:
                archs.add("compute_%d" % sm)
            elif kind == KIND_CUBIN:
                archs.add("sm_%d" % sm)
            if entry_header == 0:
                break  # malformed: never loop forever
            entry += entry_header + entry_payload
        off = off + header_size + max(payload, 1)
    return archs


def section_of(path, workdir):
    out = os.path.join(workdir, "section.bin")
    if os.path.exists(out):
        os.remove(out)
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", path, out],
                   check=True, stderr=subprocess.DEVNULL)
    with open(out, "rb") as f:
        return f.read()


def archs_of(path):
    with tempfile.TemporaryDirectory() as work:
        if path.endswith(".a"):
            members = os.path.join(work, "members")
            os.mkdir(members)
            subprocess.run(["ar", "x", os.path.abspath(path)], cwd=members, check=True)
            found = set()
            for name in sorted(os.listdir(members)):
                found |= parse_fatbin_section(section_of(os.path.join(members, name), work))
            return found
        return parse_fatbin_section(section_of(path, work))


def sort_key(arch):
    kind, sm = arch.split("_")
    return (kind != "compute", int(sm))


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    found = set()
    for path in argv[1:]:
        archs = archs_of(path)
        if not archs:
            print("%s: no device code (.nv_fatbin)" % path, file=sys.stderr)
            return 1
        found |= archs
    print(" ".join(sorted(found, key=sort_key)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
