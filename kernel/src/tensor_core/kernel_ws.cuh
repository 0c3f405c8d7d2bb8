// Warp-specialized sm_90a forward kernel of the tensor-core family (FlashAttention-3's structure, written here):
// one producer warpgroup whose single elected thread moves every tile with TMA (bulk tensor copies into the
// 128-byte-swizzled layout the wgmma descriptors read), and two consumer warpgroups of 64 query rows each (three
// with d = 64's tall tiles, tile_config.h) that only compute. Full/empty mbarriers per shared-memory slot replace
// the per-tile __syncthreads of kernel.cuh, so the consumers never wait for a load they could have overlapped and
// never wait for each other, and loads run ahead across work items of a persistent CTA. Inside a consumer the wgmma
// chains are software-pipelined: S(n) = Q K(n)^T is issued, then O += P(n-1) V(n-1), and the softmax of tile n runs
// while P V is still on the tensor cores (only the O rescale waits for it).
//
// Arithmetic is kernel.cuh's, call for call (the same parts: mainloop.cuh, mask.cuh, softmax_step.cuh,
// hidden_v.cuh, epilogue.cuh), in the same order per row, so both kernels return bit-identical O and LSE
// (kernel_gpu_test: Gpu_F16Bf16.WarpSpecializedMatchesCpAsyncKernel); the error model (families.h) does not
// change. Used where TMA can address the tensors (encode_operand(): 16-byte rows, i.e. head_dim % 8 == 0, on
// top of the family's aligned bases and strides); other launches run kernel.cuh.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>

#include "common/combine.cuh"
#include "common/tma_map.h"
#include "kernel.cuh"
#include "ws_hidden_v.cuh"
#include "ws_pipeline.cuh"
#include "ws_producer.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

#if defined(FLASHCHECK_TC_WGMMA)

template <typename T, class Cfg, OStaging kOStaging, bool kPingPong, bool kExtras, bool kSeq, bool kRedo,
          bool kInstrument>
struct WsForward : WsHiddenV<T, Cfg, kOStaging, kSeq, kRedo> {
  using Pipe = WsPipeline<Cfg, kOStaging, kRedo>;
  using HiddenWs = WsHiddenV<T, Cfg, kOStaging, kSeq, kRedo>;
  using Producer = WsProducer<Cfg, kOStaging, kSeq, kRedo>;
  using typename Pipe::Barriers;
  using typename Pipe::Layout;
  using typename Pipe::Regs;
  using typename HiddenWs::ItemCtx;
  using Pipe::bar;
  using Pipe::item_of_step;
  using Pipe::kColumnBlockElems;
  using Pipe::kColumnBlocksV;
  using Pipe::kConsumerThreads;
  using Pipe::kConsumerWarpgroups;
  using Pipe::kKStages;
  using Pipe::kQReleaseArrivals;
  using Pipe::kSmemBytes;
  using Pipe::kThreads;
  using Pipe::kVStages;
  using Pipe::listed_items;
  using Pipe::release;
  using HiddenWs::ready_v;
  using HiddenWs::scan_v;
  using F = Forward<T, Cfg, kInstrument, kExtras, kSeq>;
  using State = typename F::State;
  using Item = WorkItem;
  using Sched = typename F::Sched;
  using Loads = typename F::Loads;
  using Gemms = typename F::Gemms;
  using Mask = typename F::Mask;
  using Softmax = typename F::Softmax;
  using Hidden = typename F::Hidden;
  using Epi = typename F::Epi;  static constexpr int kNS = Cfg::kNTilesS;

  __device__ static void run(const KernelArgs& a, const TmaMaps& maps, uint8_t* smem) {
    if constexpr (kRedo) {
      // A redo CTA with no listed item (every one when none is listed) returns before it sets anything up: the
      // empty redo launch then takes 1.6 µs against 2.5 µs (docs/design/tensor-core-kernel.md, "Two launches").
      if (static_cast<int64_t>(blockIdx.x) >= listed_items(a)) return;
    }
    __shared__ Barriers bars;
    const int tid = static_cast<int>(threadIdx.x);
    Layout lay;
    lay.q = (smem_address(smem) + Cfg::kSmemAlignSlack - 1) / Cfg::kSmemAlignSlack * Cfg::kSmemAlignSlack;
    lay.k = lay.q + Cfg::kQSmemBytes;
    lay.v = lay.k + kKStages * (FC_MUTANT(kTcValueTileAtKeyTileWidth) ? Cfg::kVTileSmemBytes : Cfg::kKTileSmemBytes);
    lay.o = lay.v + kVStages * Cfg::kVTileSmemBytes;  // kOwnTile only
    if (tid == 0) {
      for (int w = 0; w < kConsumerWarpgroups; ++w) {
        mbarrier_init(bar(bars.q_full[w]), 1);
        mbarrier_init(bar(bars.q_empty[w]), kQReleaseArrivals);
      }
      for (int s = 0; s < kKStages; ++s) {
        mbarrier_init(bar(bars.k_full[s]), 1);
        mbarrier_init(bar(bars.k_empty[s]), kConsumerThreads / kWarpSize);  // one arrival per consumer warp
      }
      for (int s = 0; s < kVStages; ++s) {
        mbarrier_init(bar(bars.v_full[s]), 1);
        mbarrier_init(bar(bars.v_empty[s]), kConsumerThreads / kWarpSize);
      }
      mbarrier_init(bar(bars.v_scanned), kConsumerThreads / kWarpSize);
      bars.v_bad[0] = bars.v_bad[1] = 0;
      fence_mbarrier_init();
    }
    __syncthreads();
    if (tid < kProducerThreads) {
      setmaxnreg_dec<Regs::kProducer>();
      if (tid == 0) Producer::produce(a, maps, bars, lay);
      return;
    }
    setmaxnreg_inc<Regs::kConsumer>();
    consume(a, maps, bars, lay, tid - kProducerThreads);
  }

  // Flips the sign bits of this warpgroup's Q rows (softmax_scale < 0; exact), before any wgmma reads them.
  __device__ static void negate_q_rows(const Layout& lay, int wg, int wg_tid) {
    constexpr int kChunks = kWgmmaRows * Cfg::kChunksPerRow;
    for (int i = wg_tid; i < kChunks; i += kWarpgroupThreads) {
      Loads::negate_chunk(lay.q + F::template chunk_offset<Cfg::kBlockM>(wg * kWgmmaRows + i / Cfg::kChunksPerRow,
                                                                  i % Cfg::kChunksPerRow));
    }
    fence_proxy_async_shared();
    named_barrier_sync(kBarWarpgroup + wg, kWarpgroupThreads);
  }

  __device__ static void consume(const KernelArgs& a, const TmaMaps& maps, Barriers& bars, const Layout& lay,
                                 int ctid) {
    const int lane = ctid % kWarpSize;
    const int warp = ctid / kWarpSize;  // consumer warp: rows 16 warp .. 16 warp + 15 of the Q tile
    const int wg = warp / kWarpsPerWarpgroup;
    const int wg_tid = ctid % kWarpgroupThreads;
    const int warp_row0 = warp * Cfg::kRowsPerWarp;
    uint32_t tile = 0;
    uint32_t items = 0;
    uint32_t scans = 0;  // scan_v's count
    // Turns go round strictly: warpgroup 0 takes the first (the last warpgroup hands it over up front) and, at
    // the end, the one the last warpgroup handed over after its last chains, so every barrier ends with no
    // arrival pending. Each turn barrier counts the two warpgroups that meet there.
    const auto take_turn = [&] {
      if constexpr (kPingPong) named_barrier_sync(kBarTurn + wg, 2 * kWarpgroupThreads);
    };
    const auto pass_turn = [&] {
      if constexpr (kPingPong)
        named_barrier_arrive(kBarTurn + (wg + 1) % kConsumerWarpgroups, 2 * kWarpgroupThreads);
    };
    if (wg == kConsumerWarpgroups - 1) pass_turn();
    for (int64_t step = 0;; ++step) {
      const int64_t item = item_of_step(a, step);
      if (item >= a.work_items) break;
      ItemCtx c;
      State st;
      {
        const Item it = Sched::item_at(a, item);
        if (it.q_rows <= 0) continue;  // an empty slot (packed Q): the producer skips it too
        c.q0 = static_cast<int>(it.q0);
        c.first = it.first;
        c.n_tiles = it.n_tiles;
        c.full_begin = it.full_begin;
        c.full_end = it.full_end;
        c.clean_end = it.clean_end;
        c.tile0 = tile;
        c.seqlen_q = static_cast<int>(it.vis.seqlen_q);
        c.seqlen_k = static_cast<int>(it.vis.seqlen_k);
        c.kv_tail = (a.cu_k != nullptr || a.used_k != nullptr) && it.n_tiles > 0 &&
                    int64_t{it.first + it.n_tiles} * Cfg::kBlockN > it.vis.seqlen_k;
        Softmax::init_state(st, a, it, warp_row0, lane, ctid);
      }
      mbarrier_wait(bar(bars.q_full[wg]), items & 1);
      if (a.negate_q && c.n_tiles > 0) negate_q_rows(lay, wg, wg_tid);
      if (c.n_tiles == 0 && lane == 0) mbarrier_arrive(bar(bars.q_empty[wg]));  // nothing reads Q

      // Every warpgroup runs every tile. On a causal diagonal tile none of whose keys a warpgroup's rows see, the
      // mask gives p = 0 and alpha = 1 (exact, as skipping would be); keeping the wgmma chains out of branches
      // keeps ptxas from serializing them (it does when a chain is issued or awaited under a branch it cannot
      // prove warp-uniform).
      uint32_t pa[1][kNS / 2][4];  // P(n - 1) rounded to T, waiting for V(n - 1)
      const auto tile_step = [&]<bool kFirst>(int n) {
        const uint32_t t = tile + static_cast<uint32_t>(n);
        uint32_t v_prev = 0;
        if constexpr (!kFirst) {
          v_prev = ready_v(a, c, bars, lay, n - 1, scans, st, ctid);
          if (FC_MUTANT(kWsVReleasedEarly)) release(bars.v_empty, t - 1, lane);
        }
        if (!FC_MUTANT(kWsKFullNotAwaited)) mbarrier_wait(bar(bars.k_full[Pipe::template slot<kKStages>(t)]), Pipe::template phase<kKStages>(t));
        float sc[1][kNS][4];  // S(n), then p
        FC_PERTURB(kPerturbWsConsumerS, t);
        if constexpr (!kFirst) {
          // Both chains back to back, with every register they touch fenced before the first (an instruction
          // touching an accumulator between them would make ptxas serialize the chains).
          take_turn();
          fence_operands(sc[0]);
          fence_operands(st.acc_o[0]);
          fence_operands(pa[0]);
          wgmma_fence();
          Gemms::qk_chain(sc, lay.q, lay.k_slot(Pipe::template slot<kKStages>(t)), wg);
          Gemms::pv_chain(pa, st, v_prev);
          pass_turn();
          scan_v(a, c, bars, lay, n, scans, ctid);
          wgmma_wait<1>();  // S(n) was committed first; P(n-1) V(n-1) may still run
        } else {
          take_turn();
          Gemms::qk_wgmma_issue(sc, lay.q, lay.k_slot(Pipe::template slot<kKStages>(t)), wg);
          pass_turn();
          scan_v(a, c, bars, lay, n, scans, ctid);
          wgmma_wait<0>();
        }
        fence_operands(sc[0]);
        release(bars.k_empty, t, lane);
        if (n + 1 == (FC_MUTANT(kWsQReleasedEarly) ? 1 : c.n_tiles) && lane == 0)
          mbarrier_arrive(bar(bars.q_empty[wg]));  // last S read Q
        if constexpr (kExtras) {
          if (a.has_softcap && !FC_MUTANT(kTcSoftcapAfterMask)) Mask::cap_scores(sc, a);
        }
        if ((n < c.full_begin || n >= c.full_end) && !(FC_MUTANT(kTcLastTileUnmasked) && n + 1 == c.n_tiles))
          Mask::apply_mask(sc, HiddenWs::vis_of(a, c), c.q0 + warp_row0, int64_t{c.first + n} * Cfg::kBlockN, lane / kQuad, (lane % kQuad) * 2);
        if constexpr (kExtras) {
          if (a.has_softcap && FC_MUTANT(kTcSoftcapAfterMask)) Mask::cap_scores(sc, a);
        }
        float alpha[1][2];
        const bool rescale = Softmax::softmax_stats(sc, st, a.scale_log2, alpha);
        if constexpr (!kFirst) {
          wgmma_wait<0>();
          fence_operands(st.acc_o[0]);
          fence_operands(pa[0]);
          if (!FC_MUTANT(kWsVReleasedEarly)) release(bars.v_empty, t - 1, lane);
        }
        Softmax::rescale_o(st, alpha, rescale);
        Softmax::pack_p(sc, pa);
        Softmax::trace_tile(st, a, n, lane);
      };
      if (c.n_tiles > 0) {
        tile_step.template operator()<true>(0);
        for (int n = 1; n < c.n_tiles; ++n) tile_step.template operator()<false>(n);
        const uint32_t v_last = ready_v(a, c, bars, lay, c.n_tiles - 1, scans, st, ctid);
        FC_PERTURB(kPerturbWsConsumerPv, tile + c.n_tiles);
        take_turn();
        Gemms::pv_wgmma_issue(pa, st, v_last);
        pass_turn();
        wgmma_wait<0>();
        fence_operands(st.acc_o[0]);
        fence_operands(pa[0]);
        release(bars.v_empty, tile + static_cast<uint32_t>(c.n_tiles - 1), lane);
      }
      tile += static_cast<uint32_t>(c.n_tiles);

      // Epilogue. kRegisters: every thread on its own (store_o_direct). kOwnTile: once the previous item's store
      // has read this warpgroup's rows of the O tile, O staged there, then one TMA store per 64-column block. A
      // split run writes its partials from the registers (every item of the launch alike).
      const Item it = Sched::item_at(a, item);
      bool nonfinite = false;  // warp-uniform: an accumulator of the warp is inf or NaN
      if (kSeq && a.splits > 1) {
        nonfinite = Epi::store_partials(st, a, it, it.q0 + warp_row0, lane);
      } else if constexpr (kOStaging == OStaging::kRegisters) {
        nonfinite = Epi::store_o_direct(st, a, it, warp_row0, lane);
      } else {
        if (wg_tid == 0) tma_store_wait_read();
        named_barrier_sync(kBarWarpgroup + wg, kWarpgroupThreads);
        nonfinite = Epi::stage_o_and_lse(st, a, lay.o, it, warp_row0, lane);
        fence_proxy_async_shared();
        if (!FC_MUTANT(kWsOStagedWithoutBarrier)) named_barrier_sync(kBarWarpgroup + wg, kWarpgroupThreads);
        if (kSeq && a.cu_q != nullptr && it.q0 + (wg + 1) * kWgmmaRows > it.vis.seqlen_q) {
          // Packed Q: TMA would store the rows past the sequence over the next sequence's.
          Epi::store_staged_rows(a, lay.o, it, wg, wg_tid);
        } else if (wg_tid == 0) {
          FC_PERTURB(kPerturbWsStoreO, items);
          for (int cb = 0; cb < kColumnBlocksV; ++cb)
            tma_store_4d(&maps.o, lay.rows(lay.o, wg, cb), cb * kColumnBlockElems,
                         static_cast<int>(it.q_row0 + it.q0) + wg * kWgmmaRows, static_cast<int>(it.h),
                         static_cast<int>(it.qb));
          tma_store_commit();
        }
      }
      if constexpr (!kRedo) {
        if (warp == 0) list_for_redo(a, item, nonfinite, lane);
      }
      ++items;
    }
    if (wg == 0) take_turn();
    if (kOStaging != OStaging::kRegisters && wg_tid == 0) tma_store_wait_all();
  }

  // Lists the item for the redo launch (a.redo_count set: launches whose mask hides keys) if its accumulators came
  // out inf or NaN. Consumer warp 0 alone decides, once per item: a non-finite V element of a tile the item reads
  // reaches every row's accumulator in its column (p = 0 or not, every warpgroup runs every tile), rows past the
  // sequence and rows that see no key included, and nothing after makes it finite again.
  __device__ static void list_for_redo(const KernelArgs& a, int64_t item, bool nonfinite, int lane) {
    if (a.redo_count != nullptr && nonfinite && lane == 0) {
      a.redo_items[atomicAdd(a.redo_count, 1ull)] = item;
    }
  }

};

// kInstrument is the last template argument (mangled Lb0E / Lb1E), as the symbol check expects.
template <typename T, class Cfg, OStaging kOStaging, bool kPingPong, bool kExtras, bool kSeq, bool kRedo,
          bool kInstrument>
__global__ void __launch_bounds__(WsForward<T, Cfg, kOStaging, kPingPong, kExtras, kSeq, kRedo, kInstrument>::kThreads,
                                  1)
    tensor_core_ws_kernel(const __grid_constant__ KernelArgs args, const __grid_constant__ TmaMaps maps) {
  extern __shared__ __align__(1024) uint8_t smem[];
  WsForward<T, Cfg, kOStaging, kPingPong, kExtras, kSeq, kRedo, kInstrument>::run(args, maps, smem);
}

// The own O tile fits beside as many K slots as V slots (d = 64, 128): the only staging compiled.
template <typename T, class Cfg>
inline constexpr bool kOwnOFree =
    WsForward<T, Cfg, OStaging::kOwnTile, false, false, false, false, false>::kKStages ==
    WsForward<T, Cfg, OStaging::kOwnTile, false, false, false, false, false>::kVStages;

// K/V tiles the middle Q tile of the launch reads: the item length the per-launch choices below go by.
template <class Cfg>
int64_t middle_item_tiles(const KernelArgs& args) {
  return middle_q_tile_reads(args.vis, args.q_tiles, Cfg::kBlockM, Cfg::kBlockN);
}

// kTurnsChosen (d = 128): ping-pong where the middle Q tile reads at least kPingPongMinTiles K/V tiles and no
// window bounds the rows' first keys. Measured on the H100 (bf16; docs/design/tensor-core-kernel.md): non-causal N = 512 (4 tiles)
// 0.98x, N >= 1024 +5-8%; causal N = 512 / 1024 0.94x / 0.99x, N = 2048-4096 +2%, N >= 8192 +6-10%; causal windows
// of 256-4096 keys 0.93-0.97x.
inline constexpr int64_t kPingPongMinTiles = 8;
template <class Cfg>
bool ws_ping_pong(const KernelArgs& args) {
  return !args.vis.bounded_begin && middle_item_tiles<Cfg>(args) >= kPingPongMinTiles;
}

// d = 256 (the own O tile costs a K slot): the own O tile for short items, where the asynchronous O store
// matters more than the second K slot, measured on the H100 against kRegisters (docs/design/tensor-core-kernel.md):
// causal items gain up to 10% with the own tile up to about 32 K/V tiles for the middle Q tile (N = 4096: even),
// non-causal ones only at 8 tiles (N = 512: +5%; N >= 1024: kRegisters +1-7%).
inline constexpr int64_t kOwnOMaxTilesCausal = 32;
inline constexpr int64_t kOwnOMaxTilesNonCausal = 8;
template <typename T, class Cfg>
OStaging ws_o_staging(const KernelArgs& args) {
  if (kOwnOFree<T, Cfg>) return OStaging::kOwnTile;
  const int64_t tiles = middle_item_tiles<Cfg>(args);
  const bool masked = args.vis.bounded_end || args.vis.bounded_begin;
  return tiles <= (masked ? kOwnOMaxTilesCausal : kOwnOMaxTilesNonCausal) ? OStaging::kOwnTile
                                                                                 : OStaging::kRegisters;
}

// ---- host side

using tma::encode_operand;
using tma::kTmaMaxCoord;

// One launch of a compiled variant: the grid plan of the launch's items (schedule.h), or in a redo launch as many
// CTAs as can run at once, up to one per item (how many are listed is known on the device only).
template <typename T, class Cfg, OStaging kOStaging, bool kPingPong, bool kExtras, bool kSeq, bool kRedo>
Status launch_ws_grid(const KernelArgs& args, const TmaMaps& maps, cudaStream_t stream) {
  using Ws = WsForward<T, Cfg, kOStaging, kPingPong, kExtras, kSeq, kRedo, FLASHCHECK_INSTRUMENT != 0>;
  constexpr auto kernel =
      tensor_core_ws_kernel<T, Cfg, kOStaging, kPingPong, kExtras, kSeq, kRedo, FLASHCHECK_INSTRUMENT != 0>;
  int64_t resident = 0;
  const Status st = resident_ctas<kernel>(Ws::kThreads, Ws::kSmemBytes, &resident);
  if (!st.ok()) return st;
  int64_t grid = 0;
  if constexpr (kRedo) {
    grid = capped_grid(std::min(resident, args.work_items));
  } else {
    GridProblem problem = grid_problem<Cfg>(args);
    // The producer runs ahead across items whenever the schedule is balanced (packed Q: grid_problem's rule).
    problem.allow_persistent = args.cu_q == nullptr;
    grid = capped_grid(plan_grid(problem, resident));
  }
  if (grid < 1) return Status::ok_status();
  kernel<<<dim3(static_cast<unsigned>(grid)), Ws::kThreads, Ws::kSmemBytes, stream>>>(args, maps);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return {StatusCode::kCudaError, cudaGetErrorString(err)};
  return Status::ok_status();
}

// The launch of a variant. Where the mask hides keys from some rows of a tile, in two launches (WsForward,
// "Non-finite V rows"): the variant lists the items whose accumulators end inf or NaN, then the redo variant (the
// hidden-V check compiled in; one per tile shape and O staging, with every feature's code: the arithmetic of the
// variants is the same) runs them again. It runs with the first launch's staging: at d = 256, a redo launch of the
// other one (192 against 224 KB of shared memory) made the next first launch 7% longer (causal N = 512, H200). The
// list (a count and up to one entry per item) comes from flashcheck's workspace pool (common/combine.cuh), zeroed
// on the stream, and goes back to the pool after the redo launch.
template <typename T, class Cfg, OStaging kOStaging, bool kPingPong, bool kExtras, bool kSeq>
Status launch_ws_variant(const KernelArgs& args, const TmaMaps& maps, cudaStream_t stream) {
  if (!args.vis.bounded_begin && !args.vis.bounded_end)
    return launch_ws_grid<T, Cfg, kOStaging, kPingPong, kExtras, kSeq, false>(args, maps, stream);
  if (args.work_items < 1) return Status::ok_status();
  const size_t bytes = sizeof(unsigned long long) + static_cast<size_t>(args.work_items) * sizeof(int64_t);
  void* workspace = nullptr;
  if (const cudaError_t err = combine::workspace_alloc(&workspace, bytes, stream); err != cudaSuccess) {
    return {StatusCode::kCudaError,
            std::string("tensor_core: allocating the redo list from flashcheck's pool failed: ") +
                cudaGetErrorString(err)};
  }
  KernelArgs listed = args;
  listed.redo_count = static_cast<unsigned long long*>(workspace);
  listed.redo_items = reinterpret_cast<int64_t*>(listed.redo_count + 1);
  Status st;
  if (const cudaError_t err = cudaMemsetAsync(listed.redo_count, 0, sizeof(unsigned long long), stream);
      err != cudaSuccess) {
    st = {StatusCode::kCudaError,
          std::string("tensor_core: clearing the redo list failed: ") + cudaGetErrorString(err)};
  }
  if (st.ok()) st = launch_ws_grid<T, Cfg, kOStaging, kPingPong, kExtras, kSeq, false>(listed, maps, stream);
  if (st.ok()) {
    KernelArgs redo = listed;
    redo.inst.tile_kind_counts = nullptr;  // the first launch counted every item's tiles
    st = launch_ws_grid<T, Cfg, kOStaging, false, true, true, true>(redo, maps, stream);
  }
  const cudaError_t freed = cudaFreeAsync(workspace, stream);
  if (st.ok() && freed != cudaSuccess) {
    st = {StatusCode::kCudaError, std::string("tensor_core: cudaFreeAsync of the redo list failed: ") +
                                      cudaGetErrorString(freed)};
  }
  return st;
}

template <typename T, class Cfg, OStaging kOStaging, bool kPingPong>
Status launch_ws_kernel(const KernelArgs& args, const TmaMaps& maps, cudaStream_t stream) {
  return with_variant(args, [&](auto extras, auto seq) {
    return launch_ws_variant<T, Cfg, kOStaging, kPingPong, extras(), seq()>(args, maps, stream);
  });
}

template <typename T, class Cfg, OStaging kOStaging>
Status launch_ws_issue(const KernelArgs& args, const TmaMaps& maps, cudaStream_t stream) {
  if constexpr (kTurnsChosen<Cfg>) {
    if (ws_ping_pong<Cfg>(args)) return launch_ws_kernel<T, Cfg, kOStaging, true>(args, maps, stream);
  }
  return launch_ws_kernel<T, Cfg, kOStaging, false>(args, maps, stream);
}

// The warp-specialized launch, or *launched = false (nothing done) where TMA cannot address the operands.
template <typename T, class Cfg>
Status launch_ws(const KernelArgs& args, cudaStream_t stream, bool* launched) {
  *launched = false;
  // Packed tensors are one batch of total rows; a sequence's rows start at its cu_seqlens entry (Item).
  const bool packed_q = args.cu_q != nullptr, packed_k = args.cu_k != nullptr;
  const int64_t q_rows = packed_q ? args.total_q : args.seqlen_q, q_batch = packed_q ? 1 : args.batch;
  const int64_t k_rows = packed_k ? args.total_k : args.seqlen_k, k_batch = packed_k ? 1 : args.batch;
  if (k_rows < 1 || q_rows > kTmaMaxCoord || k_rows > kTmaMaxCoord) return Status::ok_status();
  const int64_t heads_kv = args.heads_q / args.group_size;
  TmaMaps maps;
  if (!encode_operand<T>(&maps.q, args.q, args.head_dim, q_rows, args.heads_q, q_batch, kWgmmaRows) ||
      !encode_operand<T>(&maps.k, args.k, args.head_dim, k_rows, heads_kv, k_batch, Cfg::kBlockN) ||
      !encode_operand<T>(&maps.v, args.v, args.head_dim_v, k_rows, heads_kv, k_batch, Cfg::kBlockN) ||
      !encode_operand<T>(&maps.o, args.o, args.head_dim_v, q_rows, args.heads_q, q_batch, kWgmmaRows)) {
    return Status::ok_status();
  }
  *launched = true;
  if constexpr (kOwnOFree<T, Cfg>) {
    return launch_ws_issue<T, Cfg, OStaging::kOwnTile>(args, maps, stream);
  } else {  // d = 256: both compiled
    if (ws_o_staging<T, Cfg>(args) == OStaging::kRegisters)
      return launch_ws_issue<T, Cfg, OStaging::kRegisters>(args, maps, stream);
    return launch_ws_issue<T, Cfg, OStaging::kOwnTile>(args, maps, stream);
  }
}

#endif  // FLASHCHECK_TC_WGMMA

template <typename T, class Cfg>
Status launch_tiles(const KernelArgs& args, cudaStream_t stream) {
#if defined(FLASHCHECK_TC_WGMMA)
  if constexpr (Cfg::kWarpSpecialized) {
    if (tensor_core_cp_async_forced()) return launch_with<T, Cfg>(args, stream);
    bool launched = false;
    const Status st = launch_ws<T, Cfg>(args, stream, &launched);
    if (launched || !st.ok()) return st;
  }
#endif
  return launch_with<T, Cfg>(args, stream);
}

// The family's kernel for the tiles tensor_core_select() chose (args.block_m): its first shape or, where it has
// one, its tall shape (tile_config.h).
template <typename T, int HeadDimPadded>
Status launch_forward(const KernelArgs& args, cudaStream_t stream) {
  FC_UPLOAD_MUTANT(stream);
  if (args.block_m == Sm90Tile<HeadDimPadded>::kBlockM) return launch_tiles<T, Sm90Tile<HeadDimPadded>>(args, stream);
  if constexpr (tall_tile_shape_sm90(HeadDimPadded).block_m > 0) {
    if (args.block_m == Sm90TallTile<HeadDimPadded>::kBlockM)
      return launch_tiles<T, Sm90TallTile<HeadDimPadded>>(args, stream);
  }
  return {StatusCode::kUnsupported, "tensor_core: no hdim" + std::to_string(HeadDimPadded) + " tiles of block_m " +
                                        std::to_string(args.block_m)};
}

// The kernel of a value pair (tile_config.h, kValuePairs): V and O of HeadDimVPadded columns, sm_90a only.
template <typename T, int HeadDimPadded, int HeadDimVPadded>
Status launch_forward_pair(const KernelArgs& args, cudaStream_t stream) {
#if defined(FLASHCHECK_TC_WGMMA)
  FC_UPLOAD_MUTANT(stream);
  using Cfg = Sm90PairTile<HeadDimPadded, HeadDimVPadded>;
  if (args.block_m == Cfg::kBlockM) return launch_tiles<T, Cfg>(args, stream);
#endif
  return {StatusCode::kUnsupported, "tensor_core: no hdim" + std::to_string(HeadDimPadded) + " dv" +
                                        std::to_string(HeadDimVPadded) + " tiles of block_m " +
                                        std::to_string(args.block_m)};
}

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
