// oracle_bench: throughput of the oracle's tiers (compute_rows) on the CPU, one thread and every thread.
// A term is one visible key times one head_dim element of a row: one q.k product and one p.v product, with
// the bound ingredients that come with them (a row of n visible keys and head dim d is n*d terms). Reported as
// terms/s and terms/s per thread, for fp32 inputs (normal, rounded to fp32), no mask:
//   square  b=1 h=2 seqlen_q=1024 seqlen_k=1024 d=64, every row (gold: as many rows as fit the time)
//   long    seqlen_k=10^6, d = 1, 8, 64 (gold: d = 1, 8), as many rows as fit the time
// Each measurement doubles its row count until it takes at least --seconds. A benchmark, not a test: CTest
// never runs it. Build and run (CPU build):
//   cmake --preset ci && cmake --build --preset ci --target oracle_bench && build/ci/bench/oracle_bench
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "flashcheck/oracle.h"

namespace {

using flashcheck::oracle::Problem;
using flashcheck::oracle::RowRef;
using flashcheck::oracle::Tier;

// splitmix64 and Box-Muller: the same inputs on every machine.
class Normal {
 public:
  explicit Normal(uint64_t seed) : state_(seed) {}
  double next() {
    const double u1 = (static_cast<double>(bits() >> 11) + 1.0) * 0x1p-53;  // (0, 1]
    const double u2 = static_cast<double>(bits() >> 11) * 0x1p-53;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t bits() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

struct Shape {
  std::string name;
  int64_t heads = 1, seqlen_q = 1, seqlen_k = 1, head_dim = 1;
  bool gold = true;  // measure the gold tier too
};

struct Tensors {
  std::vector<double> q, k, v;
  Problem problem;
};

Tensors make_tensors(const Shape& s, uint64_t seed) {
  Tensors t;
  Normal normal(seed);
  const auto fill = [&](std::vector<double>* x, int64_t size) {
    x->resize(static_cast<size_t>(size));
    for (double& e : *x) e = static_cast<double>(static_cast<float>(normal.next()));  // fp32 inputs
  };
  fill(&t.q, s.heads * s.seqlen_q * s.head_dim);
  fill(&t.k, s.heads * s.seqlen_k * s.head_dim);
  fill(&t.v, s.heads * s.seqlen_k * s.head_dim);
  Problem& p = t.problem;
  p.batch = 1;
  p.heads_q = p.heads_kv = s.heads;
  p.seqlen_q = s.seqlen_q;
  p.seqlen_k = s.seqlen_k;
  p.head_dim = s.head_dim;
  p.scale = static_cast<double>(1.0f / std::sqrt(static_cast<float>(s.head_dim)));
  p.q = t.q;
  p.k = t.k;
  p.v = t.v;
  return t;
}

struct Rate {
  int64_t rows = 0;
  double seconds = 0.0, terms_per_s = 0.0;
};

// Rows 0, 1, 2, ... of the problem (cycling), doubling the count until a run takes at least min_seconds or
// every row of the problem ran once (max_rows).
Rate measure(const Problem& p, Tier tier, int threads, double min_seconds, int64_t max_rows) {
  const int64_t rows_in_problem = p.batch * p.heads_q * p.seqlen_q;
  Rate rate;
  for (int64_t count = std::max(threads, 1);; count *= 2) {
    count = std::min(count, max_rows);
    std::vector<RowRef> rows;
    int64_t terms = 0;
    for (int64_t r = 0; r < count; ++r) {
      const int64_t flat = r % rows_in_problem;
      rows.push_back(RowRef{0, flat / p.seqlen_q, flat % p.seqlen_q});
      terms += flashcheck::oracle::row_terms(p, rows.back());
    }
    flashcheck::oracle::RowsOptions options;
    options.threads = threads;
    const auto start = std::chrono::steady_clock::now();
    const std::vector<flashcheck::oracle::RowResult> results = flashcheck::oracle::compute_rows(p, rows, tier, options);
    rate.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rate.rows = count;
    rate.terms_per_s = static_cast<double>(terms) / rate.seconds;
    if (results.size() != rows.size() || !std::isfinite(results.back().lse)) {
      std::fprintf(stderr, "oracle_bench: unexpected result\n");
      std::exit(1);
    }
    if (rate.seconds >= min_seconds || count >= max_rows) return rate;
  }
}

int usage() {
  std::fprintf(stderr,
               "usage: oracle_bench [--tier fast|gold|both] [--shape square|long|all] [--seconds S] [--threads N]\n"
               "  --seconds  least time per measurement (default 1)\n"
               "  --threads  the 'all' thread count (default: the oracle's team, every core)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tier_arg = "both", shape_arg = "all";
  double min_seconds = 1.0;
  int all_threads = flashcheck::oracle::max_threads();
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) return usage();
    if (arg == "--tier") tier_arg = argv[++i];
    else if (arg == "--shape") shape_arg = argv[++i];
    else if (arg == "--seconds") min_seconds = std::atof(argv[++i]);
    else if (arg == "--threads") all_threads = std::atoi(argv[++i]);
    else return usage();
  }
  if (all_threads < 1 || !(min_seconds > 0)) return usage();
  std::vector<Shape> shapes;
  if (shape_arg == "square" || shape_arg == "all") shapes.push_back({"square b1 h2 1024x1024 d64", 2, 1024, 1024, 64});
  if (shape_arg == "long" || shape_arg == "all") {
    for (int64_t d : {1, 8, 64}) {
      shapes.push_back({"long sk=1e6 d" + std::to_string(d), 1, std::max(2 * all_threads, 2), 1000000, d, d <= 8});
    }
  }
  std::vector<Tier> tiers;
  if (tier_arg == "fast" || tier_arg == "both") tiers.push_back(Tier::kFast);
  if (tier_arg == "gold" || tier_arg == "both") tiers.push_back(Tier::kGold);
  if (shapes.empty() || tiers.empty()) return usage();

  std::printf("oracle_bench: term = one visible key x one head_dim element of a row (a q.k and a p.v product)\n");
  std::printf("| shape | tier | threads | rows | seconds | terms/s | terms/s per thread |\n|---|---|---|---|---|---|---|\n");
  for (const Shape& s : shapes) {
    const Tensors t = make_tensors(s, 20260501);
    const int64_t all_rows = t.problem.batch * t.problem.heads_q * t.problem.seqlen_q;
    for (Tier tier : tiers) {
      if (tier == Tier::kGold && !s.gold) continue;
      for (int threads : {1, all_threads}) {
        const Rate r = measure(t.problem, tier, threads, min_seconds, tier == Tier::kFast ? all_rows : 1 << 20);
        std::printf("| %s | %s | %d | %lld | %.2f | %.3g | %.3g |\n", s.name.c_str(), to_string(tier), threads,
                    static_cast<long long>(r.rows), r.seconds, r.terms_per_s, r.terms_per_s / threads);
        std::fflush(stdout);
        if (all_threads == 1) break;
      }
    }
  }
  return 0;
}
