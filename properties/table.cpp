// property_table() (properties.h): every property once, in the order the tiers run them. The properties that take
// any case draw it from default_options(), what Arbitrary<Case> gives.
#include <algorithm>
#include <array>

#include "generators.h"
#include "properties.h"

namespace flashcheck::properties {
namespace {

constexpr PropertyBinary kProd = PropertyBinary::kProduction;
constexpr PropertyBinary kInst = PropertyBinary::kInstrumented;
constexpr PropertyPass kBwd = PropertyPass::kBackward;
constexpr PropertyPass kDrop = PropertyPass::kDropout;
constexpr PropertyPass kFp8 = PropertyPass::kFp8;

Case any_case() { return *gen_case(default_options()); }

constexpr std::array kTable = {
    PropertyInfo{"OracleAgreement", kProd, [] { oracle_agreement(any_case()); }},
    PropertyInfo{"MemorySafety", kProd, [] { memory_safety(any_case()); }},
    PropertyInfo{"SpecialValuesFollowSemantics", kProd, special_values_follow_semantics},
    PropertyInfo{"PermutingKeysLeavesOutputUnchanged", kProd, permuting_keys_leaves_output_unchanged},
    PropertyInfo{"ShiftingKeysShiftsOnlyLse", kProd, shifting_keys_shifts_only_lse},
    PropertyInfo{"AffineValuesGiveAffineOutput", kProd, affine_values_give_affine_output},
    PropertyInfo{"OutputWithinValueRange", kProd, [] { output_within_value_range(any_case()); }},
    PropertyInfo{"BatchesAndHeadsAreIndependent", kProd, [] { batches_and_heads_are_independent(any_case()); }},
    PropertyInfo{"CausalRowsIgnoreInvisibleKeys", kProd, causal_rows_ignore_invisible_keys},
    PropertyInfo{"NanInMaskedKeysNeverReachesOutput", kProd, nan_in_masked_keys_never_reaches_output},
    PropertyInfo{"GqaEqualsRepeatedHeads", kProd, gqa_equals_repeated_heads},
    PropertyInfo{"MergeOfKeyHalvesEqualsWhole", kProd, merge_of_key_halves_equals_whole},
    PropertyInfo{"LayoutsAgreeBitForBit", kProd, [] { layouts_agree_bit_for_bit(any_case()); }},
    PropertyInfo{"RepeatedRunsAreBitIdentical", kProd, [] { repeated_runs_are_bit_identical(any_case()); }},
    PropertyInfo{"SmallGridsGiveTheSameBits", kProd, small_grids_give_the_same_bits},
    PropertyInfo{"HeadDimVOfHeadDimIsTheDefault", kProd, head_dim_v_of_head_dim_is_the_default},
    PropertyInfo{"PermutingVColumnsPermutesO", kProd, permuting_v_columns_permutes_o},
    PropertyInfo{"OColumnsAreIndependent", kProd, o_columns_are_independent},
    PropertyInfo{"WindowCoveringAllKeysEqualsNoMask", kProd, window_covering_all_keys_equals_no_mask},
    PropertyInfo{"WindowMinusOneZeroEqualsCausal", kProd, window_minus_one_zero_equals_causal},
    PropertyInfo{"MinusInfSinkEqualsNoSink", kProd, minus_inf_sink_equals_no_sink},
    PropertyInfo{"SinkEqualsExtraZeroValueKey", kProd, sink_equals_extra_zero_value_key},
    PropertyInfo{"LargeSoftcapEqualsNoSoftcap", kProd, large_softcap_equals_no_softcap},
    PropertyInfo{"NanOutsideWindowNeverReachesOutput", kProd, nan_outside_window_never_reaches_output},
    PropertyInfo{"SequencesAgreeWithOracle", kProd, sequences_agree_with_oracle},
    PropertyInfo{"SequencesAreMemorySafe", kProd, sequences_are_memory_safe},
    PropertyInfo{"PoisonNeverReachesOutput", kProd, poison_never_reaches_output},
    PropertyInfo{"PagedEqualsPackedBitForBit", kProd, paged_equals_packed_bit_for_bit},
    PropertyInfo{"OtherSequencesLeaveARowUnchanged", kProd, other_sequences_leave_a_row_unchanged},
    PropertyInfo{"SplitsRepeatAndAgreeWithUnsplit", kProd, splits_repeat_and_agree_with_unsplit},
    PropertyInfo{"GradientsAgreeWithOracle", kProd, gradients_agree_with_oracle, kBwd},
    PropertyInfo{"GradientsAreLinearInDout", kProd, gradients_are_linear_in_dout, kBwd},
    PropertyInfo{"DeterministicGradientsRepeat", kProd, deterministic_gradients_repeat, kBwd},
    PropertyInfo{"GroupedKeyGradientsSumRepeatedHeads", kProd, grouped_key_gradients_sum_repeated_heads, kBwd},
    PropertyInfo{"NanInHiddenKeysNeverReachesGradients", kProd, nan_in_hidden_keys_never_reaches_gradients, kBwd},
    PropertyInfo{"KeyGradientsSumToZero", kProd, key_gradients_sum_to_zero, kBwd},
    PropertyInfo{"KeyShiftInvariance", kProd, key_shift_invariance, kBwd},
    PropertyInfo{"PermutingKeysPermutesKeyGradients", kProd, permuting_keys_permutes_key_gradients, kBwd},
    PropertyInfo{"RowsWithoutKeysGetZeroGradients", kProd, rows_without_keys_get_zero_gradients, kBwd},
    PropertyInfo{"DropoutAgreesWithOracle", kProd, dropout_agrees_with_oracle, kDrop},
    PropertyInfo{"DropoutMaskDumpIsTheContract", kProd, dropout_mask_dump_is_the_contract, kDrop},
    PropertyInfo{"DropoutZeroIsNoDropout", kProd, dropout_zero_is_no_dropout, kDrop},
    PropertyInfo{"DropoutOffsetChangesOnlyTheMask", kProd, dropout_offset_changes_only_the_mask, kDrop},
    PropertyInfo{"DropoutThresholdIsExact", kProd, dropout_threshold_is_exact, kDrop},
    PropertyInfo{"Fp8AgreesWithOracle", kProd, fp8_agrees_with_oracle, kFp8},
    PropertyInfo{"Fp8PNeverSaturates", kProd, fp8_p_never_saturates, kFp8},
    PropertyInfo{"Fp8LightKeysKeepTheirWeight", kProd, fp8_light_keys_keep_their_weight, kFp8},
    PropertyInfo{"Fp8QueryHeadsReadTheirKvHeadsDescales", kProd, fp8_query_heads_read_their_kv_heads_descales, kFp8},
    PropertyInfo{"Fp8PowerOfTwoDescalesScaleExactly", kProd, fp8_power_of_two_descales_scale_exactly, kFp8},
    PropertyInfo{"Fp8AgreesWithBf16OnExactInputs", kProd, fp8_agrees_with_bf16_on_exact_inputs, kFp8},
    PropertyInfo{"Fp8MemorySafety", kProd, fp8_memory_safety, kFp8},
    PropertyInfo{"Fp8LayoutsAgreeBitForBit", kProd, fp8_layouts_agree_bit_for_bit, kFp8},
    PropertyInfo{"Fp8RepeatedRunsAreBitIdentical", kProd, fp8_repeated_runs_are_bit_identical, kFp8},
    PropertyInfo{"Fp8BatchesAndHeadsAreIndependent", kProd, fp8_batches_and_heads_are_independent, kFp8},
    PropertyInfo{"OnlineSoftmaxInvariants", kInst, [] { online_softmax_invariants(any_case()); }},
    PropertyInfo{"SequenceOnlineSoftmaxInvariants", kInst, sequence_online_softmax_invariants},
    // Inputs past the L2 cache take seconds a case: with the instrumented binary's properties rather than the
    // production binary's, so that the production binary's budgeted run spends its minute on the quick ones; the
    // instrumented binary's full and budgeted runs reach it.
    PropertyInfo{"LargeInputsAgreeAndRepeat", kInst, large_inputs_agree_and_repeat},
};

}  // namespace

std::span<const PropertyInfo> property_table() { return kTable; }

const PropertyInfo* find_property(std::string_view name) {
  const auto* found = std::find_if(kTable.begin(), kTable.end(), [&](const PropertyInfo& p) { return p.name == name; });
  return found == kTable.end() ? nullptr : &*found;
}

}  // namespace flashcheck::properties
