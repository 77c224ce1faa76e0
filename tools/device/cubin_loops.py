#!/usr/bin/env python3
"""The instruction mix of a kernel's loops, read straight from a cubin (sm_90) — no cuobjdump needed, so a
SASS change can be counted on a machine without a GPU or the disassembler (issue 6: what a k-tile of the EXL3
decode loop costs, by pipe).

Each 128-bit SASS instruction's opcode is its low 12 bits; their mnemonics are learned from cuobjdump
listings (`learn`, run where cuobjdump exists — the device — on `-sass` output; the map is committed as
tools/device/sm90_opcodes.json). A loop is a backward BRA (its byte offset: the signed high word of the
low 64 bits × 256 + bits 16..23 × 4, fitted to the listings' targets) whose body holds the shared-memory
ring's LDGSTS and at least 8 HMMA (--all: every backward branch).

  learn:  cubin_loops.py learn LISTING.txt... > tools/device/sm90_opcodes.json
  loops:  nvcc ... -gencode=arch=compute_90a,code=sm_90a -cubin kernels/cuda/cuda_exl3.cu -o x.cubin
          cubin_loops.py loops x.cubin exl3KernelILi4ELi1ELi0ELb0E

Per loop: its address range, instruction count and opcode histogram, and the instructions per pipe as
ncu names them (at least: opcodes of an uncertain pipe are not counted): alu (LOP3, SHF, PRMT, IADD3, ISETP,
SEL, LEA …) and fmaheavy (IMAD, IDP) — both take a warp instruction every second cycle per scheduler — and
tensor (HMMA/IMMA).
"""
import collections
import json
import os
import re
import signal
import struct
import sys

# Only opcodes whose pipe is certain are counted (MOV, VIADD and the min/max forms are left out).
ALU = {"LOP3", "SHF", "PRMT", "IADD3", "ISETP", "SEL", "LEA", "PLOP3", "FSEL"}
FMA_HEAVY = {"IMAD", "IDP", "IMUL"}
TENSOR = {"HMMA", "IMMA"}


def learn(paths):
    seen = collections.defaultdict(collections.Counter)
    pat = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)[^;]*;\s*/\* (0x[0-9a-f]{16}) \*/")
    for p in paths:
        try:
            lines = open(p, errors="replace").readlines()
        except OSError as e:
            sys.exit(f"learn: {e}")
        for line in lines:
            m = pat.search(line)
            if m:
                seen[int(m.group(2), 16) & 0xFFF][m.group(1)] += 1
    if not seen:
        sys.exit("learn: no SASS instructions with encodings in " + ", ".join(paths) + " (cuobjdump -sass output?)")
    clash = {hex(k): dict(v) for k, v in seen.items() if len(v) > 1}
    if clash:
        sys.exit(f"learn: opcodes with more than one mnemonic: {clash}")
    json.dump({str(k): v.most_common(1)[0][0] for k, v in sorted(seen.items())}, sys.stdout, indent=0)
    print()


def sections(data):
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit("loops: not a 64-bit ELF (a cubin)")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = secs[shstrndx][4]
    for s in secs:
        name = data[strtab + s[0]:data.index(b"\0", strtab + s[0])].decode()
        yield name, s[4], s[5]


def pipes(c):
    return (f"alu {sum(v for k, v in c.items() if k in ALU)}, fmaheavy {sum(v for k, v in c.items() if k in FMA_HEAVY)}, "
            f"tensor {sum(v for k, v in c.items() if k in TENSOR)}")


def loops(cubin, kernel, every, mapPath):
    try:
        opmap = {int(k): v for k, v in json.load(open(mapPath)).items()}
        data = open(cubin, "rb").read()
    except (OSError, ValueError) as e:
        sys.exit(f"loops: {e}")
    found = False
    for name, off, size in sections(data):
        if not (name.startswith(".text.") and kernel in name):
            continue
        found = True
        words = [struct.unpack_from("<Q", data, off + i)[0] for i in range(0, size, 16)]
        ops = [opmap.get(w & 0xFFF, "?%03x" % (w & 0xFFF)) for w in words]
        print(f"{name[6:]}: {len(words)} instructions; {pipes(collections.Counter(ops))}")
        spans = []
        for i, w in enumerate(words):
            if ops[i] != "BRA":
                continue
            rel = struct.unpack("<i", struct.pack("<I", w >> 32))[0] * 256 + ((w >> 16) & 0xFF) * 4
            if rel < 0:
                t = (16 * i + 16 + rel) // 16
                body = ops[t:i + 1]
                if every or ("LDGSTS" in body and body.count("HMMA") >= 8):
                    spans.append((t, i))
        # The innermost ones: a backward branch around a whole unit (a retry of a divergent shuffle, say)
        # holds the loops too.
        for t, i in spans:
            if any((t2, i2) != (t, i) and t <= t2 and i2 <= i for t2, i2 in spans):
                continue
            c = collections.Counter(ops[t:i + 1])
            print(f"  loop {16 * t:#x}-{16 * i:#x}: {i + 1 - t} instructions; {pipes(c)}")
            print("    " + " ".join(f"{k}:{v}" for k, v in c.most_common()))
    if not found:
        sys.exit(f"loops: no function whose name holds '{kernel}' in {cubin}")


def main(argv):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    here = os.path.dirname(os.path.abspath(__file__))
    if len(argv) >= 2 and argv[0] == "learn":
        learn(argv[1:])
    elif len(argv) >= 3 and argv[0] == "loops":
        loops(argv[1], argv[2], "--all" in argv[3:], os.path.join(here, "sm90_opcodes.json"))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
