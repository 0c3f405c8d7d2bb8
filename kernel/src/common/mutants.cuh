// The mutant catalogue's guards in the kernels (flashcheck/mutants.h), and the scheduling perturbation of the same
// builds. In a FLASHCHECK_MUTANTS build each translation unit holds the selected mutant's id in a __constant__ of
// its own, which every launch of the unit refreshes from FLASHCHECK_MUTANT (FC_UPLOAD_MUTANT) before its kernels
// run, and FC_MUTANT(id) reads it. FLASHCHECK_PERTURB=<seed> (a nonzero integer) makes FC_PERTURB(site, n)
// sleep a seeded 0-8 us at the producer and consumer points of the pipelines where a missing wait or an early
// release opens a race window, in seeded regimes that hold back one side or the other (perturb() below): the
// delays depend on the seed, the site, the CTA, the warp and the tile, so a seed widens the same windows on
// every run. A fourth regime, FC_PERTURB_LATE_ISSUE(), has the cp.async pipelines issue each copy group just before
// the wait for it instead of a tile or more ahead: a load then takes longer than the work between issue and
// wait, as under heavy memory traffic, and a wait that lets the group pass reads the stage before it lands, on
// every run. What it reads there is NaN: in that regime each thread writes all-ones bytes (NaN in fp16, bf16 and
// fp32) to every 16-byte chunk before its copy into it (FC_LATE_ISSUE_POISON), so the stale read does not depend
// on what an earlier tile or an earlier launch left in the stage, which can equal the right data and hide the
// missing wait on some runs but not others. The chunk's own copy, issued after the write by the same thread,
// lands over it. Whether a reader in another warp, past the barrier that follows the wait, still finds the poison
// is a matter of timing again (the copy may land while the barrier gathers the warps), so right after the wait each
// thread reads its own chunks of the group back (FC_LATE_ISSUE_RECHECK): a chunk that still holds the poison there,
// a few cycles after its copy was issued, was let through before it landed, since a wait that covers the copy makes
// it visible to the issuing thread. The thread then lets the copies land and writes the poison over those chunks
// again, so every reader finds NaN in them on every run; after a correct wait no chunk holds the poison (or its
// data is the poison's bits, which the write leaves as they are). In every other build FC_MUTANT and
// FC_PERTURB_LATE_ISSUE are the constant false and the others do nothing, so production code holds no mutant and
// no delay.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "flashcheck/attention.h"
#include "flashcheck/mutants.h"

namespace flashcheck::detail {
// The points FC_PERTURB delays (the first argument), one per pipeline hand-off.
enum PerturbSite : uint32_t {
  kPerturbWsProducerK = 1,   // warp-specialized producer, before K's TMA load
  kPerturbWsProducerV,       // ... before V's
  kPerturbWsProducerQ,       // ... before Q's
  kPerturbWsConsumerS,       // consumer, before issuing S = Q K^T
  kPerturbWsConsumerPv,      // consumer, before issuing P V
  kPerturbWsStoreO,          // consumer, before the TMA store of O
  kPerturbGeneralLoad,       // general family, between a K/V tile's load and its barrier
  kPerturbCpAsyncWait,       // cp.async kernel (tensor-core), after the wait for a tile
  kPerturbCpAsyncIssue,      // cp.async kernels (tensor-core, decode), between issuing one copy group and the next
  kPerturbDecodeWait,        // decode family, after the wait for a tile
  kPerturbTf32Producer,      // split-TF32 producer, before publishing K
  kPerturbTf32Consumer,      // split-TF32 consumer, before P V
};
}  // namespace flashcheck::detail

#if defined(FLASHCHECK_MUTANTS) && FLASHCHECK_MUTANTS

namespace flashcheck::detail::mutants {

static __constant__ int32_t g_mutant;
static __constant__ uint32_t g_perturb;

struct Selection {
  int32_t mutant;
  uint32_t perturb;
};

// The mutant FLASHCHECK_MUTANT names (0 when unset or empty), -1 for a name not in the catalogue.
static inline int32_t selected() {
  const char* name = std::getenv("FLASHCHECK_MUTANT");
  if (name == nullptr || *name == '\0') return 0;
  return find_mutant(name);
}

// Sets this translation unit's mutant and perturbation seed for the kernels launched next on `stream`.
static inline Status upload(cudaStream_t stream) {
  static Selection sel{};  // the copies' source must outlive the asynchronous copies
  sel.mutant = selected();
  if (sel.mutant < 0) {
    return {StatusCode::kInvalidArgument, std::string("FLASHCHECK_MUTANT='") + std::getenv("FLASHCHECK_MUTANT") +
                                              "' names no mutant of the catalogue (flashcheck/mutants.h)"};
  }
  const char* perturb = std::getenv("FLASHCHECK_PERTURB");
  sel.perturb = perturb != nullptr ? static_cast<uint32_t>(std::strtoul(perturb, nullptr, 10)) : 0u;
  cudaError_t err = cudaMemcpyToSymbolAsync(g_mutant, &sel.mutant, sizeof(sel.mutant), 0, cudaMemcpyHostToDevice, stream);
  if (err == cudaSuccess) {
    err = cudaMemcpyToSymbolAsync(g_perturb, &sel.perturb, sizeof(sel.perturb), 0, cudaMemcpyHostToDevice, stream);
  }
  if (err != cudaSuccess) return {StatusCode::kCudaError, std::string("mutant upload failed: ") + cudaGetErrorString(err)};
  return Status::ok_status();
}

// Whether a site delays the side that fills a buffer (a copy or load issued) or the side that reads and releases
// it.
static __device__ __forceinline__ bool producer_site(uint32_t site) {
  return site == kPerturbWsProducerK || site == kPerturbWsProducerV || site == kPerturbWsProducerQ ||
         site == kPerturbGeneralLoad || site == kPerturbCpAsyncIssue || site == kPerturbTf32Producer;
}

static __device__ __forceinline__ uint32_t mix(uint32_t h) {
  h ^= h >> 15;
  h *= 0x2c1b3c6du;
  h ^= h >> 12;
  h *= 0x297a2d39u;
  h ^= h >> 15;
  return h;
}

// The regime of this CTA, the same at all of its sites: 0 both sides 0-4 us, 1 the producers' side held back (2-8
// us, the readers not at all: a missing wait reads a buffer before it lands), 2 the readers' side (an early release
// lets the next fill overwrite what is still read), 3 late issue (no delay; the cp.async pipelines issue each group
// just before its wait). Consecutive CTAs take the four in turn from a start hashed from (seed, grid size), so every
// grid of four CTAs or more has all of them and the small grids of small cases vary with their size.
static __device__ __forceinline__ uint32_t regime() {
  return (blockIdx.x + mix(g_perturb * 0x9e3779b1u ^ gridDim.x * 0xc2b2ae3du)) % 4;
}

static __device__ __forceinline__ bool late_issue() { return g_perturb != 0 && regime() == 3; }

static __device__ __forceinline__ void store_poison(uint32_t smem_addr) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(smem_addr), "r"(~0u) : "memory");
}

// The late-issue regime's check after the wait for a copy group (FC_LATE_ISSUE_RECHECK): the thread's chunks of the
// group, `count` (at most kMaxChunks) chunks `step` bytes apart from `first` and the same `second` bytes further (K
// and V), read back; those that still hold the poison are written with it again once every copy has landed.
template <int kMaxChunks>
static __device__ __forceinline__ void recheck_late_copies(uint32_t first, uint32_t step, int count, uint32_t second) {
  static_assert(2 * kMaxChunks <= 64, "one bit per chunk");
  uint64_t early = 0;
#pragma unroll
  for (int t = 0; t < 2; ++t) {
#pragma unroll
    for (int i = 0; i < kMaxChunks; ++i) {
      if (i >= count) continue;
      uint32_t x, y, z, w;
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(x), "=r"(y), "=r"(z), "=r"(w)
                   : "r"(first + t * second + i * step)
                   : "memory");
      if ((x & y & z & w) == ~0u) early |= uint64_t{1} << (t * kMaxChunks + i);
    }
  }
  if (early == 0) return;
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#pragma unroll
  for (int t = 0; t < 2; ++t) {
#pragma unroll
    for (int i = 0; i < kMaxChunks; ++i) {
      if ((early >> (t * kMaxChunks + i)) & 1u) store_poison(first + t * second + i * step);
    }
  }
}

// The seeded delay of FC_PERTURB (regimes above); the delay itself hashes (seed, site, CTA, warp, n).
static __device__ __forceinline__ void perturb(uint32_t site, uint32_t n) {
  if (g_perturb == 0) return;
  const uint32_t regime = mutants::regime();
  if (regime == 3) return;
  const uint32_t h = mix(g_perturb * 0x9e3779b1u ^ site * 0x85ebca77u ^ blockIdx.x * 0xc2b2ae3du ^
                         (threadIdx.x / 32) * 0x27d4eb2fu ^ n * 0x165667b1u);
  if (regime == 0) {
    __nanosleep(h % 4096u);
  } else if ((regime == 1) == producer_site(site)) {
    __nanosleep(2048u + h % 6144u);
  }
}

}  // namespace flashcheck::detail::mutants

#define FC_MUTANT(name) (::flashcheck::detail::mutants::g_mutant == static_cast<int32_t>(::flashcheck::Mutant::name))
#define FC_PERTURB(site, n) ::flashcheck::detail::mutants::perturb(site, static_cast<uint32_t>(n))
#define FC_PERTURB_LATE_ISSUE() ::flashcheck::detail::mutants::late_issue()
#define FC_LATE_ISSUE_POISON(poison, smem_addr)                                 \
  do {                                                                           \
    if (poison) ::flashcheck::detail::mutants::store_poison(smem_addr);          \
  } while (0)
#define FC_LATE_ISSUE_RECHECK(kMaxChunks, late, first, step, count, second)                             \
  do {                                                                                                   \
    if (late) ::flashcheck::detail::mutants::recheck_late_copies<kMaxChunks>(first, step, count, second); \
  } while (0)
// Lets every copy group of the thread land, in the late-issue regime only.
#define FC_LATE_ISSUE_DRAIN(late)                           \
  do {                                                      \
    if (late) asm volatile("cp.async.wait_all;\n" ::: "memory"); \
  } while (0)
#define FC_UPLOAD_MUTANT(stream)                                                               \
  do {                                                                                         \
    if (::flashcheck::Status fc_mutant_st = ::flashcheck::detail::mutants::upload(stream);    \
        !fc_mutant_st.ok())                                                                    \
      return fc_mutant_st;                                                                     \
  } while (0)

#else

#define FC_MUTANT(name) false
#define FC_PERTURB_LATE_ISSUE() false
#define FC_LATE_ISSUE_POISON(poison, smem_addr) \
  do {                                          \
    (void)(poison);                             \
    (void)(smem_addr);                          \
  } while (0)
#define FC_LATE_ISSUE_RECHECK(kMaxChunks, late, first, step, count, second) \
  do {                                                                     \
    (void)(late);                                                          \
    (void)(first);                                                         \
    (void)(step);                                                          \
    (void)(count);                                                         \
    (void)(second);                                                        \
  } while (0)
#define FC_LATE_ISSUE_DRAIN(late) \
  do {                            \
    (void)(late);                 \
  } while (0)
#define FC_PERTURB(site, n) \
  do {                      \
  } while (0)
#define FC_UPLOAD_MUTANT(stream) \
  do {                           \
  } while (0)

#endif
