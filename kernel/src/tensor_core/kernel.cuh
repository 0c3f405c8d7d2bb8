// FlashAttention-2 style forward kernel on fp16/bf16 tensor cores (mma.sync m16n8k16, ldmatrix, cp.async ring).
// A CTA computes kBlockM query rows of one (batch, head) against every K/V tile those rows can see; O, the row
// max and the row sum stay in registers and P never leaves them. Rounding points are families.h's (tensor
// core): fp32 scores, p = exp2(fl(s*c) - fl(m*c)) in fp32, l summed from fp32 p, P rounded to T for P*V, fp32 O.
// Included only by the fwd_<dtype>_hdim<d>.cu instantiation units.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "epilogue.cuh"
#include "hidden_v.cuh"
#include "loads.cuh"
#include "mainloop.cuh"
#include "mask.cuh"
#include "scheduler.cuh"
#include "softmax_step.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

// kExtras: the softcap and sink code is compiled in (launches with either take this variant); kSeq (with kExtras):
// the sequences' code too (per-item lengths, visibility and packed rows: Item), for launches with sequences. Without
// them the score, addressing and epilogue paths carry no trace of them, so plain launches keep their registers, and
// softcap and sink launches keep theirs (the per-item sequence costs the warp-specialized consumers 100+ bytes of
// spills at item boundaries, 10-19% of a softcap launch's throughput at a 256-key window).
template <typename T, class Cfg, bool kInstrument, bool kExtras = false, bool kSeq = false>
struct Forward : Fragments<T, Cfg> {
  using Base = Fragments<T, Cfg>;
  using typename Base::State;
  using Base::kM;
  using Base::kNS;
  using Base::kPitch;
  using Base::kWg;
  // The parts, each in its own file.
  using Sched = Scheduler<Cfg, kSeq>;
  using Loads = typename Base::TileLoads;
  using Gemms = typename Base::Mainloop;
  using Mask = typename Base::MaskStep;
  using Softmax = typename Base::template SoftmaxStep<kInstrument>;
  using Hidden = typename Base::HiddenV;
  using Epi = typename Base::template Epilogue<kInstrument, kExtras>;
  using Item = WorkItem;

  __device__ static void run(const KernelArgs& a, uint8_t* smem) {
    const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
    const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
    const int quad_row = lane / kQuad;        // C-fragment row in an m16 tile (and quad_row + 8)
    const int quad_col = (lane % kQuad) * 2;  // C-fragment column pair in an n8 tile
    const int warp_row0 = warp * Cfg::kRowsPerWarp;
    // (kBlockM, kHeadDim) Q; swizzled tiles start on a 1024-byte boundary.
    constexpr uint32_t kAlign = Cfg::kSmemAlignSlack > 0 ? Cfg::kSmemAlignSlack : 1;
    const uint32_t q_smem = (smem_address(smem) + kAlign - 1) / kAlign * kAlign;
    const uint32_t kv_smem = q_smem + Cfg::kQSmemBytes;  // kStages x [(kBlockN, kHeadDim) K, (kBlockN, kHeadDimV) V]
    // Per-lane ldmatrix row addresses (see the fragment layouts of mma.m16n8k16): A takes rows 0-15 with the
    // two 8-column halves in lanes 0-15 / 16-31; K (B, not transposed) keys 0-7 / 8-15 in lanes 0-15 / 16-31
    // and the k halves alternating by 8 lanes; V (B, transposed) keys 0-15 by lane%16, columns by lane/16.
    const uint32_t q_lane = q_smem + (warp_row0 + lane % 16) * kPitch + (lane / 16) * kChunkBytes;
    const uint32_t k_lane_off = (lane % 8 + 8 * (lane / 16)) * kPitch + ((lane / 8) % 2) * kChunkBytes;
    const uint32_t v_lane_off = (lane % 16) * kPitch + (lane / 16) * kChunkBytes;
    const typename Loads::LoadSlot slot = Loads::load_slot(static_cast<int>(a.head_dim));
    const typename Loads::LoadSlot slot_v = Loads::value_slot(a, slot);

    // The K/V ring of two stages runs across work items: tile n of an item sits in stage (parity + n) % 2, and
    // during an item's last tile the other stage receives the next item's tile 0 (schedule.h).
    static_assert(Cfg::kStages == 2, "the ring that runs across work items has two stages");
    static_assert(Cfg::kOSmemBytes <= Cfg::kStageSmemBytes, "O is staged in the stage of the last K/V tile");
    const auto stage_smem = [&](int tile) { return kv_smem + static_cast<uint32_t>(tile & 1) * Cfg::kStageSmemBytes; };
    int parity = 0;           // stage of the current item's tile 0
    bool prefetched = false;  // the previous item already issued this item's Q and K/V tile 0
    typename Loads::Copies copies;
    for (int64_t step = 0;; ++step) {
      const int64_t item = scheduled_item(blockIdx.x, step, gridDim.x);
      if (item >= a.work_items) break;
      const int64_t next_item = scheduled_item(blockIdx.x, step + 1, gridDim.x);
      const Item it = Sched::item_at(a, item);
      if (it.q_rows <= 0) continue;  // an empty slot: nothing was prefetched for it (its n_tiles is 0)
      const int n_tiles = it.n_tiles;
      const int64_t q0 = it.q0;
      const Visibility& vis = it.vis;
      // Q and K/V for no visible key are never read: with seqlen_k == 0 the pointers may be null.
      if (!prefetched && n_tiles > 0) {
        Loads::load_q(a, it, q_smem, slot);
        copies.filled(Loads::kSlotQ);
        copies.commit();
        FC_PERTURB(kPerturbCpAsyncIssue, step);
        Loads::load_kv(a, it, 0, stage_smem(parity), slot, slot_v);
        copies.filled(Loads::stage_slot(parity));
        copies.commit();
      }
      // The next item's loads start during this item's last tile if both have K/V tiles. (Sched::item_at(next_item) is
      // recomputed there, a few integer divisions once per item, rather than held in registers across the loop.)
      const bool prefetch_next = n_tiles > 0 && next_item < a.work_items && Sched::item_at(a, next_item).n_tiles > 0;

      State st;
      Softmax::init_state(st, a, it, warp_row0, lane, static_cast<int>(threadIdx.x));

      for (int n = 0; n < n_tiles; ++n) {
        const uint32_t k_smem = stage_smem(parity + n);
        const uint32_t v_smem =
            k_smem + (FC_MUTANT(kTcValueTileAtKeyTileWidth) ? Cfg::kVTileSmemBytes : Cfg::kKTileSmemBytes);
        const int64_t k0 = int64_t{it.first + n} * Cfg::kBlockN;
        // Q (at n == 0), K(n) and V(n) landed: nothing else is in flight.
        if (FC_MUTANT(kTcCpAsyncWaitShort)) {
          cp_async_wait<1>(copies);
        } else {
          cp_async_wait<0>(copies);
        }
        Loads::poison_if_premature(copies, Loads::kSlotQ, q_smem, Cfg::kQSmemBytes);
        Loads::poison_if_premature(copies, Loads::stage_slot(parity + n), k_smem, Cfg::kStageSmemBytes);
        FC_PERTURB(kPerturbCpAsyncWait, n);
        if (n == 0 && a.negate_q) Loads::negate_own_q_chunks(q_smem, slot);
        if constexpr (kWg) fence_proxy_async_shared();  // this thread's Q, K, V writes, before wgmma reads them
        // The one barrier per tile: publishes Q, K(n), V(n) to every warp, and every warp is past P*V of
        // tile n-1 (or the previous item's epilogue), so that stage takes tile n + 1 (or the next item's tile 0),
        // which then has a whole tile's time to arrive.
        __syncthreads();
        const bool last = n + 1 == n_tiles;
        if (!last) {
          Loads::load_kv(a, it, n + 1, stage_smem(parity + n + 1), slot, slot_v);
        } else if (prefetch_next) {
          Loads::load_kv(a, Sched::item_at(a, next_item), 0, stage_smem(parity + n + 1), slot, slot_v);
        }
        if (!last || prefetch_next) {
          copies.filled(Loads::stage_slot(parity + n + 1));
          copies.commit();
        }

        // Masked keys inside a diagonal tile are real K/V rows that later rows of the tile see. Their p is
        // exactly 0 for the rows that may not see them, which is harmless for finite V (0 * v = 0) but
        // 0 * inf = NaN: if a hidden V row is non-finite, the tile goes through exact_hidden_v first.
        const bool diagonal = it.hides_keys(n);
        // A warp whose rows see no key of a diagonal tile skips it: p = 0 and alpha = 1 there, so skipping is
        // exact (the host model leaves such rows untouched too).
        // (A wgmma is issued by the whole warpgroup: there the test is per warpgroup.)
        const int sees_row0 = kWg ? warp / kWarpsPerWarpgroup * kWgmmaRows : warp_row0;
        const int sees_rows = kWg ? kWgmmaRows : Cfg::kRowsPerWarp;
        const bool warp_sees = !diagonal || (vis.row_end(q0 + sees_row0 + sees_rows - 1) > k0 &&
                                             vis.row_begin(q0 + sees_row0) < k0 + Cfg::kBlockN);
        uint32_t pa[kM][kNS / 2][4];  // P rounded to T, A-fragment layout
        if (warp_sees) {
          float s[kM][kNS][4];  // (kRowsPerWarp, kBlockN) scores, then p
#if defined(FLASHCHECK_TC_WGMMA)
          if constexpr (kWg) {
            Gemms::qk_wgmma(s, q_smem, k_smem, warp / kWarpsPerWarpgroup);
          } else {
            Gemms::qk(s, q_lane, k_smem + k_lane_off);
          }
#else
          Gemms::qk(s, q_lane, k_smem + k_lane_off);
#endif
          if constexpr (kExtras) {
            if (a.has_softcap && !FC_MUTANT(kTcSoftcapAfterMask)) Mask::cap_scores(s, a);
          }
          if (it.needs_mask(n) && !(FC_MUTANT(kTcLastTileUnmasked) && last))
            Mask::apply_mask(s, vis, q0 + warp_row0, k0, quad_row, quad_col);
          if constexpr (kExtras) {
            if (a.has_softcap && FC_MUTANT(kTcSoftcapAfterMask)) Mask::cap_scores(s, a);
          }
          Softmax::softmax(s, st, a.scale_log2);
          Softmax::pack_p(s, pa);
        }
        const bool exact =
            diagonal && !FC_MUTANT(kTcHiddenVExactPathSkipped) &&
            __syncthreads_or(Hidden::hidden_v_nonfinite(v_smem, vis, q0, k0, static_cast<int>(threadIdx.x)));
        if (exact) {
          Hidden::exact_hidden_v(st, v_smem, vis, q0, warp_row0, k0, lane, static_cast<int>(threadIdx.x),
                         [] { __syncthreads(); });
        }
        if (last && prefetch_next) {
          // Every warp's S of the last tile has read Q (the diagonal test above was a barrier already): the next
          // item's Q loads during this P*V and the epilogue.
          if (!diagonal) __syncthreads();
          Loads::load_q(a, Sched::item_at(a, next_item), q_smem, slot);
          copies.filled(Loads::kSlotQ);
          copies.commit();
        }
        if (warp_sees) {
#if defined(FLASHCHECK_TC_WGMMA)
          if constexpr (kWg) {
            Gemms::pv_wgmma(pa, st, v_smem);
          } else {
            Gemms::pv(pa, st, v_smem + v_lane_off);
          }
#else
          Gemms::pv(pa, st, v_smem + v_lane_off);
#endif
        }

        Softmax::trace_tile(st, a, n, lane);
      }

      // Epilogue: O = acc / l rounded to T, staged through this warp's own rows of a (kBlockM, kHeadDim) tile
      // laid out like Q, then 16-byte stores of the real columns; LSE = m*|scale| + ln(l). A row with l == 0 saw
      // no key with a finite score: O = 0 and LSE = -inf by contract, whatever acc holds.
      // The staging tile is the stage of the last K/V tile, free once every warp is past its P*V (Q may hold
      // the next item's tile already); an item without K/V tiles uses the stage the next item's tile 0 skips.
      // Split runs write their partials instead (store_partials).
      const uint32_t o_smem = stage_smem(n_tiles > 0 ? parity + n_tiles - 1 : parity + 1);
      if (n_tiles > 0) __syncthreads();
      if (kSeq && a.splits > 1) {
        Epi::store_partials(st, a, it, q0 + warp_row0, lane);
        prefetched = prefetch_next;
        parity = (parity + n_tiles) & 1;
        continue;
      }
      Epi::stage_and_store_o(st, a, it, o_smem, warp_row0, lane);
      prefetched = prefetch_next;
      parity = (parity + n_tiles) & 1;
    }
  }
};

// kInstrument is the last template argument (mangled Lb0E / Lb1E), as the symbol check expects.
template <typename T, class Cfg, bool kExtras, bool kSeq, bool kInstrument>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm)
    tensor_core_forward_kernel(const __grid_constant__ KernelArgs args) {
  extern __shared__ __align__(1024) uint8_t smem[];
  Forward<T, Cfg, kInstrument, kExtras, kSeq>::run(args, smem);
}

// Which variant a launch takes: the one with sequences (which also runs split-KV), else the one with softcap and
// sink if it has either, else the plain one. f(std::bool_constant<kExtras>, std::bool_constant<kSeq>).
template <class F>
Status with_variant(const KernelArgs& args, F&& f) {
  if (args.has_sequences() || args.splits > 1) return f(std::true_type{}, std::true_type{});
  if (args.has_softcap || args.sink != nullptr) return f(std::true_type{}, std::false_type{});
  return f(std::false_type{}, std::false_type{});
}

// CTAs of kKernel (with `threads` threads and `smem_bytes` of dynamic shared memory) that fit on the current
// device at once: SMs x CTAs per SM. The kernel's shared-memory opt-in is set and the occupancy queried on the
// first call per device, then cached, so a launch costs no driver queries after the first on a device.
inline constexpr int kMaxDevices = 64;

template <auto kKernel>
Status resident_ctas(int threads, int smem_bytes, int64_t* resident) {
  static std::atomic<int> ctas_per_sm[kMaxDevices] = {};
  static std::atomic<int> sm_count[kMaxDevices] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return {StatusCode::kCudaError, cudaGetErrorString(err)};
  int per_sm = device < kMaxDevices ? ctas_per_sm[device].load(std::memory_order_acquire) : 0;
  int sms = device < kMaxDevices ? sm_count[device].load(std::memory_order_relaxed) : 0;
  if (per_sm == 0) {
    err = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, threads, smem_bytes);
    if (err != cudaSuccess) return {StatusCode::kCudaError, cudaGetErrorString(err)};
    if (per_sm < 1) return {StatusCode::kCudaError, "tensor_core: the kernel does not fit on an SM of this device"};
    if (device < kMaxDevices) {
      sm_count[device].store(sms, std::memory_order_relaxed);
      ctas_per_sm[device].store(per_sm, std::memory_order_release);
    }
  }
  *resident = int64_t{sms} * per_sm;
  return Status::ok_status();
}

// What plan_grid() needs of a launch of Cfg's tiles (schedule.h); allow_persistent per Cfg::kPersist.
template <class Cfg>
GridProblem grid_problem(const KernelArgs& args) {
  GridProblem problem;
  problem.work_items = args.work_items;
  problem.q_tiles = args.q_tiles;
  problem.splits = args.splits;
  problem.vis = args.vis;
  problem.block_m = Cfg::kBlockM;
  problem.block_n = Cfg::kBlockN;
  // Packed Q: items differ by their sequences, which plan_grid() does not see; one item per CTA lets the hardware
  // balance them.
  problem.allow_persistent = args.cu_q == nullptr &&
                             (Cfg::kPersist == Persist::kAlways ||
                              (Cfg::kPersist == Persist::kCausal && (args.vis.bounded_end || args.vis.bounded_begin)));
  return problem;
}

template <typename T, class Cfg, bool kExtras, bool kSeq>
Status launch_variant(const KernelArgs& args, cudaStream_t stream) {
  constexpr auto kernel = tensor_core_forward_kernel<T, Cfg, kExtras, kSeq, FLASHCHECK_INSTRUMENT != 0>;
  int64_t resident = 0;
  const Status st = resident_ctas<kernel>(Cfg::kThreads, Cfg::kSmemBytes, &resident);
  if (!st.ok()) return st;
  const int64_t grid = capped_grid(plan_grid(grid_problem<Cfg>(args), resident));
  if (grid < 1) return Status::ok_status();
  kernel<<<dim3(static_cast<unsigned>(grid)), Cfg::kThreads, Cfg::kSmemBytes, stream>>>(args);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return {StatusCode::kCudaError, cudaGetErrorString(err)};
  return Status::ok_status();
}

template <typename T, class Cfg>
Status launch_with(const KernelArgs& args, cudaStream_t stream) {
  return with_variant(args, [&](auto extras, auto seq) { return launch_variant<T, Cfg, extras(), seq()>(args, stream); });
}

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
