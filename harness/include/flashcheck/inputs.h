// Deterministic inputs for a case: a counter-based generator (Philox4x32-10, keyed by the case seed and
// a stream id per tensor, counter = element index) feeding distributions built only from IEEE basic
// operations (+ - * / sqrt) and our own exactly specified log/sin/cos approximations, never std::
// distributions or libm, compiled with -ffp-contract=off: a case line replays bit for bit on every
// machine and standard library (golden-hash test).
#pragma once

#include <cstdint>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/case.h"
#include "flashcheck/oracle.h"

namespace flashcheck {

// Philox4x32-10 (Salmon et al., SC'11): four 32-bit outputs for (counter, key).
struct Philox4x32 {
  static void generate(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);
};

struct HostInputs {
  Params params;                      // make_params for the case (+ layout, pad, scale), host pointers to q/k/v below; o/lse null
  std::vector<uint8_t> q, k, v;       // dtype-encoded bytes in the case's layout (padding bytes are a fixed pattern)
  std::vector<double> q_exact, k_exact, v_exact;  // the same values decoded, contiguous [B, H, S, D]
  oracle::Problem problem() const;    // view for the oracle (spans into *_exact)
  uint64_t hash() const;              // FNV-1a 64 over q, k, v bytes (golden-hash tests)
};

// Builds the inputs; fails with a message for a case whose sizes are invalid or too large for host memory
// (`max_bytes`, default 4 GiB).
Status make_inputs(const Case& c, HostInputs* out, int64_t max_bytes = int64_t{4} << 30);

// dtype encode/decode: round-to-nearest-even from double (one rounding, no double rounding through float).
uint16_t encode_f16(double x);
uint16_t encode_bf16(double x);
double decode_f16(uint16_t bits);
double decode_bf16(uint16_t bits);
double round_to_dtype(DType dtype, double x);  // value of x rounded to dtype, as double

}  // namespace flashcheck
