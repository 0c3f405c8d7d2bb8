// The one epilogue of the fp16/bf16 tensor-core forward kernels (kernel.cuh and every variant of kernel_ws.cuh): a
// row's finals (l summed over the quad, the sink merged in: common/epilogue.h), O = alpha * acc / l rounded once to
// T, staged in shared memory or stored from the registers, LSE = m*|scale| + ln(l), and split-KV's fp32 partials.
// Every O store goes through normalized_o and every LSE through write_lse, so the stagings give the same bits.
#pragma once

#include <utility>

#include "common/epilogue.h"
#include "common/row_quotient.cuh"
#include "fragments.cuh"
#include "scheduler.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

template <typename T, class Cfg>
template <bool kInstrument, bool kExtras>
struct Fragments<T, Cfg>::Epilogue {
  // Epilogue, first half: O = acc / l rounded to T into this warp's rows of a (kBlockM, kHeadDim) tile at o_smem
  // laid out like Q, and LSE = m*|scale| + ln(l) for the real rows, with the sink merged in (common/epilogue.h).
  // A row with l == 0 saw no key with a finite score: O = 0 and LSE = -inf by contract, whatever acc holds.
  // Returns normalized_o's verdict: whether an accumulator of the warp is inf or NaN.
  __device__ static bool stage_o_and_lse(const State& st, const KernelArgs& a, uint32_t o_smem, const Item& it,
                                         int warp_row0, int lane) {
    Finals fin;
    row_finals(st, a, it.h, fin);
    const bool nonfinite = normalized_o<0, kNO>(st, fin, lane, [&](int local_row, int nt, int col, uint32_t packed) {
      st_shared_b32(o_smem + chunk_offset<Cfg::kBlockM>(warp_row0 + local_row, nt) + col * kElementBytes, packed);
    });
    write_lse(st, a, fin, it, it.q0 + warp_row0, lane);
    return nonfinite;
  }

  // A row's base in log2 units, what its l and accumulator are relative to: its reference (raw score units) times
  // scale_log2.
  __device__ static float ref_log2(float ref, const KernelArgs& a) {
    return ref == kNegInf ? kNegInf : __fmul_rn(ref, a.scale_log2);
  }

  // Split-KV (kSeq variants, a.splits > 1): this thread's rows' state as it stands into run it.split's partials,
  // which the combine merges (common/combine.cuh): the accumulator in fp32, the base in log2 units, l summed over
  // the quad. row0 = the warp's first query row. Returns whether an accumulator of the warp is inf or NaN.
  __device__ static bool store_partials(const State& st, const KernelArgs& a, const Item& it, int64_t row0, int lane) {
    const int quad_col = (lane % kQuad) * 2;
    const bool pairs = value_cols(a) % 2 == 0;  // a column pair is then 8-byte aligned
    bool nonfinite = false;
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNO; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) nonfinite |= !isfinite(st.acc_o[mt][nt][e]);
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const float l = quad_sum(st.row_sum[mt][hh]);
        const int64_t row = row0 + mt * kMmaM + lane / kQuad + hh * kMmaN;
        if (row >= it.vis.seqlen_q) continue;
        const int64_t at = int64_t{it.split} * a.lse_rows + it.lse0 + row;
        float* out = a.partial_acc + at * value_cols(a);
#pragma unroll
        for (int nt = 0; nt < kNO; ++nt) {
          const int col = nt * kMmaN + quad_col;
          const float x0 = st.acc_o[mt][nt][2 * hh], x1 = st.acc_o[mt][nt][2 * hh + 1];
          if (pairs && col + 1 < value_cols(a)) {
            *reinterpret_cast<float2*>(out + col) = make_float2(x0, x1);
          } else {
            if (col < value_cols(a)) out[col] = x0;
            if (col + 1 < value_cols(a)) out[col + 1] = x1;
          }
        }
        if (lane % kQuad == 0) {
          a.partial_m[at] = ref_log2(st.row_ref[mt][hh], a);
          a.partial_l[at] = l;
        }
      }
    return __any_sync(kFullWarp, nonfinite);
  }

  // The final state of this thread's rows (common/epilogue.h, finish_row): l summed over the quad (each quad holds
  // one row's partial sums), the sink of query head h merged in.
  struct Finals {
    RowFinal row[kM][2];
    RowQuotient quot[kM][2];
    QuotientDomain domain;  // the divisors' part of fast_quotient's domain check (common/row_quotient.cuh)
  };
  __device__ static void row_finals(const State& st, const KernelArgs& a, int64_t h, Finals& fin) {
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const float ref = st.row_ref[mt][hh];
        // m in natural units as a product rounded on its own: LSE's add then contracts with nothing, so every
        // variant of the kernel (kExtras) gives it the same bits.
        const RowFinal r = finish_row(ref_log2(ref, a), __fmul_rn(ref, a.ref_to_natural),
                                      quad_sum(st.row_sum[mt][hh]),
                                      kExtras && !FC_MUTANT(kTcSinkIgnored) ? a.sink : nullptr, h,
                                      [](float e) { return ex2_approx(e); });
        fin.row[mt][hh] = r;
        fin.quot[mt][hh] = row_quotient(r.l);
        fin.domain.divisor(r.l, r.keys_empty);
      }
  }
  // O's element before the division: the accumulator times the sink's factor (final_output's product).
  __device__ static float numerator(float acc, const RowFinal& r) { return mul_rn(acc, r.alpha); }

  // O = alpha * acc / l rounded to T (0 where l == 0) for the n8 column tiles [kNt0, kNt0 + kNtCount) of this
  // thread's rows: put(row within the warp's rows, n8 tile, first column within it, the packed pair).
  // The quotients come from fast_quotient(); if any of the warp's lies outside its domain, the warp puts every
  // element again from final_output()'s div_rn (the same bits where both apply: common/row_quotient.cuh). put()
  // may shuffle within the warp, hence the warp-wide vote. Returns whether one of these accumulators of the warp is
  // inf or NaN (warp-uniform), found on the second pass only: a non-finite accumulator makes its numerator leave the
  // domain (alpha is finite and non-negative), so where the domain holds there is none.
  template <int kNt0, int kNtCount, class Put>
  __device__ static bool normalized_o(const State& st, const Finals& fin, int lane, Put&& put) {
    const int quad_row = lane / kQuad;
    const int quad_col = (lane % kQuad) * 2;
    const auto each = [&](auto&& element) {
#pragma unroll
      for (int mt = 0; mt < kM; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
#pragma unroll
          for (int nt = kNt0; nt < kNt0 + kNtCount; ++nt) {
            const float o0 = element(st.acc_o[mt][nt][2 * hh], mt, hh);
            const float o1 = element(st.acc_o[mt][nt][2 * hh + 1], mt, hh);
            put(mt * kMmaM + quad_row + hh * kMmaN, nt, quad_col, Ops::pack(o0, o1));
          }
        }
    };
    QuotientDomain domain = fin.domain;
    each([&](float acc, int mt, int hh) {
      const float x = numerator(acc, fin.row[mt][hh]);
      domain.numerator(x);
      return fast_quotient(x, fin.quot[mt][hh]);
    });
    if (!__any_sync(kFullWarp, !domain.holds())) return false;
    bool nonfinite = false;
    each([&](float acc, int mt, int hh) {
      nonfinite |= !isfinite(acc);
      return final_output(acc, fin.row[mt][hh]);
    });
    return __any_sync(kFullWarp, nonfinite);
  }

  // LSE = m*|scale| + ln(l) (common/epilogue.h) of this thread's real rows; row0 = the warp's first query row.
  // The quad's lanes share its rows' LSE: lane t writes the rows of pairs t, t + 4, ... of (mt, hh) (every lane
  // holds every row's finals), so the logarithms run side by side instead of one after another in lane 0.
  __device__ static void write_lse(const State& st, const KernelArgs& a, const Finals& fin, const Item& it,
                                   int64_t row0, int lane) {
    constexpr int kPairs = 2 * kM;
#pragma unroll
    for (int p0 = 0; p0 < kPairs; p0 += kQuad) {
      const int p = p0 + lane % kQuad;
      if (p >= kPairs) continue;
      RowFinal r = fin.row[0][0];
      int moves = 0;
#pragma unroll
      for (int q = 0; q < kPairs; ++q) {
        if (q != p) continue;
        r = fin.row[q / 2][q % 2];
        if constexpr (kInstrument) moves = st.moves[q / 2][q % 2];
      }
      const int64_t row = row0 + (p / 2) * kMmaM + lane / kQuad + (p % 2) * kMmaN;
      if (row >= it.vis.seqlen_q) continue;
      a.lse[it.lse0 + row] = row_lse(r.m_natural, r.l) * (FC_MUTANT(kTcLseLog2Units) ? kLog2e : 1.0f);
      if constexpr (kInstrument) record_row(a.inst, it.lse0 + row, r.m_natural, r.l, moves);
    }
  }

  // The cp.async kernel's epilogue (kernel.cuh): O and LSE through stage_o_and_lse into this warp's own rows of the
  // (kBlockM, kHeadDim) tile at o_smem, then 16-byte stores of the real columns of the real rows.
  __device__ static void stage_and_store_o(const State& st, const KernelArgs& a, const Item& it, uint32_t o_smem,
                                           int warp_row0, int lane) {
    T* o_head = head_of<T>(a.o, it.qb, it.h) + it.q_row0 * a.o.stride.row;
    stage_o_and_lse(st, a, o_smem, it, warp_row0, lane);
    __syncwarp();
    constexpr int kStorePerLane = Cfg::kRowsPerWarp * Cfg::kChunksPerRowV / kWarpSize;
#pragma unroll
    for (int i = 0; i < kStorePerLane; ++i) {
      const int idx = lane + i * kWarpSize;
      const int local_row = warp_row0 + idx / Cfg::kChunksPerRowV;
      const int col = (idx % Cfg::kChunksPerRowV) * kChunkElems;
      const int64_t row = it.q0 + local_row;
      if ((row >= it.vis.seqlen_q && !FC_MUTANT(kTcOStorePastSeqlen)) || col >= value_cols(a)) continue;
      const uint32_t src = o_smem + chunk_offset<Cfg::kBlockM>(local_row, col / kChunkElems);
      T* dst = o_head + row * a.o.stride.row + col;
      if (col + kChunkElems <= value_cols(a)) {
        *reinterpret_cast<uint4*>(dst) = ld_shared_v4(src);
      } else {
        for (int c = 0; c < value_cols(a) - col; c += 2) {  // padded family: only the real columns
          const float2 pair = Ops::unpack(ld_shared_b32(src + c * kElementBytes));
          dst[c] = T(pair.x);
          if (c + 1 < value_cols(a) - col) dst[c + 1] = T(pair.y);
        }
      }
    }
    // The lanes of this warp are done reading its staged rows before it stages the next item's.
    __syncwarp();
  }

  // Packed Q (kernel_ws.cuh): the staged O rows (tile o_tile, laid out like Q) of warpgroup wg that belong to the sequence, 16 bytes per thread and step (head_dim % 8 == 0
  // here: encode_operand()).
  __device__ static void store_staged_rows(const KernelArgs& a, uint32_t o_tile, const Item& it, int wg, int wg_tid) {
    const int64_t row0 = it.q0 + wg * kWgmmaRows;
    T* o_rows = a.o.template head<T>(it.qb, it.h) + (it.q_row0 + row0) * a.o.stride.row;
    const int rows = static_cast<int>(max(min(it.vis.seqlen_q - row0, int64_t{kWgmmaRows}), int64_t{0}));
    const int chunks = static_cast<int>(value_cols(a)) / kChunkElems;
    for (int i = wg_tid; i < rows * chunks; i += kWarpgroupThreads) {
      const int r = i / chunks;
      const int ch = i - r * chunks;
      const uint4 v = ld_shared_v4(o_tile + chunk_offset<Cfg::kBlockM>(wg * kWgmmaRows + r, ch));
      *reinterpret_cast<uint4*>(o_rows + r * a.o.stride.row + ch * kChunkElems) = v;
    }
  }

  // O of this thread's rows straight from the accumulators, normalized and rounded as stage_o_and_lse does (the
  // same helpers, so O is bit-identical to the other stagings and to kernel.cuh). Per pair of n8 tiles, lanes t
  // and t ^ 1 of a quad swap one packed word so that each holds 4 consecutive columns: a quad then writes the
  // pair's 32 contiguous bytes of its row, whole sectors, with 8-byte stores. 4-byte stores straight from the
  // fragments cost 13-15% at d = 256, N = 512 (half sectors). encode_operand() admits
  // only head_dim % 8 == 0, so 4 columns are real or padding together. Returns whether an accumulator of the warp is
  // inf or NaN.
  __device__ static bool store_o_direct(const State& st, const KernelArgs& a, const Item& it, int warp_row0, int lane) {
    Finals fin;
    row_finals(st, a, it.h, fin);
    const int64_t row0 = it.q0 + warp_row0;
    T* o_rows = a.o.template head<T>(it.qb, it.h) + (it.q_row0 + row0) * a.o.stride.row;
    const int t = lane % kQuad;
    const bool odd = (t & 1) != 0;
    bool nonfinite = false;
    const auto tile_pair = [&]<int kJ>() {  // n8 tiles 2 kJ and 2 kJ + 1
      uint32_t w[2][2];                     // [row half][tile]
      nonfinite |= normalized_o<2 * kJ, 2>(st, fin, lane, [&](int r, int nt, int, uint32_t packed) {
        w[r / kMmaN][nt - 2 * kJ] = packed;
      });
      const int c = (2 * kJ + (t & 1)) * kMmaN + (t & 2) * 2;  // even t: tile 2 kJ; odd t: tile 2 kJ + 1
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const uint32_t recv = __shfl_xor_sync(kFullWarp, odd ? w[hh][0] : w[hh][1], 1);
        const uint2 v = odd ? make_uint2(recv, w[hh][1]) : make_uint2(w[hh][0], recv);
        const int r = lane / kQuad + hh * kMmaN;
        if ((row0 + r < it.vis.seqlen_q || FC_MUTANT(kTcOStorePastSeqlen)) && c < value_cols(a)) *reinterpret_cast<uint2*>(o_rows + r * a.o.stride.row + c) = v;
      }
    };
    [&]<int... kJ>(std::integer_sequence<int, kJ...>) {
      (tile_pair.template operator()<kJ>(), ...);
    }(std::make_integer_sequence<int, Cfg::kNTilesO / 2>{});
    write_lse(st, a, fin, it, row0, lane);
    return nonfinite;
  }
};

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
