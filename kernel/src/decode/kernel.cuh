// The decode family: attention for few query rows against long K/V (a decoding step, dense, varlen or paged), on
// fp16/bf16 tensor cores (mma.sync m16n8k16). One warp is one work item (sequence b, K/V head, run): its 16 mma rows
// hold every query row of the query heads that read that K/V head (GQA packing, so K and V are read once for all of
// them), and it streams its run of K/V tiles through a private ring of kStages cp.async stages (rows gathered
// through the page table where the cache is paged; any page size). No barrier spans warps. Rounding points are the
// tensor-core path's of families.h with the host model's formulation: x = fl(s * scale log2 e) (or the softcapped
// score), the reference of common/softmax.h's tile_reference, p = ex2.approx(x - ref) in fp32, l summed from fp32 p
// per lane, P rounded to T for P V, fp32 mma accumulation. Unsplit launches write O and LSE through the shared
// epilogue; split launches write each run's state for the combine (common/combine.cuh). Included by
// decode_<dtype>.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "common/args.h"
#include "common/combine.cuh"
#include "common/epilogue.h"
#include "common/mutants.cuh"
#include "common/softmax.h"
#include "decode/tiles.h"
#include "families.h"
#include "tensor_core/ptx.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace decode_kernel {

using namespace ::flashcheck::decode;
using tc_kernel::cp_async_16;
using tc_kernel::cp_async_commit;
using tc_kernel::cp_async_wait;
using tc_kernel::DtypeOps;
using tc_kernel::ex2_approx;
using tc_kernel::ld_shared_v4;
using tc_kernel::ldmatrix_x4;
using tc_kernel::ldmatrix_x4_trans;
using tc_kernel::smem_address;
using tc_kernel::st_shared_v4;

inline constexpr bool kInstrument = FLASHCHECK_INSTRUMENT;
inline constexpr uint32_t kFullWarp = 0xFFFFFFFFu;
inline constexpr int kLanes = 32;

struct NoInstrumentation {};

template <bool kInst>
struct DecodeArgs : ProblemArgs {
  int64_t heads_kv = 0;
  int32_t rows_per_head = 0;  // query rows of each packed head: 16 / group
  std::conditional_t<kInst, Instrumentation, NoInstrumentation> inst;
};

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(kFullWarp, x, 1));
  return fmaxf(x, __shfl_xor_sync(kFullWarp, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(kFullWarp, x, 1);
  return FC_MUTANT(kDecodeQuadSumShort) ? x : x + __shfl_xor_sync(kFullWarp, x, 2);
}

template <typename T, class Tile, bool kInst>
struct Warp {
  using Ops = DtypeOps<T>;

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

  // Byte offsets, within a row r with r % 8 == x, of the chunk pairs 2s + c a lane's ldmatrix rows read. The swizzle
  // (Tile::slot) changes only the low three bits of a chunk index, so pair s = 4j + m sits at at[m] + j * 128
  // bytes: a lane keeps four offsets, and the rest of every ldmatrix address is a row base and immediates
  // (Tile::chunk() at each ldmatrix made the d = 128 kernel spill 92 bytes; with the offsets it spills 52).
  struct PairOffsets {
    uint32_t at[4];
    __device__ uint32_t operator()(int s) const { return at[s % 4] + static_cast<uint32_t>(s / 4) * 8 * kChunkBytes; }
  };
  __device__ static PairOffsets pair_offsets(int x, int c) {
    PairOffsets p;
#pragma unroll
    for (int m = 0; m < 4; ++m) p.at[m] = Tile::slot(x, 2 * m + c);
    return p;
  }

  // A row's final state from the lane's partial l (quad-summed here).
  struct RowState {
    float m = kNegInf;    // running max, log2 units
    float ref = kNegInf;  // what p and l are relative to (tile_reference)
    float l_part = 0.0f;  // this lane's share of l
    int64_t moves = 0;    // instrumented builds: how often the running max moved
  };

  __device__ static void run(const DecodeArgs<kInst>& a, uint8_t* smem, int64_t item, int lane) {
    const int32_t run_index = static_cast<int32_t>(item % a.splits);
    const int64_t pair = item / a.splits;
    const int64_t h_kv = pair % a.heads_kv;
    const int64_t b = pair / a.heads_kv;
    const SequenceView seq = a.sequence(b);
    if (seq.seqlen_q == 0) return;
    const Visibility& vis = seq.vis;
    const Visibility::TileRange tiles = vis.tile_range(0, seq.seqlen_q, Tile::kBlockN);
    const int64_t run_begin = a.split_begin(tiles.count, run_index);
    const int64_t run_end = a.split_begin(tiles.count, run_index + 1);
    const int64_t keys_end = vis.row_end(seq.seqlen_q - 1);          // keys some row sees
    const int64_t all_begin = vis.row_begin(seq.seqlen_q - 1);       // keys every row sees: [all_begin, all_end)
    const int64_t all_end = vis.row_end(0);

    // This lane's two rows (m16 fragment rows g and g + 8): packed head and query row, and their keys.
    const int group = static_cast<int>(a.group_size);
    int64_t head[2], qrow[2], kb[2], ke[2];
    bool valid[2];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = lane / 4 + hh * 8;
      const int g = FC_MUTANT(kDecodeGqaRowMapping) ? r % group : r / a.rows_per_head;
      qrow[hh] = FC_MUTANT(kDecodeGqaRowMapping) ? r / group : r % a.rows_per_head;
      head[hh] = h_kv * group + g;
      valid[hh] = g < group && qrow[hh] < seq.seqlen_q;
      kb[hh] = valid[hh] ? vis.row_begin(qrow[hh]) : 0;
      ke[hh] = valid[hh] ? vis.row_end(qrow[hh]) : 0;
    }

    const uint32_t stage0 = smem_address(smem);
    const RowSource<const T> k_rows = a.template kv_rows<const T>(a.k, b, h_kv);
    const RowSource<const T> v_rows = a.template kv_rows<const T>(a.v, b, h_kv);

    RowState st[2];
    float acc[Tile::kNO][4];
#pragma unroll
    for (int nt = 0; nt < Tile::kNO; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;

    uint32_t qa[Tile::kKSteps][4];  // Q as A fragments, every k16 step
    // Q and V ldmatrix rows: row % 8 == lane % 8, pair half lane / 16; K rows: the same rows, half (lane / 8) % 2.
    const PairOffsets qv_pairs = pair_offsets(lane % 8, lane / 16);
    const PairOffsets k_pairs = pair_offsets(lane % 8, (lane / 8) % 2);
    TileRows rows_next;              // page and slot of the next tile to copy (paged caches)
    constexpr int kS = Tile::kStages;
    // The slots copies fill (CpAsyncShadow, common/mutants.cuh): the kS stages, then Q. Perturbed builds: a slot
    // read before a wait guaranteed its copies reads NaN (the lanes all commit and wait alike).
    constexpr int kSlotQ = kS;
    CpAsyncShadow<kS + 1> copies;
    const auto stage_slot = [&](int64_t kt) { return static_cast<int>((kt - run_begin) % kS); };
    const auto stage_of = [&](int64_t kt) { return stage0 + static_cast<uint32_t>(stage_slot(kt)) * Tile::kStageBytes; };
    const auto poison_if_premature = [&](int slot, uint32_t base, int bytes) {
      detail::poison_if_premature(copies.premature(slot), base, bytes, lane, kLanes, [] { __syncwarp(); });
    };
    const auto tile_key = [&](int64_t kt) { return (tiles.first + kt) * Tile::kBlockN; };
    const auto copy_tile = [&](int64_t kt, const TileRows& where) {
      load_tile(stage_of(kt), k_rows, v_rows, where, tile_key(kt), keys_end, a.head_dim, lane);
    };
    if (run_end > run_begin) {
      // Q (the 16 packed rows, zeros for rows that are not rows of the problem) passes through the last stage into
      // registers; the first kS - 1 tiles fill the others, one commit group each (Q rides with the first).
      const uint32_t q_stage = stage0 + (kS - 1) * Tile::kStageBytes;
#pragma unroll
      for (int c = lane; c < kRows * Tile::kChunksPerRow; c += kLanes) {
        const int r = c / Tile::kChunksPerRow;
        const int ch = c % Tile::kChunksPerRow;
        const int g = r / a.rows_per_head;
        const int64_t i = r % a.rows_per_head;
        const bool live = g < group && i < seq.seqlen_q && ch * kChunkElems < a.head_dim;
        const T* src = static_cast<const T*>(a.q.ptr);
        if (live) src = a.template q_rows<const T>(a.q, b, h_kv * group + g) + i * a.q.stride.row + ch * kChunkElems;
        cp_async_16(q_stage + Tile::chunk(r, ch), src, live ? kChunkBytes : 0);
      }
      copies.filled(kSlotQ);
#pragma unroll
      for (int s = 0; s < kS - 1; ++s) {
        if (run_begin + s < run_end) {
          FC_PERTURB(kPerturbCpAsyncIssue, s);
          resolve_rows(k_rows, tile_key(run_begin + s), keys_end, lane, rows_next);
          copy_tile(run_begin + s, rows_next);
          copies.filled(stage_slot(run_begin + s));
        }
        cp_async_commit();
        copies.commit();
      }
      cp_async_wait<kS - 2>(copies);  // Q and the first tile
      poison_if_premature(kSlotQ, q_stage, Tile::kQBytes);
      __syncwarp();
#pragma unroll
      for (int ks = 0; ks < Tile::kKSteps; ++ks) {
        ldmatrix_x4(qa[ks], q_stage + (lane % 16) * Tile::kPitchBytes + qv_pairs(ks));
      }
      __syncwarp();  // Q is in registers: its stage takes tile kS - 1
      if (run_begin + kS - 1 < run_end) resolve_rows(k_rows, tile_key(run_begin + kS - 1), keys_end, lane, rows_next);
    }

    for (int64_t kt = run_begin; kt < run_end; ++kt) {
      const uint32_t stage = stage_of(kt);
      // Tile kt + kS - 1 into the stage tile kt - 1 left (every lane is past it: the __syncwarp ending the last
      // iteration); one commit group an iteration, empty past the run, so that kS - 1 groups stay pending.
      if (kt + kS - 1 < run_end) {
        copy_tile(kt + kS - 1, rows_next);
        copies.filled(stage_slot(kt + kS - 1));
        if (kt + kS < run_end) resolve_rows(k_rows, tile_key(kt + kS), keys_end, lane, rows_next);
      }
      cp_async_commit();
      copies.commit();
      if (FC_MUTANT(kDecodeCpAsyncWaitShort)) {
        cp_async_wait<kS>(copies);
      } else {
        cp_async_wait<kS - 1>(copies);
      }
      poison_if_premature(stage_slot(kt), stage, Tile::kStageBytes);
      FC_PERTURB(kPerturbDecodeWait, kt);
      __syncwarp();
      const uint32_t k_tile = stage;
      const uint32_t v_tile = stage + Tile::kTileBytes;
      const int64_t k0 = (tiles.first + kt) * Tile::kBlockN;

      // S = Q K^T.
      float s[Tile::kNS][4];
#pragma unroll
      for (int nt = 0; nt < Tile::kNS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < Tile::kKSteps; ++ks) {
#pragma unroll
        for (int n2 = 0; n2 < Tile::kNS / 2; ++n2) {
          uint32_t kb4[4];
          const int key = n2 * 16 + (lane / 16) * 8 + lane % 8;
          ldmatrix_x4(kb4, k_tile + key * Tile::kPitchBytes + k_pairs(ks));
          Ops::mma(s[2 * n2], qa[ks], kb4[0], kb4[1]);
          Ops::mma(s[2 * n2 + 1], qa[ks], kb4[2], kb4[3]);
        }
      }

      // Scores in log2 units, hidden keys -inf (a select: the hidden key's own score, NaN or not, never enters).
      // A tile of keys that every row of the sequence sees needs no select. The rows of the mma tile that are no
      // rows of the problem (zero Q) then keep their scores, 0 or NaN (0 * inf) where K is not finite: rows stay
      // apart in the mma and in the quad reductions, and nothing stores them (valid[] gates every write).
      if (a.has_softcap) {
#pragma unroll
        for (int nt = 0; nt < Tile::kNS; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[nt][e] = capped_score_log2(s[nt][e], a.softcap);
      } else {
#pragma unroll
        for (int nt = 0; nt < Tile::kNS; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[nt][e] = mul_rn(s[nt][e], a.scale_log2);
      }
      if (tiles.needs_mask(kt)) {
        const int64_t key0 = k0 + (lane % 4) * 2;
#pragma unroll
        for (int nt = 0; nt < Tile::kNS; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int64_t key = key0 + nt * 8 + (e % 2);
            s[nt][e] = key >= kb[e / 2] && key < ke[e / 2] ? s[nt][e] : kNegInf;
          }
      }

      // Online softmax (common/softmax.h): the tile's max, the reference, alpha, p.
      float alpha[2];
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        float tile_max = kNegInf;
#pragma unroll
        for (int nt = 0; nt < Tile::kNS; ++nt) tile_max = fmaxf(tile_max, fmaxf(s[nt][2 * hh], s[nt][2 * hh + 1]));
        tile_max = quad_max(tile_max);
        const float m_new = fmaxf(st[hh].m, tile_max);
        const float ref = tile_reference(tile_max, m_new, st[hh].ref, [](float u) { return u; });
        const float origin = exponent_origin(ref);
        alpha[hh] = ex2_approx(st[hh].ref - origin);
        float sum = st[hh].l_part * alpha[hh];
#pragma unroll
        for (int nt = 0; nt < Tile::kNS; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float p = ex2_approx(s[nt][2 * hh + e] - origin);
            s[nt][2 * hh + e] = p;
            sum += p;  // l takes p before it is rounded to T
          }
        st[hh].l_part = sum;
        if constexpr (kInst) st[hh].moves += m_new != st[hh].m ? 1 : 0;
        st[hh].m = m_new;
        st[hh].ref = ref;
      }
#pragma unroll
      for (int nt = 0; nt < Tile::kNO; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nt][e] *= alpha[e / 2];

      // Keys this tile hides from some row (below keys_end) whose V row holds inf or NaN: 0 * inf must not reach
      // the rows that do not see them. Such a row is added on the CUDA cores (p rounded to T, as P V takes it) to
      // the rows that see it and zeroed for the mma.
      if (tiles.hides_keys(kt)) hidden_nonfinite_v(v_tile, k0, keys_end, all_begin, all_end, kb, ke, s, acc, lane);

      // O += P V with P rounded to T.
#pragma unroll
      for (int kk = 0; kk < Tile::kPvSteps; ++kk) {
        uint32_t pa[4];
        pa[0] = Ops::pack(s[2 * kk][0], s[2 * kk][1]);
        pa[1] = Ops::pack(s[2 * kk][2], s[2 * kk][3]);
        pa[2] = Ops::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        pa[3] = Ops::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
        for (int n2 = 0; n2 < Tile::kNO / 2; ++n2) {
          uint32_t vb[4];
          const int key = kk * 16 + ((lane / 8) % 2) * 8 + lane % 8;
          ldmatrix_x4_trans(vb, v_tile + key * Tile::kPitchBytes + qv_pairs(n2));
          Ops::mma(acc[2 * n2], pa, vb[0], vb[1]);
          Ops::mma(acc[2 * n2 + 1], pa, vb[2], vb[3]);
        }
      }
      if constexpr (kInst) {
        if (a.splits == 1) {
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const float l = quad_sum(st[hh].l_part);
            if (valid[hh] && lane % 4 == 0) {
              const int slot = trace_slot(a.inst, a.row_block(b, head[hh]) + qrow[hh]);
              record_trace(a.inst, slot, kt, mul_rn(st[hh].ref, kLn2), l);
            }
          }
        }
      }
      __syncwarp();  // every lane is done with this stage before the next load overwrites it
    }

    // Epilogue: O and LSE through common/epilogue.h, or the run's state for the combine.
    const int col0 = (lane % 4) * 2;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const float l = quad_sum(st[hh].l_part);
      if (!valid[hh]) continue;
      const int64_t lse_row = a.row_block(b, head[hh]) + qrow[hh];
      if (a.splits > 1) {
        const int64_t at = static_cast<int64_t>(run_index) * a.lse_rows + lse_row;
        float* out = a.partial_acc + at * a.head_dim;
#pragma unroll
        for (int nt = 0; nt < Tile::kNO; ++nt) {
          const int col = nt * 8 + col0;
          if (col < a.head_dim) *reinterpret_cast<float2*>(out + col) = make_float2(acc[nt][2 * hh], acc[nt][2 * hh + 1]);
        }
        if (lane % 4 == 0) {
          a.partial_m[at] = st[hh].ref;
          a.partial_l[at] = l;
        }
        continue;
      }
      const RowFinal fin = finish_row(st[hh].ref, mul_rn(st[hh].ref, kLn2), l, a.sink, head[hh],
                                      [](float e) { return ex2_approx(e); });
      T* o_row = a.template q_rows<T>(a.o, b, head[hh]) + qrow[hh] * a.o.stride.row;
#pragma unroll
      for (int nt = 0; nt < Tile::kNO; ++nt) {
        const int col = nt * 8 + col0;
        if (col < a.head_dim) {
          *reinterpret_cast<uint32_t*>(o_row + col) =
              Ops::pack(final_output(acc[nt][2 * hh], fin), final_output(acc[nt][2 * hh + 1], fin));
        }
      }
      if (lane % 4 == 0) {
        a.lse[lse_row] = row_lse(fin.m_natural, fin.l);
        if constexpr (kInst) record_row(a.inst, lse_row, fin.m_natural, fin.l, st[hh].moves);
      }
    }
    if constexpr (kInst) {
      // Counted per query head, as for one Q tile of rows_per_head rows each (the host model's tiles).
      if (lane == 0 && run_index == 0) {
        for (int g = 0; g < group; ++g) {
          count_tile_kinds(a.inst, vis, 0, a.rows_per_head, Tile::kBlockN, tiles.first, tiles.first + tiles.count);
        }
      }
    }
  }

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

template <typename T, class Tile, bool kInst>
__global__ void __launch_bounds__(kWarps * kLanes, 1) decode_kernel(const DecodeArgs<kInst> args) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) / kLanes;
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  uint8_t* warp_smem = smem + warp * Tile::kWarpBytes;
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * kWarps + warp; item < args.work_items;
       item += static_cast<int64_t>(gridDim.x) * kWarps) {
    Warp<T, Tile, kInst>::run(args, warp_smem, item, lane);
  }
}

inline constexpr int64_t kGridMax = int64_t{1} << 20;

template <typename T, class Tile, bool kInst = kInstrument>
Status launch_decode_tile(const Params& params, cudaStream_t stream, const Instrumentation* inst) {
  KernelConfig config;
  decode_select(params, &config);
  FC_UPLOAD_MUTANT(stream);
  DecodeArgs<kInst> args{make_problem_args(params, config.block_m, effective_splits(params))};
  args.heads_kv = params.heads_kv;
  args.rows_per_head = config.block_m;
  args.work_items = params.batch * params.heads_kv * args.splits;
  if constexpr (kInst) {
    if (inst != nullptr) args.inst = *inst;
  }
  const auto kernel = decode_kernel<T, Tile, kInst>;
  const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Tile::kSmemBytes));
  if (attr != cudaSuccess) {
    return {StatusCode::kCudaError, std::string("decode: cudaFuncSetAttribute(max dynamic smem) failed: ") +
                                        cudaGetErrorString(attr)};
  }
  return combine::launch_split<T, kInst>(args, stream, inst, [&](const DecodeArgs<kInst>& run_args) -> Status {
    const int64_t blocks = (run_args.work_items + kWarps - 1) / kWarps;
    const dim3 grid(static_cast<unsigned>(capped_grid(blocks < kGridMax ? blocks : kGridMax)));
    kernel<<<grid, kWarps * kLanes, Tile::kSmemBytes, stream>>>(run_args);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
      return {StatusCode::kCudaError, std::string("decode: kernel launch failed: ") + cudaGetErrorString(err)};
    }
    return Status::ok_status();
  });
}

template <typename T>
Status launch_decode_dtype(const Params& params, const KernelConfig& config, cudaStream_t stream,
                           const Instrumentation* inst) {
  switch (config.head_dim_padded) {
    case 64: return launch_decode_tile<T, DecodeTile<64>>(params, stream, inst);
    case 128: return launch_decode_tile<T, DecodeTile<128>>(params, stream, inst);
    case 256: return launch_decode_tile<T, DecodeTile<256>>(params, stream, inst);
    default: break;
  }
  return {StatusCode::kUnsupported, "decode: no compiled head_dim family of " + std::to_string(config.head_dim_padded)};
}

}  // namespace decode_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
