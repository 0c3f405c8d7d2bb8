// The API's dtype queries (attention.h: dtype_size, to_string(DType)) answered from the one dtype table
// (dtype.h), so the sizes and names the kernel reports are the ones the harness and the host model use.
// A value outside the enum has size 0 (can_implement rejects it before any size is used).
#include "flashcheck/dtype.h"

namespace flashcheck {

int64_t dtype_size(DType dtype) {
  const DTypeInfo* info = find_dtype(dtype);
  return info != nullptr ? info->size_bytes : 0;
}

const char* to_string(DType dtype) {
  const DTypeInfo* info = find_dtype(dtype);
  return info != nullptr ? info->name : "invalid-dtype";
}

}  // namespace flashcheck
