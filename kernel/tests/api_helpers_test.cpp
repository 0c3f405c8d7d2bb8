// Part of kernel_model_test (cpu): the small API helpers (names, sizes, strides, make_params, set_head_dim_v), the
// one definition of the causal masks, and select_config's tiles, which tests and generators aim at.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "families.h"
#include "flashcheck/attention.h"
#include "tensor_core/tile_config.h"

namespace flashcheck {
namespace {

TEST(Api, NamesAndSizes) {
  EXPECT_STREQ(to_string(DType::kF32), "f32");
  EXPECT_STREQ(to_string(DType::kF16), "f16");
  EXPECT_STREQ(to_string(DType::kBF16), "bf16");
  EXPECT_STREQ(to_string(Mask::kNone), "none");
  EXPECT_STREQ(to_string(Mask::kCausalBottomRight), "causal-br");
  EXPECT_STREQ(to_string(Mask::kCausalTopLeft), "causal-tl");
  EXPECT_STREQ(to_string(ComputePath::kGeneralFp32), "general-fp32");
  EXPECT_EQ(dtype_size(DType::kF32), 4);
  EXPECT_EQ(dtype_size(DType::kF16), 2);
  EXPECT_EQ(dtype_size(DType::kBF16), 2);
}

TEST(Api, ContiguousStridesAndMakeParams) {
  const Strides bhsd = contiguous_strides(Layout::kBHSD, 3, 5, 7);
  EXPECT_EQ(bhsd.batch, 3 * 5 * 7);
  EXPECT_EQ(bhsd.head, 5 * 7);
  EXPECT_EQ(bhsd.row, 7);
  const Strides bshd = contiguous_strides(Layout::kBSHD, 3, 5, 7);
  EXPECT_EQ(bshd.batch, 5 * 3 * 7);
  EXPECT_EQ(bshd.head, 7);
  EXPECT_EQ(bshd.row, 3 * 7);
  const Params p = make_params(DType::kBF16, 2, 8, 2, 11, 13, 64, Mask::kCausalTopLeft, Layout::kBSHD);
  EXPECT_EQ(p.q_stride.row, 8 * 64);
  EXPECT_EQ(p.k_stride.row, 2 * 64);
  EXPECT_EQ(p.k_stride.batch, 13 * 2 * 64);
  EXPECT_EQ(p.o_stride.head, 64);
  EXPECT_EQ(p.softmax_scale, 0.125f);
  EXPECT_EQ(p.mask, Mask::kCausalTopLeft);
  EXPECT_EQ(p.q, nullptr);
}

// make_params leaves head_dim_v 0 (V and O of head_dim columns); set_head_dim_v gives V and O their own columns and
// contiguous strides for them, and 0 restores make_params' strides.
TEST(Api, SetHeadDimVRecomputesVAndOStrides) {
  for (Layout layout : {Layout::kBHSD, Layout::kBSHD}) {
    const Params made = make_params(DType::kBF16, 2, 8, 2, 11, 13, 192, Mask::kNone, layout);
    EXPECT_EQ(made.head_dim_v, 0);
    EXPECT_EQ(value_head_dim(made), 192);
    Params p = made;
    set_head_dim_v(&p, 128, layout);
    EXPECT_EQ(p.head_dim_v, 128);
    EXPECT_EQ(value_head_dim(p), 128);
    const Strides v = contiguous_strides(layout, 2, 13, 128), o = contiguous_strides(layout, 8, 11, 128);
    EXPECT_EQ(p.v_stride.batch, v.batch);
    EXPECT_EQ(p.v_stride.head, v.head);
    EXPECT_EQ(p.v_stride.row, v.row);
    EXPECT_EQ(p.o_stride.batch, o.batch);
    EXPECT_EQ(p.o_stride.head, o.head);
    EXPECT_EQ(p.o_stride.row, o.row);
    EXPECT_EQ(p.q_stride.row, made.q_stride.row);  // Q and K keep head_dim's
    EXPECT_EQ(p.k_stride.batch, made.k_stride.batch);
    EXPECT_EQ(p.softmax_scale, made.softmax_scale);  // 1/sqrt(head_dim): the dot products' length
    set_head_dim_v(&p, 0, layout);
    EXPECT_EQ(value_head_dim(p), 192);
    EXPECT_EQ(p.v_stride.batch, made.v_stride.batch);
    EXPECT_EQ(p.v_stride.row, made.v_stride.row);
    EXPECT_EQ(p.o_stride.head, made.o_stride.head);
    EXPECT_EQ(p.o_stride.row, made.o_stride.row);
  }
}

// Unequal head dims run in the tensor-core family's value pairs (fp16/bf16 where the two dims' families form one of
// kValuePairs), else in the general family, padded to the family of the larger; head_dim_v = head_dim spelled
// out selects what head_dim_v = 0 selects (tensor-core, split-TF32, decode and general shapes, split or not).
TEST(Api, SelectConfigOfUnequalHeadDims) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t d = 1; d <= 256; d += 7) {
      for (int64_t dv : {int64_t{1}, int64_t{8}, int64_t{64}, int64_t{128}, int64_t{192}, int64_t{256}}) {
        for (const auto& [sq, splits] : {std::pair<int64_t, int32_t>{128, 1}, {1, 1}, {1, 4}}) {
          Params p = make_params(dtype, 1, 2, 2, sq, 512, d);
          p.num_splits = splits;
          const KernelConfig zero = select_config(p);
          set_head_dim_v(&p, d, Layout::kBHSD);
          const KernelConfig spelled = select_config(p);
          EXPECT_STREQ(spelled.name, zero.name) << d;
          EXPECT_EQ(spelled.block_m, zero.block_m) << d;
          EXPECT_EQ(spelled.block_n, zero.block_n) << d;
          EXPECT_EQ(spelled.heads_per_tile, zero.heads_per_tile) << d;
          if (dv == d) continue;
          set_head_dim_v(&p, dv, Layout::kBHSD);
          const KernelConfig unequal = select_config(p);
          const int family = tensor_core::family_head_dim(d), family_v = tensor_core::family_head_dim(dv);
          if (dtype != DType::kF32 && d % 8 == 0 && dv % 8 == 0 && family != family_v &&
              tensor_core::is_value_pair(family, family_v)) {
            const std::string pair = std::string(dtype == DType::kBF16 ? "bf16" : "f16") + "_hdim" +
                                     std::to_string(family) + "_dv" + std::to_string(family_v);
            EXPECT_EQ(unequal.path, ComputePath::kTensorCore) << pair;
            EXPECT_EQ(std::string(unequal.name), "tensor_core_" + pair);
            EXPECT_EQ(unequal.head_dim_padded, family) << pair;
            EXPECT_EQ(unequal.block_m, tensor_core::value_pair_shape_sm90(family).block_m) << pair;
            EXPECT_EQ(unequal.block_n, tensor_core::value_pair_shape_sm90(family).block_n) << pair;
            continue;
          }
          KernelConfig widest;  // the general family's tiles of equal head dims, the larger of the two
          detail::general_select(make_params(dtype, 1, 2, 2, sq, 512, std::max(d, dv)), &widest);
          const std::string what = std::to_string(d) + "," + std::to_string(dv) + " " + unequal.name;
          EXPECT_EQ(unequal.path, ComputePath::kGeneralFp32) << what;
          EXPECT_GE(unequal.head_dim_padded, std::max(d, dv)) << what;
          EXPECT_STREQ(unequal.name, widest.name) << what;
          EXPECT_EQ(unequal.block_m, widest.block_m) << what;
          EXPECT_EQ(unequal.block_n, widest.block_n) << what;
        }
      }
    }
  }
}

// visible_key_range against the definitions written out: top-left j <= i, bottom-right j <= i + sk - sq.
TEST(Api, VisibleKeysMatchTheMaskDefinitions) {
  for (int64_t sq : {1, 2, 5, 9}) {
    for (int64_t sk : {0, 1, 3, 5, 12}) {
      for (int64_t i = 0; i < sq; ++i) {
        int64_t none = 0, tl = 0, br = 0;
        for (int64_t j = 0; j < sk; ++j) {
          ++none;
          tl += j <= i ? 1 : 0;
          br += j <= i + sk - sq ? 1 : 0;
        }
        EXPECT_EQ(visible_key_range(make_params(DType::kF32, 1, 1, 1, sq, sk, 8, Mask::kNone), i).size(), none);
        EXPECT_EQ(visible_key_range(make_params(DType::kF32, 1, 1, 1, sq, sk, 8, Mask::kCausalTopLeft), i).size(), tl) << i << " " << sq << " " << sk;
        EXPECT_EQ(visible_key_range(make_params(DType::kF32, 1, 1, 1, sq, sk, 8, Mask::kCausalBottomRight), i).size(), br) << i << " " << sq << " " << sk;
      }
    }
  }
}

// Every valid head_dim gets a config whose padded head dim covers it, with positive tiles.
TEST(Api, SelectConfigCoversEveryHeadDim) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t d = 1; d <= 256; ++d) {
      const KernelConfig c = select_config(make_params(dtype, 1, 1, 1, 128, 128, d));
      EXPECT_GE(c.head_dim_padded, d);
      EXPECT_GT(c.block_m, 0);
      EXPECT_GT(c.block_n, 0);
      EXPECT_NE(std::string(c.name), "");
    }
  }
}

// d = 64's two tile shapes on sm_90a builds (tensor_core/tile_config.h): the tall 192-row tiles for every launch
// whose mask bounds no row's keys and for masked ones whose middle Q tile reads at least kTallMinTiles K/V tiles,
// 128 rows otherwise. The generators and the report aim their tile-boundary shapes at what select_config returns.
TEST(Api, SelectConfigTakesD64TallTilesForLongItems) {
  const int tall = tensor_core::tall_tile_shape_sm90(64).block_m;
  if (tall == 0) GTEST_SKIP() << "this build has one d = 64 tile shape (no sm_90a wgmma)";
  const int standard = tensor_core::tile_shape_sm90(64).block_m;
  const auto rows = [](int64_t sq, int64_t sk, Mask mask, int64_t left = -1, int64_t right = -1) {
    Params p = make_params(DType::kBF16, 1, 2, 2, sq, sk, 64);
    p.mask = mask;
    p.window_left = left;
    p.window_right = right;
    return select_config(p).block_m;
  };
  EXPECT_EQ(rows(512, 512, Mask::kNone), tall);
  EXPECT_EQ(rows(100, 700, Mask::kNone), tall);
  EXPECT_EQ(rows(2048, 2048, Mask::kCausalTopLeft), standard);                  // middle Q tile: 9 K/V tiles
  EXPECT_EQ(rows(4096, 4096, Mask::kCausalTopLeft), tall);                      // 17
  EXPECT_EQ(rows(8192, 8192, Mask::kWindowBottomRight, 1023, 0), standard);     // 9
  EXPECT_EQ(rows(8192, 8192, Mask::kWindowBottomRight, 4095, 0), tall);         // 33
  EXPECT_EQ(rows(int64_t{1} << 40, 1 << 20, Mask::kCausalBottomRight), standard);  // rows past 32 bits
}

}  // namespace
}  // namespace flashcheck
