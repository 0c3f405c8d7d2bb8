// The decode kernel's loads: a tile's K and V rows by cp.async into its swizzled stage, contiguous or gathered through
// the page table (rows resolved once a tile), zero-filled past the keys and past head_dim without reading there.
#pragma once

#include "common/mutants.cuh"
#include "decode/device.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace decode_kernel {

template <typename T, class Tile>
struct DecodeLoads {
  // Where rows [k0, k0 + kBlockN) of a tile live in a paged cache: page and slot of row r, resolved once a tile by
  // lane r % 32 (32-bit arithmetic: a paged sequence's capacity fits int32), handed to the copying lanes by shuffle.
  // Unused for contiguous K/V.
  struct TileRows {
    int32_t page[Tile::kRowsPerLane];
    int32_t slot[Tile::kRowsPerLane];
  };
  __device__ static void resolve_rows(const RowSource<const T>& rows, int64_t k0, int64_t keys_end, int lane,
                                      TileRows& out) {
#pragma unroll
    for (int i = 0; i < Tile::kRowsPerLane; ++i) {
      const int64_t key = k0 + lane + i * kLanes;
      out.page[i] = 0;
      out.slot[i] = 0;
      if (rows.pages != nullptr && key < keys_end) {
        const uint32_t j = static_cast<uint32_t>(key);
        const uint32_t size = static_cast<uint32_t>(rows.page_size);
        const uint32_t index = j / size;
        out.page[i] = rows.pages[index];
        out.slot[i] = static_cast<int32_t>(FC_MUTANT(kDecodePageSlotMask) ? j & (size - 1) : j - index * size);
      }
    }
  }

  // Rows [k0, k0 + kBlockN) of a K or V head into a tile (swizzled chunks), zero-filled at or past `keys_end` and past
  // head_dim, never reading there. Lane l copies chunk l % kChunksPerRow of every (32 / kChunksPerRow)-th row.
  __device__ static void load_kv(uint32_t tile, const RowSource<const T>& rows, const TileRows& where, int64_t k0,
                                 int64_t keys_end, int64_t head_dim, int lane) {
    constexpr int kRowStep = kLanes / Tile::kChunksPerRow < 1 ? 1 : kLanes / Tile::kChunksPerRow;
    const int ch = lane % Tile::kChunksPerRow;
    const int r0 = lane / Tile::kChunksPerRow;
    const bool col_live = ch * kChunkElems < head_dim;
#pragma unroll
    for (int t = 0; t < Tile::kChunkIters; ++t) {
      const int r = r0 + t * kRowStep;
      const int64_t key = k0 + r;
      const bool live = col_live && key < keys_end;
      int64_t offset = key * rows.row_stride;
      if (rows.pages != nullptr) {
        const int i = (t * kRowStep) / kLanes;  // r / 32: r0 < kRowStep, and kRowStep divides 32
        const int32_t page = __shfl_sync(kFullWarp, where.page[i], r % kLanes);
        const int32_t slot = __shfl_sync(kFullWarp, where.slot[i], r % kLanes);
        offset = page * rows.page_stride + slot * rows.row_stride;
      }
      const T* src = live ? rows.base + offset + ch * kChunkElems : rows.base;
      cp_async_16(tile + Tile::chunk(r, ch), src, live ? kChunkBytes : 0);
    }
  }

  // K and V rows [k0, k0 + kBlockN) into a stage (K, then V). A whole tile whose rows are row_stride apart
  // (contiguous K/V, or one page holding the whole tile: page_size a multiple of kBlockN) takes one base pointer
  // per tensor, advanced by a constant per copy; any other tile goes through load_kv row by row. `where` holds this
  // tile's rows as resolve_rows() gave them for the same k0 (lane 0: row k0), as for load_kv.
  __device__ static void load_tile(uint32_t stage, const RowSource<const T>& k_rows, const RowSource<const T>& v_rows,
                                   const TileRows& where, int64_t k0, int64_t keys_end, int64_t head_dim, int lane) {
    if (k0 + Tile::kBlockN > keys_end || (k_rows.pages != nullptr && k_rows.page_size % Tile::kBlockN != 0)) {
      load_kv(stage, k_rows, where, k0, keys_end, head_dim, lane);
      load_kv(stage + Tile::kTileBytes, v_rows, where, k0, keys_end, head_dim, lane);
      return;
    }
    constexpr int kRowStep = kLanes / Tile::kChunksPerRow < 1 ? 1 : kLanes / Tile::kChunksPerRow;
    const int ch = lane % Tile::kChunksPerRow;
    const int r0 = lane / Tile::kChunksPerRow;
    const bool col_live = ch * kChunkElems < head_dim;
    // Opaque strides: the compiler would otherwise hold one pointer per copy across the K/V loop.
    int64_t k_stride = k_rows.row_stride, v_stride = v_rows.row_stride;
    asm volatile("" : "+l"(k_stride), "+l"(v_stride));
    int64_t k_first = k0 * k_stride, v_first = k0 * v_stride;
    if (k_rows.pages != nullptr) {  // row k0 is lane 0's first resolved row; K and V share the page table
      const int64_t page = __shfl_sync(kFullWarp, where.page[0], 0);
      const int64_t slot = __shfl_sync(kFullWarp, where.slot[0], 0);
      k_first = page * k_rows.page_stride + slot * k_stride;
      v_first = page * v_rows.page_stride + slot * v_stride;
    }
    // A lane past head_dim copies nothing (zero bytes from a valid address that never moves).
    const int64_t lane_offset = ch * kChunkElems;
    const T* k_src = col_live ? k_rows.base + k_first + r0 * k_stride + lane_offset : k_rows.base;
    const T* v_src = col_live ? v_rows.base + v_first + r0 * v_stride + lane_offset : v_rows.base;
    const int64_t k_step = col_live ? kRowStep * k_stride : 0;
    const int64_t v_step = col_live ? kRowStep * v_stride : 0;
    const int bytes = col_live ? kChunkBytes : 0;
#pragma unroll
    for (int t = 0; t < Tile::kChunkIters; ++t) {
      cp_async_16(stage + Tile::chunk(r0 + t * kRowStep, ch), k_src, bytes);
      k_src += k_step;
    }
#pragma unroll
    for (int t = 0; t < Tile::kChunkIters; ++t) {
      cp_async_16(stage + Tile::kTileBytes + Tile::chunk(r0 + t * kRowStep, ch), v_src, bytes);
      v_src += v_step;
    }
  }
};

}  // namespace decode_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
