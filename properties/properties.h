// The properties, each written once against the active tier's backend (tier.h) and listed once in
// property_table(), from which suite.h registers a RapidCheck test per property in every tier and
// flashcheck-repro replays a case line's property=NAME. Every property draws its case inside (gen_case and the
// narrower generators, generators.h), which a replayed case line takes the place of (replay.h); the relation's own
// choices come from the case's seed (RelationDraws, checks.h), so the line alone reruns the relation.
#pragma once

#include <span>
#include <string_view>

#include "flashcheck/case.h"

namespace flashcheck::properties {

// The binary a property runs in on the GPU: the production kernel, or the instrumented one (per-tile m/l traces;
// inputs past the L2 cache). The host model runs both.
enum class PropertyBinary { kProduction, kInstrumented };

// The pass a property checks: the forward's O and LSE, the backward's gradients (grad=1 cases), or dropout (forward
// and backward with a dropout). A subject runs the backward properties where it declares a backward pass
// (fc_subject_backward_v1) and dropout's where it declares a dropout (fc_subject_dropout_v1).
// kFp8: the fp8 path's forward (f8e4m3 cases): the host model, the fp8 kernel (sm_90a builds), and a subject that
// declares an fp8 path (fc_subject_fp8_v1).
enum class PropertyPass { kForward, kBackward, kDropout, kFp8 };

struct PropertyInfo {
  const char* name;       // the test name in every tier (<Suite>.<name>) and a case line's property=NAME
  PropertyBinary binary;
  void (*body)();         // draws its case, runs the relation, asserts with RC_ASSERT
  PropertyPass pass = PropertyPass::kForward;
};

// Every property, in the order the tiers run them.
std::span<const PropertyInfo> property_table();
// The row named `name`, or null.
const PropertyInfo* find_property(std::string_view name);

// 1. O and LSE within the error-model bound of the exact oracle, plus the statistical RMS check.
void oracle_agreement(const Case& c);
void large_inputs_agree_and_repeat();

// 2. Online-softmax invariants from the instrumented build: per-tile (m, l) traces and final m, l.
void online_softmax_invariants(const Case& c);

// 3. Metamorphic relations: the kernel against itself.
void permuting_keys_leaves_output_unchanged();
void shifting_keys_shifts_only_lse();
void affine_values_give_affine_output();
void output_within_value_range(const Case& c);
void batches_and_heads_are_independent(const Case& c);
void causal_rows_ignore_invisible_keys();
void nan_in_masked_keys_never_reaches_output();
void gqa_equals_repeated_heads();
void merge_of_key_halves_equals_whole();
void layouts_agree_bit_for_bit(const Case& c);
void repeated_runs_are_bit_identical(const Case& c);
void small_grids_give_the_same_bits();
void head_dim_v_of_head_dim_is_the_default();
void permuting_v_columns_permutes_o();
void o_columns_are_independent();

// 4. Memory safety: poisoned outputs fully overwritten, canaries intact, inputs unchanged.
void memory_safety(const Case& c);

// 5. The documented NaN / Inf semantics, row by row.
void special_values_follow_semantics();

// 6. Sliding windows, softcaps and sinks against their definitions (attention.h).
void window_covering_all_keys_equals_no_mask();
void window_minus_one_zero_equals_causal();
void minus_inf_sink_equals_no_sink();
void sink_equals_extra_zero_value_key();
void large_softcap_equals_no_softcap();
void nan_outside_window_never_reaches_output();

// Property 7 (sequences.cpp): the inference path, varlen, paged and split-KV.
void sequences_agree_with_oracle();
void sequences_are_memory_safe();
void sequence_online_softmax_invariants();
void poison_never_reaches_output();
void paged_equals_packed_bit_for_bit();
void other_sequences_leave_a_row_unchanged();
void splits_repeat_and_agree_with_unsplit();

// Property 8 (backward.cpp): the backward pass, grad=1 cases (PropertyPass::kBackward).
void gradients_agree_with_oracle();
void gradients_are_linear_in_dout();
void deterministic_gradients_repeat();
void grouped_key_gradients_sum_repeated_heads();
void nan_in_hidden_keys_never_reaches_gradients();
void key_gradients_sum_to_zero();
void permuting_keys_permutes_key_gradients();
void key_shift_invariance();
void rows_without_keys_get_zero_gradients();

// Property 9 (dropout.cpp): dropout, forward and backward, against the contract and the oracle.
void dropout_agrees_with_oracle();
void dropout_mask_dump_is_the_contract();
void dropout_zero_is_no_dropout();
void dropout_offset_changes_only_the_mask();
void dropout_threshold_is_exact();

// Property 10 (fp8.cpp): the fp8 path, f8e4m3 cases (PropertyPass::kFp8).
void fp8_agrees_with_oracle();
void fp8_p_never_saturates();
void fp8_light_keys_keep_their_weight();
void fp8_query_heads_read_their_kv_heads_descales();
void fp8_power_of_two_descales_scale_exactly();
void fp8_agrees_with_bf16_on_exact_inputs();
void fp8_memory_safety();
void fp8_layouts_agree_bit_for_bit();
void fp8_repeated_runs_are_bit_identical();
void fp8_batches_and_heads_are_independent();

}  // namespace flashcheck::properties
