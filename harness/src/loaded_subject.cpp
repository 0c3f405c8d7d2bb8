// Loading, validating and running a subject (loaded_subject.h). The descriptor is checked field by field once,
// at load time, so that supports() and run_case() can trust it; every message names the field that is wrong.
// A subject's arithmetic is mapped onto the error model's classes where its class or its rounding points
// match one; otherwise it is judged by the generic bound (docs/error-model.md §3.1).
#include "flashcheck/loaded_subject.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string_view>
#include <tuple>

#ifndef FLASHCHECK_PYTHON_BRIDGE_DEFAULT
#define FLASHCHECK_PYTHON_BRIDGE_DEFAULT ""  // no bridge built
#endif

#include "flashcheck/case.h"
#include "flashcheck/mask_names.h"
#include "flashcheck/oracle.h"
#include "flashcheck/subject_params.h"
#include "flashcheck/python_bridge.h"

namespace flashcheck {
namespace {

constexpr int32_t kMaxHeadDim = 256;
constexpr size_t kErrLen = 512;
constexpr uint32_t kSequenceFeatures = FC_SUBJECT_BIT(FC_SUBJECT_SEQ_VARLEN) | FC_SUBJECT_BIT(FC_SUBJECT_SEQ_SEQUSED_K) |
                                       FC_SUBJECT_BIT(FC_SUBJECT_SEQ_PAGED) | FC_SUBJECT_BIT(FC_SUBJECT_SEQ_SPLITS);

Status bad(const std::string& path, const std::string& what) {
  return {StatusCode::kInvalidArgument, "subject " + path + ": " + what};
}

// The rounding points of each class, as subject.h lists them: (score accumulation, P before P*V, O accumulation).
struct ClassPoints {
  int32_t arith;
  ComputePath path;
  int32_t score, p, o;
  bool for_fp32_inputs, for_tensor_core_inputs;  // the dtypes the class applies to (DTypeInfo::tensor_core_input)
  bool applies_to(const DTypeInfo& info) const {
    return info.tensor_core_input ? for_tensor_core_inputs : for_fp32_inputs;
  }
};
constexpr ClassPoints kClasses[] = {
    {FC_SUBJECT_ARITH_GENERAL_FP32, ComputePath::kGeneralFp32, FC_SUBJECT_FMT_FP32, FC_SUBJECT_FMT_FP32,
     FC_SUBJECT_FMT_FP32, true, true},
    {FC_SUBJECT_ARITH_TENSOR_CORE, ComputePath::kTensorCore, FC_SUBJECT_FMT_FP32, FC_SUBJECT_FMT_INPUT,
     FC_SUBJECT_FMT_FP32, false, true},
    {FC_SUBJECT_ARITH_SPLIT_TF32, ComputePath::kSplitTf32, FC_SUBJECT_FMT_TF32X3, FC_SUBJECT_FMT_TF32X3,
     FC_SUBJECT_FMT_FP32, true, false},
};

// The subject ABI repeats the C ABI's codes so that a subject builds without flashcheck's headers: the same
// numbers, row by row of dtypes.def and masks.def.
#define FC_DTYPE_ROW(c_suffix, enumerator, code, ...)  \
  static_assert(FC_SUBJECT_DTYPE_##c_suffix == (code), \
                "subject.h: FC_SUBJECT_DTYPE_" #c_suffix " != FC_DTYPE_" #c_suffix);
#include "flashcheck/dtypes.def"
#undef FC_DTYPE_ROW
#define FC_MASK_ROW(c_suffix, enumerator, code, ...) \
  static_assert(FC_SUBJECT_MASK_##c_suffix == (code), "subject.h: FC_SUBJECT_MASK_" #c_suffix " != FC_MASK_" #c_suffix);
#include "flashcheck/masks.def"
#undef FC_MASK_ROW

// The dtype rows the version-1 ABI carries: its per-dtype arrays (fc_subject_arithmetic's, the backward's and the
// dropout's) hold one entry per code below their length. A row beyond them (f8e4m3) comes through its own entry point
// (fc_subject_fp8_v1); the capabilities cannot name it.
constexpr size_t kAbiDTypeCount = std::size(fc_subject_arithmetic{}.arithmetic);
constexpr std::array<DTypeInfo, kAbiDTypeCount> kSubjectDTypes = [] {
  std::array<DTypeInfo, kAbiDTypeCount> rows{};
  for (const DTypeInfo& info : kDTypes) {
    if (static_cast<size_t>(info.c_code) < kAbiDTypeCount) rows[static_cast<size_t>(info.c_code)] = info;
  }
  return rows;
}();
constexpr bool abi_rows_complete() {
  for (size_t i = 0; i < kAbiDTypeCount; ++i) {
    if (kSubjectDTypes[i].name == nullptr || static_cast<size_t>(kSubjectDTypes[i].c_code) != i) return false;
  }
  return true;
}
static_assert(abi_rows_complete(), "dtypes.def: every code the subject ABI's arrays index needs its row");

const char* arith_name(int32_t arith) {
  switch (arith) {
    case FC_SUBJECT_ARITH_GENERAL_FP32: return "general-fp32";
    case FC_SUBJECT_ARITH_TENSOR_CORE: return "tensor-core";
    case FC_SUBJECT_ARITH_SPLIT_TF32: return "split-tf32";
    case FC_SUBJECT_ARITH_TENSOR_CORE_FP8: return "tensor-core-fp8";
    default: return "undeclared";
  }
}

bool is_bool(int32_t x) { return x == 0 || x == 1; }

// Strides contiguous for `layout` over d elements per row.
// `rows` rows of d elements per head (a batch entry, a packed tensor's every row, or one page); the batch stride too
// where `with_batch` (a packed tensor has none).
bool contiguous(const Strides& s, int64_t d, int64_t heads, int64_t rows, uint32_t layout, bool with_batch) {
  if (layout == FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BHSD)) {
    return s.row == d && s.head == rows * d && (!with_batch || s.batch == heads * rows * d);
  }
  return s.head == d && s.row == heads * d && (!with_batch || s.batch == rows * heads * d);  // BSHD
}

std::string list_dtypes(uint32_t bits) {
  std::string out;
  for (const DTypeInfo& info : kSubjectDTypes) {
    if (bits & (1u << static_cast<int>(info.dtype))) out += std::string(out.empty() ? "" : ", ") + info.name;
  }
  return out;
}

const char* mask_text(Mask mask) {
  for (const MaskName& m : kMaskNames) {
    if (m.mask == mask) return m.name;
  }
  return "?";
}

std::string list_masks(uint32_t bits) {
  std::string out;
  for (const MaskName& m : kMaskNames) {
    if (bits & (1u << static_cast<int>(m.mask))) out += std::string(out.empty() ? "" : ", ") + m.name;
  }
  return out;
}

std::string head_dims_text(const fc_subject_capabilities& caps) {
  if (caps.head_dims == nullptr) return std::to_string(caps.head_dim_min) + ".." + std::to_string(caps.head_dim_max);
  std::string out;
  for (int32_t i = 0; i < caps.head_dim_count; ++i) out += (i ? "," : "") + std::to_string(caps.head_dims[i]);
  return out;
}

Status validate(const std::string& path, const fc_subject& s) {
  const fc_subject_capabilities& c = s.capabilities;
  if (s.name == nullptr || !is_subject_name(s.name)) return bad(path, "name: 1 to 64 of A-Z a-z 0-9 . _ -");
  if (s.forward == nullptr) return bad(path, "forward: null");
  if (c.dtypes == 0 || (c.dtypes & ~subject_bits(kSubjectDTypes)) != 0) {
    return bad(path, "capabilities.dtypes: a non-empty set of FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_*)");
  }
  if (c.head_dims != nullptr) {
    if (c.head_dim_count < 1) return bad(path, "capabilities.head_dim_count: at least 1 with a head_dims list");
    for (int32_t i = 0; i < c.head_dim_count; ++i) {
      if (c.head_dims[i] < 1 || c.head_dims[i] > kMaxHeadDim) return bad(path, "capabilities.head_dims: each in 1..256");
    }
  } else if (c.head_dim_min < 1 || c.head_dim_max > kMaxHeadDim || c.head_dim_min > c.head_dim_max) {
    return bad(path, "capabilities.head_dim_min/max: 1 <= min <= max <= 256");
  }
  if (c.masks == 0 || (c.masks & ~subject_bits(kMaskNames)) != 0) return bad(path, "capabilities.masks: a non-empty set of FC_SUBJECT_BIT(FC_SUBJECT_MASK_*)");
  if (c.layouts == 0 || (c.layouts & ~7u) != 0) {
    return bad(path, "capabilities.layouts: a non-empty set of FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_*)");
  }
  if (!is_bool(c.gqa) || !is_bool(c.lse) || !is_bool(c.softcap) || !is_bool(c.sink)) {
    return bad(path, "capabilities.gqa, lse, softcap, sink: 0 or 1");
  }
  if (c.memory != FC_SUBJECT_MEMORY_DEVICE && c.memory != FC_SUBJECT_MEMORY_HOST) {
    return bad(path, "capabilities.memory: FC_SUBJECT_MEMORY_DEVICE or FC_SUBJECT_MEMORY_HOST");
  }
  if (c.instrumented != 0) return bad(path, "capabilities.instrumented: 0 (ABI version 1 carries no instrumentation)");
  if (s.arithmetic.key_tile < 0) return bad(path, "arithmetic.key_tile: >= 0 (0 = undeclared)");
  for (const DTypeInfo& info : kSubjectDTypes) {
    const size_t d = static_cast<size_t>(info.dtype);
    const int32_t arith = s.arithmetic.arithmetic[d];
    if (arith < FC_SUBJECT_ARITH_UNDECLARED || arith > FC_SUBJECT_ARITH_SPLIT_TF32) {
      return bad(path, std::string("arithmetic.arithmetic[") + info.name + "]: one of FC_SUBJECT_ARITH_*");
    }
    const int32_t points[] = {s.arithmetic.score_accumulation[d], s.arithmetic.p_rounding[d], s.arithmetic.o_accumulation[d]};
    for (int32_t p : points) {
      if (p < FC_SUBJECT_FMT_UNDECLARED || p > FC_SUBJECT_FMT_TF32X3) {
        return bad(path, std::string("arithmetic rounding points [") + info.name + "]: one of FC_SUBJECT_FMT_*");
      }
    }
    if (arith == FC_SUBJECT_ARITH_UNDECLARED || !(c.dtypes & (1u << d))) continue;
    for (const ClassPoints& k : kClasses) {
      if (k.arith != arith) continue;
      if (!k.applies_to(info)) {
        return bad(path, std::string("arithmetic.arithmetic[") + info.name + "]: " + arith_name(arith) +
                             " does not apply to " + info.name);
      }
      const int32_t want[] = {k.score, k.p, k.o};
      for (int i = 0; i < 3; ++i) {
        if (points[i] != FC_SUBJECT_FMT_UNDECLARED && points[i] != want[i]) {
          return bad(path, std::string("arithmetic [") + info.name + "]: the declared rounding points contradict the class " +
                               arith_name(arith) + " (docs/error-model.md §3)");
        }
      }
    }
  }
  return Status::ok_status();
}

// An optional entry point's answer into *out: null where the library does not export it, a refusal where it answers
// null.
template <typename T>
Status optional_entry(void* handle, const std::string& path, const char* symbol, const T** out) {
  *out = nullptr;
  void* entry = dlsym(handle, symbol);
  if (entry == nullptr) return Status::ok_status();
  *out = reinterpret_cast<const T* (*)(void)>(entry)();
  return *out != nullptr ? Status::ok_status() : bad(path, std::string(symbol) + "() returned null");
}

// A per-dtype class array of an optional entry point (backward.arithmetic, dropout.arithmetic): each declared class
// passes `check` (what is wrong with it, or ""), only for a dtype the capabilities take, and at least one declared.
template <typename Check>
Status check_classes(const std::string& path, const std::string& what, const int32_t (&arithmetic)[3], uint32_t dtypes,
                     Check&& check) {
  bool any = false;
  for (const DTypeInfo& info : kSubjectDTypes) {
    const int32_t arith = arithmetic[static_cast<size_t>(info.dtype)];
    if (arith == FC_SUBJECT_ARITH_UNDECLARED) continue;
    const std::string field = what + "[" + info.name + "]: ";
    if (const std::string why = check(arith, info); !why.empty()) return bad(path, field + why);
    if (!(dtypes & (1u << static_cast<int>(info.dtype)))) {
      return bad(path, field + "a class for a dtype the capabilities leave out");
    }
    any = true;
  }
  return any ? Status::ok_status() : bad(path, what + ": a class for at least one dtype");
}

// A subject call's return code as a status: its message (or that it gave none) under the subject's name.
Status status_of(const LoadedSubject& subject, const char* call, int code, char (&err)[kErrLen]) {
  if (code == FC_SUBJECT_OK) return Status::ok_status();
  err[kErrLen - 1] = '\0';
  const std::string message =
      "subject " + subject.name() + ": " + (err[0] ? std::string(err) : std::string(call) + " failed without a message");
  switch (code) {
    case FC_SUBJECT_INVALID_ARGUMENT: return {StatusCode::kInvalidArgument, message};
    case FC_SUBJECT_UNSUPPORTED: return {StatusCode::kUnsupported, message};
    default: return {StatusCode::kCudaError, message + " (" + call + " returned " + std::to_string(code) + ")"};
  }
}

// The subject's forward on `params` (pointers in the subject's memory kind), after the checks every case gets.
Status call_forward(const LoadedSubject& subject, const Params& params, void* stream) {
  if (Status st = can_implement(params); !st.ok()) return st;
  if (Status st = subject.supports(params); !st.ok()) return st;
  const fc_subject_problem problem = problem_of(params);
  const fc_subject_buffers buffers{params.q, params.k, params.v, params.o, params.lse, params.sink};
  char err[kErrLen] = {};
  // supports() let sequences and split-KV through only for a library with forward_sequences.
  const bool sequence_call = has_sequences(params) || params.num_splits != 1;
  const fc_subject_sequence_args sequences = sequence_args_of(params);
  if (params.dtype == DType::kF8E4M3) {  // supports() let it through only for a library with forward_fp8, dense
    const fc_subject_fp8_args fp8 = fp8_args_of(params);
    const int code = subject.fp8()->forward_fp8(&problem, &fp8, &buffers, stream, err, sizeof err);
    return status_of(subject, "forward_fp8", code, err);
  }
  if (params.dropout_p != 0.0f) {  // supports() let it through only for a library with forward_dropout
    const fc_subject_dropout_args dropout = dropout_args_of(params);
    const int code = subject.dropout()->forward_dropout(&problem, sequence_call ? &sequences : nullptr, &dropout,
                                                        &buffers, stream, err, sizeof err);
    return status_of(subject, "forward_dropout", code, err);
  }
  const int code = sequence_call ? subject.sequences()->forward_sequences(&problem, &sequences, &buffers, stream, err, sizeof err)
                                 : subject.descriptor().forward(&problem, &buffers, stream, err, sizeof err);
  return status_of(subject, "forward", code, err);
}

// The subject's backward on `params` (pointers in the subject's memory kind), after the checks every case gets.
Status call_backward(const LoadedSubject& subject, const BackwardParams& params, void* stream) {
  if (Status st = can_implement_backward(params); !st.ok()) return st;
  if (Status st = subject.supports_backward(params.forward); !st.ok()) return st;
  const Params& f = params.forward;
  const fc_subject_problem problem = problem_of(f);
  const fc_subject_sequence_args sequences = sequence_args_of(f);
  const fc_subject_backward_strides strides = backward_strides_of(params);
  const fc_subject_buffers forward{f.q, f.k, f.v, nullptr, nullptr, f.sink};
  const fc_subject_backward_buffers buffers{f.o, f.lse, params.d_o, params.dq, params.dk, params.dv, params.dsink};
  char err[kErrLen] = {};
  if (f.dropout_p != 0.0f) {  // supports_backward() let it through only for a library with backward_dropout
    fc_subject_dropout_args dropout = dropout_args_of(f);
    dropout.mask_out = nullptr;
    const int code = subject.dropout()->backward_dropout(&problem, has_sequences(f) ? &sequences : nullptr, &dropout,
                                                         &strides, &forward, &buffers, stream, err, sizeof err);
    return status_of(subject, "backward_dropout", code, err);
  }
  const int code = subject.backward()->backward(&problem, has_sequences(f) ? &sequences : nullptr, &strides, &forward,
                                                &buffers, stream, err, sizeof err);
  return status_of(subject, "backward", code, err);
}

// The widest head dim the capabilities take (validate() holds a list to at least one entry).
int32_t widest_head_dim(const fc_subject_capabilities& c) {
  return c.head_dims == nullptr ? c.head_dim_max : *std::max_element(c.head_dims, c.head_dims + c.head_dim_count);
}

}  // namespace

LoadedSubject::~LoadedSubject() {
  if (handle_ != nullptr) dlclose(handle_);
}

Status LoadedSubject::load(const std::string& path, std::unique_ptr<LoadedSubject>* out) {
  out->reset();
  if (path.empty()) return bad("''", "empty path");
  // python:MODULE:FUNCTION is a callable the Python bridge serves (subjects/python/python_bridge.h).
  const bool python = path.rfind(FC_SUBJECT_PYTHON_PREFIX, 0) == 0;
  std::string open_path;
  std::error_code ec;
  if (python) {
    const char* bridge = std::getenv("FLASHCHECK_PYTHON_BRIDGE");
    open_path = bridge != nullptr && *bridge != '\0' ? bridge : FLASHCHECK_PYTHON_BRIDGE_DEFAULT;
    if (open_path.empty()) {
      return bad(path, "this flashcheck is built without the Python bridge (CMake found no Python 3 to embed); "
                       "FLASHCHECK_PYTHON_BRIDGE names one built elsewhere");
    }
  } else {
    // A path that names a file is that file, written with or without a directory: dlopen() alone would search the
    // library path for a bare "libmy_kernel.so" and miss the one in the working directory.
    const bool is_file = std::filesystem::is_regular_file(path, ec);
    if (!is_file && std::filesystem::exists(path, ec)) return bad(path, "not a regular file (a shared library is)");
    open_path = is_file ? std::filesystem::absolute(path, ec).string() : path;
  }
  // RTLD_LOCAL: a subject's own copy of flashcheck (the host-model subject links the model) stays its own. The bridge
  // stays loaded (RTLD_NODELETE): the interpreter it started cannot be unloaded.
  void* handle = dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL | (python ? RTLD_NODELETE : 0));
  if (handle == nullptr) {
    const char* why = dlerror();
    return bad(path, std::string("cannot load: ") + (why ? why : "dlopen failed"));
  }
  std::unique_ptr<LoadedSubject> s(new LoadedSubject);
  s->handle_ = handle;
  s->path_ = path;
  dlerror();
  const fc_subject* descriptor = nullptr;
  const fc_subject_limits* limits = nullptr;
  const fc_subject_value_dims* dims = nullptr;
  const fc_subject_sequences* seqs = nullptr;
  const fc_subject_backward* bwd = nullptr;
  const fc_subject_dropout* drop = nullptr;
  const fc_subject_fp8* fp8 = nullptr;
  const fc_subject_fp8_head_dims* fp8_dims = nullptr;
  if (python) {
    void* symbol = dlsym(handle, FC_SUBJECT_PYTHON_ENTRY_POINT);
    if (symbol == nullptr) return bad(path, "the Python bridge " + open_path + " has no " FC_SUBJECT_PYTHON_ENTRY_POINT);
    const fc_subject_python answer = reinterpret_cast<fc_subject_python_fn>(symbol)(path.c_str());
    if (answer.subject == nullptr) return bad(path, answer.error != nullptr ? answer.error : "the Python bridge refused it");
    descriptor = answer.subject;
    limits = answer.limits;
    dims = answer.value_dims;
    seqs = answer.sequences;
    bwd = answer.backward;
    drop = answer.dropout;
    fp8 = answer.fp8;
    fp8_dims = answer.fp8_head_dims;
  } else {
    void* symbol = dlsym(handle, FC_SUBJECT_ENTRY_POINT);
    if (symbol == nullptr) {
      return bad(path, "no symbol " FC_SUBJECT_ENTRY_POINT " (a subject exports const fc_subject* " FC_SUBJECT_ENTRY_POINT
                       "(void) with C linkage and default visibility, flashcheck/subject.h)");
    }
    descriptor = reinterpret_cast<fc_subject_entry_fn>(symbol)();
    if (descriptor == nullptr) return bad(path, FC_SUBJECT_ENTRY_POINT "() returned null");
    for (Status st : {optional_entry(handle, path, FC_SUBJECT_LIMITS_ENTRY_POINT, &limits),
                      optional_entry(handle, path, FC_SUBJECT_VALUE_DIMS_ENTRY_POINT, &dims),
                      optional_entry(handle, path, FC_SUBJECT_SEQUENCES_ENTRY_POINT, &seqs),
                      optional_entry(handle, path, FC_SUBJECT_BACKWARD_ENTRY_POINT, &bwd),
                      optional_entry(handle, path, FC_SUBJECT_DROPOUT_ENTRY_POINT, &drop),
                      optional_entry(handle, path, FC_SUBJECT_FP8_ENTRY_POINT, &fp8),
                      optional_entry(handle, path, FC_SUBJECT_FP8_HEAD_DIMS_ENTRY_POINT, &fp8_dims)}) {
      if (!st.ok()) return st;
    }
  }
  if (descriptor->abi_version != FC_SUBJECT_ABI_VERSION) {
    return bad(path, "ABI version " + std::to_string(descriptor->abi_version) + ", this flashcheck reads version " +
                         std::to_string(FC_SUBJECT_ABI_VERSION) + " (rebuild the subject against this flashcheck/subject.h)");
  }
  if (Status st = validate(path, *descriptor); !st.ok()) return st;
  // The optional shape limits: checked like the capabilities.
  if (limits != nullptr) {
    const fc_subject_limits& l = *limits;
    if (l.seqlen_q_multiple < 0 || l.seqlen_k_multiple < 0 || l.seqlen_q_min < 0 || l.seqlen_k_min < 0 ||
        l.seqlen_q_max < 0 || l.seqlen_k_max < 0) {
      return bad(path, "limits: every field >= 0 (0: no limit)");
    }
    if ((l.seqlen_q_max > 0 && l.seqlen_q_max < l.seqlen_q_min) || (l.seqlen_k_max > 0 && l.seqlen_k_max < l.seqlen_k_min)) {
      return bad(path, "limits: a maximum below its minimum");
    }
    s->limits_ = l;
  }
  // The optional head_dim_v range.
  if (dims != nullptr) {
    if (dims->head_dim_v_min < 1 || dims->head_dim_v_max > kMaxHeadDim || dims->head_dim_v_min > dims->head_dim_v_max) {
      return bad(path, "value dims: 1 <= head_dim_v_min <= head_dim_v_max <= 256");
    }
    s->value_dims_ = *dims;
  }
  // The optional sequence features.
  if (seqs != nullptr) {
    if (seqs->features == 0 || (seqs->features & ~kSequenceFeatures) != 0) {
      return bad(path, "sequences.features: a non-empty set of FC_SUBJECT_BIT(FC_SUBJECT_SEQ_*)");
    }
    if ((seqs->features & FC_SUBJECT_BIT(FC_SUBJECT_SEQ_PAGED)) && !(seqs->features & FC_SUBJECT_BIT(FC_SUBJECT_SEQ_SEQUSED_K))) {
      return bad(path, "sequences.features: PAGED needs SEQUSED_K (a paged sequence's keys are seqused_k)");
    }
    if ((seqs->features & FC_SUBJECT_BIT(FC_SUBJECT_SEQ_SEQUSED_K)) &&
        !(seqs->features & (FC_SUBJECT_BIT(FC_SUBJECT_SEQ_VARLEN) | FC_SUBJECT_BIT(FC_SUBJECT_SEQ_PAGED)))) {
      return bad(path, "sequences.features: SEQUSED_K needs VARLEN or PAGED (spare slots belong to packed or paged K/V)");
    }
    if (seqs->page_size_multiple < 0) return bad(path, "sequences.page_size_multiple: >= 0 (0: any)");
    if (seqs->max_splits < 0 || seqs->max_splits == 1) return bad(path, "sequences.max_splits: 0 (no bound) or >= 2");
    if (seqs->forward_sequences == nullptr) return bad(path, "sequences.forward_sequences: null");
    s->sequences_ = *seqs;
  }
  // The optional backward pass.
  if (bwd != nullptr) {
    if (bwd->backward == nullptr) return bad(path, "backward.backward: null");
    if (!is_bool(bwd->sink) || !is_bool(bwd->sequences) || !is_bool(bwd->deterministic)) {
      return bad(path, "backward.sink, sequences, deterministic: 0 or 1");
    }
    if (descriptor->capabilities.lse != 1 && bwd->sequences) {
      return bad(path, "backward.sequences: needs capabilities.lse = 1 (a packed backward reads the LSE its forward "
                       "wrote)");
    }
    if (bwd->sequences && !(s->takes(FC_SUBJECT_SEQ_VARLEN))) {
      return bad(path, "backward.sequences: needs VARLEN among the sequence features (fc_subject_sequences_v1)");
    }
    const Status classes = check_classes(path, "backward.arithmetic", bwd->arithmetic, descriptor->capabilities.dtypes,
                                         [](int32_t arith, const DTypeInfo& info) -> std::string {
                                           const ClassPoints* k = nullptr;
                                           for (const ClassPoints& c : kClasses) {
                                             if (c.arith == arith && arith != FC_SUBJECT_ARITH_SPLIT_TF32) k = &c;
                                           }
                                           if (k == nullptr) return "FC_SUBJECT_ARITH_GENERAL_FP32, _TENSOR_CORE or _UNDECLARED";
                                           if (!k->applies_to(info)) {
                                             return std::string(arith_name(arith)) + " does not apply to " + info.name;
                                           }
                                           return "";
                                         });
    if (!classes.ok()) return classes;
    s->backward_ = *bwd;
  }
  // The optional dropout: the general-fp32 class only (the error model bounds a dropped softmax there).
  if (drop != nullptr) {
    if (drop->forward_dropout == nullptr) return bad(path, "dropout.forward_dropout: null");
    if (!is_bool(drop->mask_dump) || !is_bool(drop->sequences)) return bad(path, "dropout.mask_dump, sequences: 0 or 1");
    if (drop->sequences && !s->takes(FC_SUBJECT_SEQ_VARLEN)) {
      return bad(path, "dropout.sequences: needs VARLEN among the sequence features (fc_subject_sequences_v1)");
    }
    if (drop->backward_dropout != nullptr && !s->backward_) {
      return bad(path, "dropout.backward_dropout: needs a backward pass (fc_subject_backward_v1)");
    }
    const Status classes = check_classes(path, "dropout.arithmetic", drop->arithmetic, descriptor->capabilities.dtypes,
                                         [](int32_t arith, const DTypeInfo&) -> std::string {
                                           return arith == FC_SUBJECT_ARITH_GENERAL_FP32
                                                      ? ""
                                                      : "FC_SUBJECT_ARITH_GENERAL_FP32 or _UNDECLARED (the error model "
                                                        "bounds a dropout on the general-fp32 class only, "
                                                        "docs/error-model.md §4.13)";
                                         });
    if (!classes.ok()) return classes;
    if (drop->backward_dropout != nullptr) {
      bool reachable = false;
      for (const DTypeInfo& info : kSubjectDTypes) {
        const size_t d = static_cast<size_t>(info.dtype);
        reachable = reachable || (drop->arithmetic[d] != FC_SUBJECT_ARITH_UNDECLARED &&
                                  s->backward_->arithmetic[d] != FC_SUBJECT_ARITH_UNDECLARED);
      }
      if (!reachable) {
        return bad(path, "dropout.backward_dropout: no dtype has both a dropout class and a backward class (it could "
                         "never be called)");
      }
    }
    s->dropout_ = *drop;
  }
  // The optional fp8 path: the error model's one fp8 class.
  if (fp8 != nullptr) {
    if (fp8->forward_fp8 == nullptr) return bad(path, "fp8.forward_fp8: null");
    if (fp8->arithmetic != FC_SUBJECT_ARITH_TENSOR_CORE_FP8) {
      return bad(path, "fp8.arithmetic: FC_SUBJECT_ARITH_TENSOR_CORE_FP8 (the error model's one fp8 class, "
                       "docs/design/fp8-forward.md)");
    }
    if (!is_bool(fp8->descales)) return bad(path, "fp8.descales: 0 or 1");
    if (fp8->key_tile < 0) return bad(path, "fp8.key_tile: >= 0 (0: the descriptor's arithmetic.key_tile)");
    if (fp8->key_tiles_count < 0 || fp8->key_tiles_count > FC_SUBJECT_FP8_KEY_TILES) {
      return bad(path, "fp8.key_tiles_count: 0.." + std::to_string(FC_SUBJECT_FP8_KEY_TILES));
    }
    for (int32_t i = 0; i < fp8->key_tiles_count; ++i) {
      const fc_subject_fp8_key_tile& t = fp8->key_tiles[i];
      const std::string entry = "fp8.key_tiles[" + std::to_string(i) + "]";
      if (t.max_head_dim <= 0 || (i > 0 && t.max_head_dim <= fp8->key_tiles[i - 1].max_head_dim)) {
        return bad(path, entry + ".max_head_dim: > 0 and above the previous entry's (got " +
                             std::to_string(t.max_head_dim) + ")");
      }
      if (t.key_tile <= 0) return bad(path, entry + ".key_tile: > 0 (got " + std::to_string(t.key_tile) + ")");
    }
    // Past the table's last head dim: fp8.key_tile, else arithmetic.key_tile; the widest head dim the library takes
    // needs one of them (the fp8 class's bound needs the tile its products are promoted per).
    const int32_t widest = widest_head_dim(descriptor->capabilities);
    if (fc_subject_fp8_tile_for(fp8, widest) == 0 && descriptor->arithmetic.key_tile == 0) {
      return bad(path, "fp8.key_tile: the fp8 class's bound needs the tile its products are promoted per, and head dims "
                       "up to " + std::to_string(widest) + " are taken (fp8.key_tiles covers " +
                       std::to_string(fp8->key_tiles_count > 0 ? fp8->key_tiles[fp8->key_tiles_count - 1].max_head_dim : 0) +
                       "; declare it there, in fp8.key_tile or in arithmetic.key_tile)");
    }
    s->fp8_ = *fp8;
  }
  s->subject_ = descriptor;
  s->name_ = descriptor->name;
  // The fp8 path's head dims: a multiple, with at least one head dim of the capabilities a multiple of it.
  if (fp8_dims != nullptr) {
    if (fp8 == nullptr) return bad(path, "fp8 head dims: declared without an fp8 path (" FC_SUBJECT_FP8_ENTRY_POINT ")");
    if (fp8_dims->multiple < 1) {
      return bad(path, "fp8 head dims.multiple: >= 1 (got " + std::to_string(fp8_dims->multiple) + ")");
    }
    s->fp8_head_dim_multiple_ = fp8_dims->multiple;
    if (s->nearest_head_dim(DType::kF8E4M3, 1) == 0) {
      return bad(path, "fp8 head dims.multiple: " + std::to_string(fp8_dims->multiple) +
                           " leaves the fp8 path no head dim among " + head_dims_text(descriptor->capabilities));
    }
  }
  for (const DTypeInfo& info : kSubjectDTypes) {
    const size_t d = static_cast<size_t>(info.dtype);
    const fc_subject_arithmetic& a = descriptor->arithmetic;
    int32_t arith = a.arithmetic[d];
    // Undeclared class, declared rounding points: the class whose points they are, if one applies to the dtype.
    if (arith == FC_SUBJECT_ARITH_UNDECLARED) {
      for (const ClassPoints& k : kClasses) {
        if (k.applies_to(info) && a.score_accumulation[d] == k.score && a.p_rounding[d] == k.p && a.o_accumulation[d] == k.o) {
          arith = k.arith;
        }
      }
    }
    s->declared_[d] = arith != FC_SUBJECT_ARITH_UNDECLARED;
    s->path_of_[d] = ComputePath::kGeneralFp32;
    for (const ClassPoints& k : kClasses) {
      if (k.arith == arith) s->path_of_[d] = k.path;
    }
    s->config_name_[d] = "subject " + s->name_ + (s->declared_[d] ? "" : " (arithmetic undeclared: generic bound)");
  }
  s->dropout_config_name_ = "subject " + s->name_ + " (dropout: general-fp32)";
  if (s->fp8_) {
    const size_t d = static_cast<size_t>(DType::kF8E4M3);
    s->declared_[d] = true;
    s->path_of_[d] = ComputePath::kTensorCoreFp8;
    s->config_name_[d] = "subject " + s->name_;
  }
  *out = std::move(s);
  return Status::ok_status();
}

bool LoadedSubject::takes_dtype(DType dtype) const {
  if (dtype == DType::kF8E4M3) return fp8_.has_value();
  const DTypeInfo* info = find_dtype(dtype);
  return info != nullptr && (subject_->capabilities.dtypes & FC_SUBJECT_BIT(info->c_code)) != 0;
}

bool LoadedSubject::takes_head_dim(int64_t head_dim) const {
  const fc_subject_capabilities& c = subject_->capabilities;
  if (c.head_dims == nullptr) return head_dim >= c.head_dim_min && head_dim <= c.head_dim_max;
  return std::find(c.head_dims, c.head_dims + c.head_dim_count, head_dim) != c.head_dims + c.head_dim_count;
}

bool LoadedSubject::takes_head_dim(DType dtype, int64_t head_dim) const {
  return takes_head_dim(head_dim) && (dtype != DType::kF8E4M3 || head_dim % fp8_head_dim_multiple_ == 0);
}

int64_t LoadedSubject::nearest_head_dim(DType dtype, int64_t head_dim) const {
  const fc_subject_capabilities& c = subject_->capabilities;
  // The candidates in increasing distance, the smaller first on a tie: head_dim, head_dim - 1, head_dim + 1, ...
  const int64_t lo = c.head_dims == nullptr ? c.head_dim_min : *std::min_element(c.head_dims, c.head_dims + c.head_dim_count);
  const int64_t hi = widest_head_dim(c);
  for (int64_t distance = 0; head_dim - distance >= lo || head_dim + distance <= hi; ++distance) {
    for (const int64_t d : {head_dim - distance, head_dim + distance}) {
      if (d >= 1 && takes_head_dim(dtype, d)) return d;
    }
  }
  return 0;
}

Status LoadedSubject::supports(const Params& p) const {
  const fc_subject_capabilities& c = subject_->capabilities;
  auto unsupported = [&](const std::string& field, const std::string& what) {
    return Status{StatusCode::kUnsupported, field + ": " + what + " (subject " + name_ + ")"};
  };
  if (p.dtype == DType::kF8E4M3) {
    if (!fp8_) return unsupported("dtype", "f8e4m3: the library declares no fp8 path (" FC_SUBJECT_FP8_ENTRY_POINT ")");
    if ((p.descale_q != nullptr || p.descale_k != nullptr || p.descale_v != nullptr) && !fp8_->descales) {
      return unsupported("descale", "its fp8 path takes no descales");
    }
    if (p.page_table != nullptr) return unsupported("page", "f8e4m3 comes without paged K/V");
    if (has_sequences(p)) return unsupported("seqs", "f8e4m3 comes without packed sequences");
    if (p.num_splits != 1) return unsupported("splits", "f8e4m3 comes without split-KV");
    if (p.dropout_p != 0.0f) return unsupported("dropout", "f8e4m3 comes without dropout");
  } else if (!takes_dtype(p.dtype)) {
    return unsupported("dtype", std::string(to_string(p.dtype)) + " not among " + list_dtypes(c.dtypes));
  }
  if (!takes_head_dim(p.head_dim)) return unsupported("head_dim", std::to_string(p.head_dim) + " not among " + head_dims_text(c));
  if (!takes_head_dim(p.dtype, p.head_dim)) {
    return unsupported("head_dim", std::to_string(p.head_dim) + " is not a multiple of " +
                                       std::to_string(fp8_head_dim_multiple_) + ", as the fp8 path's head dims are (" +
                                       FC_SUBJECT_FP8_HEAD_DIMS_ENTRY_POINT ")");
  }
  // V's and O's own width: only for a library that declares the range it reads (fc_subject_value_dims_v1).
  if (const int64_t dv = value_head_dim(p); dv != p.head_dim) {
    if (!value_dims_) {
      return unsupported("head_dim_v", std::to_string(dv) + " != head_dim " + std::to_string(p.head_dim) +
                                           ": the library declares no value dims (" FC_SUBJECT_VALUE_DIMS_ENTRY_POINT ")");
    }
    if (dv < value_dims_->head_dim_v_min || dv > value_dims_->head_dim_v_max) {
      return unsupported("head_dim_v", std::to_string(dv) + " outside " + std::to_string(value_dims_->head_dim_v_min) +
                                           ".." + std::to_string(value_dims_->head_dim_v_max));
    }
  }
  if (find_mask(p.mask) == nullptr || !(c.masks & FC_SUBJECT_BIT(find_mask(p.mask)->c_code))) {
    return unsupported("mask", std::string(mask_text(p.mask)) + " not among " + list_masks(c.masks));
  }
  if (p.heads_q != p.heads_kv && !c.gqa) {
    return unsupported("heads_kv", "heads_q " + std::to_string(p.heads_q) + " != heads_kv " + std::to_string(p.heads_kv) +
                                       ": no grouped-query attention");
  }
  // Sequences and split-KV only through forward_sequences, for the features the library declares.
  if (has_sequences(p) && !sequences_) {
    return unsupported("seqs", "variable-length sequences, seqused_k and paged K/V: the library declares no sequences "
                               "(" FC_SUBJECT_SEQUENCES_ENTRY_POINT ")");
  }
  if (p.page_table != nullptr) {
    if (!takes(FC_SUBJECT_SEQ_PAGED)) return unsupported("page", "paged K/V is not among the declared sequence features");
    if (const int64_t m = sequences_->page_size_multiple; m > 1 && p.page_size % m != 0) {
      return unsupported("page", std::to_string(p.page_size) + " keys a page is not a multiple of " + std::to_string(m));
    }
  } else if ((p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr) && !takes(FC_SUBJECT_SEQ_VARLEN)) {
    return unsupported("seqs", "packed variable-length sequences are not among the declared sequence features");
  }
  if (p.seqused_k != nullptr && !takes(FC_SUBJECT_SEQ_SEQUSED_K)) {
    return unsupported("seqs", "spare K/V slots (seqused_k) are not among the declared sequence features");
  }
  if (p.num_splits == 0) {
    return unsupported("splits", "0 (the kernel's own heuristic) is flashcheck's: a subject is given its split count");
  }
  if (p.num_splits != 1) {
    if (!takes(FC_SUBJECT_SEQ_SPLITS)) {
      return unsupported("splits", std::to_string(p.num_splits) + ": split-KV is not among the declared sequence features");
    }
    if (sequences_->max_splits > 0 && p.num_splits > sequences_->max_splits) {
      return unsupported("splits", std::to_string(p.num_splits) + " above the declared maximum " +
                                       std::to_string(sequences_->max_splits));
    }
  }
  // After the sequence and split checks, so that a field the subject lacks is named as such.
  if (p.dropout_p != 0.0f) {
    if (!dropout_) {
      return unsupported("dropout", "the library declares no dropout (" FC_SUBJECT_DROPOUT_ENTRY_POINT ")");
    }
    if (!drops(p.dtype)) {
      return unsupported("dropout", std::string("its dropout declares no class for ") + to_string(p.dtype));
    }
    if (p.page_table != nullptr || p.num_splits > 1) {
      return unsupported("dropout", "paged K/V and split-KV never come with a dropout");
    }
    if (has_sequences(p) && !dropout_->sequences) return unsupported("dropout", "its dropout takes no sequences");
    if (p.dropout_mask_out != nullptr && !dropout_->mask_dump) return unsupported("dropout", "its dropout dumps no mask");
  }
  if (p.softcap > 0 && !c.softcap) return unsupported("softcap", "no softcap");
  if (p.sink != nullptr && !c.sink) return unsupported("sink", "no sink logits");
  if (!(c.layouts & FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_STRIDED))) {
    bool fits = false;
    for (uint32_t layout : {FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BHSD), FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BSHD)}) {
      if (!(c.layouts & layout)) continue;
      const int64_t d = p.head_dim, dv = value_head_dim(p);
      // Packed Q and O: every sequence's rows as one batch entry; K and V packed likewise, or paged (a page is a
      // batch entry of page_size rows, .batch the page stride).
      const bool packed_q = p.cu_seqlens_q != nullptr, paged = p.page_table != nullptr, packed_k = p.cu_seqlens_k != nullptr;
      const int64_t q_rows = packed_q ? p.total_q : p.seqlen_q;
      const int64_t k_rows = paged ? p.page_size : packed_k ? p.total_k : p.seqlen_k;
      fits = fits || (contiguous(p.q_stride, d, p.heads_q, q_rows, layout, !packed_q) &&
                      contiguous(p.o_stride, dv, p.heads_q, q_rows, layout, !packed_q) &&
                      contiguous(p.k_stride, d, p.heads_kv, k_rows, layout, !packed_k) &&
                      contiguous(p.v_stride, dv, p.heads_kv, k_rows, layout, !packed_k));
    }
    if (!fits) {
      return unsupported("layout", std::string("strides not contiguous in ") +
                                       ((c.layouts & FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BHSD)) &&
                                                (c.layouts & FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BSHD))
                                            ? "bhsd or bshd"
                                            : (c.layouts & FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BHSD)) ? "bhsd" : "bshd"));
    }
  }
  // The shape limits (fc_subject_limits_v1), where the subject declares them.
  const fc_subject_limits& l = limits_;
  for (const auto& [field, value, multiple, lo, hi] :
       {std::tuple{"seqlen_q", p.seqlen_q, l.seqlen_q_multiple, l.seqlen_q_min, l.seqlen_q_max},
        std::tuple{"seqlen_k", p.seqlen_k, l.seqlen_k_multiple, l.seqlen_k_min, l.seqlen_k_max}}) {
    if (multiple > 1 && value % multiple != 0) {
      return unsupported(field, std::to_string(value) + " is not a multiple of " + std::to_string(multiple));
    }
    if (value < lo) return unsupported(field, std::to_string(value) + " is below the minimum " + std::to_string(lo));
    if (hi > 0 && value > hi) return unsupported(field, std::to_string(value) + " is above the maximum " + std::to_string(hi));
  }
  return Status::ok_status();
}

Status LoadedSubject::supports(const Case& c) const { return supports(stand_in_params(c)); }

Params LoadedSubject::stand_in_params(const Case& c) {
  static constexpr float kSinkStandIn = 0.0f;  // only whether there is a sink matters
  static constexpr int32_t kIndexStandIn = 0;  // likewise which index arrays there are (inputs.h, HostInputs)
  static constexpr float kDescaleStandIn = 1.0f;  // and whether there are descales
  Params params = case_params(c);
  if (c.sink) params.sink = &kSinkStandIn;
  if (c.descale) params.descale_q = params.descale_k = params.descale_v = &kDescaleStandIn;
  if (!c.seqs.empty()) {
    params.cu_seqlens_q = &kIndexStandIn;
    (c.page > 0 ? params.page_table : params.cu_seqlens_k) = &kIndexStandIn;
    const bool spare = std::any_of(c.seqs.begin(), c.seqs.end(), [](const Sequence& s) { return s.extra > 0; });
    if (c.page > 0 || spare) params.seqused_k = &kIndexStandIn;
    params.page_size = c.page;
  }
  return params;
}

Status LoadedSubject::supports_backward(const Params& p) const {
  if (!backward_) return no_backward();
  if (Status st = supports(p); !st.ok()) return st;
  return backward_refusal(p);
}

Status LoadedSubject::supports_backward(const Case& c) const {
  if (!backward_) return no_backward();
  if (Status st = supports(c); !st.ok()) return st;
  return backward_refusal(stand_in_params(c));
}

Status LoadedSubject::no_backward() const {
  return {StatusCode::kUnsupported,
          "grad: the library declares no backward pass (" FC_SUBJECT_BACKWARD_ENTRY_POINT ") (subject " + name_ + ")"};
}

Status LoadedSubject::backward_refusal(const Params& p) const {
  auto unsupported = [&](const std::string& field, const std::string& what) {
    return Status{StatusCode::kUnsupported, field + ": " + what + " (subject " + name_ + ")"};
  };
  if (backward_class(p.dtype) == FC_SUBJECT_ARITH_UNDECLARED) {
    return unsupported("dtype", std::string(to_string(p.dtype)) + ": the backward declares no class for it");
  }
  if (p.sink != nullptr && !backward_->sink) return unsupported("sink", "the backward computes no dsink");
  if (p.page_table != nullptr) return unsupported("page", "paged K/V is forward-only");
  if (p.num_splits != 1) return unsupported("splits", "split-KV is forward-only");
  if (has_sequences(p) && !backward_->sequences) return unsupported("seqs", "the backward takes no sequences");
  if (p.dropout_p != 0.0f && dropout_->backward_dropout == nullptr) {
    return unsupported("dropout", "its dropout is forward-only (dropout.backward_dropout null)");
  }
  return Status::ok_status();
}

int32_t LoadedSubject::backward_class(DType dtype) const {
  const DTypeInfo* info = find_dtype(dtype);
  // A dtype past the arrays' rows (f8e4m3) has no backward class.
  if (!backward_ || info == nullptr || static_cast<size_t>(info->c_code) >= kAbiDTypeCount) {
    return FC_SUBJECT_ARITH_UNDECLARED;
  }
  return backward_->arithmetic[static_cast<size_t>(info->c_code)];
}

bool LoadedSubject::drops(DType dtype) const {
  const DTypeInfo* info = find_dtype(dtype);
  return dropout_ && info != nullptr && static_cast<size_t>(info->c_code) < kAbiDTypeCount &&
         dropout_->arithmetic[static_cast<size_t>(info->c_code)] != FC_SUBJECT_ARITH_UNDECLARED;
}

ComputePath LoadedSubject::backward_path(const Params& params) const {
  if (params.dropout_p != 0.0f) return ComputePath::kGeneralFp32;  // the one class a dropout declares
  const DType dtype = params.dtype;
  return backward_class(dtype) == FC_SUBJECT_ARITH_TENSOR_CORE ? ComputePath::kTensorCore : ComputePath::kGeneralFp32;
}

int32_t LoadedSubject::fp8_key_tile(int64_t head_dim) const {
  if (!fp8_) return 0;
  const int32_t tile = fc_subject_fp8_tile_for(&*fp8_, head_dim);
  return tile > 0 ? tile : subject_->arithmetic.key_tile;
}

bool LoadedSubject::takes_fp8_tiles(int64_t head_dim, int64_t tiles) const {
  return fp8_ && takes_head_dim(DType::kF8E4M3, head_dim) &&
         (limits_.seqlen_k_max == 0 || limits_.seqlen_k_max >= tiles * fp8_key_tile(head_dim));
}

KernelConfig LoadedSubject::config(DType dtype, int64_t head_dim) const {
  const size_t d = static_cast<size_t>(dtype) < kDTypes.size() ? static_cast<size_t>(dtype) : 0;
  KernelConfig config;
  config.path = path_of_[d];
  config.block_n = tiling_declared() ? subject_->arithmetic.key_tile : kDefaultKeyTile;
  if (dtype == DType::kF8E4M3 && fp8_) config.block_n = fp8_key_tile(head_dim);
  config.block_m = config.block_n;
  config.name = config_name_[d].c_str();
  return config;
}

std::string LoadedSubject::describe() const {
  const fc_subject_capabilities& c = subject_->capabilities;
  std::string out = "subject " + name_ + " (" + path_ + "): " + (on_device() ? "device" : "host") + " memory; " +
                    list_dtypes(c.dtypes) + "; head_dim " + head_dims_text(c) + "; head_dim_v " +
                    (value_dims_ ? std::to_string(value_dims_->head_dim_v_min) + ".." +
                                       std::to_string(value_dims_->head_dim_v_max)
                                 : std::string("= head_dim")) +
                    "; masks " + list_masks(c.masks) +
                    "; layouts";
  if (c.layouts & FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BHSD)) out += " bhsd";
  if (c.layouts & FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BSHD)) out += " bshd";
  if (c.layouts & FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_STRIDED)) out += " strided";
  const fc_subject_limits& l = limits_;
  if (has_limits()) {
    out += "; shape limits";
    const auto side = [&](const char* name, int64_t multiple, int64_t lo, int64_t hi) {
      if (multiple > 1) out += std::string(" ") + name + " % " + std::to_string(multiple) + " == 0";
      if (lo > 0) out += std::string(" ") + name + " >= " + std::to_string(lo);
      if (hi > 0) out += std::string(" ") + name + " <= " + std::to_string(hi);
    };
    side("seqlen_q", l.seqlen_q_multiple, l.seqlen_q_min, l.seqlen_q_max);
    side("seqlen_k", l.seqlen_k_multiple, l.seqlen_k_min, l.seqlen_k_max);
  }
  out += "; sequences";
  if (!sequences_) out += " none";
  for (const auto& [feature, text] : {std::pair{FC_SUBJECT_SEQ_VARLEN, " varlen"}, std::pair{FC_SUBJECT_SEQ_SEQUSED_K, " seqused_k"},
                                      std::pair{FC_SUBJECT_SEQ_PAGED, " paged"}, std::pair{FC_SUBJECT_SEQ_SPLITS, " splits"}}) {
    if (takes(feature)) out += text;
  }
  if (takes(FC_SUBJECT_SEQ_PAGED) && sequences_->page_size_multiple > 1) {
    out += " (page % " + std::to_string(sequences_->page_size_multiple) + " == 0)";
  }
  if (takes(FC_SUBJECT_SEQ_SPLITS) && sequences_->max_splits > 0) {
    out += " (splits <= " + std::to_string(sequences_->max_splits) + ")";
  }
  out += "; backward";
  if (!backward_) out += " none";
  for (const DTypeInfo& info : kSubjectDTypes) {
    const int32_t arith = backward_ ? backward_->arithmetic[static_cast<size_t>(info.dtype)] : FC_SUBJECT_ARITH_UNDECLARED;
    if (arith != FC_SUBJECT_ARITH_UNDECLARED) out += std::string(" ") + info.name + "=" + arith_name(arith);
  }
  if (backward_) {
    out += std::string(backward_->sink ? ", dsink" : "") + (backward_->sequences ? ", sequences" : "") +
           (backward_->deterministic ? ", deterministic" : "");
  }
  out += "; dropout";
  if (!dropout_) out += " none";
  for (const DTypeInfo& info : kSubjectDTypes) {
    if (drops(info.dtype)) out += std::string(" ") + info.name;
  }
  if (dropout_) {
    out += std::string(dropout_->backward_dropout ? ", backward" : ", forward only") +
           (dropout_->mask_dump ? ", mask dump" : "") + (dropout_->sequences ? ", sequences" : "");
  }
  out += "; fp8";
  if (!fp8_) {
    out += " none";
  } else {
    out += std::string(" f8e4m3=tensor-core-fp8") + (fp8_->descales ? ", descales" : ", no descales");
    if (fp8_head_dim_multiple_ > 1) out += ", head_dim % " + std::to_string(fp8_head_dim_multiple_) + " == 0";
    out += ", key tile";
    int32_t below = 0;
    for (int32_t i = 0; i < fp8_->key_tiles_count; ++i) {
      out += " " + std::to_string(fp8_->key_tiles[i].key_tile) + " (head dims " + std::to_string(below + 1) + ".." +
             std::to_string(fp8_->key_tiles[i].max_head_dim) + ")";
      below = fp8_->key_tiles[i].max_head_dim;
    }
    // The rest, where the library takes a head dim past the table's last entry.
    if (const int32_t widest = widest_head_dim(c); widest > below) {
      out += " " + std::to_string(fp8_key_tile(widest)) + (below > 0 ? " (above)" : "");
    }
  }
  out += std::string("; gqa ") + (c.gqa ? "yes" : "no") + ", lse " + (c.lse ? "yes" : "no") + ", softcap " +
         (c.softcap ? "yes" : "no") + ", sink " + (c.sink ? "yes" : "no") + "; arithmetic";
  for (const DTypeInfo& info : kSubjectDTypes) {
    if (!(c.dtypes & (1u << static_cast<int>(info.dtype)))) continue;
    out += std::string(" ") + info.name + "=" +
           (declared_[static_cast<size_t>(info.dtype)] ? to_string(path_of_[static_cast<size_t>(info.dtype)]) : "generic");
  }
  out += "; key tile " + (tiling_declared() ? std::to_string(subject_->arithmetic.key_tile) : std::string("undeclared"));
  return out;
}

int64_t seqlen_onto_limits(int64_t seqlen, int64_t multiple, int64_t minimum, int64_t maximum) {
  const int64_t m = std::max<int64_t>(multiple, 1);
  const int64_t v = (std::max(seqlen, minimum) + m - 1) / m * m;
  return maximum > 0 && v > maximum ? maximum / m * m : v;
}

std::string wrong_subject(const Case& c, const LoadedSubject* loaded) {
  if (c.subject.empty() || (loaded != nullptr && c.subject == loaded->name())) return "";
  return "the case line names subject=" + excerpt(c.subject) + ", this run " +
         (loaded == nullptr ? std::string("loads none: give --subject PATH of its library")
                            : "runs subject " + loaded->name());
}

Case onto_sequence_features(const LoadedSubject& subject, Case c) {
  if (c.splits != 1) {
    const int32_t most = subject.takes(FC_SUBJECT_SEQ_SPLITS) ? subject.sequences()->max_splits : 1;
    c.splits = c.splits == 0 ? 2 : c.splits;
    if (most > 0) c.splits = std::min(c.splits, most);
  }
  if (c.seqs.empty()) return c;
  const fc_subject_limits& l = subject.limits();
  if (!subject.takes(FC_SUBJECT_SEQ_VARLEN) && !subject.takes(FC_SUBJECT_SEQ_PAGED)) {
    c.seqs.clear();  // dense, in the sequences' bounds moved onto the shape limits
    c.page = 0;
    c.poison = Poison::kNaN;
    c.seqlen_q = seqlen_onto_limits(c.seqlen_q, l.seqlen_q_multiple, l.seqlen_q_min, l.seqlen_q_max);
    c.seqlen_k = seqlen_onto_limits(c.seqlen_k, l.seqlen_k_multiple, l.seqlen_k_min, l.seqlen_k_max);
    return c;
  }
  if (c.page > 0 && !subject.takes(FC_SUBJECT_SEQ_PAGED)) c.page = 0;
  if (c.page == 0 && !subject.takes(FC_SUBJECT_SEQ_VARLEN)) c.page = 1;
  if (c.page > 0) {
    const int64_t m = std::max<int64_t>(subject.sequences()->page_size_multiple, 1);
    c.page = (c.page + m - 1) / m * m;
  }
  if (!subject.takes(FC_SUBJECT_SEQ_SEQUSED_K)) {
    for (Sequence& s : c.seqs) s.extra = 0;
  }
  fit_to_sequences(&c);
  // The shape limits bound sq and sk, the sequences' bounds: onto them, and every sequence within them.
  const int64_t sq = seqlen_onto_limits(c.seqlen_q, l.seqlen_q_multiple, l.seqlen_q_min, l.seqlen_q_max);
  const int64_t sk = seqlen_onto_limits(c.seqlen_k, l.seqlen_k_multiple, l.seqlen_k_min, l.seqlen_k_max);
  for (Sequence& s : c.seqs) {
    s.q = std::min(s.q, sq);
    s.k = std::min(s.k, sk);
    s.extra = std::min(s.extra, sk - s.k);
  }
  c.seqlen_q = sq;
  c.seqlen_k = sk;
  return c;
}

RunOutputs run_case(const HostInputs& inputs, const LoadedSubject& subject, const RunOptions& options) {
  RunOutputs out;
  if (options.any_instrumentation()) {
    out.status = {StatusCode::kUnsupported, "instrumentation: subject " + subject.name() +
                                                " records no row m, l or tile traces (flashcheck's instrumented builds do)"};
  } else if (subject.on_device()) {
    RunOptions device_options = options;
    device_options.device_call = [&subject](const Params& params, void* stream) {
      return call_forward(subject, params, stream);
    };
    out = run_case(inputs, Backend::kGpu, device_options);
  } else {
    const HostBackend backend = [&subject](const Params& params, const Instrumentation&) {
      return call_forward(subject, params, nullptr);
    };
    out = run_case(inputs, backend, options);
  }
  const DType dtype = inputs.params.dtype;
  out.config = subject.config(dtype, inputs.params.head_dim);
  out.subject = subject.name();
  out.generic_bound = subject.generic_bound(dtype);
  if (inputs.params.dropout_p != 0.0f) {  // the general-fp32 class, the one a dropout declares (supports())
    out.config.path = ComputePath::kGeneralFp32;
    out.config.name = subject.dropout_config_name().c_str();
    out.generic_bound = false;
  }
  // An fp8 path declares its tile (load() holds it to one, in fp8.key_tile or the descriptor's).
  out.tiling_declared = subject.tiling_declared() || (dtype == DType::kF8E4M3 && subject.fp8().has_value());
  out.lse_written = subject.descriptor().capabilities.lse != 0;
  out.splits = std::max(inputs.params.num_splits, 1);  // a subject is given its split count (supports())
  if (!out.lse_written) out.unwritten_lse = 0;
  return out;
}

BackwardOutputs run_backward_case(const HostInputs& inputs, const LoadedSubject& subject,
                                  const BackwardRunOptions& options) {
  if (Status st = subject.supports_backward(inputs.params); !st.ok()) {
    BackwardOutputs out;
    out.status = st;
    return out;
  }
  BackwardRunOptions own = options;
  own.defect = ModelDefect::kNone;
  own.forward_run = [&subject, stream = options.stream](const HostInputs& in) {
    RunOptions forward;
    forward.stream = stream;
    RunOutputs out = run_case(in, subject, forward);
    // A subject whose forward writes no LSE (SDPA's public op) recomputes its forward in the backward (autograd); it is
    // handed, and judged against, the exact LSE rounded to fp32 (dense cases: the loader holds such a backward to them).
    if (out.status.ok() && !out.lse_written && in.cu_seqlens_q.empty()) {
      const oracle::Problem problem = in.problem();
      const Params& p = in.params;
      out.lse.resize(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q));
      for (int64_t b = 0; b < p.batch; ++b) {
        for (int64_t h = 0; h < p.heads_q; ++h) {
          for (int64_t i = 0; i < p.seqlen_q; ++i) {
            out.lse[static_cast<size_t>((b * p.heads_q + h) * p.seqlen_q + i)] =
                static_cast<float>(oracle::compute_row(problem, {b, h, i}, oracle::Tier::kFast).lse);
          }
        }
      }
    }
    return out;
  };
  own.backward_call = [&subject](const BackwardParams& params, void* stream) {
    return call_backward(subject, params, stream);
  };
  own.path = subject.backward_path(inputs.params);
  return run_backward_case(inputs, subject.on_device() ? Backend::kGpu : Backend::kHostModel, own);
}

const LoadedSubject* subject_from_environment(std::string* error) {
  static std::once_flag once;
  static std::unique_ptr<LoadedSubject> subject;
  static std::string load_error;
  std::call_once(once, [] {
    const char* path = std::getenv("FLASHCHECK_SUBJECT");
    if (path == nullptr || *path == '\0') return;
    if (Status st = LoadedSubject::load(path, &subject); !st.ok()) load_error = "FLASHCHECK_SUBJECT: " + st.message();
  });
  if (error != nullptr) *error = load_error;
  return subject.get();
}

}  // namespace flashcheck
