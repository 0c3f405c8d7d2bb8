// libflashcheck.so (target flashcheck_shared): the C ABI of flashcheck/attention_c.h for ctypes and other
// FFIs. The code lives in the flashcheck_api / flashcheck_kernel archives; a linker only takes archive
// members something references, so this exported table references every entry point of the ABI. A function
// added to attention_c.h must be added here too, or Python will not find it.
#include "flashcheck/attention_c.h"

// Directly in a linkage specification (no braces) the definition is extern: exported, never discarded.
extern "C" const void* const fc_abi_entry_points[] = {
    reinterpret_cast<const void*>(&fc_make_params),      reinterpret_cast<const void*>(&fc_can_implement),
    reinterpret_cast<const void*>(&fc_forward),          reinterpret_cast<const void*>(&fc_select_config),
    reinterpret_cast<const void*>(&fc_device_available), reinterpret_cast<const void*>(&fc_version),
    reinterpret_cast<const void*>(&fc_effective_splits), reinterpret_cast<const void*>(&fc_set_head_dim_v),
    reinterpret_cast<const void*>(&fc_make_backward_params), reinterpret_cast<const void*>(&fc_can_implement_backward),
    reinterpret_cast<const void*>(&fc_backward_path),        reinterpret_cast<const void*>(&fc_backward),
};
