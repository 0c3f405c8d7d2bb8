// flashcheck's host model of the tiled algorithm (kernel/include/flashcheck/host_model.h), packaged as a subject
// (flashcheck/subject.h) in host memory: the subject path of every tool, property and fuzzer is tested on a
// machine without a GPU. It fixes the model's configuration to what it declares (tensor-core class for fp16/bf16,
// general-fp32 for fp32, kKeyTile keys per tile; tensor-core fp8 for f8e4m3, kFp8 key tiles per head dim), so that
// the declared arithmetic is the arithmetic that runs.
// Built five ways (FC_HOST_SUBJECT_VARIANT):
//   0  host-model                    everything flashcheck computes; healthy
//   1  host-model-missing-rescale    the same with a planted defect: the last K/V tile skips O's rescale
//   2  host-model-restricted         f16 only, head_dim 8..32, causal-br, contiguous bhsd, no GQA, softcap, sink
//                                    or LSE output, arithmetic undeclared (judged by the generic bound)
//   3  host-model-tiled              everything flashcheck computes, within shape limits (fc_subject_limits_v1):
//                                    seqlen_q a multiple of 16, seqlen_k a multiple of 32 and at least 32; of the
//                                    sequences, packed ones with spare K/V slots only (no paged K/V, no split-KV)
//   4  host-model-bad-gradient       everything flashcheck computes, with a planted backward defect: dS without D
//   5  host-model-dropout-offset-32bit  everything flashcheck computes, with a planted dropout defect: the Philox stream
//                                    offset truncated to its low 32 bits (forward, mask dump and backward)
//   6  host-model-head-dims          everything flashcheck computes at head dims 16, 32, 64 and 128 only (a list, as
//                                    FlexAttention declares), fp8 at 32, 64 and 128 (fc_subject_fp8_head_dims_v1,
//                                    as FlashAttention-3 takes multiples of 16): the relations whose second run takes
//                                    another head dim find one the subject takes, and no f8e4m3 case is refused
// Every variant but the restricted one reads V and O of their own width (fc_subject_value_dims_v1, 1..256) and takes
// sequences (fc_subject_sequences_v1): varlen, seqused_k, paged K/V and split-KV but for the tiled variant's narrower set;
// every one but the tiled and the restricted has a backward pass (fc_subject_backward_v1), a dropout in every dtype
// (fc_subject_dropout_v1: the documented mask, its dump, packed sequences, forward and backward) and the fp8 path
// (fc_subject_fp8_v1: e4m3 inputs with descales, the tensor-core fp8 class on tiles that depend on the head dim).
#include <iterator>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/dtype.h"
#include "flashcheck/host_model.h"
#include "flashcheck/mask_names.h"
#include "flashcheck/subject.h"
#include "flashcheck/subject_params.h"

#ifndef FC_HOST_SUBJECT_VARIANT
#define FC_HOST_SUBJECT_VARIANT 0
#endif

namespace {

constexpr int32_t kKeyTile = 64;  // keys per K/V tile of the modelled kernel (declared as arithmetic.key_tile)
constexpr bool kRestricted = FC_HOST_SUBJECT_VARIANT == 2;
constexpr int32_t kHeadDimList[] = {16, 32, 64, 128};  // variant 6's head dims
constexpr bool kListed = FC_HOST_SUBJECT_VARIANT == 6;

void copy_message(const std::string& message, char* err, size_t err_len) {
  if (err == nullptr || err_len == 0) return;
  const size_t n = message.size() < err_len - 1 ? message.size() : err_len - 1;
  message.copy(err, n);
  err[n] = '\0';
}

// A status as the subject ABI's return code, its message into err.
int code_of(const flashcheck::Status& status, char* err, size_t err_len) {
  if (status.ok()) return FC_SUBJECT_OK;
  copy_message(status.message(), err, err_len);
  return status.code() == flashcheck::StatusCode::kInvalidArgument ? FC_SUBJECT_INVALID_ARGUMENT
         : status.code() == flashcheck::StatusCode::kUnsupported   ? FC_SUBJECT_UNSUPPORTED
                                                                   : FC_SUBJECT_ERROR;
}

// The planted defect of a variant, or none.
constexpr flashcheck::ModelDefect kDefect = FC_HOST_SUBJECT_VARIANT == 1   ? flashcheck::ModelDefect::kMissingRescale
                                            : FC_HOST_SUBJECT_VARIANT == 4 ? flashcheck::ModelDefect::kBwdDsWithoutD
                                            : FC_HOST_SUBJECT_VARIANT == 5 ? flashcheck::ModelDefect::kDropoutOffset32Bit
                                                                           : flashcheck::ModelDefect::kNone;

int forward_fp8(const fc_subject_problem* problem, const fc_subject_fp8_args* fp8, const fc_subject_buffers* buffers,
                void* stream, char* err, size_t err_len);

// The fp8 path's descriptor. Its key tile depends on the head dim, in FlashAttention-3's fp8 pattern (hopper/
// tile_size.h: 160, 128, 224, 160 and 128 keys up to head dims 64, 96, 128, 192 and 256), so that the harness's
// per-head-dim tiles (fp8.key_tiles) run on a machine without a GPU. The table reaches 256, the widest head dim.
constexpr fc_subject_fp8 kFp8{FC_SUBJECT_ARITH_TENSOR_CORE_FP8, /*descales=*/1, /*key_tile=*/128, forward_fp8,
                              /*key_tiles_count=*/5, {{64, 160}, {96, 128}, {128, 224}, {192, 160}, {256, 128}}};

int run_model(flashcheck::Params params, char* err, size_t err_len) {
  // Without LSE output the model still needs somewhere to put it: its own scratch, never the caller's buffer.
  std::vector<float> scratch_lse;
  if (kRestricted) {
    scratch_lse.resize(static_cast<size_t>(params.batch * params.heads_q * params.seqlen_q));
    params.lse = scratch_lse.empty() ? nullptr : scratch_lse.data();
  }
  flashcheck::HostModelOptions options;
  options.override_config = true;
  options.config = flashcheck::select_config(params);
  // The declared classes: general-fp32 for fp32 and under a dropout, tensor-core for fp16/bf16 otherwise,
  // tensor-core fp8 for f8e4m3.
  const bool fp8 = params.dtype == flashcheck::DType::kF8E4M3;
  options.config.path = fp8 ? flashcheck::ComputePath::kTensorCoreFp8
                        : params.dtype == flashcheck::DType::kF32 || params.dropout_p != 0.0f
                            ? flashcheck::ComputePath::kGeneralFp32
                            : flashcheck::ComputePath::kTensorCore;
  options.config.block_m = fp8 ? fc_subject_fp8_tile_for(&kFp8, params.head_dim) : kKeyTile;
  options.config.block_n = options.config.block_m;
  options.defect = kDefect;
  return code_of(flashcheck::run_host_model(params, options), err, err_len);
}

int forward(const fc_subject_problem* problem, const fc_subject_buffers* buffers, void*, char* err, size_t err_len) {
  return run_model(flashcheck::params_of(*problem, *buffers), err, err_len);
}

int forward_sequences(const fc_subject_problem* problem, const fc_subject_sequence_args* sequences,
                      const fc_subject_buffers* buffers, void*, char* err, size_t err_len) {
  return run_model(flashcheck::params_of(*problem, *sequences, *buffers), err, err_len);
}

int run_backward_model(const flashcheck::BackwardParams& params, char* err, size_t err_len) {
  flashcheck::HostModelOptions options;
  options.defect = kDefect;
  return code_of(flashcheck::run_backward_host_model(params, options), err, err_len);
}

int backward(const fc_subject_problem* problem, const fc_subject_sequence_args* sequences,
             const fc_subject_backward_strides* strides, const fc_subject_buffers* forward,
             const fc_subject_backward_buffers* buffers, void*, char* err, size_t err_len) {
  return run_backward_model(flashcheck::backward_params_of(*problem, sequences, *strides, *forward, *buffers), err,
                            err_len);
}

int forward_dropout(const fc_subject_problem* problem, const fc_subject_sequence_args* sequences,
                    const fc_subject_dropout_args* dropout, const fc_subject_buffers* buffers, void*, char* err,
                    size_t err_len) {
  flashcheck::Params params = sequences != nullptr ? flashcheck::params_of(*problem, *sequences, *buffers)
                                                   : flashcheck::params_of(*problem, *buffers);
  flashcheck::set_dropout(*dropout, &params);
  return run_model(params, err, err_len);
}

int backward_dropout(const fc_subject_problem* problem, const fc_subject_sequence_args* sequences,
                     const fc_subject_dropout_args* dropout, const fc_subject_backward_strides* strides,
                     const fc_subject_buffers* forward, const fc_subject_backward_buffers* buffers, void*, char* err,
                     size_t err_len) {
  flashcheck::BackwardParams params = flashcheck::backward_params_of(*problem, sequences, *strides, *forward, *buffers);
  flashcheck::set_dropout(*dropout, &params.forward);
  return run_backward_model(params, err, err_len);
}

int forward_fp8(const fc_subject_problem* problem, const fc_subject_fp8_args* fp8, const fc_subject_buffers* buffers,
                void*, char* err, size_t err_len) {
  flashcheck::Params params = flashcheck::params_of(*problem, *buffers);
  flashcheck::set_fp8(*fp8, &params);
  return run_model(params, err, err_len);
}

// Every dtype the descriptor carries (f8e4m3 comes through fc_subject_fp8_v1) and every row of the mask table: the
// model computes them all.
constexpr uint32_t kAllDtypes =
    FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_F32) | FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_F16) | FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_BF16);
constexpr uint32_t kAllMasks = flashcheck::subject_bits(flashcheck::kMaskNames);
constexpr uint32_t kAllLayouts = FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BHSD) | FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BSHD) |
                                 FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_STRIDED);

constexpr fc_subject_capabilities kCapabilities =
    kRestricted ? fc_subject_capabilities{FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_F16), 8, 32, nullptr, 0,
                                          FC_SUBJECT_BIT(FC_SUBJECT_MASK_CAUSAL_BOTTOM_RIGHT),
                                          FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BHSD),
                                          /*gqa=*/0, /*lse=*/0, /*softcap=*/0, /*sink=*/0, FC_SUBJECT_MEMORY_HOST,
                                          /*instrumented=*/0}
                : fc_subject_capabilities{kAllDtypes, 1, 256, kListed ? kHeadDimList : nullptr,
                                          kListed ? static_cast<int32_t>(std::size(kHeadDimList)) : 0, kAllMasks,
                                          kAllLayouts, 1, 1, 1, 1, FC_SUBJECT_MEMORY_HOST, 0};

// Per dtype (f32, f16, bf16): the class and its rounding points (score accumulation, P, O accumulation).
constexpr fc_subject_arithmetic kArithmetic =
    kRestricted ? fc_subject_arithmetic{}
                : fc_subject_arithmetic{
                      {FC_SUBJECT_ARITH_GENERAL_FP32, FC_SUBJECT_ARITH_TENSOR_CORE, FC_SUBJECT_ARITH_TENSOR_CORE},
                      {FC_SUBJECT_FMT_FP32, FC_SUBJECT_FMT_FP32, FC_SUBJECT_FMT_FP32},
                      {FC_SUBJECT_FMT_FP32, FC_SUBJECT_FMT_INPUT, FC_SUBJECT_FMT_INPUT},
                      {FC_SUBJECT_FMT_FP32, FC_SUBJECT_FMT_FP32, FC_SUBJECT_FMT_FP32},
                      kKeyTile};

constexpr const char* kName = FC_HOST_SUBJECT_VARIANT == 1   ? "host-model-missing-rescale"
                              : FC_HOST_SUBJECT_VARIANT == 2 ? "host-model-restricted"
                              : FC_HOST_SUBJECT_VARIANT == 3 ? "host-model-tiled"
                              : FC_HOST_SUBJECT_VARIANT == 4 ? "host-model-bad-gradient"
                              : FC_HOST_SUBJECT_VARIANT == 5 ? "host-model-dropout-offset-32bit"
                              : FC_HOST_SUBJECT_VARIANT == 6 ? "host-model-head-dims"
                                                             : "host-model";

const fc_subject kSubject = {FC_SUBJECT_ABI_VERSION, kName, kCapabilities, kArithmetic, forward};

}  // namespace

const fc_subject* fc_subject_v1(void) { return &kSubject; }

#if FC_HOST_SUBJECT_VARIANT == 3
// seqlen_q % 16, seqlen_k % 32, seqlen_k >= 32; no maxima.
const fc_subject_limits* fc_subject_limits_v1(void) {
  static constexpr fc_subject_limits kLimits{16, 32, 0, 32, 0, 0};
  return &kLimits;
}
#endif

#if FC_HOST_SUBJECT_VARIANT != 2
// The model's sequences: every feature, or (tiled) packed sequences with spare slots only.
const fc_subject_sequences* fc_subject_sequences_v1(void) {
  static constexpr uint32_t kTiledFeatures = FC_SUBJECT_BIT(FC_SUBJECT_SEQ_VARLEN) | FC_SUBJECT_BIT(FC_SUBJECT_SEQ_SEQUSED_K);
  static constexpr uint32_t kEvery = kTiledFeatures | FC_SUBJECT_BIT(FC_SUBJECT_SEQ_PAGED) | FC_SUBJECT_BIT(FC_SUBJECT_SEQ_SPLITS);
  static constexpr fc_subject_sequences kSequences{FC_HOST_SUBJECT_VARIANT == 3 ? kTiledFeatures : kEvery, 0, 0,
                                                   forward_sequences};
  return &kSequences;
}

// The model's backward pass (run_backward_host_model): the general class in every dtype, deterministic, with dsink
// and packed sequences (not on the tiled variant, whose limits the backward's cases rarely meet).
#if FC_HOST_SUBJECT_VARIANT != 3
const fc_subject_backward* fc_subject_backward_v1(void) {
  static constexpr fc_subject_backward kBackward{
      {FC_SUBJECT_ARITH_GENERAL_FP32, FC_SUBJECT_ARITH_GENERAL_FP32, FC_SUBJECT_ARITH_GENERAL_FP32},
      /*sink=*/1, /*sequences=*/1, /*deterministic=*/1, backward};
  return &kBackward;
}

// The model's dropout (the documented mask): the general class in every dtype, its dump, packed sequences, backward.
const fc_subject_dropout* fc_subject_dropout_v1(void) {
  static constexpr fc_subject_dropout kDropout{
      {FC_SUBJECT_ARITH_GENERAL_FP32, FC_SUBJECT_ARITH_GENERAL_FP32, FC_SUBJECT_ARITH_GENERAL_FP32},
      /*mask_dump=*/1, /*sequences=*/1, forward_dropout, backward_dropout};
  return &kDropout;
}

// The model's fp8 path (e4m3 Q, K, V with descales, O in bf16).
const fc_subject_fp8* fc_subject_fp8_v1(void) { return &kFp8; }

#if FC_HOST_SUBJECT_VARIANT == 6
// Its fp8 head dims: multiples of 32.
const fc_subject_fp8_head_dims* fc_subject_fp8_head_dims_v1(void) {
  static constexpr fc_subject_fp8_head_dims kFp8HeadDims{32};
  return &kFp8HeadDims;
}
#endif
#endif

// The model reads head_dim_v (params_of): every width flashcheck computes.
const fc_subject_value_dims* fc_subject_value_dims_v1(void) {
  static constexpr fc_subject_value_dims kValueDims{1, 256};
  return &kValueDims;
}
#endif
