#!/usr/bin/env python3
"""The loops of each kernel in a cubin, object file or executable, read from its SASS: per function, every loop
(a backward branch and the instructions it spans, nested ones included) with its size, its instruction mix and
its local-memory traffic (STL/LDL: spills, or an array the compiler could not keep in registers, such as one
read with a runtime index). A loop's static size counts every path through it; read the hot path with --dump.

With --issue it lists instead each wgmma issue window: the wgmma instructions issued between two waits for
wgmma (WARPGROUP.DEPBAR), from the last mbarrier wait before the first of them (the wait for the operands' tiles)
to the last, with the named barriers (ping-pong turns) and the uniform-register moves in between: what a warp
executes between getting its operands and handing the tensor cores its chains.

With --same-as OTHER it compares instead each function's instructions with OTHER's (branch labels aside): a change
whose kernels compile to the same instructions needs no new GPU run to keep what the GPU tier measured.

usage: tools/dev/sass_loops.py FILE [--function SUBSTRING] [--min-size N] [--dump START END] [--issue]
                               [--same-as OTHER]
  FILE            anything cuobjdump -sass reads (nvcc -cubin gives one quickly: see tools/dev/README.md)
  --function S    only functions whose mangled name contains S
  --min-size N    loops of at least N instructions (default 64)
  --dump A B      print instructions A..B (indices as listed) of the one selected function
  --issue         the wgmma issue windows instead of the loops
  --same-as OTHER the functions whose instructions differ from OTHER's (exit 1 if any does)

Needs cuobjdump and nvdisasm on PATH (the CUDA toolkit's; PyPI's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm
wheels carry them for a machine without the toolkit).
"""
import argparse
import collections
import re
import subprocess
import sys

INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BRANCH = re.compile(r"\bBRA(?:\.\w+)*\s+(?:[!\w]+,\s*)?0x([0-9a-f]+)")
# Opcode families worth counting in a loop: tensor-core, copies, shared and local memory, transcendentals, ALU.
FAMILIES = [("mma", ("HMMA", "HGMMA", "QGMMA", "IMMA")), ("global->smem", ("LDGSTS", "UBLKCP", "UTMALDG")),
            ("smem", ("LDS", "LDSM", "STS")), ("local", ("STL", "LDL")), ("mufu", ("MUFU",)),
            ("fp32", ("FMUL", "FADD", "FFMA", "FMNMX", "FSEL", "FSETP")),
            ("int", ("IMAD", "IADD3", "ISETP", "LOP3", "LEA", "SHF", "SEL", "VIADD")),
            ("shfl/vote", ("SHFL", "VOTE")), ("branch", ("BRA", "BSSY", "BSYNC")),
            ("to uniform", ("R2UR",)), ("uniform", ("UMOV", "UIADD3", "ULOP3", "USHF", "ULEA", "UIMAD"))]


def disassemble(path):
    try:
        return subprocess.run(["cuobjdump", "-sass", path], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"sass_loops: cuobjdump -sass {path} failed: {getattr(e, 'stderr', '') or e}")


def functions(sass):
    name, body = None, []
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name:
                yield name, body
            name, body = m.group(1), []
            continue
        m = INSTRUCTION.match(line)
        if m and name:
            body.append((int(m.group(1), 16), m.group(2)))
    if name:
        yield name, body


def opcode(text):
    words = [w for w in text.split() if not w.startswith("@")]
    return words[0].split(".")[0] if words else ""


def mix(body):
    counts = collections.Counter()
    for _, text in body:
        op = opcode(text)
        for family, ops in FAMILIES:
            if op in ops:
                counts[family] += 1
    return counts


def loops(body, min_size):
    index = {addr: i for i, (addr, _) in enumerate(body)}
    # Out-of-line blocks after the last EXIT (the warp-divergence fallbacks of shuffles and votes) branch back into
    # the body without being loops.
    exits = [i for i, (_, text) in enumerate(body) if opcode(text) == "EXIT"]
    end = exits[-1] if exits else len(body)
    found = []
    for i, (addr, text) in enumerate(body[:end]):
        m = BRANCH.search(text)
        if m and int(m.group(1), 16) < addr and int(m.group(1), 16) in index:
            head = index[int(m.group(1), 16)]
            if i - head + 1 >= min_size:
                found.append((head, i))
    # A loop appears once however many branches close it: keep the widest span per head.
    widest = {}
    for head, tail in found:
        widest[head] = max(widest.get(head, tail), tail)
    return sorted(widest.items())


WGMMA = ("HGMMA", "QGMMA")  # wgmma on 16-bit and tf32 operands, and on fp8


def issue_windows(body):
    """(start, first wgmma, last wgmma, named-barrier syncs) per group of wgmma issued between two wgmma waits."""
    windows, group, floor = [], [], 0
    for i, (_, text) in enumerate(body + [(0, "WARPGROUP.DEPBAR.LE gsb0, 0x0")]):
        op, full = opcode(text), text.split()
        if op in WGMMA:
            group.append(i)
        elif op == "WARPGROUP" and any(w.startswith("WARPGROUP.DEPBAR") for w in full):
            if group:
                waits = [j for j in range(floor, group[0]) if "SYNCS.PHASECHK" in body[j][1]]
                start = waits[-1] if waits else group[0]
                turns = [j - start for j in range(start, group[-1])
                         if opcode(body[j][1]) == "BAR" and ".SYNC" in body[j][1]]
                windows.append((start, group[0], group[-1], turns))
            group, floor = [], i + 1
    return windows


LABEL = re.compile(r"\.L_x_\d+|0x[0-9a-f]+(?=\s*(?:$|;))")


def same_as(selected, other_sass, function):
    """Functions of `selected` whose instructions differ from the same-named function of other_sass, branch targets
    and label numbers aside (they move when any function of the file grows). Returns the count that differ."""
    mine_all = dict(selected)
    other = {n: b for n, b in functions(other_sass) if function in n}
    names = sorted(set(other) | set(mine_all))
    normalized = lambda body: [LABEL.sub("L", t) if BRANCH.search(t) else t for _, t in body]  # noqa: E731
    differ = 0
    for name in names:
        mine, theirs = mine_all.get(name), other.get(name)
        if mine is None or theirs is None:
            print(f"only in {'the other file' if mine is None else 'this file'}: {name}")
            differ += 1
            continue
        a, b = normalized(mine), normalized(theirs)
        if a != b:
            first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            print(f"differs: {name}\n  {len(a)} against {len(b)} instructions; first difference at {first}: "
                  f"{a[first] if first < len(a) else '(end)'} | {b[first] if first < len(b) else '(end)'}")
            differ += 1
    print(f"{len(names) - differ} of {len(names)} functions the same")
    return differ


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--function", default="")
    ap.add_argument("--min-size", type=int, default=64)
    ap.add_argument("--dump", nargs=2, type=int, metavar=("START", "END"))
    ap.add_argument("--issue", action="store_true")
    ap.add_argument("--same-as", metavar="OTHER")
    args = ap.parse_args()
    sass = disassemble(args.file)
    selected = [(n, b) for n, b in functions(sass) if args.function in n]
    if not selected:
        sys.exit(f"sass_loops: no function with '{args.function}' in its name")
    if args.same_as:
        sys.exit(1 if same_as(selected, disassemble(args.same_as), args.function) else 0)
    if args.dump:
        if len(selected) != 1:
            sys.exit(f"sass_loops: --dump needs one function; --function matches {len(selected)}")
        body = selected[0][1]
        for i in range(max(0, args.dump[0]), min(len(body), args.dump[1] + 1)):
            print(f"{i:6d}  {body[i][1]}")
        return
    for name, body in selected:
        total = mix(body)
        print(f"{name}\n  {len(body)} instructions, local memory {total['local']} (STL/LDL)")
        if args.issue:
            for start, first, last, turns in issue_windows(body):
                counts = mix(body[start:last + 1])
                shown = ", ".join(f"{f} {counts[f]}" for f, _ in FAMILIES if counts[f])
                turn = f", turn barrier at +{', +'.join(map(str, turns))}" if turns else ""
                print(f"  issue {start}-{last} ({last - start + 1} instructions, first wgmma at +{first - start}{turn}): "
                      f"{shown}")
            continue
        for head, tail in loops(body, args.min_size):
            counts = mix(body[head:tail + 1])
            shown = ", ".join(f"{f} {counts[f]}" for f, _ in FAMILIES if counts[f])
            print(f"  loop {head}-{tail} ({tail - head + 1} instructions): {shown}")


if __name__ == "__main__":
    main()
