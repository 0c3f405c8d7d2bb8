/* flashcheck subject ABI: any attention forward kernel, packaged as a shared library, put under the suite.
 *
 * A subject library exports one entry point,
 *
 *     const fc_subject* fc_subject_v1(void);
 *
 * returning a pointer to a static descriptor (it must stay valid until the library is unloaded) whose
 * `abi_version` is FC_SUBJECT_ABI_VERSION. The descriptor names the subject, states what it can compute
 * (capabilities), the arithmetic it computes in (so that the error model judges it by the right bound), and
 * carries the one call, `forward`. Everything travels as fixed-width integers, so the layout is the same for
 * every compiler; no flashcheck header or library is needed to build a subject (flashcheck/attention_c.h's
 * FC_DTYPE_*, FC_MASK_* values are repeated here under the same numbers).
 *
 * Semantics are flashcheck's (attention.h, README "Semantics"): O = softmax(cap(scale * Q K^T) + mask) V,
 * LSE = log sum exp (natural log), the masks and their alignments, the softcap, the sink, GQA (query head h
 * reads key/value head h / (heads_q / heads_kv)), rows with no visible key give O = 0 and LSE = -inf.
 *
 * Optional entry points widen what a library is given, each checked like the descriptor: fc_subject_limits_v1 (shape
 * limits), fc_subject_value_dims_v1 (head_dim_v != head_dim), fc_subject_sequences_v1 (varlen, seqused_k, paged K/V,
 * split-KV), fc_subject_backward_v1 (dQ, dK, dV), fc_subject_dropout_v1 (dropout with flashcheck's documented mask),
 * fc_subject_fp8_v1 (e4m3 inputs with descales), fc_subject_fp8_head_dims_v1 (the fp8 path's head dims). A library
 * built against an older subject.h simply lacks the newer ones.
 *
 * The harness loads the library (dlopen), checks the version and the descriptor, and runs a case only when it
 * lies inside the capabilities; a case outside them is UNSUPPORTED for this subject, never a pass. A forward
 * call that returns FC_SUBJECT_UNSUPPORTED is reported the same way (with the subject's message). Every run
 * goes through the harness's guards: O and LSE are poisoned before the call and must be overwritten,
 * canary regions around every output must survive, Q, K, V and the sink must be unchanged after it.
 *
 * Example (subjects/example/README.md has the walk-through and the build command):
 *
 *     #include "flashcheck/subject.h"   // declares fc_subject_v1 with C linkage, for C and C++ alike
 *     static int forward(const fc_subject_problem* p, const fc_subject_buffers* b, void* stream,
 *                        char* err, size_t err_len) { ...launch on (cudaStream_t)stream... return FC_SUBJECT_OK; }
 *     static const fc_subject kSubject = {FC_SUBJECT_ABI_VERSION, "my-kernel", {...capabilities...},
 *                                         {...arithmetic...}, forward};
 *     const fc_subject* fc_subject_v1(void) { return &kSubject; }
 *
 * A row of a problem whose every visible score is -inf (or that sees no key) gives O = 0 and LSE = -inf: the
 * classic online softmax computes exp(-inf - (-inf)) = NaN there; subtract 0 instead while the running max is
 * -inf. Known differences of a peer from these semantics can be declared to the property tier
 * (FLASHCHECK_KNOWN_DEVIATIONS, README "Your kernel under test") so that they are discarded, never passed.
 */
#ifndef FLASHCHECK_SUBJECT_H_
#define FLASHCHECK_SUBJECT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FC_SUBJECT_ABI_VERSION 1
#define FC_SUBJECT_ENTRY_POINT "fc_subject_v1"
#define FC_SUBJECT_EXPORT __attribute__((visibility("default")))

/* The capabilities' sets (dtypes, masks, layouts) are bit sets with one bit per value: FC_SUBJECT_BIT(value), i.e.
 * 1u << value, for every value the subject takes, e.g. FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_F16) |
 * FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_BF16). Every FC_SUBJECT_* value below is a small integer, never a bit. */
#define FC_SUBJECT_BIT(value) (1u << (value))
/* = FC_DTYPE_*. Version 1's capabilities and per-dtype arrays carry the first three, and a descriptor that names
 * F8E4M3 among its dtypes is refused: f8e4m3 comes through fc_subject_fp8_v1 (below). */
enum { FC_SUBJECT_DTYPE_F32 = 0, FC_SUBJECT_DTYPE_F16 = 1, FC_SUBJECT_DTYPE_BF16 = 2, FC_SUBJECT_DTYPE_F8E4M3 = 3 };
enum {
  FC_SUBJECT_MASK_NONE = 0,
  FC_SUBJECT_MASK_CAUSAL_BOTTOM_RIGHT = 1,
  FC_SUBJECT_MASK_CAUSAL_TOP_LEFT = 2,
  FC_SUBJECT_MASK_WINDOW_BOTTOM_RIGHT = 3,
  FC_SUBJECT_MASK_WINDOW_TOP_LEFT = 4
}; /* = FC_MASK_* */
enum {
  FC_SUBJECT_LAYOUT_BHSD = 0,   /* contiguous [B, H, S, D] */
  FC_SUBJECT_LAYOUT_BSHD = 1,   /* contiguous [B, S, H, D] */
  FC_SUBJECT_LAYOUT_STRIDED = 2 /* any element strides (padded rows): the harness's pad=N cases */
};
enum { FC_SUBJECT_MEMORY_DEVICE = 0, FC_SUBJECT_MEMORY_HOST = 1 };

/* forward's return codes. */
enum {
  FC_SUBJECT_OK = 0,
  FC_SUBJECT_INVALID_ARGUMENT = 1, /* the problem breaks the contract (REJECTED) */
  FC_SUBJECT_UNSUPPORTED = 2,      /* valid, but this subject does not compute it (UNSUPPORTED) */
  FC_SUBJECT_ERROR = 3             /* anything else: a CUDA error, out of memory (FAIL) */
};

/* What the subject computes. A case is run only when every field admits it. */
typedef struct fc_subject_capabilities {
  uint32_t dtypes;           /* bit set: FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_*) */
  int32_t head_dim_min;      /* inclusive, >= 1 */
  int32_t head_dim_max;      /* inclusive, <= 256 (flashcheck's own limit) */
  const int32_t* head_dims;  /* if non-null: exactly these head dims (head_dim_count of them), min/max ignored */
  int32_t head_dim_count;
  uint32_t masks;            /* bit set: FC_SUBJECT_BIT(FC_SUBJECT_MASK_*); a window bit means any window sides */
  uint32_t layouts;          /* bit set: FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_*) */
  int32_t gqa;               /* 1: heads_q a multiple of heads_kv > 1 apart; 0: heads_q == heads_kv only */
  int32_t lse;               /* 1: writes LSE; 0: LSE is not produced (the harness judges O alone) */
  int32_t softcap;           /* 1: softcap > 0 supported */
  int32_t sink;              /* 1: per-head sink logits supported */
  int32_t memory;            /* FC_SUBJECT_MEMORY_DEVICE (CUDA device pointers) or FC_SUBJECT_MEMORY_HOST */
  int32_t instrumented;      /* 0. (Per-row m/l and per-tile traces come from flashcheck's own builds only.) */
} fc_subject_capabilities;

/* The arithmetic the subject computes in (docs/error-model.md §3 and §3.1). A subject that declares a class
 * the error model has is judged by that class's bound and its same-precision reference; one that declares
 * FC_SUBJECT_ARITH_UNDECLARED (or a combination no class matches) is judged by the generic bound (§3.1). */
enum {
  FC_SUBJECT_ARITH_UNDECLARED = 0,
  /* Classes of the error model (oracle/include/flashcheck/oracle_problem.h, Arithmetic): */
  FC_SUBJECT_ARITH_GENERAL_FP32 = 1, /* fp32 scores, fp32 P, fp32 accumulation, round to nearest (CUDA cores) */
  FC_SUBJECT_ARITH_TENSOR_CORE = 2,  /* fp16/bf16: exact products, fp32 (truncating) accumulation of scores,
                                        P rounded to the input dtype before P*V, fp32 O accumulation: the
                                        FlashAttention class */
  FC_SUBJECT_ARITH_SPLIT_TF32 = 3,   /* fp32 inputs as hi + lo tf32, three tf32 products, fp32 accumulation */
  FC_SUBJECT_ARITH_TENSOR_CORE_FP8 = 4 /* e4m3 inputs (fc_subject_fp8_v1 only): products summed in the tensor core's
                                          14-bit accumulator within a K/V tile and promoted to fp32 per tile, P moved
                                          up by 2^8 and rounded to e4m3 before P*V (docs/design/fp8-forward.md) */
};
/* Rounding points, for the record (printed with every verdict) and to check a declared class against. */
enum { FC_SUBJECT_FMT_UNDECLARED = 0, FC_SUBJECT_FMT_FP32 = 1, FC_SUBJECT_FMT_INPUT = 2, FC_SUBJECT_FMT_TF32X3 = 3 };

typedef struct fc_subject_arithmetic {
  /* Per dtype (index FC_SUBJECT_DTYPE_*): one of FC_SUBJECT_ARITH_*. */
  int32_t arithmetic[3];
  /* Per dtype, descriptive: score accumulation, P before P*V, O accumulation (FC_SUBJECT_FMT_*). A class above
   * must agree with them: GENERAL_FP32 = (FP32, FP32, FP32), TENSOR_CORE = (FP32, INPUT, FP32) for fp16/bf16,
   * SPLIT_TF32 = (TF32X3, TF32X3, FP32) for fp32; the loader refuses a class that contradicts them. */
  int32_t score_accumulation[3];
  int32_t p_rounding[3];
  int32_t o_accumulation[3];
  /* Keys per K/V tile of the online softmax (the error model's running-sum bound and the reference's tiling);
   * 0: undeclared (the generic bound's tiling, §3.1). */
  int32_t key_tile;
} fc_subject_arithmetic;

typedef struct fc_subject_strides {
  int64_t batch, head, row; /* elements; the head_dim axis has unit stride */
} fc_subject_strides;

/* One forward problem: the same fields and meanings as fc_params (attention_c.h) without the pointers. */
typedef struct fc_subject_problem {
  int32_t dtype; /* FC_SUBJECT_DTYPE_* */
  int32_t mask;  /* FC_SUBJECT_MASK_* */
  int64_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
  fc_subject_strides q_stride, k_stride, v_stride, o_stride;
  float softmax_scale;
  int64_t window_left, window_right; /* window masks only; -1 = unbounded */
  float softcap;                     /* > 0: scores become softcap * tanh(score / softcap); 0: off */
  /* V's and O's columns: V is [.., seqlen_k, head_dim_v], O [.., seqlen_q, head_dim_v]. Always set; it differs
   * from head_dim only for a library that exports fc_subject_value_dims_v1 (below), which needs a harness whose
   * subject.h has this field. The last field: a subject that does not read it needs no rebuild. */
  int64_t head_dim_v;
} fc_subject_problem;

/* The tensors, in the memory kind the capabilities declare. lse: [batch, heads_q, seqlen_q] fp32,
 * contiguous. sink: [heads_q] fp32 or NULL. The harness guards them (poison, canaries, hashes); a subject that needs
 * scratch memory allocates its own (and may keep it between calls): it must not write anywhere else. */
typedef struct fc_subject_buffers {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  const float* sink;
} fc_subject_buffers;

typedef struct fc_subject {
  int32_t abi_version; /* FC_SUBJECT_ABI_VERSION */
  const char* name;    /* [A-Za-z0-9._-]{1,64}: recorded in case lines as subject=NAME */
  fc_subject_capabilities capabilities;
  fc_subject_arithmetic arithmetic;
  /* Computes O (and LSE when capabilities.lse) for `problem` into `buffers`. Device subjects enqueue on `stream`
   * (a cudaStream_t; the harness synchronises after the call); host subjects ignore it. On failure returns a
   * non-zero FC_SUBJECT_* code and writes a NUL-terminated message into err (err_len bytes). */
  int (*forward)(const fc_subject_problem* problem, const fc_subject_buffers* buffers, void* stream, char* err,
                 size_t err_len);
} fc_subject;

typedef const fc_subject* (*fc_subject_entry_fn)(void);

/* The entry point every subject library defines (with this declaration in scope, a C++ definition gets C linkage). */
FC_SUBJECT_EXPORT const fc_subject* fc_subject_v1(void);

/* Optional: the shapes the subject computes, where they are narrower than flashcheck's (a kernel whose tiles need
 * seqlen_k a multiple of 32, say). A library that exports
 *
 *     const fc_subject_limits* fc_subject_limits_v1(void);
 *
 * has its limits checked like its capabilities: a case outside them is UNSUPPORTED for the subject, and the
 * generators of the property tests and the report's sweep draw only shapes inside them, so that a narrow subject's
 * refusals are not discards. Each field 0 means no limit. */
#define FC_SUBJECT_LIMITS_ENTRY_POINT "fc_subject_limits_v1"
typedef struct fc_subject_limits {
  int64_t seqlen_q_multiple; /* seqlen_q a multiple of this (0 or 1: any) */
  int64_t seqlen_k_multiple; /* seqlen_k a multiple of this (0 or 1: any) */
  int64_t seqlen_q_min;      /* seqlen_q at least this */
  int64_t seqlen_k_min;      /* seqlen_k at least this */
  int64_t seqlen_q_max;      /* seqlen_q at most this (0: no bound) */
  int64_t seqlen_k_max;      /* seqlen_k at most this (0: no bound) */
} fc_subject_limits;
typedef const fc_subject_limits* (*fc_subject_limits_fn)(void);
FC_SUBJECT_EXPORT const fc_subject_limits* fc_subject_limits_v1(void);

/* Optional: V and O with a head dim of their own (head_dim_v != head_dim: DeepSeek's (192, 128) and the like). A
 * library that exports
 *
 *     const fc_subject_value_dims* fc_subject_value_dims_v1(void);
 *
 * reads fc_subject_problem.head_dim_v and is given cases whose head_dim_v lies in [head_dim_v_min, head_dim_v_max]
 * (its head_dim still within the capabilities); without it every case it is given has head_dim_v == head_dim, and
 * an unequal one is UNSUPPORTED for the subject. */
#define FC_SUBJECT_VALUE_DIMS_ENTRY_POINT "fc_subject_value_dims_v1"
typedef struct fc_subject_value_dims {
  int32_t head_dim_v_min; /* inclusive, >= 1 */
  int32_t head_dim_v_max; /* inclusive, <= 256 */
} fc_subject_value_dims;
typedef const fc_subject_value_dims* (*fc_subject_value_dims_fn)(void);
FC_SUBJECT_EXPORT const fc_subject_value_dims* fc_subject_value_dims_v1(void);

/* Optional: the inference path's sequences (attention.h, "Sequences": packed variable-length batches, seqused_k, paged
 * K/V caches, split-KV). A library that exports
 *
 *     const fc_subject_sequences* fc_subject_sequences_v1(void);
 *
 * is given cases with sequences, and split-KV cases, through its `forward_sequences` (other cases still go to
 * fc_subject.forward), with the layouts and meanings of flashcheck's own Params (a split-KV case without sequences
 * has every index array NULL and the dense layout):
 *   - Q and O packed [total_q, heads_q, head_dim] (O: head_dim_v columns); sequence b owns rows cu_seqlens_q[b] ..
 *     cu_seqlens_q[b + 1] - 1; q_stride / o_stride .row and .head (their .batch unused); LSE is [heads_q, total_q].
 *     The problem's seqlen_q and seqlen_k bound every sequence's; masks, windows, softcaps and sinks apply per
 *     sequence with its own lengths.
 *   - K and V packed the same way by cu_seqlens_k (VARLEN), or paged (PAGED): [num_pages, page_size, heads_kv,
 *     head_dim] with .batch the page stride, key j of sequence b at row j % page_size of page
 *     page_table[b * max_pages_per_seq + j / page_size].
 *   - Sequence b's keys: seqused_k[b] where given (always with PAGED; with VARLEN where a sequence's K/V slots
 *     outnumber its keys), else cu_seqlens_k[b + 1] - cu_seqlens_k[b]. The slots past them hold NaN, inf or zeros
 *     that must never reach O or LSE.
 *   - num_splits: the harness asks for that many runs of K/V tiles per query tile (SPLITS); results for one split
 *     count repeat bit for bit, and every split count agrees with 1 within the error model's bound. It is always
 *     >= 1 (a heuristic's own pick, flashcheck's splits=0, is not asked of a subject) and 1 without SPLITS.
 * The index arrays (int32) live in the memory kind the capabilities declare, like the tensors. Every capability and
 * limit of the dense path holds per case (fc_subject_limits bound the problem's seqlen_q and seqlen_k, the longest
 * sequence; the sequences' own lengths are any within them). A case with sequences outside the features declared
 * here is UNSUPPORTED for the subject; without this entry point every case with sequences is. */
#define FC_SUBJECT_SEQUENCES_ENTRY_POINT "fc_subject_sequences_v1"
enum {
  FC_SUBJECT_SEQ_VARLEN = 0,    /* cu_seqlens_q and cu_seqlens_k: packed Q, O, K and V */
  FC_SUBJECT_SEQ_SEQUSED_K = 1, /* seqused_k: fewer keys than K/V slots (with VARLEN or PAGED; PAGED needs it) */
  FC_SUBJECT_SEQ_PAGED = 2,     /* cu_seqlens_q with a page table for K and V */
  FC_SUBJECT_SEQ_SPLITS = 3     /* num_splits > 1 honoured */
};

typedef struct fc_subject_sequence_args {
  const int32_t* cu_seqlens_q; /* [batch + 1] */
  int64_t total_q;             /* packed Q and O rows */
  const int32_t* cu_seqlens_k; /* [batch + 1] or NULL (paged) */
  int64_t total_k;             /* packed K and V rows (0 when paged) */
  const int32_t* seqused_k;    /* [batch] or NULL */
  const int32_t* page_table;   /* [batch, max_pages_per_seq] or NULL */
  int64_t page_size, num_pages, max_pages_per_seq;
  int32_t num_splits; /* >= 1; > 1 only for a subject that declares FC_SUBJECT_SEQ_SPLITS */
} fc_subject_sequence_args;

typedef struct fc_subject_sequences {
  uint32_t features;          /* bit set: FC_SUBJECT_BIT(FC_SUBJECT_SEQ_*), non-empty; PAGED needs SEQUSED_K */
  int64_t page_size_multiple; /* PAGED: page sizes a multiple of this (0 or 1: any) */
  int32_t max_splits;         /* SPLITS: num_splits at most this (0: no bound) */
  /* As fc_subject.forward, for a problem with sequences. */
  int (*forward_sequences)(const fc_subject_problem* problem, const fc_subject_sequence_args* sequences,
                           const fc_subject_buffers* buffers, void* stream, char* err, size_t err_len);
} fc_subject_sequences;
typedef const fc_subject_sequences* (*fc_subject_sequences_fn)(void);
FC_SUBJECT_EXPORT const fc_subject_sequences* fc_subject_sequences_v1(void);

/* Optional: the backward pass (flashcheck/backward.h: dQ, dK, dV and the sink's gradient from dO, with the forward's
 * O and LSE as the subject's own forward wrote them). A library that exports
 *
 *     const fc_subject_backward* fc_subject_backward_v1(void);
 *
 * is given grad=1 cases: the harness runs its forward (forward or forward_sequences, with every guard), then its
 * `backward` on the O and LSE it wrote, and judges dQ, dK and dV against the oracle's exact gradient with the bound of
 * the backward's declared class (docs/error-model.md §10) and the RMS check against a same-precision reference.
 * Every gradient element of a valid row or key slot must be written; dK and dV of packed key slots past a sequence's
 * keys must be 0; dQ, dK, dV sit in the layout of Q, K, V (their strides below). Paged K/V and split-KV are forward-only
 * here; a dropout's backward comes through fc_subject_dropout_v1. A subject whose forward writes no LSE (capabilities.lse = 0) may declare a backward that recomputes
 * its forward (autograd, as SDPA's does): its `lse` buffer then holds the exact LSE rounded to fp32, against which it is
 * judged, and it takes dense cases only (`sequences` 0). A grad=1 case the library cannot take (its dtype has no declared class, a sink without `sink`,
 * sequences without `sequences`) is UNSUPPORTED. */
#define FC_SUBJECT_BACKWARD_ENTRY_POINT "fc_subject_backward_v1"

typedef struct fc_subject_backward_strides {
  fc_subject_strides d_o, dq, dk, dv; /* elements, as the forward's (d_o like o, dq like q, dk like k, dv like v) */
} fc_subject_backward_strides;

typedef struct fc_subject_backward_buffers {
  const void* o;    /* the forward's O, as its forward wrote it (read here) */
  const float* lse; /* the forward's LSE (read here) */
  const void* d_o;  /* dO, shaped like O */
  void* dq;         /* shaped like Q */
  void* dk;         /* shaped like K */
  void* dv;         /* shaped like V */
  float* dsink;     /* [heads_q] fp32 with a sink, else NULL */
} fc_subject_backward_buffers;

typedef struct fc_subject_backward {
  /* Per dtype (index FC_SUBJECT_DTYPE_*): the backward's class, FC_SUBJECT_ARITH_GENERAL_FP32 (fp32 P and dS, fp32
   * accumulation) or FC_SUBJECT_ARITH_TENSOR_CORE (fp16/bf16: P and dS rounded to the dtype before their products,
   * fp32 accumulation: FlashAttention's); FC_SUBJECT_ARITH_UNDECLARED: no backward for that dtype. */
  int32_t arithmetic[3];
  int32_t sink;          /* 1: dsink computed (grad=1 cases with a sink otherwise UNSUPPORTED) */
  int32_t sequences;     /* 1: the packed sequences declared in fc_subject_sequences_v1 (VARLEN, SEQUSED_K) here too */
  int32_t deterministic; /* 1: dQ, dK, dV bit-identical from run to run (DeterministicGradientsRepeat holds it to that) */
  /* dQ, dK, dV (and dsink) for `problem`: `sequences` NULL for a dense case; `forward` carries Q, K, V and the sink as
   * the forward read them (its o and lse NULL: they are in `buffers`). Return codes and messages as forward's. */
  int (*backward)(const fc_subject_problem* problem, const fc_subject_sequence_args* sequences,
                  const fc_subject_backward_strides* strides, const fc_subject_buffers* forward,
                  const fc_subject_backward_buffers* buffers, void* stream, char* err, size_t err_len);
} fc_subject_backward;
typedef const fc_subject_backward* (*fc_subject_backward_fn)(void);
FC_SUBJECT_EXPORT const fc_subject_backward* fc_subject_backward_v1(void);

/* Optional: dropout of P's elements with flashcheck's documented mask (docs/design/dropout-rng.md, attention.h
 * "Dropout"): element (b, h, i, j) (sequence, query head, query row and key within the sequence) draws word j mod 4 of
 * Philox4x32-10 at counter (j div 4, i, lo32(s), hi32(s)) with s = offset + b * heads_q + h modulo 2^64 under key
 * (lo32(seed), hi32(seed)); it is dropped iff that draw is below floor(p * 2^32); a kept element is scaled by 1 / (1 - p).
 * O is the dropped attention's, LSE the undropped softmax's. A library that exports
 *
 *     const fc_subject_dropout* fc_subject_dropout_v1(void);
 *
 * is given dropout cases (dropout=P in a case line) through `forward_dropout`, and grad=1 dropout cases through
 * `backward_dropout` where it has one (with fc_subject_backward_v1 declared: its sink and sequence rules hold too).
 * The oracle redraws the mask from the contract and judges O (and the gradients) with it, so a subject that draws
 * another mask fails; with `mask_dump` the property tier asks for the mask itself and holds it to the contract element
 * by element. Cases are dense, or packed sequences (the VARLEN and SEQUSED_K features of fc_subject_sequences_v1)
 * where `sequences`; paged K/V and split-KV never come with a dropout. The error model bounds a dropped softmax on the
 * general-fp32 class (docs/error-model.md §4.13 and §10.8): per dtype, the subject declares that class (its forward and
 * backward under a dropout compute in it) or none (no dropout for that dtype: UNSUPPORTED). A case with p = 0 is no
 * dropout and goes to `forward` as always. */
#define FC_SUBJECT_DROPOUT_ENTRY_POINT "fc_subject_dropout_v1"

typedef struct fc_subject_dropout_args {
  float p;           /* the drop probability, in (0, 1) */
  uint64_t seed;     /* the Philox key */
  uint64_t offset;   /* the first (b, h) stream; any 64-bit value */
  uint8_t* mask_out; /* forward only, and only for a subject with mask_dump: NULL, or [batch, heads_q, seqlen_q,
                        seqlen_k] bytes in the declared memory kind, every one to be written: 1 kept, 0 dropped, hidden
                        by the mask, or past the sequence's own lengths (rows and keys of sequence b counted from 0) */
} fc_subject_dropout_args;

typedef struct fc_subject_dropout {
  /* Per dtype (index FC_SUBJECT_DTYPE_*): FC_SUBJECT_ARITH_GENERAL_FP32 (fp32 scores, P and accumulation under a
   * dropout, forward and backward), or FC_SUBJECT_ARITH_UNDECLARED: no dropout for that dtype. */
  int32_t arithmetic[3];
  int32_t mask_dump; /* 1: writes mask_out when it is not NULL */
  int32_t sequences; /* 1: packed sequences (VARLEN, SEQUSED_K as fc_subject_sequences_v1 declares them) with a dropout */
  /* As fc_subject.forward (and forward_sequences: `sequences` NULL for a dense case), under the dropout. */
  int (*forward_dropout)(const fc_subject_problem* problem, const fc_subject_sequence_args* sequences,
                         const fc_subject_dropout_args* dropout, const fc_subject_buffers* buffers, void* stream,
                         char* err, size_t err_len);
  /* NULL: a forward-only dropout. Else as fc_subject_backward.backward under the dropout (its mask_out NULL), with O and
   * LSE as forward_dropout wrote them. */
  int (*backward_dropout)(const fc_subject_problem* problem, const fc_subject_sequence_args* sequences,
                          const fc_subject_dropout_args* dropout, const fc_subject_backward_strides* strides,
                          const fc_subject_buffers* forward, const fc_subject_backward_buffers* buffers, void* stream,
                          char* err, size_t err_len);
} fc_subject_dropout;
typedef const fc_subject_dropout* (*fc_subject_dropout_fn)(void);
FC_SUBJECT_EXPORT const fc_subject_dropout* fc_subject_dropout_v1(void);

/* Optional: fp8 (e4m3) inputs. A library that exports
 *
 *     const fc_subject_fp8* fc_subject_fp8_v1(void);
 *
 * is given f8e4m3 cases (f8e4m3 in a case line; docs/design/fp8-forward.md) through `forward_fp8`, with
 * problem->dtype FC_SUBJECT_DTYPE_F8E4M3: Q, K and V in OCP e4m3 (E4M3FN: one byte an element, strides in elements),
 * O in bf16 (o_stride in elements), LSE fp32 as always. The descales are fp32 factors per (batch, kv head),
 * [batch, heads_kv] contiguous in the declared memory kind, or NULL (1): the problem is the attention of
 * descale_q Q, descale_k K and descale_v V (a query head reads its kv head's). The descriptor's capabilities (head
 * dims, masks, layouts, GQA, LSE, softcap, sink, memory), its value dims and its shape limits hold for these cases
 * too; packed sequences, split-KV, the backward pass and dropout never come with f8e4m3. The error model has one fp8
 * class, FC_SUBJECT_ARITH_TENSOR_CORE_FP8: the subject is judged by its bound and by the RMS check against its
 * emulation, with the key tile of the case's head dim (the tile its products are promoted per): the first entry of
 * `key_tiles` whose max_head_dim is at least the head dim, else `key_tile` (kernels pick their fp8 tile per head dim:
 * FlashAttention-3's are 160, 128, 224, 160 and 128 keys up to head dims 64, 96, 128, 192 and 256). */
#define FC_SUBJECT_FP8_ENTRY_POINT "fc_subject_fp8_v1"
#define FC_SUBJECT_FP8_KEY_TILES 8

typedef struct fc_subject_fp8_key_tile {
  int32_t max_head_dim; /* > 0; the entries in increasing max_head_dim */
  int32_t key_tile;     /* > 0: keys per K/V tile for head dims up to max_head_dim (and above the previous entry's) */
} fc_subject_fp8_key_tile;

typedef struct fc_subject_fp8_args {
  const float* descale_q; /* [batch, heads_kv] or NULL (1) */
  const float* descale_k;
  const float* descale_v;
} fc_subject_fp8_args;

typedef struct fc_subject_fp8 {
  int32_t arithmetic; /* FC_SUBJECT_ARITH_TENSOR_CORE_FP8 */
  int32_t descales;   /* 1: takes descales; 0: every call's are NULL (a case with descales is UNSUPPORTED) */
  int32_t key_tile;   /* keys per K/V tile (the per-tile promotion); 0: arithmetic.key_tile of the descriptor */
  /* As fc_subject.forward, on e4m3 inputs. */
  int (*forward_fp8)(const fc_subject_problem* problem, const fc_subject_fp8_args* fp8, const fc_subject_buffers* buffers,
                     void* stream, char* err, size_t err_len);
  /* The tile per head dim, where it depends on it (after forward_fp8: an initializer that ends there declares none).
   * 0..FC_SUBJECT_FP8_KEY_TILES entries; head dims past the last entry's take key_tile. */
  int32_t key_tiles_count;
  fc_subject_fp8_key_tile key_tiles[FC_SUBJECT_FP8_KEY_TILES];
} fc_subject_fp8;
typedef const fc_subject_fp8* (*fc_subject_fp8_fn)(void);

/* Optional, beside fc_subject_fp8_v1: the head dims of the fp8 path, where they are fewer than the capabilities'
 * (FlashAttention-3's e4m3 rows are whole 16-byte TMA rows: head dims that are multiples of 16). A library that exports
 *
 *     const fc_subject_fp8_head_dims* fc_subject_fp8_head_dims_v1(void);
 *
 * has an f8e4m3 case at another head dim UNSUPPORTED naming head_dim, and the generators and the report's sweep draw
 * f8e4m3 cases at the head dims it takes, so that its refusals are not discards. */
#define FC_SUBJECT_FP8_HEAD_DIMS_ENTRY_POINT "fc_subject_fp8_head_dims_v1"
typedef struct fc_subject_fp8_head_dims {
  int32_t multiple; /* >= 1: an f8e4m3 case's head_dim is a multiple of this (and one the capabilities take) */
} fc_subject_fp8_head_dims;
typedef const fc_subject_fp8_head_dims* (*fc_subject_fp8_head_dims_fn)(void);
FC_SUBJECT_EXPORT const fc_subject_fp8_head_dims* fc_subject_fp8_head_dims_v1(void);

/* The rule above, once for the library and the harness alike: the key tile an fp8 path declares for `head_dim`,
 * 0 where it leaves it to arithmetic.key_tile. */
static inline int32_t fc_subject_fp8_tile_for(const fc_subject_fp8* fp8, int64_t head_dim) {
  for (int32_t i = 0; i < fp8->key_tiles_count; ++i) {
    if (head_dim <= fp8->key_tiles[i].max_head_dim) return fp8->key_tiles[i].key_tile;
  }
  return fp8->key_tile;
}
FC_SUBJECT_EXPORT const fc_subject_fp8* fc_subject_fp8_v1(void);

#ifdef __cplusplus
}
#endif

#endif /* FLASHCHECK_SUBJECT_H_ */
