/* flashcheck's bridge to kernels written in Python: a subject library (flashcheck/subject.h) that embeds CPython and
 * serves any number of Python callables as subjects. The harness's loader takes a subject spec
 *
 *     python:MODULE:FUNCTION
 *
 * (on --subject and FLASHCHECK_SUBJECT), dlopen()s this library and asks it for the descriptor of that callable.
 * MODULE is imported with the working directory and PYTHONPATH on sys.path; FUNCTION's attribute `flashcheck` (a
 * dict, subjects/python/flashcheck_subject.py writes it with a decorator) declares what fc_subject_capabilities,
 * fc_subject_arithmetic, fc_subject_limits and fc_subject_value_dims declare for a C library, by name:
 *
 *     name        str, [A-Za-z0-9._-]{1,64}            memory      "host" or "device"
 *     dtypes      ["f32", "f16", "bf16"]               masks       ["none", "causal-br", "causal-tl", "window-br", ...]
 *     head_dim    [min, max] (or head_dims: [d, ...])   head_dim_v  [min, max]: V and O of their own width (optional)
 *     layouts     ["bhsd", "bshd", "strided"]          gqa, lse, softcap, sink    bool
 *     arithmetic  {"f16": "tensor-core", ...}          key_tile    int (0: undeclared)
 *     limits      {"seqlen_k_multiple": 32, ...}       (fc_subject_limits' fields; optional)
 *     sequences   {"features": ["varlen", "seqused_k", "paged", "splits"], "page_size_multiple": 0, "max_splits": 0}
 *                 (fc_subject_sequences_v1; optional: FUNCTION then also gets the cases with sequences)
 *     backward    {"function": NAME, "arithmetic": {...}, "sink": bool, "sequences": bool, "deterministic": bool}
 *                 (fc_subject_backward_v1; optional: MODULE.NAME(problem, buffers) computes the gradients)
 *     dropout     {"arithmetic": {"f32": "general-fp32", ...}, "mask_dump": bool, "sequences": bool, "backward": bool}
 *                 (fc_subject_dropout_v1; optional: FUNCTION, and with "backward" the backward callable, also get the
 *                 dropout cases, the problem's dropout_p > 0 with dropout_seed and dropout_offset, uint64 ints; 0, 0,
 *                 0 on every other call; buffers["dropout_mask"] the mask dump's uint8 [B, Hq, Sq, Sk] view to write
 *                 when the harness asks for it, else None)
 *     fp8         {"arithmetic": "tensor-core-fp8", "descales": bool, "key_tile": int,
 *                  "key_tiles": {max_head_dim: key_tile, ...} (the tile per head dim; optional)}
 *                 (fc_subject_fp8_v1; optional: FUNCTION also gets the f8e4m3 cases, the problem's dtype "f8e4m3", Q, K
 *                 and V as e4m3 bytes (typestr "|u1", memoryview format "B"; flashcheck_subject.as_torch views them as
 *                 torch.float8_e4m3fn), O as bf16's bits, and buffers["descale_q"], ["descale_k"], ["descale_v"] fp32
 *                 [B, H_kv] views, or None (1); None on every other call)
 *
 * The call is FUNCTION(problem, buffers): `problem` a dict of fc_subject_problem's fields (dtype and mask by name,
 * plus "stream", the cudaStream_t as an int); `buffers` a dict of q, k, v, o, lse and sink (None when absent), each
 * viewing the harness's own memory, never a copy: in host memory a memoryview of shape [B, H, S, D] (LSE [B, H, S],
 * the sink [H]) with the tensor's strides, format "f" (fp32), "e" (fp16) or "H" (bf16's bits as uint16); in device
 * memory an object with __cuda_array_interface__ (version 3, typestr "<f4", "<f2", or "<u2" for bf16's bits; marked
 * writable, as torch requires, inputs included: the harness compares the inputs' bytes after the call), which
 * torch.as_tensor(x, device="cuda") aliases (flashcheck_subject.as_torch views bf16 as torch.bfloat16). With
 * sequences the layouts are attention.h's: Q, O (and dO, dQ) packed [total_q, H, D], K and V (and dK, dV) packed
 * [total_k, H, D] or paged [num_pages, page_size, H, D], LSE [H, total_q]; the index arrays cu_seqlens_q,
 * cu_seqlens_k, seqused_k and page_table come as int32 views (None where absent: all of them for a dense case) and
 * the problem carries total_q, total_k, page_size, num_pages, max_pages_per_seq and num_splits (0 and 1 when dense). The backward's buffers add d_o, dq, dk, dv and
 * dsink (written), o and lse (read). The outputs (o, lse; dq, dk, dv, dsink) are the only writable host views. The views live for the call:
 * the bridge releases the host ones when it returns, and a call that returns while the subject still holds a view (a
 * reference, or an array or tensor made from a host view) fails naming the buffer; a tensor made from a device view
 * must not outlive the call either (the bridge cannot see it).
 * Returning None is FC_SUBJECT_OK; raising NotImplementedError is UNSUPPORTED, ValueError INVALID_ARGUMENT, any other
 * exception ERROR, each with the exception's text as the message.
 */
#ifndef FLASHCHECK_PYTHON_BRIDGE_H_
#define FLASHCHECK_PYTHON_BRIDGE_H_

#include "flashcheck/subject.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FC_SUBJECT_PYTHON_PREFIX "python:"
#define FC_SUBJECT_PYTHON_ENTRY_POINT "fc_subject_python_v4"

/* What fc_subject_python_v4 answers for one spec: the descriptor (null on failure, with `error` saying why) and the
 * optional limits, value dims, sequences, backward pass, dropout, fp8 path and its head dims (null where the callable
 * declares none). Valid until the library is unloaded. The entry point's version names this struct's layout (v2 added
 * `dropout`, v3 `fp8`, v4 `fp8_head_dims`), so that a harness and a bridge built apart never read each other's answer
 * in another layout. */
typedef struct fc_subject_python {
  const fc_subject* subject;
  const fc_subject_limits* limits;
  const fc_subject_value_dims* value_dims;
  const char* error;
  const fc_subject_sequences* sequences;
  const fc_subject_backward* backward;
  const fc_subject_dropout* dropout;
  const fc_subject_fp8* fp8;
  const fc_subject_fp8_head_dims* fp8_head_dims;
} fc_subject_python;
typedef fc_subject_python (*fc_subject_python_fn)(const char* spec);
FC_SUBJECT_EXPORT fc_subject_python fc_subject_python_v4(const char* spec);

#ifdef __cplusplus
}
#endif

#endif /* FLASHCHECK_PYTHON_BRIDGE_H_ */
