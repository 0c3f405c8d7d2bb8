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
#include "decode/device.cuh"
#include "decode/hidden_v.cuh"
#include "decode/loads.cuh"
#include "decode/tiles.h"
#include "families.h"
#include "tensor_core/ptx.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace decode_kernel {

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

  using Loads = DecodeLoads<T, Tile>;    // decode/loads.cuh
  using HiddenV = DecodeHiddenV<T, Tile>;  // decode/hidden_v.cuh

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
    typename Loads::TileRows rows_next;              // page and slot of the next tile to copy (paged caches)
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
    const auto copy_tile = [&](int64_t kt, const typename Loads::TileRows& where) {
      Loads::load_tile(stage_of(kt), k_rows, v_rows, where, tile_key(kt), keys_end, a.head_dim, lane);
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
          Loads::resolve_rows(k_rows, tile_key(run_begin + s), keys_end, lane, rows_next);
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
      if (run_begin + kS - 1 < run_end) Loads::resolve_rows(k_rows, tile_key(run_begin + kS - 1), keys_end, lane, rows_next);
    }

    for (int64_t kt = run_begin; kt < run_end; ++kt) {
      const uint32_t stage = stage_of(kt);
      // Tile kt + kS - 1 into the stage tile kt - 1 left (every lane is past it: the __syncwarp ending the last
      // iteration); one commit group an iteration, empty past the run, so that kS - 1 groups stay pending.
      if (kt + kS - 1 < run_end) {
        copy_tile(kt + kS - 1, rows_next);
        copies.filled(stage_slot(kt + kS - 1));
        if (kt + kS < run_end) Loads::resolve_rows(k_rows, tile_key(kt + kS), keys_end, lane, rows_next);
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
      if (tiles.hides_keys(kt)) HiddenV::hidden_nonfinite_v(v_tile, k0, keys_end, all_begin, all_end, kb, ke, s, acc, lane);

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
