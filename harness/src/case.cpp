// Case codec: the canonical one-line form of a Case and its parser.
// Invariant: format_case(c) parses back to a Case equal to c, and re-formats to the same bytes, because
// every number is printed in its shortest round-tripping form (std::to_chars) and keys come in one order.
// Parse errors are Status values that name the token, its 1-based column and the reason.
#include "flashcheck/case.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "flashcheck/dtype.h"
#include "flashcheck/mask_names.h"

namespace flashcheck {
namespace {

constexpr std::array<const char*, kDistKindCount> kDistNames = {
    "normal", "uniform", "const", "nearmax", "subnormal", "ramp", "dominant", "negzero"};

// Names come from the kernel's tables (dtype.h, mask_names.h); "?" marks a value outside the enum.
const char* dtype_name(DType dtype) {
  const DTypeInfo* info = find_dtype(dtype);
  return info != nullptr ? info->name : "?";
}

const char* mask_name(Mask mask) {
  for (const MaskName& entry : kMaskNames) {
    if (entry.mask == mask) return entry.name;
  }
  return "?";
}

// "a, b or c" / "a, b, c" over a name table, for parse errors.
template <typename Table, typename Name>
std::string list_names(const Table& table, Name name, const char* last_separator) {
  std::string out;
  for (size_t i = 0; i < table.size(); ++i) {
    if (i > 0) out += i + 1 == table.size() ? last_separator : ", ";
    out += name(table[i]);
  }
  return out;
}

// Same number, with -0 != +0 (they are different case lines) and NaN == NaN (the line says "nan").
bool same_number(double x, double y) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  return x == y && std::signbit(x) == std::signbit(y);
}

// Shortest round-tripping decimal; every NaN prints as "nan" (payloads are not part of a case).
void append_number(std::string* out, double x) {
  if (std::isnan(x)) {
    *out += "nan";
    return;
  }
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), x);
  out->append(buf, result.ptr);
}

void append_float(std::string* out, float x) {
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), x);
  out->append(buf, result.ptr);
}

void append_int(std::string* out, int64_t x) { *out += std::to_string(x); }

void append_spec(std::string* out, const ValueSpec& spec) {
  *out += to_string(spec.kind);
  *out += '(';
  const int arity = dist_arity(spec.kind);
  if (arity >= 1) append_number(out, spec.a);
  if (arity >= 2) {
    *out += ',';
    append_number(out, spec.b);
  }
  *out += ')';
}

Status invalid(std::string message) { return {StatusCode::kInvalidArgument, std::move(message)}; }

// Concatenation by appending (GCC 12 warns spuriously on chains that start with "literal" + std::string).
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view part : parts) out += part;
  return out;
}

// A blank-separated token of the line and where it starts.
struct Token {
  std::string_view text;
  int64_t column = 0;  // 1-based
};

// Short: the tools print the whole line (cut at 200 bytes) beside the message.
constexpr size_t kTokenEcho = 60;

std::string where(const Token& token) {
  return cat({"'", excerpt(token.text, kTokenEcho), "' at column ", std::to_string(token.column)});
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::vector<Token> split_tokens(std::string_view line) {
  std::vector<Token> tokens;
  size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && is_blank(line[pos])) ++pos;
    const size_t start = pos;
    while (pos < line.size() && !is_blank(line[pos])) ++pos;
    if (pos > start) tokens.push_back({line.substr(start, pos - start), static_cast<int64_t>(start) + 1});
  }
  return tokens;
}

// All of `text` as a decimal integer of type T (the sign was checked by the caller); on failure `*reason`
// says why, naming T as `type`.
template <typename T>
bool parse_decimal(std::string_view text, T* out, std::string* reason, const char* type) {
  T value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    *reason = std::string("does not fit in ") + type;
    return false;
  }
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    *reason = "not a decimal integer";
    return false;
  }
  *out = value;
  return true;
}

// Parses all of `text` as a non-negative int64; on failure `*reason` says why.
bool parse_size(std::string_view text, int64_t* out, std::string* reason) {
  if (text.empty()) {
    *reason = "missing number";
    return false;
  }
  if (text.front() == '-') {
    *reason = "must be non-negative";
    return false;
  }
  return parse_decimal(text, out, reason, "int64");
}

}  // namespace

bool parse_u64(std::string_view text, uint64_t* out, std::string* reason) {
  if (text.empty() || text.front() == '-') {
    *reason = "must be a non-negative decimal integer";
    return false;
  }
  return parse_decimal(text, out, reason, "uint64");
}

namespace {

// Decimal number, or nan / inf / -inf; decimal input is rounded correctly to the nearest double.
bool parse_double(std::string_view text, double* out, std::string* reason) {
  if (text.empty()) {
    *reason = "missing number";
    return false;
  }
  double value = 0.0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    *reason = cat({"'", text, "' is outside the range of double"});
    return false;
  }
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    *reason = cat({"'", text, "' is not a number"});
    return false;
  }
  *out = std::isnan(value) ? std::numeric_limits<double>::quiet_NaN() : value;
  return true;
}

// All of `text` as a float (correctly rounded); finiteness is the caller's check.
bool parse_float(std::string_view text, float* out, std::string* reason) {
  float value = 0.0f;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    *reason = "outside the range of float";
    return false;
  }
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    *reason = "not a number";
    return false;
  }
  *out = value;
  return true;
}

// `text` is "L,R", each side -1 (unbounded) or a non-negative int64; on failure `*reason` names the side.
bool parse_window(std::string_view text, int64_t* left, int64_t* right, std::string* reason) {
  const size_t comma = text.find(',');
  if (comma == std::string_view::npos || text.find(',', comma + 1) != std::string_view::npos) {
    *reason = "expected window=L,R (each side -1 = unbounded, or >= 0)";
    return false;
  }
  const std::pair<const char*, std::string_view> sides[2] = {{"window_left", text.substr(0, comma)},
                                                             {"window_right", text.substr(comma + 1)}};
  int64_t values[2] = {-1, -1};
  for (int i = 0; i < 2; ++i) {
    const auto& [name, part] = sides[i];
    if (part == "-1") continue;
    std::string why;
    if (!part.empty() && part.front() == '-') {
      *reason = cat({name, " '", part, "' must be -1 (unbounded) or >= 0"});
      return false;
    }
    if (!parse_size(part, &values[i], &why)) {
      *reason = cat({name, " '", part, "': ", why});
      return false;
    }
  }
  *left = values[0];
  *right = values[1];
  return true;
}

std::string format_window(int64_t left, int64_t right) {
  return "window=" + std::to_string(left) + "," + std::to_string(right);
}

// Empty when the window suits the mask: each side -1 or >= 0 with a window mask, (-1, -1) with any other.
std::string check_window(const Case& c) {
  for (const auto& [name, value] : {std::pair{"window_left", c.window_left}, std::pair{"window_right", c.window_right}}) {
    if (value < -1) return std::string(name) + "=" + std::to_string(value) + ": must be -1 (unbounded) or >= 0";
  }
  if (!takes_window(c.mask) && (c.window_left != -1 || c.window_right != -1)) {
    return format_window(c.window_left, c.window_right) + ": only mask=window-br or mask=window-tl take a window (mask is " +
           mask_name(c.mask) + ")";
  }
  return {};
}

// Why descale= is refused with another dtype, for the parser and validate_case alike.
constexpr const char* kDescaleNeedsFp8 = "only with dtype f8e4m3 (the fp8 path's descales)";
// Why dout= is refused without grad=1, for the parser and validate_case alike.
constexpr const char* kDoutNeedsGrad = "needs grad=1 (dO is the upstream gradient of the backward pass)";

// Why drop_seed= and drop_offset= are refused without a dropout, for the parser and validate_case alike.
constexpr const char* kDropNeedsDropout = "needs dropout=P with P > 0 (the seed and offset of dropout's mask)";

// Empty when the drop probability is one the API takes: in [0, 1).
std::string check_dropout(float p) {
  if (!(p >= 0.0f && p < 1.0f)) return "dropout must be in [0, 1) (0 = off)";
  return "";
}

// Empty when the softcap is one the API takes: finite and >= 0 (0 = off).
std::string check_softcap(float softcap) {
  if (!std::isfinite(softcap) || softcap < 0.0f) return "softcap must be finite and >= 0 (0 = off)";
  return {};
}

// A descale distribution (Case::descale): every value it can draw rounds to a positive normal fp32 value.
std::string check_descale(const ValueSpec& spec) {
  if (spec.kind != DistKind::kUniform && spec.kind != DistKind::kConst) {
    return "a descale is drawn from uniform(lo,hi) or const(c)";
  }
  const double lo = spec.a, hi = spec.kind == DistKind::kUniform ? spec.b : spec.a;
  if (!(lo >= static_cast<double>(std::numeric_limits<float>::min()) && lo <= hi &&
        hi <= static_cast<double>(std::numeric_limits<float>::max()))) {
    return "descales must lie in fp32's positive normal range (lo >= 2^-126, hi <= FLT_MAX)";
  }
  return {};
}

// Checks the parameters of a distribution; empty string when fine.
std::string check_spec(const ValueSpec& spec) {
  const double a = spec.a, b = spec.b;
  switch (spec.kind) {
    case DistKind::kNormal:
      if (!std::isfinite(a)) return "mu must be finite";
      if (!std::isfinite(b) || b < 0) return "sigma must be finite and >= 0";
      return {};
    case DistKind::kUniform:
      if (!std::isfinite(a) || !std::isfinite(b)) return "lo and hi must be finite";
      if (a > b) return "lo must be <= hi";
      if (!std::isfinite(b - a)) return "hi - lo overflows double";
      return {};
    case DistKind::kConst:
      return {};
    case DistKind::kNearMax:
      if (!std::isfinite(a) || a < 0) return "frac must be finite and >= 0";
      return {};
    case DistKind::kSubnormal:
    case DistKind::kNegZero:
      return {};
    case DistKind::kRamp:
      if (!std::isfinite(a) || !std::isfinite(b)) return "lo and hi must be finite";
      if (!std::isfinite(b - a)) return "hi - lo overflows double";
      return {};
    case DistKind::kDominant:
      if (!std::isfinite(a) || a < 0) return "sigma must be finite and >= 0";
      if (!std::isfinite(b) || b < 0) return "big must be finite and >= 0";
      return {};
  }
  return "unknown distribution kind " + std::to_string(static_cast<int>(spec.kind));
}

// `text` is e.g. "normal(0,3)".
bool parse_spec(std::string_view text, ValueSpec* out, std::string* reason) {
  const size_t open = text.find('(');
  if (open == std::string_view::npos || text.empty() || text.back() != ')') {
    *reason = "expected name(params), e.g. normal(0,1)";
    return false;
  }
  const std::string_view name = text.substr(0, open);
  int kind_index = -1;
  for (int i = 0; i < kDistKindCount; ++i) {
    if (name == kDistNames[i]) kind_index = i;
  }
  if (kind_index < 0) {
    std::string known;
    for (const char* n : kDistNames) known += std::string(known.empty() ? "" : ", ") + n;
    *reason = cat({"unknown distribution '", name, "' (known: ", known, ")"});
    return false;
  }
  ValueSpec spec;
  spec.kind = static_cast<DistKind>(kind_index);
  const std::string_view args = text.substr(open + 1, text.size() - open - 2);
  std::vector<std::string_view> parts;
  if (!args.empty()) {
    size_t start = 0;
    while (true) {
      const size_t comma = args.find(',', start);
      parts.push_back(args.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }
  const int arity = dist_arity(spec.kind);
  if (static_cast<int>(parts.size()) != arity) {
    *reason = std::string(name) + " takes " + std::to_string(arity) + " parameter" + (arity == 1 ? "" : "s") +
              ", got " + std::to_string(parts.size());
    return false;
  }
  double* fields[2] = {&spec.a, &spec.b};
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parse_double(parts[i], fields[i], reason)) return false;
  }
  const std::string problem = check_spec(spec);
  if (!problem.empty()) {
    *reason = problem;
    return false;
  }
  *out = spec;
  return true;
}

// One injection, e.g. "q[0,1,5,3]:nan".
bool parse_injection(std::string_view text, Injection* out, std::string* reason) {
  Injection inj;
  if (text.size() < 2 || (text[0] != 'q' && text[0] != 'k' && text[0] != 'v') || text[1] != '[') {
    *reason = cat({"injection '", text, "' must look like q[b,h,s,d]:value (tensor q, k or v)"});
    return false;
  }
  inj.tensor = text[0];
  const size_t close = text.find(']');
  if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
    *reason = cat({"injection '", text, "' must look like q[b,h,s,d]:value"});
    return false;
  }
  const std::string_view index_text = text.substr(2, close - 2);
  int64_t* fields[4] = {&inj.b, &inj.h, &inj.s, &inj.d};
  size_t start = 0;
  for (int i = 0; i < 4; ++i) {
    const size_t comma = index_text.find(',', start);
    const bool last = i == 3;
    if (last != (comma == std::string_view::npos)) {
      *reason = cat({"injection '", text, "' needs exactly four indices [b,h,s,d]"});
      return false;
    }
    const std::string_view part =
        index_text.substr(start, last ? std::string_view::npos : comma - start);
    std::string why;
    if (!parse_size(part, fields[i], &why)) {
      *reason = cat({"injection '", text, "': index '", part, "' ", why});
      return false;
    }
    start = comma + 1;
  }
  if (!parse_double(text.substr(close + 2), &inj.value, reason)) {
    *reason = cat({"injection '", text, "': ", *reason});
    return false;
  }
  *out = inj;
  return true;
}

// Empty when `inj` lies inside the shape of its tensor.
std::string check_injection(const Case& c, const Injection& inj) {
  if (inj.tensor != 'q' && inj.tensor != 'k' && inj.tensor != 'v') {
    return std::string("tensor '") + inj.tensor + "' is not q, k or v";
  }
  const bool is_q = inj.tensor == 'q', is_v = inj.tensor == 'v';
  const int64_t heads = is_q ? c.heads_q : c.heads_kv;
  const int64_t seqlen = is_q ? c.seqlen_q : c.seqlen_k;
  struct Axis {
    const char* name;
    int64_t index, size;
    const char* key;
  };
  const Axis axes[4] = {{"batch", inj.b, c.batch, "b"},
                        {"head", inj.h, heads, is_q ? "hq" : "hkv"},
                        {"row", inj.s, seqlen, is_q ? "sq" : "sk"},
                        {"column", inj.d, is_v ? c.value_dim() : c.head_dim, is_v ? "dv" : "d"}};
  for (const Axis& axis : axes) {
    if (axis.index < 0 || axis.index >= axis.size) {
      return std::string(axis.name) + " index " + std::to_string(axis.index) + " outside " + axis.key + "=" +
             std::to_string(axis.size);
    }
  }
  // With sequences a row lies inside its own sequence: its q rows, or its k keys (never the extra slots, which
  // hold the poison).
  if (!c.seqs.empty() && inj.b < static_cast<int64_t>(c.seqs.size())) {
    const Sequence& seq = c.seqs[static_cast<size_t>(inj.b)];
    const int64_t length = is_q ? seq.q : seq.k;
    if (inj.s >= length) {
      return "row index " + std::to_string(inj.s) + " outside sequence " + std::to_string(inj.b) + "'s " +
             (is_q ? "q=" : "k=") + std::to_string(length) + " (seqs)";
    }
  }
  return {};
}

std::string format_injection(const Injection& inj) {
  std::string out(1, inj.tensor);
  out += '[';
  append_int(&out, inj.b);
  out += ',';
  append_int(&out, inj.h);
  out += ',';
  append_int(&out, inj.s);
  out += ',';
  append_int(&out, inj.d);
  out += "]:";
  append_number(&out, inj.value);
  return out;
}

constexpr std::array<const char*, kPoisonCount> kPoisonNames = {"nan", "inf", "zero"};
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? std::numeric_limits<int64_t>::max() : out;
}

// One entry of seqs=..., "Q:K" or "Q:K+E".
bool parse_sequence(std::string_view text, Sequence* out, std::string* reason) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    *reason = cat({"sequence '", text, "' must look like Q:K or Q:K+E (query rows, keys, extra key slots)"});
    return false;
  }
  const size_t plus = text.find('+', colon + 1);
  const std::pair<const char*, std::string_view> parts[3] = {
      {"q", text.substr(0, colon)},
      {"k", text.substr(colon + 1, plus == std::string_view::npos ? std::string_view::npos : plus - colon - 1)},
      {"extra", plus == std::string_view::npos ? std::string_view("0") : text.substr(plus + 1)}};
  Sequence seq;
  int64_t* fields[3] = {&seq.q, &seq.k, &seq.extra};
  for (int i = 0; i < 3; ++i) {
    std::string why;
    if (!parse_size(parts[i].second, fields[i], &why)) {
      *reason = cat({"sequence '", text, "': ", parts[i].first, " '", parts[i].second, "' ", why});
      return false;
    }
  }
  *out = seq;
  return true;
}

std::string format_sequences(const std::vector<Sequence>& seqs) {
  std::string out;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (i > 0) out += ',';
    append_int(&out, seqs[i].q);
    out += ':';
    append_int(&out, seqs[i].k);
    if (seqs[i].extra != 0) {
      out += '+';
      append_int(&out, seqs[i].extra);
    }
  }
  return out;
}

// What check_sequences finds wrong, and the key it is about, so that the parser can point at that key's token.
struct KeyProblem {
  const char* key = "";
  std::string message;  // empty: fine
};

// Checks seqs, page, poison and splits against each other and against b, sq and sk: the line stays
// self-describing (b, sq, sk say the batch and the maxima), and every index array fits its int32 entries.
KeyProblem check_sequences(const Case& c) {
  auto problem = [](const char* key, std::string message) { return KeyProblem{key, std::move(message)}; };
  if (c.splits < 0) {
    return problem("splits", "splits=" + std::to_string(c.splits) + ": must be >= 0 (0 = the kernel's heuristic)");
  }
  const int poison = static_cast<int>(c.poison);
  if (poison < 0 || poison >= kPoisonCount) {
    return problem("poison", "poison: unknown value " + std::to_string(poison) + " (known: nan, inf, zero)");
  }
  if (c.page < 0) return problem("page", "page=" + std::to_string(c.page) + ": must be >= 1 (0: not paged)");
  if (c.seqs.empty()) {
    if (c.page != 0) {
      return problem("page", "page=" + std::to_string(c.page) + ": paged K/V needs seqs (a dense case has no page table)");
    }
    if (c.poison != Poison::kNaN) {
      return problem("poison", std::string("poison=") + to_string(c.poison) +
                                   ": needs seqs (a dense case's padding keeps the NaN pattern)");
    }
    return {};
  }
  int64_t max_q = 0, max_capacity = 0, total_q = 0, total_k = 0, pages = 0, max_pages = 1;
  for (size_t i = 0; i < c.seqs.size(); ++i) {
    const Sequence& s = c.seqs[i];
    const std::string name = "seqs: sequence " + std::to_string(i);
    if (s.q < 0 || s.k < 0 || s.extra < 0) return problem("seqs", name + ": q, k and extra must be non-negative");
    if (s.q > kInt32Max || s.capacity() > kInt32Max) {
      return problem("seqs", name + ": q and k + extra must fit int32 (the index arrays are int32)");
    }
    max_q = std::max(max_q, s.q);
    max_capacity = std::max(max_capacity, s.capacity());
    total_q += s.q;  // terms below 2^31, far fewer than 2^32 of them: no int64 overflow
    total_k += s.capacity();
    if (c.page > 0) {
      const int64_t n = sequence_pages(s, c.page);
      pages += n;
      max_pages = std::max(max_pages, n);
    }
  }
  if (c.batch != static_cast<int64_t>(c.seqs.size())) {
    return problem("seqs", "b=" + std::to_string(c.batch) + " but seqs lists " + std::to_string(c.seqs.size()) +
                               (c.seqs.size() == 1 ? " sequence" : " sequences") + " (b is the number of sequences)");
  }
  // sq and sk bound the sequences, as Params::seqlen_q / seqlen_k do (the launch is sized by them): a batch whose
  // other sequences are emptied keeps its bounds and so its values.
  if (c.seqlen_q < max_q) {
    return problem("sq", "sq=" + std::to_string(c.seqlen_q) + " but the largest q of seqs is " + std::to_string(max_q) +
                             " (sq bounds every q)");
  }
  if (c.seqlen_k < max_capacity) {
    return problem("sk", "sk=" + std::to_string(c.seqlen_k) + " but the largest k + extra of seqs is " +
                             std::to_string(max_capacity) + " (sk bounds every k + extra)");
  }
  if (total_q > kInt32Max) return problem("seqs", "seqs: the q rows total more than int32 holds (cu_seqlens_q)");
  if (c.page == 0 && total_k > kInt32Max) {
    return problem("seqs", "seqs: the k + extra slots total more than int32 holds (cu_seqlens_k)");
  }
  // num_pages counts the spare page; the table's unread entries hold num_pages + 7 (inputs.h); and the kernel's
  // capacity max_pages_per_seq * page is an int32 too.
  const int64_t num_pages = pages + 1;
  if (c.page > 0 && (num_pages > kInt32Max - 7 || max_pages > kInt32Max / c.page)) {
    return problem("page", "page=" + std::to_string(c.page) + ": " + std::to_string(num_pages) + " pages (" +
                               std::to_string(max_pages) + " for one sequence) do not fit the int32 page table "
                               "(num_pages + 7 and max_pages_per_seq * page must)");
  }
  return {};
}

}  // namespace

const char* to_string(Poison poison) {
  const int index = static_cast<int>(poison);
  return index >= 0 && index < kPoisonCount ? kPoisonNames[index] : "?";
}

int64_t Sequence::capacity() const { return saturating_add(k, extra); }

int64_t sequence_pages(const Sequence& s, int64_t page) {
  const int64_t capacity = s.capacity();
  return capacity / page + (capacity % page != 0 ? 1 : 0);
}

void fit_to_sequences(Case* c) {
  c->batch = static_cast<int64_t>(c->seqs.size());
  c->seqlen_q = 0;
  c->seqlen_k = 0;
  for (const Sequence& s : c->seqs) {
    c->seqlen_q = std::max(c->seqlen_q, s.q);
    c->seqlen_k = std::max(c->seqlen_k, s.capacity());
  }
}

const char* to_string(DistKind kind) {
  const int index = static_cast<int>(kind);
  return index >= 0 && index < kDistKindCount ? kDistNames[index] : "?";
}

const char* to_string(Layout layout) {
  switch (layout) {
    case Layout::kBHSD:
      return "bhsd";
    case Layout::kBSHD:
      return "bshd";
  }
  return "?";
}

int dist_arity(DistKind kind) {
  switch (kind) {
    case DistKind::kNormal:
    case DistKind::kUniform:
    case DistKind::kRamp:
    case DistKind::kDominant:
      return 2;
    case DistKind::kConst:
    case DistKind::kNearMax:
      return 1;
    case DistKind::kSubnormal:
    case DistKind::kNegZero:
      return 0;
  }
  return 0;
}

bool operator==(const ValueSpec& x, const ValueSpec& y) {
  if (x.kind != y.kind) return false;
  const int arity = dist_arity(x.kind);
  return (arity < 1 || same_number(x.a, y.a)) && (arity < 2 || same_number(x.b, y.b));
}

bool operator==(const Injection& x, const Injection& y) {
  return x.tensor == y.tensor && x.b == y.b && x.h == y.h && x.s == y.s && x.d == y.d &&
         same_number(x.value, y.value);
}

float Case::softmax_scale() const {
  if (scale) return *scale;
  if (head_dim <= 0) return 1.0f;
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

Params case_params(const Case& c) {
  Params p = make_params(c.dtype, c.batch, c.heads_q, c.heads_kv, c.seqlen_q, c.seqlen_k, c.head_dim, c.mask, c.layout);
  p.head_dim_v = c.head_dim_v;
  // Padding appends `pad` elements to every row: the contiguous strides of head_dim + pad (Q, K) and
  // value_dim() + pad (V, O).
  const auto padded = [&](int64_t columns) {
    int64_t elements = 0;
    return __builtin_add_overflow(columns, c.pad, &elements) ? std::numeric_limits<int64_t>::max() : elements;
  };
  const int64_t row_elements = padded(c.head_dim);
  const int64_t value_row_elements = padded(c.value_dim());
  p.q_stride = contiguous_strides(c.layout, c.heads_q, c.seqlen_q, row_elements);
  p.k_stride = contiguous_strides(c.layout, c.heads_kv, c.seqlen_k, row_elements);
  p.v_stride = contiguous_strides(c.layout, c.heads_kv, c.seqlen_k, value_row_elements);
  p.o_stride = contiguous_strides(c.layout, c.heads_q, c.seqlen_q, value_row_elements);
  p.softmax_scale = c.softmax_scale();
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.softcap = c.softcap;
  p.num_splits = c.splits;
  p.dropout_p = c.dropout;
  p.dropout_seed = c.drop_seed;
  p.dropout_offset = c.drop_offset;
  if (c.seqs.empty()) return p;

  // Packed rows: the layout of one batch entry over all the sequences' rows (head-major for bhsd: each head's
  // rows of every sequence, then the next head's), .batch unused.
  const auto packed = [&](int64_t heads, int64_t rows, int64_t columns) {
    Strides s = contiguous_strides(c.layout, heads, rows, columns);
    s.batch = 0;
    return s;
  };
  int64_t total_q = 0, total_k = 0;
  for (const Sequence& s : c.seqs) {
    total_q = saturating_add(total_q, s.q);
    total_k = saturating_add(total_k, s.capacity());
  }
  p.total_q = total_q;
  p.q_stride = packed(c.heads_q, total_q, row_elements);
  p.o_stride = packed(c.heads_q, total_q, value_row_elements);
  if (c.page <= 0) {
    p.total_k = total_k;
    p.k_stride = packed(c.heads_kv, total_k, row_elements);
    p.v_stride = packed(c.heads_kv, total_k, value_row_elements);
  } else {
    // One page is the layout of one batch entry of page rows: .batch is the page stride.
    p.page_size = c.page;
    p.k_stride = contiguous_strides(c.layout, c.heads_kv, c.page, row_elements);
    p.v_stride = contiguous_strides(c.layout, c.heads_kv, c.page, value_row_elements);
    int64_t pages = 1;  // the spare page
    p.max_pages_per_seq = 1;
    for (const Sequence& s : c.seqs) {
      const int64_t n = sequence_pages(s, c.page);
      pages = saturating_add(pages, n);
      p.max_pages_per_seq = std::max(p.max_pages_per_seq, n);
    }
    p.num_pages = pages;
  }
  return p;
}

std::string format_case(const Case& c) {
  std::string out = dtype_name(c.dtype);
  const std::pair<const char*, int64_t> sizes[] = {{" b=", c.batch},     {" hq=", c.heads_q}, {" hkv=", c.heads_kv},
                                                  {" sq=", c.seqlen_q}, {" sk=", c.seqlen_k}, {" d=", c.head_dim}};
  for (const auto& [key, value] : sizes) {
    out += key;
    append_int(&out, value);
  }
  if (c.head_dim_v != 0) {
    out += " dv=";
    append_int(&out, c.head_dim_v);
  }
  out += " mask=";
  out += mask_name(c.mask);
  // Written whenever it is not the default, so that an invalid Case prints what parse_case then rejects.
  if (takes_window(c.mask) || c.window_left != -1 || c.window_right != -1) {
    out += ' ';
    out += format_window(c.window_left, c.window_right);
  }
  if (c.layout != Layout::kBHSD) {
    out += " layout=";
    out += to_string(c.layout);
  }
  if (c.pad != 0) {
    out += " pad=";
    append_int(&out, c.pad);
  }
  if (!c.seqs.empty()) {
    out += " seqs=";
    out += format_sequences(c.seqs);
  }
  if (c.page != 0) {
    out += " page=";
    append_int(&out, c.page);
  }
  if (c.poison != Poison::kNaN) {
    out += " poison=";
    out += to_string(c.poison);
  }
  if (c.splits != 1) {
    out += " splits=";
    append_int(&out, c.splits);
  }
  if (c.scale) {
    out += " scale=";
    append_float(&out, *c.scale);
  }
  if (c.softcap != 0.0f) {
    out += " softcap=";
    append_float(&out, c.softcap);
  }
  // drop_seed and drop_offset with every dropout, so the line says the mask; without one only when not 0, so that
  // an invalid Case prints what parse_case then rejects.
  if (c.dropout != 0.0f) {
    out += " dropout=";
    append_float(&out, c.dropout);
  }
  if (c.dropout != 0.0f || c.drop_seed != 0 || c.drop_offset != 0) {
    out += " drop_seed=" + std::to_string(c.drop_seed) + " drop_offset=" + std::to_string(c.drop_offset);
  }
  const std::pair<const char*, const ValueSpec*> specs[] = {{" q=", &c.q}, {" k=", &c.k}, {" v=", &c.v}};
  for (const auto& [key, spec] : specs) {
    out += key;
    append_spec(&out, *spec);
  }
  if (c.sink) {
    out += " sink=";
    append_spec(&out, *c.sink);
  }
  if (c.descale) {
    out += " descale=";
    append_spec(&out, *c.descale);
  }
  if (c.grad) out += " grad=1";
  // dout= with every grad=1 line, so the line says dO's distribution; without grad only when not the default, so
  // that an invalid Case prints what parse_case then rejects.
  if (c.grad || c.dout != ValueSpec{}) {
    out += " dout=";
    append_spec(&out, c.dout);
  }
  if (!c.inject.empty()) {
    out += " inject=";
    for (size_t i = 0; i < c.inject.size(); ++i) {
      if (i > 0) out += ';';
      out += format_injection(c.inject[i]);
    }
  }
  if (!c.property.empty()) {
    out += " property=";
    out += c.property;
  }
  if (!c.subject.empty()) {
    out += " subject=";
    out += c.subject;
  }
  out += " seed=";
  out += std::to_string(c.seed);
  return out;
}

bool is_subject_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxSubjectName) return false;
  return std::all_of(name.begin(), name.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
           ch == '_' || ch == '-';
  });
}

bool is_property_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxPropertyName) return false;
  const auto letter = [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); };
  return letter(name[0]) &&
         std::all_of(name.begin(), name.end(), [&](char ch) { return letter(ch) || (ch >= '0' && ch <= '9'); });
}

std::string excerpt(std::string_view text, size_t limit) {
  constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const size_t shown = std::min(text.size(), limit);
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char ch = static_cast<unsigned char>(text[i]);
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch == '\\') {
      out += "\\\\";
    } else if (ch < 0x20 || ch >= 0x7f) {
      out += "\\x";
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    } else {
      out += static_cast<char>(ch);
    }
  }
  if (shown < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

Status validate_case(const Case& c) {
  const std::pair<const char*, int64_t> sizes[] = {{"b", c.batch},     {"hq", c.heads_q}, {"hkv", c.heads_kv},
                                                  {"sq", c.seqlen_q}, {"sk", c.seqlen_k}, {"d", c.head_dim},
                                                  {"dv", c.head_dim_v}, {"pad", c.pad}};
  for (const auto& [key, value] : sizes) {
    if (value < 0) return invalid(std::string(key) + "=" + std::to_string(value) + ": must be non-negative");
  }
  if (c.scale && !std::isfinite(*c.scale)) {
    return invalid("scale must be finite (a non-finite scale is outside the API; test it with Params directly)");
  }
  if (const std::string problem = check_window(c); !problem.empty()) return invalid(problem);
  if (const std::string problem = check_softcap(c.softcap); !problem.empty()) return invalid(problem);
  if (const std::string problem = check_dropout(c.dropout); !problem.empty()) return invalid(problem);
  if (c.dropout == 0.0f && (c.drop_seed != 0 || c.drop_offset != 0)) {
    return invalid(std::string(c.drop_seed != 0 ? "drop_seed" : "drop_offset") + ": " + kDropNeedsDropout);
  }
  if (const KeyProblem problem = check_sequences(c); !problem.message.empty()) return invalid(problem.message);
  const std::pair<const char*, const ValueSpec*> specs[] = {
      {"q", &c.q}, {"k", &c.k}, {"v", &c.v}, {"sink", c.sink ? &*c.sink : nullptr}, {"dout", &c.dout}};
  for (const auto& [key, spec] : specs) {
    if (spec == nullptr) continue;
    const std::string problem = check_spec(*spec);
    if (!problem.empty()) return invalid(std::string(key) + "=" + to_string(spec->kind) + ": " + problem);
  }
  if (!c.grad && c.dout != ValueSpec{}) {
    std::string spec;
    append_spec(&spec, c.dout);
    return invalid("dout=" + spec + ": " + kDoutNeedsGrad);
  }
  if (c.descale) {
    std::string spec;
    append_spec(&spec, *c.descale);
    if (c.dtype != DType::kF8E4M3) return invalid("descale=" + spec + ": " + kDescaleNeedsFp8);
    if (const std::string problem = check_descale(*c.descale); !problem.empty()) {
      return invalid("descale=" + spec + ": " + problem);
    }
  }
  for (const Injection& inj : c.inject) {
    const std::string problem = check_injection(c, inj);
    if (!problem.empty()) return invalid("inject " + format_injection(inj) + ": " + problem);
  }
  if (!c.property.empty() && !is_property_name(c.property)) return invalid("property=" + excerpt(c.property, 80) + ": not a property name");
  if (!c.subject.empty() && !is_subject_name(c.subject)) return invalid("subject=" + excerpt(c.subject, 80) + ": not a subject name");
  return Status::ok_status();
}

bool holds_case_line(std::string_view line) {
  const size_t start = line.find_first_not_of(" \t\r");
  return start != std::string_view::npos && line[start] != '#';
}

Status parse_case(std::string_view line, Case* out) {
  const std::vector<Token> tokens = split_tokens(line);
  if (tokens.empty()) return invalid("empty case line (expected e.g. 'f16 b=1 hq=2 hkv=2 sq=64 sk=64 d=64 seed=1')");

  Case c;
  const std::optional<DType> dtype = dtype_from_name(tokens[0].text);
  if (!dtype) {
    const std::string names = list_names(kDTypes, [](const DTypeInfo& info) { return info.name; }, " or ");
    return invalid("unknown dtype " + where(tokens[0]) + " (expected " + names + " first)");
  }
  c.dtype = *dtype;

  constexpr std::array<const char*, 31> kKeys = {"b",        "hq",      "hkv",     "sq",        "sk",          "d",
                                                 "dv",       "mask",    "window",  "layout",    "pad",         "seqs",
                                                 "page",     "poison",  "splits",  "scale",     "softcap",     "dropout",
                                                 "drop_seed", "drop_offset", "q",  "k",         "v",           "sink",
                                                 "descale",  "grad",    "dout",    "inject",    "property",    "subject",
                                                 "seed"};
  constexpr size_t kHkvKey = 2, kMaskKey = 7, kWindowKey = 8, kDropSeedKey = 18, kDropOffsetKey = 19, kDescaleKey = 24,
                   kDoutKey = 26;
  static_assert(std::string_view(kKeys[kHkvKey]) == "hkv" && std::string_view(kKeys[kMaskKey]) == "mask" &&
                std::string_view(kKeys[kWindowKey]) == "window" && std::string_view(kKeys[kDoutKey]) == "dout" &&
                std::string_view(kKeys[kDescaleKey]) == "descale" &&
                std::string_view(kKeys[kDropSeedKey]) == "drop_seed" &&
                std::string_view(kKeys[kDropOffsetKey]) == "drop_offset");
  const auto key_index_of = [&](std::string_view key) {
    size_t index = 0;
    while (index < kKeys.size() && key != kKeys[index]) ++index;
    return index;
  };
  std::array<bool, kKeys.size()> seen{};
  std::array<Token, kKeys.size()> key_token{};
  Token inject_token;
  for (size_t t = 1; t < tokens.size(); ++t) {
    const Token& token = tokens[t];
    const size_t eq = token.text.find('=');
    if (eq == std::string_view::npos) return invalid("expected key=value, got " + where(token));
    const std::string_view key = token.text.substr(0, eq);
    const std::string_view value = token.text.substr(eq + 1);
    const size_t key_index = key_index_of(key);
    if (key_index == kKeys.size()) {
      std::string known;
      for (const char* k : kKeys) known += std::string(known.empty() ? "" : " ") + k;
      return invalid(cat({"unknown key '", excerpt(key, kTokenEcho), "' at column ", std::to_string(token.column), " (known: ", known, ")"}));
    }
    if (seen[key_index]) return invalid(cat({"duplicate key '", excerpt(key, kTokenEcho), "' at column ", std::to_string(token.column)}));
    seen[key_index] = true;
    key_token[key_index] = token;

    std::string reason;
    bool ok = true;
    const std::string_view k = key;
    if (k == "b" || k == "hq" || k == "hkv" || k == "sq" || k == "sk" || k == "d" || k == "dv" || k == "pad") {
      int64_t* field = k == "b"     ? &c.batch
                       : k == "hq"  ? &c.heads_q
                       : k == "hkv" ? &c.heads_kv
                       : k == "sq"  ? &c.seqlen_q
                       : k == "sk"  ? &c.seqlen_k
                       : k == "d"   ? &c.head_dim
                       : k == "dv"  ? &c.head_dim_v
                                    : &c.pad;
      ok = parse_size(value, field, &reason);
    } else if (k == "mask") {
      const std::optional<Mask> mask = mask_from_name(value);
      ok = mask.has_value();
      if (ok) {
        c.mask = *mask;
      } else {
        reason = "unknown mask (known: " + list_names(kMaskNames, [](const MaskName& m) { return m.name; }, ", ") + ")";
      }
    } else if (k == "layout") {
      if (value == "bhsd") {
        c.layout = Layout::kBHSD;
      } else if (value == "bshd") {
        c.layout = Layout::kBSHD;
      } else {
        ok = false;
        reason = "unknown layout (known: bhsd, bshd)";
      }
    } else if (k == "window") {
      ok = parse_window(value, &c.window_left, &c.window_right, &reason);
    } else if (k == "seqs") {
      if (value.empty()) {
        ok = false;
        reason = "empty sequence list (expected e.g. seqs=3:100,0:5+2: Q:K or Q:K+E per sequence)";
      }
      size_t start = 0;
      while (ok && start <= value.size()) {
        const size_t comma = value.find(',', start);
        Sequence seq;
        ok = parse_sequence(value.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start),
                            &seq, &reason);
        if (ok) c.seqs.push_back(seq);
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
    } else if (k == "page") {
      ok = parse_size(value, &c.page, &reason);
      if (ok && c.page == 0) {
        ok = false;
        reason = "must be >= 1 keys per page (leave page out for unpaged K/V)";
      }
    } else if (k == "poison") {
      const auto* found = std::find(kPoisonNames.begin(), kPoisonNames.end(), value);
      ok = found != kPoisonNames.end();
      if (ok) {
        c.poison = static_cast<Poison>(found - kPoisonNames.begin());
      } else {
        reason = "unknown poison (known: nan, inf, zero)";
      }
    } else if (k == "splits") {
      ok = !value.empty() && value.front() != '-';
      if (!ok) reason = "must be a non-negative decimal integer (0 = the kernel's heuristic)";
      ok = ok && parse_decimal(value, &c.splits, &reason, "int32");
    } else if (k == "scale") {
      float scale = 0.0f;
      ok = parse_float(value, &scale, &reason);
      if (ok && !std::isfinite(scale)) {
        // A NaN scale would make the Case unequal to itself; the API requires a finite scale anyway.
        ok = false;
        reason = "softmax scale must be finite";
      }
      if (ok) c.scale = scale;
    } else if (k == "softcap") {
      float softcap = 0.0f;
      ok = parse_float(value, &softcap, &reason);
      if (ok) reason = check_softcap(softcap);
      ok = ok && reason.empty();
      if (ok) c.softcap = softcap == 0.0f ? 0.0f : softcap;  // -0 is off, like 0
    } else if (k == "dropout") {
      float p = 0.0f;
      ok = parse_float(value, &p, &reason);
      if (ok) reason = check_dropout(p);
      ok = ok && reason.empty();
      if (ok) c.dropout = p == 0.0f ? 0.0f : p;  // -0 is off, like 0
    } else if (k == "drop_seed") {
      ok = parse_u64(value, &c.drop_seed, &reason);
    } else if (k == "drop_offset") {
      ok = parse_u64(value, &c.drop_offset, &reason);
    } else if (k == "q" || k == "k" || k == "v") {
      ValueSpec* spec = k == "q" ? &c.q : k == "k" ? &c.k : &c.v;
      ok = parse_spec(value, spec, &reason);
    } else if (k == "sink") {
      ValueSpec spec;
      ok = parse_spec(value, &spec, &reason);
      if (ok) c.sink = spec;
    } else if (k == "descale") {
      ValueSpec spec;
      ok = parse_spec(value, &spec, &reason);
      if (ok) reason = check_descale(spec);
      ok = ok && reason.empty();
      if (ok) c.descale = spec;
    } else if (k == "grad") {
      ok = value == "0" || value == "1";
      if (ok) {
        c.grad = value == "1";
      } else {
        reason = "must be 1 (check the backward pass too) or 0 (forward only, the default)";
      }
    } else if (k == "dout") {
      ok = parse_spec(value, &c.dout, &reason);
    } else if (k == "inject") {
      inject_token = token;
      if (value.empty()) {
        ok = false;
        reason = "empty injection list";
      }
      size_t start = 0;
      while (ok && start <= value.size()) {
        const size_t semi = value.find(';', start);
        const std::string_view item =
            value.substr(start, semi == std::string_view::npos ? std::string_view::npos : semi - start);
        Injection inj;
        ok = parse_injection(item, &inj, &reason);
        if (ok) c.inject.push_back(inj);
        if (semi == std::string_view::npos) break;
        start = semi + 1;
      }
    } else if (k == "property") {
      ok = is_property_name(value);
      if (ok) {
        c.property = std::string(value);
      } else {
        reason = "a property name is a letter then up to 63 letters and digits (e.g. PagedEqualsPackedBitForBit)";
      }
    } else if (k == "subject") {
      ok = is_subject_name(value);
      if (ok) {
        c.subject = std::string(value);
      } else {
        reason = "a subject name is 1 to 64 of A-Z a-z 0-9 . _ -";
      }
    } else {  // seed
      ok = parse_u64(value, &c.seed, &reason);
    }
    if (!ok) return invalid(where(token) + ": " + reason);
  }
  // hkv defaults to hq: a hand-written line without hkv means plain multi-head attention.
  if (!seen[kHkvKey]) c.heads_kv = c.heads_q;

  // A window mask needs its window and a window needs a window mask: checked once both keys are known.
  if (takes_window(c.mask) && !seen[kWindowKey]) {
    return invalid(where(key_token[kMaskKey]) + ": mask " + mask_name(c.mask) +
                   " needs window=L,R (each side -1 = unbounded, or >= 0)");
  }
  if (!takes_window(c.mask) && seen[kWindowKey]) {
    return invalid(where(key_token[kWindowKey]) + ": window: only mask=window-br or mask=window-tl take a window (mask is " +
                   mask_name(c.mask) + ")");
  }

  // The mask's seed and offset exist only with a dropout: checked once dropout is known, whichever came first.
  for (const size_t key : {kDropSeedKey, kDropOffsetKey}) {
    if (seen[key] && c.dropout == 0.0f) return invalid(where(key_token[key]) + ": " + kKeys[key] + " " + kDropNeedsDropout);
  }

  // Descales belong to the fp8 path: the dtype comes first on every line.
  if (seen[kDescaleKey] && c.dtype != DType::kF8E4M3) {
    return invalid(where(key_token[kDescaleKey]) + ": descale " + kDescaleNeedsFp8);
  }

  // dO exists only in the backward pass: checked once grad is known, whichever came first.
  if (seen[kDoutKey] && !c.grad) return invalid(where(key_token[kDoutKey]) + ": dout " + kDoutNeedsGrad);

  // Sequences against b, sq and sk, page and poison against sequences: once the whole shape is known, pointing at
  // the token of the key the problem is about (or at seqs when that key was left out).
  if (const KeyProblem problem = check_sequences(c); !problem.message.empty()) {
    size_t index = key_index_of(problem.key);
    if (!seen[index]) index = key_index_of("seqs");
    return invalid(where(key_token[index]) + ": " + problem.message);
  }

  // Injection positions can only be checked once the whole shape is known.
  for (const Injection& inj : c.inject) {
    const std::string problem = check_injection(c, inj);
    if (!problem.empty()) return invalid(where(inject_token) + ": " + format_injection(inj) + ": " + problem);
  }
  // The seed decides every input value: a line without one would silently mean seed 0.
  if (!seen[kKeys.size() - 1]) return invalid("seed: missing (every case line gives seed=N, N a decimal uint64)");
  *out = std::move(c);
  return Status::ok_status();
}

}  // namespace flashcheck
