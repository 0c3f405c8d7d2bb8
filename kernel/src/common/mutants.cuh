// The mutant catalogue's guards in the kernels (flashcheck/mutants.h), and the scheduling perturbation of the same
// builds. In a FLASHCHECK_MUTANTS build each translation unit holds the selected mutant's id in a __constant__ of
// its own, which every launch of the unit refreshes from FLASHCHECK_MUTANT (FC_UPLOAD_MUTANT) before its kernels
// run, and FC_MUTANT(id) reads it. FLASHCHECK_PERTURB=<seed> (a nonzero integer) makes FC_PERTURB(site, n)
// sleep a seeded 0-8 us at the producer and consumer points of the pipelines where a missing wait or an early
// release opens a race window, in seeded regimes that hold back one side or the other (perturb() below): the
// delays depend on the seed, the site, the CTA, the warp and the tile, so a seed widens the same windows on
// every run.
//
// A delay cannot open the window of a cp.async wait that lets a group pass: the copies are issued and read by the
// same threads, and on an H200 a 16-byte copy from L2 has landed by the time the issuing thread reads its own
// chunk back in about 96% of reads, even with no wait at all (tools/dev/cp_async_window.cu). So the perturbed
// builds let every copy group land as late as the PTX memory model allows, no earlier than the first wait that
// requires it, and make a read before that find NaN (CpAsyncShadow): each thread numbers the groups it commits,
// each slot of shared memory that copies fill (a Q tile, a ring stage) remembers the group that last filled it, and
// cp.async.wait_group N guarantees every group but the N most recent. A slot read while its group is not yet
// guaranteed is a race whatever the timing; there the threads let their copies land and write all-ones bytes (NaN
// in fp16, bf16 and fp32) over the slot before the read, so the race gives the same wrong output on every run
// instead of the new data, the old or a mix as the timing falls. In every other build FC_MUTANT is the constant
// false, CpAsyncShadow keeps no state and finds no read premature, and the other macros do nothing, so production
// code holds no mutant, no delay and no bookkeeping.
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
// lets the next fill overwrite what is still read), 3 none (the CTA runs undisturbed beside the others).
// Consecutive CTAs take the four in turn from a start hashed from (seed, grid size), so every grid of four CTAs or
// more has all of them and the small grids of small cases vary with their size.
static __device__ __forceinline__ uint32_t regime() {
  return (blockIdx.x + mix(g_perturb * 0x9e3779b1u ^ gridDim.x * 0xc2b2ae3du)) % 4;
}

static __device__ __forceinline__ bool perturbing() { return g_perturb != 0; }

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
#define FC_UPLOAD_MUTANT(stream)                                                               \
  do {                                                                                         \
    if (::flashcheck::Status fc_mutant_st = ::flashcheck::detail::mutants::upload(stream);    \
        !fc_mutant_st.ok())                                                                    \
      return fc_mutant_st;                                                                     \
  } while (0)

#else

#define FC_MUTANT(name) false
#define FC_PERTURB(site, n) \
  do {                      \
  } while (0)
#define FC_UPLOAD_MUTANT(stream) \
  do {                           \
  } while (0)

#endif

namespace flashcheck::detail {

// A thread's cp.async copy groups as the perturbed builds let them land (the header above): slots 0..kSlots-1 are
// the shared-memory regions the kernel fills with copies. filled(slot) when copies into a slot join the open group,
// commit() with cp.async.commit_group, waited(N) with cp.async.wait_group N; premature(slot) before a read of the
// slot says whether no wait has guaranteed its copies yet (only with FLASHCHECK_PERTURB set; always false in
// production builds, where the struct is empty).
template <int kSlots>
struct CpAsyncShadow {
#if defined(FLASHCHECK_MUTANTS) && FLASHCHECK_MUTANTS
  uint32_t committed = 0;       // groups committed
  uint32_t guaranteed = 0;      // groups 1..guaranteed have landed by the waits so far
  uint32_t group[kSlots] = {};  // the group that last filled each slot (0: none)

  __device__ __forceinline__ void filled(int slot) { group[slot] = committed + 1; }
  __device__ __forceinline__ void commit() { ++committed; }
  __device__ __forceinline__ void waited(uint32_t pending) {
    if (committed > pending && committed - pending > guaranteed) guaranteed = committed - pending;
  }
  __device__ __forceinline__ bool premature(int slot) const {
    return mutants::perturbing() && group[slot] > guaranteed;
  }
#else
  __device__ __forceinline__ void filled(int) {}
  __device__ __forceinline__ void commit() {}
  __device__ __forceinline__ void waited(uint32_t) {}
  __device__ __forceinline__ bool premature(int) const { return false; }
#endif
};

// What a premature read finds in a perturbed build: every copy of the threads that share the slot landed
// (cp.async.wait_all, then `barrier`, which gathers them: __syncthreads or __syncwarp), then all-ones bytes over
// [base, base + bytes), 16 bytes per thread and step (thread `index` of `count`), and `barrier` again, so that no
// thread's own access to its chunks comes before the poison. The test is the same in every thread (they all commit
// and wait alike), so every thread reaches the barriers.
template <class Barrier>
__device__ __forceinline__ void poison_if_premature(bool premature, uint32_t base, int bytes, int index, int count,
                                                    Barrier barrier) {
  if (!premature) return;
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  barrier();
  for (int offset = index * 16; offset < bytes; offset += count * 16) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(base + offset), "r"(~0u) : "memory");
  }
  barrier();
}

}  // namespace flashcheck::detail
