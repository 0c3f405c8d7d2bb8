// Host model of the kernel's tiled algorithm: the same tiling (select_config's block sizes), the same
// order of K/V tiles and rescaling, the same rounding points (fp32 arithmetic, dtype roundings where the
// kernel rounds). It lets the CPU tier run every property against the real algorithm without a GPU.
// Params are the kernel's, with host pointers. Not bit-identical to the GPU (fp32 summation order inside
// a dot product differs), but bound by the same error model.
#pragma once

#include <string_view>

#include "flashcheck/attention.h"
#include "flashcheck/backward.h"
#include "flashcheck/instrument.h"

namespace flashcheck {

// Deliberate defects, to show that the verdicts and the properties catch them (docs/error-model.md,
// docs/mutation-testing.md: the CPU tier's kill table). Never used in production. Each alters one step of the
// model, the host twin of a bug class of the GPU mutant catalogue (flashcheck/mutants.h).
enum class ModelDefect : int32_t {
  kNone = 0,
  kPOneFormatCoarser = 1,
  kOAccumInDtype = 2,
  kMissingRescale = 3,
  kLseBase2 = 4,
  kSplitMergeUnscaled = 5,
  kReadsPastSeqused = 6,
  kWindowLeftOffByOne = 7,
  kCausalOffByOne = 8,
  kSoftcapAfterMask = 9,
  kSinkIgnored = 10,
  kGqaHeadModulo = 11,
  kEmptyRowDivide = 12,
  kHiddenVUnmasked = 13,
  kPageSlotMask = 14,
  kSplitEmptyNan = 15,
  kTf32MissingLoTerm = 16,
  kMaxShortReduction = 17,
  kWindowLeftFirstTileOnly = 18,
  kHiddenTileMaxZero = 19,
  kValueWidthFromHeadDim = 20,
  // The backward pass's (run_backward_host_model).
  kBwdDsWithoutD = 21,
  kBwdSoftcapDerivativeDropped = 22,
  kBwdDkScaleMissing = 23,
  kBwdLseWrongRow = 24,
  kBwdGqaGroupShort = 25,
  kBwdPaddedTailNotZeroed = 26,
  kBwdDqMissingTile = 27,
  kBwdHiddenKeysInDq = 28,
  // Dropout's (the forward, its mask dump and the backward, as each names).
  kDropoutOffset32Bit = 29,
  kDropoutBackwardOffsetPlusOne = 30,
  kDropoutThresholdOffByOne = 31,
  kDropoutScaleMissing = 32,
  kDropoutKvHeadIndex = 33,
  // The fp8 path's (docs/design/fp8-forward.md).
  kFp8POffsetMissing = 34,
  kFp8LazyRescale = 35,
  kFp8DescaleQueryHead = 36,
  kFp8DescaleVTwice = 37,
};

struct ModelDefectInfo {
  ModelDefect id;
  const char* name;         // what FLASHCHECK_PLANT, flashcheck-repro --defect and FLASHCHECK_FUZZ_MODEL_DEFECT take
  const char* bug_class;    // the class of bug it stands for
  const char* description;  // what the model does wrong
};

// Indexed by the enum's value.
inline constexpr ModelDefectInfo kModelDefects[] = {
    {ModelDefect::kNone, "none", "-", "the model as the kernel computes"},
    {ModelDefect::kPOneFormatCoarser, "p-one-format-coarser", "precision",
     "P rounded one step down the ladder fp32 -> fp16 -> bf16 -> fp8 e4m3 from the format the path keeps it in "
     "(fp32 on the general and split-TF32 paths, the dtype on the tensor-core path)"},
    {ModelDefect::kOAccumInDtype, "o-accum-in-dtype", "precision",
     "the O accumulator rounded to the input dtype after every K/V tile"},
    {ModelDefect::kMissingRescale, "missing-rescale", "online-softmax rescale",
     "the last K/V tile's update skips the exp(m_old - m_new) rescale of O"},
    {ModelDefect::kLseBase2, "lse-base2", "LSE units", "LSE reported in base 2 (m log2 e + log2 l)"},
    {ModelDefect::kSplitMergeUnscaled, "split-merge-unscaled", "online-softmax rescale",
     "split-KV runs merged without their exp2(m_run - m) factors"},
    {ModelDefect::kReadsPastSeqused, "reads-past-seqused", "paged KV addressing",
     "a sequence's keys run to its memory's end (its packed rows, its last page's slots), not to seqused_k"},
    {ModelDefect::kWindowLeftOffByOne, "window-left-off-by-one", "mask off by one",
     "a row with a left window edge also sees the key just before it (a row whose window lies past the last key: "
     "that key), where it lies in a visited K/V tile"},
    {ModelDefect::kCausalOffByOne, "causal-off-by-one", "mask off by one",
     "a row with a right edge (causal, or a window's) also sees the key just after it, where that key lies in a "
     "visited K/V tile"},
    {ModelDefect::kSoftcapAfterMask, "softcap-after-mask", "softcap",
     "with a softcap, the masked keys of a visited K/V tile are capped after the mask: c tanh(-inf / c) = -c, a "
     "finite score, so they join the softmax (their V included; zero past seqlen_k)"},
    {ModelDefect::kSinkIgnored, "sink-ignored", "attention sink", "the sink never joins the softmax"},
    {ModelDefect::kGqaHeadModulo, "gqa-head-modulo", "GQA/MQA head mapping",
     "query head h reads K/V head h mod heads_kv instead of h / (heads_q / heads_kv)"},
    {ModelDefect::kEmptyRowDivide, "empty-row-divide", "fully masked rows",
     "a row without a visible key (and no sink) divides its zero accumulator by l = 0: O = NaN"},
    {ModelDefect::kHiddenVUnmasked, "hidden-v-unmasked", "masking of non-finite values",
     "the masked keys of a visited K/V tile, up to the Q tile's last right edge, add 0 * V to O (NaN where that V is "
     "NaN or infinite)"},
    {ModelDefect::kPageSlotMask, "page-slot-mask", "paged KV addressing",
     "a paged key's slot is j & (page_size - 1), right for powers of two only"},
    {ModelDefect::kSplitEmptyNan, "split-empty-nan", "fully masked rows",
     "split-KV runs merged with exp2(m_run - m) even where every run is empty: exp2(-inf + inf) = NaN"},
    {ModelDefect::kTf32MissingLoTerm, "tf32-missing-lo-term", "precision",
     "S = Q K^T drops the q_lo k_hi term of the three-term split-TF32 product"},
    {ModelDefect::kMaxShortReduction, "max-short-reduction", "reduction",
     "a tile's max covers only the column pairs one step of a quad's reduction reaches (keys 0-3 of every 8), so m "
     "can lie below the row max"},
    {ModelDefect::kWindowLeftFirstTileOnly, "window-left-first-tile-only", "mask off by one",
     "only a Q tile's first visited K/V tile is masked at the window's left edge: a row whose left edge lies inside "
     "a later tile that every row sees to its end takes that tile's keys from its start"},
    {ModelDefect::kHiddenTileMaxZero, "hidden-tile-max-zero", "online-softmax rescale",
     "a visited K/V tile wholly hidden from a row sets its running max to the exponent origin 0 instead of keeping "
     "-inf: the row's later scores below about -87 underflow to weight 0"},
    {ModelDefect::kValueWidthFromHeadDim, "value-width-from-head-dim", "unequal head dims",
     "V is read over Q's and K's head_dim columns instead of head_dim_v: with head_dim_v > head_dim O's last "
     "columns come out zero"},
    {ModelDefect::kBwdDsWithoutD, "bwd-ds-without-d", "backward: softmax gradient",
     "dS = P dP: the row's D = dO.O is never subtracted"},
    {ModelDefect::kBwdSoftcapDerivativeDropped, "bwd-softcap-derivative-dropped", "backward: softcap",
     "with a softcap, dT = dS: the factor 1 - tanh^2 of the cap's chain rule is dropped"},
    {ModelDefect::kBwdDkScaleMissing, "bwd-dk-scale-missing", "backward: scale",
     "dK = sum_i dT_ij q_i without the softmax scale"},
    {ModelDefect::kBwdLseWrongRow, "bwd-lse-wrong-row", "backward: row indexing",
     "P of row i is recomputed from LSE of row i + 1 (the sequence's last row keeps its own)"},
    {ModelDefect::kBwdGqaGroupShort, "bwd-gqa-group-short", "GQA/MQA head mapping",
     "dK and dV sum over the first heads_q / heads_kv - 1 query heads of the group: the last head is left out"},
    {ModelDefect::kBwdPaddedTailNotZeroed, "bwd-padded-tail-not-zeroed", "backward: padded tails",
     "dK and dV rows of a K/V tile past the sequence's keys (the packed slots up to the next sequence) are never "
     "written"},
    {ModelDefect::kBwdDqMissingTile, "bwd-dq-missing-tile", "backward: dQ accumulation",
     "a row's dQ misses the partial sum of the last K/V tile it sees, where it sees more than one"},
    {ModelDefect::kBwdHiddenKeysInDq, "bwd-hidden-keys-in-dq", "backward: masking",
     "dQ's partial sums take every key of a visited K/V tile below seqlen_k, hidden ones included, with dT "
     "computed as if visible"},
    {ModelDefect::kDropoutOffset32Bit, "dropout-offset-32bit", "dropout: RNG offset",
     "dropout_offset truncated to its low 32 bits before the stream sum, in the forward, the mask dump and the "
     "backward alike"},
    {ModelDefect::kDropoutBackwardOffsetPlusOne, "dropout-backward-offset-plus-one", "dropout: RNG offset",
     "the backward regenerates the mask with dropout_offset + 1 (the forward and the dump keep the offset)"},
    {ModelDefect::kDropoutThresholdOffByOne, "dropout-threshold-off-by-one", "dropout: threshold",
     "an element is dropped iff its draw is <= t instead of < t (forward, dump and backward)"},
    {ModelDefect::kDropoutScaleMissing, "dropout-scale-missing", "dropout: scale",
     "the forward's O is not multiplied by 1 / (1 - p) (the backward keeps its scale)"},
    {ModelDefect::kDropoutKvHeadIndex, "dropout-kv-head-index", "dropout: head indexing",
     "the mask is drawn with the K/V head h / (heads_q / heads_kv) in place of the query head h (forward, dump and "
     "backward)"},
    {ModelDefect::kFp8POffsetMissing, "fp8-p-offset-missing", "fp8: P quantisation",
     "P is cast to e4m3 without the exponent offset: p = exp2(x - r) <= 1, so every weight below 2^-6 of its tile's "
     "reference lands in e4m3's subnormals (below 2^-10 at zero)"},
    {ModelDefect::kFp8LazyRescale, "fp8-lazy-rescale", "fp8: P saturation",
     "the offset without the rescale bound: the reference stays put while a tile's max lies within 8 (log2 units) "
     "above it, so P reaches 2^16 and saturates at 448"},
    {ModelDefect::kFp8DescaleQueryHead, "fp8-descale-query-head", "fp8: descale indexing",
     "descale_q and descale_k are read at the query head h (mod heads_kv) in place of its K/V head "
     "h / (heads_q / heads_kv)"},
    {ModelDefect::kFp8DescaleVTwice, "fp8-descale-v-twice", "fp8: descale", "O is multiplied by descale_v twice"},
};
const char* to_string(ModelDefect defect);
// The defect named `name` (a kModelDefects name, "none" included), or false.
bool parse_model_defect(std::string_view name, ModelDefect* defect);

struct HostModelOptions {
  // Path and tiles to model; by default what select_config(params) picks for the GPU.
  bool override_config = false;
  KernelConfig config;
  ModelDefect defect = ModelDefect::kNone;
  Instrumentation instrumentation;  // host pointers
};

// Validates with can_implement(), then computes O and LSE into params.o / params.lse (host memory).
Status run_host_model(const Params& params, const HostModelOptions& options = {});

// The backward pass (backward.h) in host memory: validates with can_implement_backward(), then writes dQ, dK, dV
// (and dsink) with the kernels' arithmetic (backward/arith.h) in their order, dQ's tile partials added in tile
// order (what the deterministic mode does). options.defect may name a backward defect (kBwd*); config and
// instrumentation are not used.
Status run_backward_host_model(const BackwardParams& params, const HostModelOptions& options = {});

}  // namespace flashcheck
