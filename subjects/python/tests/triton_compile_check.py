"""Compiles the Triton example's kernel (subjects/python/triton_attention.py) for sm_90 without a GPU: every dtype at
the smallest and largest head-dim block (sink and softcap are runtime values), fp32's dropout with its mask dump, and the
planted bug, through Triton's compiler down to a cubin, at the pipeline depth the launch uses; each must fit Hopper's
shared memory per block (a launch past it fails on the GPU with OutOfResources). ctest
triton_example_compiles (label cpu) runs it where Triton imports and skips (exit 77) where it does not; the GPU tier's
subject_triton_example runs the kernel itself.

    python3 subjects/python/tests/triton_compile_check.py
"""
import itertools
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
try:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
except ImportError:
    print("flashcheck-skip: triton is not importable here")
    sys.exit(77)

import triton_attention

POINTERS = ("Q", "K", "V", "O")
SHARED_LIMIT = 232448  # bytes of shared memory one block may opt into on sm_90 (227 KiB)
FLAGS = ("IEEE", "TAIL_BUG", "DROPOUT", "DUMP", "BLOCK_M", "BLOCK_N", "BLOCK_D")


def signature(dtype):
    sig = {}
    for name in triton_attention._forward.arg_names:
        if name in POINTERS:
            sig[name] = "*" + dtype
        elif name in ("LSE", "SINK"):
            sig[name] = "*fp32"
        elif name == "MASK":
            sig[name] = "*u8"
        elif name in ("threshold", "seed_lo", "seed_hi", "offset_lo", "offset_hi", "has_sink"):
            sig[name] = "i32"
        elif name in ("scale", "softcap", "keep_scale"):
            sig[name] = "fp32"
        elif name in FLAGS:
            sig[name] = "constexpr"
        else:
            sig[name] = "i32"
    return sig


def main():
    target = GPUTarget("cuda", 90, 32)
    compiled = 0
    dtypes = ("fp32", "fp16", "bf16")
    variants = [(dtype, False, block_d, False) for dtype, block_d in itertools.product(dtypes, (16, 256))]
    variants.append(("fp16", True, 64, False))
    variants.append(("fp32", False, 64, True))  # fp32's dropout, with its mask dump
    for dtype, bug, block_d, dropout in variants:
        constants = dict(IEEE=dtype == "fp32", TAIL_BUG=bug, DROPOUT=dropout,
                         DUMP=dropout, BLOCK_M=triton_attention.BLOCK_M, BLOCK_N=triton_attention.BLOCK_N,
                         BLOCK_D=block_d)
        stages = triton_attention.num_stages(4 if dtype == "fp32" else 2, block_d)
        kernel = triton.compile(ASTSource(fn=triton_attention._forward, signature=signature(dtype),
                                          constexprs=constants), target=target, options={"num_stages": stages})
        if not kernel.asm.get("cubin"):
            print(f"FAIL: {dtype} {constants}: no cubin")
            return 1
        if kernel.metadata.shared > SHARED_LIMIT:
            print(f"FAIL: {dtype} {constants}, {stages} stages: {kernel.metadata.shared} bytes of shared memory, "
                  f"past sm_90's {SHARED_LIMIT}")
            return 1
        compiled += 1
    print(f"ok: {compiled} variants of the Triton example compiled for sm_90, each within its shared memory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
