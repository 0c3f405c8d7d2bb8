// The mutant catalogue: realistic kernel bugs, each a few guarded lines in the production kernels' sources, for
// measuring the suite on the bugs it exists to catch (tools/mutation_test.py, docs/mutation-testing.md). A build
// configured with -DFLASHCHECK_MUTANTS=ON (preset gpu-mutants) compiles every mutant in, all off; the process
// environment's FLASHCHECK_MUTANT=<name> switches one on at run time, so one build runs the whole catalogue.
// Without FLASHCHECK_MUTANTS the guards are the constant false and no mutant exists in the code.
//
// Each entry names the family it lives in and the bug class it stands for, as the issue trackers of
// FlashAttention, PyTorch and cuDNN report them (the catalogue's rationale is docs/mutation-testing.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

namespace flashcheck {

// Ids are positions in kMutants (0: none). Add new ones at the end of both.
enum class Mutant : int32_t {
  kNone = 0,
  kGeneralMissingRescale,
  kGeneralCausalOffByOne,
  kGeneralWarpMaxShortReduction,
  kGeneralLNotRescaled,
  kGeneralMissingTileBarrier,
  kGeneralHiddenVUnmasked,
  kGeneralGqaHeadModulo,
  kGeneralEmptyRowDivide,
  kGeneralSplitOverlap,
  kTcWindowLeftOffByOne,
  kTcLastTileUnmasked,
  kTcQuadMaxShortReduction,
  kTcLseLog2Units,
  kTcHiddenVExactPathSkipped,
  kTcOStorePastSeqlen,
  kTcSoftcapAfterMask,
  kTcSinkIgnored,
  kTcCpAsyncWaitShort,
  kTcOffset32Bit,
  kWsKFullNotAwaited,
  kWsVReleasedEarly,
  kWsQReleasedEarly,
  kWsOStagedWithoutBarrier,
  kTf32MissingLoTerm,
  kTf32UnsplittableNotRecomputed,
  kTf32TailUnmasked,
  kDecodePageSlotMask,
  kDecodeGqaRowMapping,
  kDecodeQuadSumShort,
  kDecodeCpAsyncWaitShort,
  kCombineUnscaled,
  kCombineEmptySplitsNan,
  kWsRedoListShort,
  kTcWindowLeftFirstTileOnly,
  kTcHiddenTileMaxZero,
  kGeneralValueWidthFromHeadDim,
  kCombineValueStrideFromHeadDim,
  kTcValueColumnsFromHeadDim,
  kTcValueTileAtKeyTileWidth,
  kBwdDsWithoutD,
  kBwdDkScaleMissing,
  kBwdDqMissingTile,
  kBwdPaddedTailNotZeroed,
  kBwdSoftcapDerivativeDropped,
  kBwdLseWrongRow,
  kBwdGqaGroupShort,
  kBwdHiddenKeysInDq,
  kDropoutOffset32Bit,
  kDropoutBackwardOffsetPlusOne,
  kDropoutThresholdOffByOne,
  kDropoutScaleMissing,
  kDropoutKvHeadIndex,
  kFp8POffsetMissing,
  kFp8LazyRescale,
  kFp8DescaleQueryHead,
  kFp8DescaleVTwice,
  kFp8VtKeysUnpermuted,
  kCount
};

struct MutantInfo {
  Mutant id;
  const char* name;         // what FLASHCHECK_MUTANT takes
  const char* family;       // general, tensor_core (cp.async and warp-specialized), ws (warp-specialized only),
                            // split_tf32, decode, combine (split-KV's merge), backward, dropout (the general
                            // forward, the mask dump and the CUDA-core backward)
  const char* bug_class;    // the class of bug it stands for
  const char* description;  // what the guarded code does wrong
};

inline constexpr MutantInfo kMutants[] = {
    {Mutant::kNone, "none", "-", "-", "the production kernels"},
    {Mutant::kGeneralMissingRescale, "general-missing-rescale", "general", "online-softmax rescale",
     "the last K/V tile of a work item skips the rescale of O by exp2(m_old - m_new)"},
    {Mutant::kGeneralCausalOffByOne, "general-causal-off-by-one", "general", "mask off by one",
     "every row sees one key past its right edge (causal diagonal, window, seqlen_k)"},
    {Mutant::kGeneralWarpMaxShortReduction, "general-warp-max-short-reduction", "general", "reduction",
     "the row max's warp shuffle reduction stops one step early (offset 1 skipped)"},
    {Mutant::kGeneralLNotRescaled, "general-l-not-rescaled", "general", "online-softmax rescale",
     "l adds the tile's sum without rescaling the old l by alpha"},
    {Mutant::kGeneralMissingTileBarrier, "general-missing-tile-barrier", "general", "race",
     "the __syncthreads between loading a K/V tile and reading it is missing"},
    {Mutant::kGeneralHiddenVUnmasked, "general-hidden-v-unmasked", "general", "masking of non-finite values",
     "P V runs without the visibility predicate on masked tiles: 0 * (NaN or inf) from a hidden V row reaches O"},
    {Mutant::kGeneralGqaHeadModulo, "general-gqa-head-modulo", "general", "GQA/MQA head mapping",
     "query head h reads K/V head h % heads_kv instead of h / group"},
    {Mutant::kGeneralEmptyRowDivide, "general-empty-row-divide", "general", "fully masked rows",
     "O = acc / l without the l == 0 rule: a row that sees no key gets 0/0 = NaN"},
    {Mutant::kGeneralSplitOverlap, "general-split-overlap", "general", "split-KV partition",
     "each split run but the last also processes the next run's first K/V tile"},
    {Mutant::kTcWindowLeftOffByOne, "tc-window-left-off-by-one", "tensor_core", "mask off by one",
     "the mask lets every row see one key left of its window's left edge"},
    {Mutant::kTcLastTileUnmasked, "tc-last-tile-unmasked", "tensor_core", "sequence tails",
     "the last K/V tile is never masked: zero-filled keys past seqlen_k get weight"},
    {Mutant::kTcQuadMaxShortReduction, "tc-quad-max-short-reduction", "tensor_core", "reduction",
     "the row max over a quad misses the xor-2 shuffle: half the row's columns are ignored"},
    {Mutant::kTcLseLog2Units, "tc-lse-log2-units", "tensor_core", "LSE units",
     "LSE is written in log2 units (m log2 e + log2 l) instead of natural log"},
    {Mutant::kTcHiddenVExactPathSkipped, "tc-hidden-v-exact-path-skipped", "tensor_core",
     "masking of non-finite values", "a diagonal tile's non-finite hidden V rows are never taken off the tensor cores"},
    {Mutant::kTcOStorePastSeqlen, "tc-o-store-past-seqlen", "tensor_core", "out-of-bounds write",
     "the cp.async kernel's epilogue stores every row of a partial last Q tile"},
    {Mutant::kTcSoftcapAfterMask, "tc-softcap-after-mask", "tensor_core", "softcap",
     "the softcap's tanh runs after the mask: a hidden key's -inf becomes -cap and gets weight"},
    {Mutant::kTcSinkIgnored, "tc-sink-ignored", "tensor_core", "attention sink", "the epilogue leaves the sink out"},
    {Mutant::kTcCpAsyncWaitShort, "tc-cp-async-wait-short", "tensor_core", "race",
     "the cp.async kernel waits for all but the newest copy group: K/V may not have landed"},
    {Mutant::kTcOffset32Bit, "tc-offset-32bit", "tensor_core", "large tensors",
     "the cp.async kernel computes each (batch, head)'s element offset in 32-bit unsigned arithmetic: it wraps "
     "past 2^32 elements"},
    {Mutant::kWsKFullNotAwaited, "ws-k-full-not-awaited", "ws", "race",
     "consumers issue S = Q K^T without waiting for K's TMA load"},
    {Mutant::kWsVReleasedEarly, "ws-v-released-early", "ws", "race",
     "consumers release a V slot before the P V that reads it has completed"},
    {Mutant::kWsQReleasedEarly, "ws-q-released-early", "ws", "race",
     "consumers release their Q rows after the first S of an item instead of the last"},
    {Mutant::kWsOStagedWithoutBarrier, "ws-o-staged-without-barrier", "ws", "race",
     "the TMA store of O starts without the barrier that waits for every thread's staged rows"},
    {Mutant::kTf32MissingLoTerm, "tf32-missing-lo-term", "split_tf32", "precision",
     "S = Q K^T drops the q_lo k_hi term of the three-term split-TF32 product"},
    {Mutant::kTf32UnsplittableNotRecomputed, "tf32-unsplittable-not-recomputed", "split_tf32", "special values",
     "scores whose inputs the TF32 split cannot carry are not recomputed in fp32"},
    {Mutant::kTf32TailUnmasked, "tf32-tail-unmasked", "split_tf32", "sequence tails",
     "no tile is masked: keys past seqlen_k and past the mask's edges get weight"},
    {Mutant::kDecodePageSlotMask, "decode-page-slot-mask", "decode", "paged KV addressing",
     "a key's slot in its page is key & (page_size - 1): wrong for page sizes that are not powers of two"},
    {Mutant::kDecodeGqaRowMapping, "decode-gqa-row-mapping", "decode", "GQA packing",
     "a packed tile row's query row and head are swapped for seqlen_q > 1"},
    {Mutant::kDecodeQuadSumShort, "decode-quad-sum-short", "decode", "reduction",
     "l over a quad misses the xor-2 shuffle"},
    {Mutant::kDecodeCpAsyncWaitShort, "decode-cp-async-wait-short", "decode", "race",
     "the K/V loop waits for one copy group too few: the tile read may not have landed"},
    {Mutant::kCombineUnscaled, "combine-unscaled", "combine", "split-KV merge",
     "the combine adds the split runs' l and O without moving them onto the merged max"},
    {Mutant::kCombineEmptySplitsNan, "combine-empty-splits-nan", "combine", "fully masked rows",
     "the combine's factor is exp2(m_s - M) without the -inf origin rule: empty runs give NaN"},
    {Mutant::kWsRedoListShort, "ws-redo-list-short", "ws", "masking of non-finite values",
     "the redo launch runs every listed item but the last: that item keeps the first launch's inf or NaN"},
    {Mutant::kTcWindowLeftFirstTileOnly, "tc-window-left-first-tile-only", "tensor_core", "mask off by one",
     "only a Q tile's first K/V tile is masked at the window's left edge: a row whose left edge lies inside a later "
     "tile sees the keys before it there"},
    {Mutant::kTcHiddenTileMaxZero, "tc-hidden-tile-max-zero", "tensor_core", "online-softmax rescale",
     "a K/V tile wholly hidden from a row sets its running max to the exponent origin 0 instead of keeping -inf: "
     "later scores below about -87 underflow to weight 0"},
    {Mutant::kGeneralValueWidthFromHeadDim, "general-value-width-from-head-dim", "general", "unequal head dims",
     "V tiles load Q's and K's head_dim columns instead of head_dim_v: with head_dim_v > head_dim O's last columns "
     "come out zero (with head_dim_v < head_dim the loads read past V's rows)"},
    {Mutant::kCombineValueStrideFromHeadDim, "combine-value-stride-from-head-dim", "combine", "unequal head dims",
     "the combine steps through the split runs' accumulators by head_dim instead of head_dim_v"},
    {Mutant::kTcValueColumnsFromHeadDim, "tc-value-columns-from-head-dim", "tensor_core", "unequal head dims",
     "a value pair's kernel stores O and split-KV's partials over head_dim columns instead of head_dim_v"},
    {Mutant::kTcValueTileAtKeyTileWidth, "tc-value-tile-at-key-tile-width", "tensor_core", "unequal head dims",
     "a value pair's kernel places V one V tile after K instead of one K tile: P V reads part of K, or of what "
     "follows V, as V (the cp.async kernel's stage; the warp-specialized kernel's V slots then overlap K's or the "
     "O tile)"},
    {Mutant::kBwdDsWithoutD, "backward-ds-without-d", "backward", "backward: softmax gradient",
     "dS = P dP: the row's D = dO.O is never subtracted"},
    {Mutant::kBwdDkScaleMissing, "backward-dk-scale-missing", "backward", "backward: scale",
     "dK is stored as sum_i dT_ij q_i without the softmax scale"},
    {Mutant::kBwdDqMissingTile, "backward-dq-missing-tile", "backward", "backward: dQ accumulation",
     "in atomic mode a row's partial sum of dQ over the last K/V tile it sees is never added, where it sees more "
     "than one"},
    {Mutant::kBwdPaddedTailNotZeroed, "backward-padded-tail-not-zeroed", "backward", "backward: padded tails",
     "dK and dV rows of a K/V tile past the sequence's keys (packed slots up to the next sequence) are never "
     "written"},
    {Mutant::kBwdSoftcapDerivativeDropped, "backward-softcap-derivative-dropped", "backward", "backward: softcap",
     "the tensor-core key-tile kernel passes dS on as dT without the softcap's factor 1 - t^2"},
    {Mutant::kBwdLseWrongRow, "backward-lse-wrong-row", "backward", "backward: row indexing",
     "the tensor-core key-tile kernel recomputes P of row i with the LSE of row i + 1 (the sequence's last row keeps "
     "its own)"},
    {Mutant::kBwdGqaGroupShort, "backward-gqa-group-short", "backward", "GQA/MQA head mapping",
     "the tensor-core key-tile kernel sums dK and dV over all but the last query head of a group"},
    {Mutant::kBwdHiddenKeysInDq, "backward-hidden-keys-in-dq", "backward", "backward: masking",
     "the tensor-core key-tile kernel loads K and V of keys no row sees: a NaN there reaches dQ through dT K "
     "(0 * NaN)"},
    {Mutant::kDropoutOffset32Bit, "dropout-offset-32bit", "dropout", "dropout: RNG offset",
     "the general forward, its mask dump and the CUDA-core backward truncate dropout_offset to its low 32 bits before "
     "the stream sum offset + b * heads_q + h"},
    {Mutant::kDropoutBackwardOffsetPlusOne, "dropout-backward-offset-plus-one", "dropout", "dropout: RNG offset",
     "the CUDA-core backward regenerates the mask with dropout_offset + 1: every head draws the next stream's mask"},
    {Mutant::kDropoutThresholdOffByOne, "dropout-threshold-off-by-one", "dropout", "dropout: threshold",
     "an element is dropped iff its draw is <= t instead of < t (forward, dump and backward)"},
    {Mutant::kDropoutScaleMissing, "dropout-scale-missing", "dropout", "dropout: scale",
     "the general forward's O is not multiplied by 1 / (1 - p) (the backward keeps its scale)"},
    {Mutant::kDropoutKvHeadIndex, "dropout-kv-head-index", "dropout", "dropout: head indexing",
     "the mask is drawn with the K/V head h / (heads_q / heads_kv) in place of the query head h (forward, dump and "
     "backward): a GQA group's query heads share one mask"},
    {Mutant::kFp8POffsetMissing, "fp8-p-offset-missing", "fp8", "fp8: P quantisation",
     "the fp8 kernel casts P to e4m3 without the exponent offset 2^8 (l and LSE consistent with it): weights below "
     "2^-6 of the tile's reference lose their precision as e4m3 subnormals, or vanish below 2^-10"},
    {Mutant::kFp8LazyRescale, "fp8-lazy-rescale", "fp8", "fp8: P saturation",
     "the fp8 kernel keeps a row's reference while a tile's max lies within 8 log2 units above it (a lazy rescale "
     "beside the offset 2^8): P reaches 2^16 and e4m3 clamps it to 448"},
    {Mutant::kFp8DescaleQueryHead, "fp8-descale-query-head", "fp8", "fp8: descale indexing",
     "the fp8 kernel reads Q's and K's descales at the query head (mod heads_kv) instead of its K/V head"},
    {Mutant::kFp8DescaleVTwice, "fp8-descale-v-twice", "fp8", "fp8: descale",
     "the fp8 kernel multiplies O by V's descale twice"},
    {Mutant::kFp8VtKeysUnpermuted, "fp8-vt-keys-unpermuted", "fp8", "fp8: register/shared-memory layout",
     "the fp8 kernel's V transpose stores keys in their natural order, not in the order P's accumulator registers "
     "hold them: P of key 2q + 8 meets V of key 4q + 2 (P V pairs the wrong keys within each k32 step)"},
};
constexpr bool catalogue_in_id_order() {
  for (size_t i = 0; i < std::size(kMutants); ++i) {
    if (static_cast<size_t>(kMutants[i].id) != i) return false;
  }
  return std::size(kMutants) == static_cast<size_t>(Mutant::kCount);
}
static_assert(catalogue_in_id_order(), "one catalogue entry per mutant id, in id order");

// The id of a catalogue name, or -1.
constexpr int32_t find_mutant(std::string_view name) {
  for (const MutantInfo& m : kMutants) {
    if (name == m.name) return static_cast<int32_t>(m.id);
  }
  return -1;
}

}  // namespace flashcheck
