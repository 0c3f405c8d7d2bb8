// A subject (flashcheck/subject.h) loaded from its shared library: someone else's attention kernel under the
// same guards, generators and verdicts as flashcheck's own. load() checks the ABI version and the descriptor and
// names what is wrong; supports() answers, for one problem, whether it lies inside the declared capabilities
// (outside them a case is UNSUPPORTED for this subject, never a pass); run_case() runs a case through the
// guarded runner (poison, canaries, input hashes), on the host or on the device as the subject declares;
// run_backward_case() runs a grad=1 case forward and backward on a library that declares a backward pass.
// Invariant: a case reaches the subject's forward only when can_implement() and supports() accept it.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>

#include "flashcheck/attention.h"
#include "flashcheck/backward_check.h"
#include "flashcheck/case.h"
#include "flashcheck/dtype.h"
#include "flashcheck/inputs.h"
#include "flashcheck/runner.h"
#include "flashcheck/subject.h"

namespace flashcheck {

// Exit status of a tool whose --subject (or FLASHCHECK_SUBJECT) cannot be loaded or is malformed (EX_CONFIG):
// not an outcome of any case, since no case ran.
inline constexpr int kExitBadSubject = 78;

class LoadedSubject {
 public:
  ~LoadedSubject();
  LoadedSubject(const LoadedSubject&) = delete;
  LoadedSubject& operator=(const LoadedSubject&) = delete;

  // dlopen()s `path`, calls its fc_subject_v1 and validates the descriptor. On failure *out stays empty and the
  // status (kInvalidArgument) says what is wrong: "subject PATH: <what>".
  static Status load(const std::string& path, std::unique_ptr<LoadedSubject>* out);

  const fc_subject& descriptor() const { return *subject_; }
  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  bool on_device() const { return subject_->capabilities.memory == FC_SUBJECT_MEMORY_DEVICE; }

  // Whether the library takes `dtype` (f8e4m3 through its fp8 path, the others through capabilities.dtypes) and
  // `head_dim` (the capabilities' list or range).
  bool takes_dtype(DType dtype) const;
  bool takes_head_dim(int64_t head_dim) const;
  // The same for a case of `dtype`: f8e4m3's head dims also a multiple of the fp8 path's (fc_subject_fp8_head_dims_v1).
  bool takes_head_dim(DType dtype, int64_t head_dim) const;
  // The head dim nearest `head_dim` that a case of `dtype` may have (the smaller on a tie); 0 where there is none.
  int64_t nearest_head_dim(DType dtype, int64_t head_dim) const;
  // Ok, or kUnsupported naming the field outside the capabilities or the shape limits ("head_dim: 200 not among
  // 1..128 (subject x)", "seqlen_k: 17 is not a multiple of 32 (subject x)").
  Status supports(const Params& params) const;
  // The same for a case (its sink and its sequences, whose pointers case_params leaves null, count).
  Status supports(const Case& c) const;

  // The configuration the verdict judges by: the declared class's compute path (kGeneralFp32 as a placeholder
  // when undeclared: generic_bound() then says so), block_n the declared key tile (kDefaultKeyTile when
  // undeclared; only row sampling and the reference's tiling use it then); f8e4m3's block_n the fp8 path's tile for
  // `head_dim` (fp8_key_tile).
  KernelConfig config(DType dtype, int64_t head_dim) const;
  bool generic_bound(DType dtype) const { return !declared_[static_cast<size_t>(dtype)]; }
  // The head_dim_v range the library declares (fc_subject_value_dims_v1), or none: head_dim_v == head_dim only.
  const std::optional<fc_subject_value_dims>& value_dims() const { return value_dims_; }
  // The shape limits the library declares (fc_subject_limits_v1; every field 0 where it declares none).
  const fc_subject_limits& limits() const { return limits_; }
  bool has_limits() const {
    return limits_.seqlen_q_multiple > 1 || limits_.seqlen_k_multiple > 1 || limits_.seqlen_q_min > 0 ||
           limits_.seqlen_k_min > 0 || limits_.seqlen_q_max > 0 || limits_.seqlen_k_max > 0;
  }
  bool tiling_declared() const { return subject_->arithmetic.key_tile > 0; }
  // The sequence features the library declares (fc_subject_sequences_v1), or none: dense cases only.
  const std::optional<fc_subject_sequences>& sequences() const { return sequences_; }
  // Whether it declares FC_SUBJECT_SEQ_<feature>.
  bool takes(int feature) const { return sequences_ && (sequences_->features & FC_SUBJECT_BIT(feature)) != 0; }
  // The backward pass the library declares (fc_subject_backward_v1), or none: forward cases only.
  const std::optional<fc_subject_backward>& backward() const { return backward_; }
  // Ok when a grad=1 case of `params` (or of `c`) lies inside the forward's capabilities and the backward's (a
  // declared class for its dtype, dsink for a sink, packed sequences only where declared, no paged K/V or split-KV, a
  // dropout only with backward_dropout), else kUnsupported naming the field.
  Status supports_backward(const Params& params) const;
  Status supports_backward(const Case& c) const;
  // The backward's class for `dtype` (FC_SUBJECT_ARITH_*; UNDECLARED without a backward or a class for it), and as a
  // compute path (kGeneralFp32 where undeclared: supports_backward refuses).
  int32_t backward_class(DType dtype) const;
  ComputePath backward_path(const Params& params) const;  // general-fp32 under a dropout
  // The dropout the library declares (fc_subject_dropout_v1), or none: dropout cases are UNSUPPORTED.
  const std::optional<fc_subject_dropout>& dropout() const { return dropout_; }
  // Whether it declares a dropout for `dtype` (the general-fp32 class).
  bool drops(DType dtype) const;
  // KernelConfig::name of a run under a dropout (stable storage).
  const std::string& dropout_config_name() const { return dropout_config_name_; }
  // The fp8 path the library declares (fc_subject_fp8_v1), or none: f8e4m3 cases are UNSUPPORTED.
  const std::optional<fc_subject_fp8>& fp8() const { return fp8_; }
  // The fp8 path's key tile at `head_dim`: the first fp8.key_tiles entry that covers it, else fp8.key_tile, else
  // arithmetic.key_tile (load() holds a head dim the library takes to one of them); 0 without an fp8 path.
  int32_t fp8_key_tile(int64_t head_dim) const;
  // Whether its fp8 path takes rows of `tiles` whole key tiles at `head_dim` (the head dim taken, the keys within
  // the seqlen_k limit).
  bool takes_fp8_tiles(int64_t head_dim, int64_t tiles) const;

  // One line: name, memory kind, dtypes, head dims, masks, layouts, features, arithmetic per dtype.
  std::string describe() const;

  static constexpr int32_t kDefaultKeyTile = 64;

 private:
  LoadedSubject() = default;
  // case_params(c) with stand-in pointers for its sink, descales and index arrays: what supports() reads of them is which
  // exist.
  static Params stand_in_params(const Case& c);
  Status no_backward() const;
  Status backward_refusal(const Params& params) const;  // the backward's own conditions, the forward's supported
  void* handle_ = nullptr;
  const fc_subject* subject_ = nullptr;
  std::string name_, path_;
  std::array<bool, kDTypes.size()> declared_{};          // per dtype: an arithmetic class of the error model
  std::array<ComputePath, kDTypes.size()> path_of_{};    // per dtype: the class as a compute path
  std::array<std::string, kDTypes.size()> config_name_;  // KernelConfig::name per dtype (stable storage)
  fc_subject_limits limits_{};
  std::optional<fc_subject_value_dims> value_dims_;
  std::optional<fc_subject_sequences> sequences_;
  std::optional<fc_subject_backward> backward_;
  std::optional<fc_subject_dropout> dropout_;
  std::string dropout_config_name_;
  std::optional<fc_subject_fp8> fp8_;
  int32_t fp8_head_dim_multiple_ = 1;  // fc_subject_fp8_head_dims_v1's multiple (1: the capabilities' head dims)
};

// A case moved onto a subject's sequence features: without any, dense (the sequences' bounds as its shape); paged
// K/V packed without FC_SUBJECT_SEQ_PAGED, a page size onto its multiple with it; spare K/V slots (seqused_k)
// dropped without FC_SUBJECT_SEQ_SEQUSED_K; splits = 1 without FC_SUBJECT_SEQ_SPLITS, within max_splits with it (and
// 2 for flashcheck's heuristic, splits=0); sq and sk onto the shape limits, every sequence within them. The
// generators and the report's sweep draw sequence cases this way.
Case onto_sequence_features(const LoadedSubject& subject, Case c);

// A seqlen moved onto a subject's shape limits (fc_subject_limits: 0 and 1 mean none): at least the minimum, up to
// the next multiple, and down to the largest multiple within the maximum. The generators and the report's sweep
// draw shapes this way.
int64_t seqlen_onto_limits(int64_t seqlen, int64_t multiple, int64_t minimum, int64_t maximum);

// Runs `inputs` on `subject` through the guarded runner. A case the subject does not support ends with status
// kUnsupported before its forward is called; instrumentation (row m, l, traces) is kUnsupported for every
// subject. RunOutputs carry the subject's name and how the verdict judges it (generic_bound, tiling_declared,
// lse_written). A device subject without a CUDA device is kNoDevice.
RunOutputs run_case(const HostInputs& inputs, const LoadedSubject& subject, const RunOptions& options = {});

// Runs a grad=1 case's `inputs` on `subject`: its forward through the guarded runner, then its backward on the O and
// LSE the forward wrote, with the backward's guards (backward_check.h, run_backward_case). A case outside
// supports_backward ends with status kUnsupported before any call; `options.defect` is ignored (a subject's defects
// are its own). BackwardOutputs::path is the class the library declares for the dtype.
BackwardOutputs run_backward_case(const HostInputs& inputs, const LoadedSubject& subject,
                                  const BackwardRunOptions& options = {});

// Why a case line cannot run in this process: it names subject=NAME (a finding replays against the subject it was
// found on) and `loaded` (null: none) is another. "" when the line names none or the loaded one.
std::string wrong_subject(const Case& c, const LoadedSubject* loaded);

// The subject FLASHCHECK_SUBJECT names, loaded once per process (property binaries, fuzzers); null when the
// variable is unset or empty, and when it cannot be loaded, with the reason in *error (same on every call).
const LoadedSubject* subject_from_environment(std::string* error);

}  // namespace flashcheck
