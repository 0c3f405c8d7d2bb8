// The decode kernel's exact path for non-finite V rows that some row of a masked tile may not see (0 * inf = NaN on
// the tensor cores): the rows that see such a value take its product on CUDA cores, then the value is zeroed.
#pragma once

#include "common/dtype.cuh"
#include "decode/device.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace decode_kernel {

template <typename T, class Tile>
struct DecodeHiddenV {
  // See the call site. Lane j % 32 checks keys j of the tile; a key visible to every valid row, or at or past
  // keys_end (zero-filled, never read), needs nothing.
  __device__ static void hidden_nonfinite_v(uint32_t v_tile, int64_t k0, int64_t keys_end, int64_t all_begin,
                                            int64_t all_end, const int64_t (&kb)[2], const int64_t (&ke)[2],
                                            const float (&p)[Tile::kNS][4], float (&acc)[Tile::kNO][4], int lane) {
#pragma unroll
    for (int base = 0; base < Tile::kBlockN; base += kLanes) {
      const int r = base + lane;
      const int64_t key = k0 + r;
      bool bad = false;
      if (r < Tile::kBlockN && key < keys_end && (key < all_begin || key >= all_end)) {
        for (int ch = 0; ch < Tile::kChunksPerRow; ++ch) {
          const uint4 w = ld_shared_v4(v_tile + r * Tile::kPitchBytes + ch * kChunkBytes);  // the row's chunks, any order
          for (const uint32_t word : {w.x, w.y, w.z, w.w}) {
            bad |= (word & DeviceDtype<T>::kExpLo) == DeviceDtype<T>::kExpLo ||
                   (word & DeviceDtype<T>::kExpHi) == DeviceDtype<T>::kExpHi;
          }
        }
      }
      uint32_t marked = __ballot_sync(kFullWarp, bad);
      while (marked != 0) {
        const int rr = base + __ffs(marked) - 1;
        marked &= marked - 1;
        // p of (this lane's rows, key rr): held by the quad lane of column rr % 8 / 2, element rr % 2.
        const int nt_key = rr / 8;
        const int src = (lane & ~3) | ((rr % 8) / 2);
        float pk[2];
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          // Selected by opaque selects over constant indices: an indexed read would put p (and the scores of
          // every tile) in local memory.
          float mine = 0.0f;
#pragma unroll
          for (int nt = 0; nt < Tile::kNS; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const uint32_t hit = nt == nt_key && e == rr % 2;
              asm("{\n .reg .pred q;\n setp.ne.u32 q, %3, 0;\n selp.f32 %0, %1, %2, q;\n}"
                  : "=f"(mine)
                  : "f"(p[nt][2 * hh + e]), "f"(mine), "r"(hit));
            }
          const float got = __shfl_sync(kFullWarp, mine, src);
          const float2 rounded = DeviceDtype<T>::unpack(DeviceDtype<T>::pack(got, 0.0f));
          pk[hh] = rounded.x;
        }
        const int64_t key = k0 + rr;
        const uint32_t row = v_tile + rr * Tile::kPitchBytes;  // the row's chunks, in swizzled order
#pragma unroll
        for (int nt = 0; nt < Tile::kNO; ++nt) {
          const float2 v = DeviceDtype<T>::unpack(tc_kernel::ld_shared_b32(v_tile + Tile::chunk(rr, nt) + (lane % 4) * 4));
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            if (key >= kb[hh] && key < ke[hh]) {
              acc[nt][2 * hh] = fmaf(pk[hh], v.x, acc[nt][2 * hh]);
              acc[nt][2 * hh + 1] = fmaf(pk[hh], v.y, acc[nt][2 * hh + 1]);
            }
          }
        }
        __syncwarp();  // every lane has read the row before it is zeroed
        for (int ch = lane; ch < Tile::kChunksPerRow; ch += kLanes) st_shared_v4(row + ch * kChunkBytes, make_uint4(0, 0, 0, 0));
        __syncwarp();
      }
    }
  }
};

}  // namespace decode_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
