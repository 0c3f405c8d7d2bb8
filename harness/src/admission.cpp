// admit_case (admission.h): parse, validate, route, estimate, admit. Each step reads the line and the sequences,
// never loops over the sizes the line names: validate_shape is closed-form, host_inputs_bytes and the estimate of
// the buffers are arithmetic on the sizes, and the estimate stops before its row loops when the buffers alone are
// over the cap.
#include "flashcheck/admission.h"

#include "flashcheck/device_inputs.h"
#include "flashcheck/loaded_subject.h"

namespace flashcheck {

Status validate_for_run(const Case& c, const LoadedSubject* subject) {
  if (Status s = validate_case(c); !s.ok()) return s;
  if (Status s = validate_shape(case_params(c)); !s.ok()) return s;
  if (subject != nullptr) {
    if (Status s = subject->supports(c); !s.ok()) return s;
  }
  return Status::ok_status();
}

Status admit_case(std::string_view line, const AdmitOptions& options, Admission* out) {
  Case c;
  if (Status s = parse_case(line, &c); !s.ok()) return s;
  return admit_case(c, options, out);
}

Status admit_case(const Case& c, const AdmitOptions& options, Admission* out) {
  *out = Admission{.c = c};
  if (Status s = validate_for_run(c, options.subject); !s.ok()) return s;
  // Past the host's memory (or asked for): inputs on the device, sized by the device route itself. The limit is the
  // caller's, never below make_inputs' own default, so a low memory cap rejects rather than reroutes.
  if (options.subject == nullptr) {
    const Status device_case = check_device_inputs_case(c);  // dense, as the device route takes them
    if (device_case.ok() &&
        (options.device_inputs || needs_device_inputs(c, std::max(options.host_inputs_limit, kHostInputsLimit)))) {
      out->route = InputRoute::kDevice;
      return Status::ok_status();
    }
    if (options.device_inputs) return device_case;
  }
  BudgetOptions budget = options.budget;
  budget.memory_cap = options.memory_cap;
  budget.host_model = options.host_model;
  out->budget = estimate_budget(c, budget);
  Status memory = check_memory(out->budget, options.memory_cap);
  out->over_memory_cap = !memory.ok();
  return memory;
}

}  // namespace flashcheck
