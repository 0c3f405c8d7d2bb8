// The harness's CUDA error handling (runner_gpu.cpp, device_inputs.cu): a failed CUDA call as a Status naming the
// step, and the early return on a failed step. Needs the CUDA runtime: included only by the harness's CUDA code.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <string_view>

#include "flashcheck/attention.h"

namespace flashcheck::detail {

inline Status cuda_status(cudaError_t error, std::string_view what) {
  return {StatusCode::kCudaError,
          std::string(what) + ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error)};
}

}  // namespace flashcheck::detail

// Returns the Status of `expr` from the enclosing function when it is not ok.
#define FLASHCHECK_RETURN_IF_ERROR(expr)          \
  do {                                            \
    if (::flashcheck::Status status_ = (expr); !status_.ok()) { \
      return status_;                             \
    }                                             \
  } while (0)

// Returns cuda_status(error, what) from the enclosing function when the CUDA call `expr` fails.
#define FLASHCHECK_CUDA_TRY(expr, what)                                      \
  do {                                                                       \
    if (cudaError_t error_ = (expr); error_ != cudaSuccess) {                \
      return ::flashcheck::detail::cuda_status(error_, what);                \
    }                                                                        \
  } while (0)
