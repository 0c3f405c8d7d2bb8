// The dispatcher of a build without CUDA: run() and run_instrumented() still validate their params (so the
// CPU tier sees the same errors) and then report kNoDevice (the documented no-op sizes still succeed); device_available() is false.
#include "families.h"
#include "flashcheck/attention.h"
#include "flashcheck/backward.h"
#include "flashcheck/instrument.h"

namespace flashcheck {
namespace {

Status no_device(const Params& params) {
  if (Status st = can_implement(params); !st.ok()) return st;
  if (params.batch == 0 || params.heads_q == 0 || params.seqlen_q == 0) return Status::ok_status();  // no-op
  if (params.cu_seqlens_q != nullptr && params.total_q == 0) return Status::ok_status();  // every sequence empty
  return {StatusCode::kNoDevice, "flashcheck was built without CUDA (FLASHCHECK_CUDA=OFF)"};
}

}  // namespace

#if FLASHCHECK_INSTRUMENT
Status run_instrumented(const Params& params, const Instrumentation& inst, void* stream) { return no_device(params); }
#else
Status run(const Params& params, void* stream) { return no_device(params); }
Status run_prechecked(const Params& params, void* stream) { return no_device(params); }
bool device_available() { return false; }
Status run_backward(const BackwardParams& params, void*) {
  if (Status st = can_implement_backward(params); !st.ok()) return st;
  const Params& p = params.forward;
  if ((p.batch == 0 || p.heads_q == 0) && params.dsink == nullptr) return Status::ok_status();  // no-op
  return {StatusCode::kNoDevice, "flashcheck was built without CUDA (FLASHCHECK_CUDA=OFF)"};
}
int32_t effective_splits(const Params& params) { return detail::pick_splits(params, detail::kModelSmCount); }
#endif

}  // namespace flashcheck
