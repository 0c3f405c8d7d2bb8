// Case lines of the backward tests (backward_test.cpp on the host model, backward_gpu_test.cpp on the kernels): every
// feature of the backward pass at shapes off the kernels' 32-row and 32-key tiles.
#pragma once

#include <string>
#include <vector>

namespace flashcheck::testing {

inline const std::vector<std::string>& backward_lines() {
  static const std::vector<std::string> all{
      "bf16 b=1 hq=2 hkv=1 sq=40 sk=70 d=64 mask=causal-br q=normal(0,1) k=normal(0,1) v=normal(0,1) grad=1 "
      "dout=normal(0,1) seed=3",
      "bf16 b=1 hq=4 hkv=2 sq=70 sk=90 d=64 dv=32 mask=window-tl window=20,5 softcap=5 q=normal(0,1) k=normal(0,1) "
      "v=normal(0,1) sink=normal(0,1) grad=1 dout=normal(0,1) seed=5",
      "f16 b=2 hq=2 hkv=1 sq=30 sk=53 d=40 mask=causal-br seqs=30:40+7,20:50+3 q=normal(0,1) k=normal(0,1) "
      "v=normal(0,1) grad=1 dout=normal(0,1) seed=9",
      "f32 b=1 hq=3 hkv=3 sq=33 sk=65 d=24 mask=none layout=bshd pad=3 q=normal(0,1) k=normal(0,1) v=normal(0,1) "
      "grad=1 dout=uniform(-1,1) seed=2",
  };
  return all;
}

}  // namespace flashcheck::testing
