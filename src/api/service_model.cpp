#include "api/service_model.h"

#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

// The models, linked in by embedded_models.S. Each is followed by a NUL byte after `_end`.
extern "C" const char ty_batch_model_begin[];
extern "C" const char ty_batch_model_end[];
extern "C" const char ty_sagemaker_model_begin[];
extern "C" const char ty_sagemaker_model_end[];

namespace ty::api {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;  // keeps members in model order

constexpr size_t kNoShape = static_cast<size_t>(-1);
constexpr int kMaxDepth = 64;           // nesting limit for validated values
constexpr size_t kMaxShownValue = 100;  // code points of a value quoted in a message
constexpr size_t kMaxListedErrors = 100;

// ---------------------------------------------------------------------------------------------
// Shapes

enum class Type {
  kStructure, kList, kMap, kString, kInteger, kLong, kBoolean, kTimestamp, kDouble, kFloat,
  kBlob, kOther,  // document and anything unknown: accepted as is
};

Type TypeFromName(std::string_view t) {
  static const std::map<std::string_view, Type> kTypes = {
      {"structure", Type::kStructure}, {"list", Type::kList},       {"map", Type::kMap},
      {"string", Type::kString},       {"integer", Type::kInteger}, {"long", Type::kLong},
      {"boolean", Type::kBoolean},     {"timestamp", Type::kTimestamp},
      {"double", Type::kDouble},       {"float", Type::kFloat},     {"blob", Type::kBlob},
  };
  auto it = kTypes.find(t);
  return it == kTypes.end() ? Type::kOther : it->second;
}

// A min or max from the model, exact for integers.
struct Bound {
  bool is_int = false;
  int64_t i = 0;
  double d = 0;
  std::string text;  // as shown in messages
};

std::string FormatDouble(double d) {
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15) {
    return std::to_string(static_cast<int64_t>(d));
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  return r.ec == std::errc() ? std::string(buf, r.ptr) : std::to_string(d);
}

std::optional<Bound> ReadBound(const ojson& shape, const char* key) {
  auto it = shape.find(key);
  if (it == shape.end() || !it->is_number()) return std::nullopt;
  Bound b;
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
    b.is_int = false;
    b.d = it->get<double>();
    b.text = std::to_string(it->get<uint64_t>());
  } else if (it->is_number_integer()) {
    b.is_int = true;
    b.i = it->get<int64_t>();
    b.d = static_cast<double>(b.i);
    b.text = std::to_string(b.i);
  } else {
    b.d = it->get<double>();
    b.text = FormatDouble(b.d);
  }
  return b;
}

struct Member {
  std::string name;  // wire name (locationName when given)
  size_t shape = kNoShape;
  bool required = false;
  bool in_body = true;     // false for uri / querystring / header(s) members
  std::string location, location_name;  // where a member outside the body is bound, and its name there
  bool jsonvalue = false;  // a JSON document carried in a string
};

struct Shape {
  std::string name;
  std::string type_name;
  Type type = Type::kOther;
  std::vector<Member> members;
  bool is_union = false;
  bool sensitive = false;
  std::optional<Bound> min, max;
  std::set<std::string, std::less<>> enum_values;
  std::string enum_text;  // "[A, B, C]"
  std::string pattern;
  int pattern_id = -1;
  size_t member = kNoShape, key = kNoShape, value = kNoShape;
};

// ---------------------------------------------------------------------------------------------
// Java regular expressions on RE2

RE2::Options PatternOptions() {
  RE2::Options o;
  o.set_encoding(RE2::Options::EncodingUTF8);
  o.set_dot_nl(true);
  o.set_longest_match(false);
  o.set_log_errors(false);
  return o;
}

// A translated pattern: the main expression (full match) plus the lookarounds that were peeled
// off its ends and are checked on their own.
struct Assertion {
  bool lookbehind = false;  // at the end of the text; else a lookahead at its start
  bool negate = false;
  std::unique_ptr<RE2> re;
};

struct CompiledPattern {
  std::string source;
  bool ok = false;
  std::unique_ptr<RE2> main;
  std::vector<Assertion> assertions;

  bool Matches(std::string_view text) const {
    re2::StringPiece sp(text.data(), text.size());
    if (!RE2::FullMatch(sp, *main)) return false;
    for (const auto& a : assertions) {
      bool m = a.re->Match(sp, 0, sp.size(), a.lookbehind ? RE2::UNANCHORED : RE2::ANCHOR_START,
                           nullptr, 0);
      if (m == a.negate) return false;
    }
    return true;
  }
};

bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// Index just past the escape sequence starting at p[i] == '\\'.
size_t SkipEscape(const std::string& p, size_t i) {
  size_t n = p.size();
  if (i + 1 >= n) return n;
  char d = p[i + 1];
  if (d == 'Q') {
    size_t e = p.find("\\E", i + 2);
    return e == std::string::npos ? n : e + 2;
  }
  if ((d == 'p' || d == 'P' || d == 'x' || d == 'N') && i + 2 < n && p[i + 2] == '{') {
    size_t e = p.find('}', i + 3);
    return e == std::string::npos ? n : e + 1;
  }
  return i + 2;
}

// Index just past the character class starting at p[i] == '[' (Java classes nest), or npos.
size_t SkipClass(const std::string& p, size_t i) {
  size_t n = p.size();
  int depth = 0;
  while (i < n) {
    char c = p[i];
    if (c == '\\') {
      i = SkipEscape(p, i);
      continue;
    }
    if (c == '[') {
      ++depth;
      ++i;
      if (i < n && p[i] == '^') ++i;
      continue;
    }
    if (c == ']') {
      if (--depth == 0) return i + 1;
    }
    ++i;
  }
  return std::string::npos;
}

// Index just past the group starting at p[i] == '(', or npos.
size_t SkipGroup(const std::string& p, size_t i) {
  size_t n = p.size();
  int depth = 0;
  while (i < n) {
    char c = p[i];
    if (c == '\\') {
      i = SkipEscape(p, i);
    } else if (c == '[') {
      i = SkipClass(p, i);
      if (i == std::string::npos) return i;
    } else {
      if (c == '(') ++depth;
      if (c == ')' && --depth == 0) return i + 1;
      ++i;
    }
  }
  return std::string::npos;
}

size_t AtomEnd(const std::string& p, size_t i) {
  if (p[i] == '\\') return SkipEscape(p, i);
  if (p[i] == '[') return SkipClass(p, i);
  if (p[i] == '(') return SkipGroup(p, i);
  return i + 1;
}

// Start offsets of the top-level atoms of p, or nullopt if p is unbalanced.
std::optional<std::vector<size_t>> TopLevelAtoms(const std::string& p) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < p.size();) {
    size_t e = AtomEnd(p, i);
    if (e == std::string::npos) return std::nullopt;
    starts.push_back(i);
    i = e;
  }
  return starts;
}

struct Peeled {
  std::string main;
  struct Look {
    bool lookbehind, negate;
    std::string body;
  };
  std::vector<Look> looks;
};

// Splits leading lookaheads ("(?=X)", "(?!X)", optionally after '^') and trailing lookbehinds
// ("(?<=X)", "(?<!X)", optionally before '$') off a pattern. With full-match semantics, and no
// top-level alternation, they are independent checks on the start and the end of the text.
std::optional<Peeled> PeelLookarounds(std::string p) {
  Peeled out;
  auto atoms = TopLevelAtoms(p);
  if (!atoms) return std::nullopt;
  for (size_t s : *atoms) {
    if (p[s] == '|') {  // lookarounds would bind to one alternative only
      out.main = std::move(p);
      return out;
    }
  }
  for (;;) {
    size_t start = (!p.empty() && p[0] == '^') ? 1 : 0;
    if (p.compare(start, 3, "(?=") != 0 && p.compare(start, 3, "(?!") != 0) break;
    size_t end = SkipGroup(p, start);
    if (end == std::string::npos) return std::nullopt;
    out.looks.push_back({false, p[start + 2] == '!', p.substr(start + 3, end - 1 - (start + 3))});
    p.erase(start, end - start);
  }
  for (;;) {
    atoms = TopLevelAtoms(p);
    if (!atoms || atoms->empty()) break;
    size_t last = atoms->size() - 1;
    size_t tail_end = p.size();
    if (p.substr(atoms->at(last)) == "$") {
      if (last == 0) break;
      tail_end = atoms->at(last);
      --last;
    }
    size_t s = atoms->at(last);
    if (p.compare(s, 4, "(?<=") != 0 && p.compare(s, 4, "(?<!") != 0) break;
    out.looks.push_back({true, p[s + 3] == '!', p.substr(s + 4, tail_end - 1 - (s + 4))});
    p.erase(s, tail_end - s);
  }
  out.main = std::move(p);
  return out;
}

const std::map<std::string_view, std::string_view>& PosixClasses() {
  static const std::map<std::string_view, std::string_view> kMap = {
      {"Lower", "lower"}, {"Upper", "upper"}, {"ASCII", "ascii"}, {"Alpha", "alpha"},
      {"Digit", "digit"}, {"Alnum", "alnum"}, {"Punct", "punct"}, {"Graph", "graph"},
      {"Print", "print"}, {"Blank", "blank"}, {"Cntrl", "cntrl"}, {"XDigit", "xdigit"},
      {"Space", "space"},
  };
  return kMap;
}

void AppendCodePoint(std::string& out, uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\x{%X}", static_cast<unsigned>(cp));
  out += buf;
}

// `atom` repeated min to max times (max absent: no upper bound), in RE2 syntax. RE2 refuses counts
// over 1000, which Java allows ("[\\S]{1,2048}"). `length_bound` is the most code points a value
// checked against the pattern may have (its shapes' max length).
//  - When max >= length_bound, the upper count can never be what stops a match: every string of at
//    most length_bound code points that X{min,} matches, X{min,max} matches too (a repetition
//    that consumes nothing can be dropped, and each other one consumes a code point). So the
//    count is written X{min,}, exactly, at no cost.
//  - Otherwise the count is split into repetitions of at most 1000 each, which match exactly the
//    same strings (X{1,2048} is X{1} X{0,1000} X{0,1000} X{0,47}); RE2 then holds one copy of X per
//    count in its program, so this is kept for the patterns no length bounds.
std::string Repeat(const std::string& atom, size_t min, std::optional<size_t> max,
                   std::optional<size_t> length_bound) {
  constexpr size_t kRe2MaxRepeat = 1000;
  if (max && *max > kRe2MaxRepeat && length_bound && *max >= *length_bound) max.reset();
  auto count = [](size_t lo, std::optional<size_t> hi) {
    if (!hi) return "{" + std::to_string(lo) + ",}";
    if (*hi == lo) return "{" + std::to_string(lo) + "}";
    return "{" + std::to_string(lo) + "," + std::to_string(*hi) + "}";
  };
  if (min <= kRe2MaxRepeat && (!max || *max <= kRe2MaxRepeat)) return atom + count(min, max);
  const std::string group = "(?:" + atom + ")";
  std::string out;
  size_t left = min;
  for (; left > kRe2MaxRepeat; left -= kRe2MaxRepeat) out += group + count(kRe2MaxRepeat, kRe2MaxRepeat);
  if (!max) return out + group + count(left, std::nullopt);
  if (left > 0) out += group + count(left, left);
  size_t optional = *max - min;
  for (; optional > kRe2MaxRepeat; optional -= kRe2MaxRepeat) out += group + count(0, kRe2MaxRepeat);
  if (optional > 0) out += group + count(0, optional);
  return out.empty() ? "(?:)" : out;
}

// Rewrites Java-only syntax into RE2 syntax. nullopt when a construct has no RE2 equivalent.
std::optional<std::string> JavaToRe2(const std::string& p, std::optional<size_t> length_bound) {
  std::string out;
  size_t n = p.size();
  std::vector<bool> class_stack;  // per open '[': whether its brackets were emitted
  bool after_quantifier = false;
  size_t atom_start = 0;            // where the last top-level atom begins in `out`
  std::vector<size_t> group_starts;  // where each open group begins in `out`
  for (size_t i = 0; i < n;) {
    char c = p[i];
    bool in_class = !class_stack.empty();
    if (!in_class && c != '{' && c != '*' && c != '+' && c != '?' && c != ')' && c != '|') {
      atom_start = out.size();
    }
    if (c == '\\') {
      after_quantifier = false;
      if (i + 1 >= n) return std::nullopt;
      char d = p[i + 1];
      if (d == 'p' || d == 'P') {
        std::string name;
        size_t next;
        if (i + 2 < n && p[i + 2] == '{') {
          size_t e = p.find('}', i + 3);
          if (e == std::string::npos) return std::nullopt;
          name = p.substr(i + 3, e - (i + 3));
          next = e + 1;
        } else if (i + 2 < n) {
          name = p.substr(i + 2, 1);
          next = i + 3;
        } else {
          return std::nullopt;
        }
        if (name.rfind("java", 0) == 0) return std::nullopt;
        std::string bare = name.rfind("Is", 0) == 0 ? name.substr(2) : name;
        auto posix = PosixClasses().find(bare);
        if (posix != PosixClasses().end()) {
          std::string cls = "[:" + std::string(d == 'P' ? "^" : "") + std::string(posix->second) + ":]";
          out += in_class ? cls : "[" + cls + "]";
        } else {
          out += '\\';
          out += d;
          out += '{';
          out += bare;
          out += '}';
        }
        i = next;
        continue;
      }
      if (d == 'u') {
        if (i + 6 > n || !std::all_of(p.begin() + i + 2, p.begin() + i + 6, IsHex)) return std::nullopt;
        uint32_t cp = std::stoul(p.substr(i + 2, 4), nullptr, 16);
        i += 6;
        if (cp >= 0xD800 && cp < 0xDC00 && i + 6 <= n && p[i] == '\\' && p[i + 1] == 'u' &&
            std::all_of(p.begin() + i + 2, p.begin() + i + 6, IsHex)) {
          uint32_t lo = std::stoul(p.substr(i + 2, 4), nullptr, 16);
          if (lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          }
        }
        if (cp >= 0xD800 && cp < 0xE000) return std::nullopt;  // a lone surrogate
        AppendCodePoint(out, cp);
        continue;
      }
      if (d == 'Z') {
        out += "\\z";
        i += 2;
        continue;
      }
      size_t e = SkipEscape(p, i);
      out.append(p, i, e - i);
      i = e;
      continue;
    }
    if (in_class) {
      if (c == '[') {  // Java class union: flatten a non-negated nested class
        if (i + 1 < n && p[i + 1] == '^') return std::nullopt;
        class_stack.push_back(false);
      } else if (c == ']') {
        if (class_stack.back()) out += ']';
        class_stack.pop_back();
      } else if (c == '&' && i + 1 < n && p[i + 1] == '&') {
        return std::nullopt;  // class intersection
      } else {
        out += c;
      }
      ++i;
      continue;
    }
    switch (c) {
      case '[':
        class_stack.push_back(true);
        out += '[';
        ++i;
        if (i < n && p[i] == '^') out += p[i++];
        after_quantifier = false;
        continue;
      case '(':
        after_quantifier = false;
        group_starts.push_back(out.size());
        if (p.compare(i, 3, "(?>") == 0) {  // atomic group: same matches for a full match
          out += "(?:";
          i += 3;
        } else if (p.compare(i, 3, "(?<") == 0 && i + 3 < n && p[i + 3] != '=' && p[i + 3] != '!') {
          out += "(?P<";  // named group
          i += 3;
        } else {
          out += '(';
          ++i;
        }
        continue;
      case '*':
      case '+':
      case '?':
        if (after_quantifier && c == '+') {  // possessive: drop
          after_quantifier = false;
        } else if (after_quantifier && c == '?') {  // lazy
          out += c;
          after_quantifier = false;
        } else {
          out += c;
          after_quantifier = true;
        }
        ++i;
        continue;
      case '{': {
        size_t j = i + 1;
        auto digits = [&](size_t& k) {
          size_t b = k;
          while (k < n && std::isdigit(static_cast<unsigned char>(p[k]))) ++k;
          return p.substr(b, k - b);
        };
        std::string lo = digits(j), hi;
        bool comma = false;
        if (j < n && p[j] == ',') {
          comma = true;
          ++j;
          hi = digits(j);
        }
        if (lo.empty() || j >= n || p[j] != '}') {  // not a repetition: a literal brace
          atom_start = out.size();
          out += "\\{";
          ++i;
          after_quantifier = false;
          continue;
        }
        if (lo.size() > 6 || hi.size() > 6) return std::nullopt;
        size_t min = std::stoul(lo);
        std::optional<size_t> max;
        if (!comma) max = min;
        if (comma && !hi.empty()) max = std::stoul(hi);
        if (max && *max < min) return std::nullopt;
        std::string atom = out.substr(atom_start);
        out.erase(atom_start);
        out += Repeat(atom, min, max, length_bound);
        i = j + 1;
        after_quantifier = true;
        continue;
      }
      default:
        if (c == ')' && !group_starts.empty()) {
          atom_start = group_starts.back();
          group_starts.pop_back();
        }
        out += c;
        ++i;
        after_quantifier = false;
    }
  }
  if (!class_stack.empty()) return std::nullopt;
  return out;
}

std::unique_ptr<RE2> CompileRe2(const std::string& re2_text) {
  auto re = std::make_unique<RE2>(re2::StringPiece(re2_text.data(), re2_text.size()),
                                  PatternOptions());
  if (re->error_code() == RE2::ErrorPatternTooLarge) {
    // A wide Unicode class repeated a thousand times over ("[\p{L}\p{M}...]{0,1024}") outgrows
    // RE2's default 8 MiB program budget; such a pattern gets a larger one.
    RE2::Options big = PatternOptions();
    big.set_max_mem(int64_t{64} << 20);
    re = std::make_unique<RE2>(re2::StringPiece(re2_text.data(), re2_text.size()), big);
  }
  if (!re->ok()) return nullptr;
  return re;
}

// Model patterns that use what RE2 lacks where no general rewrite reaches, each with a Java pattern
// that matches exactly the same strings and that the translation above handles. Keyed by the
// pattern as the model writes it.
const std::map<std::string_view, std::string_view>& EquivalentPatterns() {
  static const std::map<std::string_view, std::string_view> kEquivalents = {
      // SageMaker's model-package name or ARN with an optional version. "(?<!-)" in the middle
      // says the name (1 to 63 characters, the first alphanumeric) does not end in '-'; a name of
      // one character is alphanumeric already, a longer one ends in an alphanumeric character.
      {R"((arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:[a-z\-]*\/)?([a-zA-Z0-9]([a-zA-Z0-9-]){0,62})(?<!-)(\/[0-9]{1,9})?)",
       R"((arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:[a-z\-]*\/)?([a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)(\/[0-9]{1,9})?)"},
  };
  return kEquivalents;
}

// `length_bound`: see Repeat().
CompiledPattern CompilePattern(const std::string& source, std::optional<size_t> length_bound) {
  CompiledPattern cp;
  cp.source = source;
  try {
    auto equivalent = EquivalentPatterns().find(source);
    auto peeled = PeelLookarounds(equivalent == EquivalentPatterns().end() ? source
                                                                           : std::string(equivalent->second));
    if (!peeled) return cp;
    auto main = JavaToRe2(peeled->main, length_bound);
    if (!main) return cp;
    cp.main = CompileRe2(*main);
    if (!cp.main) return cp;
    for (const auto& look : peeled->looks) {
      auto body = JavaToRe2(look.body, length_bound);
      if (!body) return cp;
      Assertion a;
      a.lookbehind = look.lookbehind;
      a.negate = look.negate;
      a.re = CompileRe2(look.lookbehind ? "(?:" + *body + ")$" : *body);
      if (!a.re) return cp;
      cp.assertions.push_back(std::move(a));
    }
    cp.ok = true;
  } catch (const std::exception&) {
    cp.ok = false;
  }
  if (!cp.ok) {
    cp.main.reset();
    cp.assertions.clear();
  }
  return cp;
}

// ---------------------------------------------------------------------------------------------
// Messages

size_t CodePoints(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string Truncate(std::string s) {
  size_t count = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && count++ == kMaxShownValue) {
      s.resize(i);
      s += "...";
      break;
    }
  }
  return s;
}

// A value as a message quotes it: its compact JSON (json::dump(-1) with invalid UTF-8 replaced),
// cut after kMaxShownValue code points. Written without recursion and only as far as the cut, so
// neither the nesting nor the size of what a caller sent bounds the stack or the work: dump()
// recurses once per level, and a body nested 65,000 deep overflowed the stack here.
std::string Show(const json& v) {
  if (v.is_string()) return Truncate(v.get<std::string>());
  auto scalar = [](const json& x) { return x.dump(-1, ' ', false, json::error_handler_t::replace); };
  struct Open {
    const json* node;
    json::const_iterator next;
  };
  std::vector<Open> open;  // the arrays and objects written up to their next element
  std::string out;
  auto write = [&](const json& x) {
    if (x.is_structured()) {
      out += x.is_object() ? '{' : '[';
      open.push_back({&x, x.cbegin()});
    } else {
      out += scalar(x);
    }
  };
  write(v);
  // More than 4 bytes per code point cannot be: past that, Truncate cuts what is written already.
  while (!open.empty() && out.size() <= 4 * kMaxShownValue) {
    Open& top = open.back();
    if (top.next == top.node->cend()) {
      out += top.node->is_object() ? '}' : ']';
      open.pop_back();
      continue;
    }
    if (top.next != top.node->cbegin()) out += ',';
    if (top.node->is_object()) {
      out += scalar(json(top.next.key()));
      out += ':';
    }
    const json& item = *top.next++;
    write(item);  // may grow `open`: `top` is not used past here
  }
  return Truncate(std::move(out));
}

std::string JoinPath(std::string_view path, std::string_view name) {
  std::string out(path);
  if (!out.empty()) out += '.';
  out += name;
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The model

struct ServiceModel::Impl {
  std::string protocol, target_prefix, signing_name, api_version;
  std::vector<Shape> shapes;
  std::map<std::string, size_t, std::less<>> shape_index;
  std::deque<Operation> operations;  // stable addresses
  std::map<std::string, const Operation*, std::less<>> operation_index;
  std::vector<CompiledPattern> patterns;
  std::map<std::string, int, std::less<>> pattern_index;
  std::vector<std::string> unsupported;

  size_t FindShape(std::string_view name) const {
    auto it = shape_index.find(name);
    return it == shape_index.end() ? kNoShape : it->second;
  }
};

namespace {

class Validator {
 public:
  // `bound`: the members bound to the URI, query string or headers (see ValidateInput), or null.
  Validator(const std::vector<Shape>& shapes, const std::vector<CompiledPattern>& patterns,
            const json* bound = nullptr)
      : shapes_(shapes), patterns_(patterns), bound_(bound) {}

  void Check(size_t shape_id, const json& v, const std::string& path, int depth, bool body_only,
             bool jsonvalue = false) {
    const Shape& s = shapes_[shape_id];
    if (depth > kMaxDepth) {
      Fail(&v, path, s, "not be nested more than " + std::to_string(kMaxDepth) + " levels deep");
      return;
    }
    switch (s.type) {
      case Type::kStructure: CheckStructure(s, v, path, depth, body_only); return;
      case Type::kList: CheckList(s, v, path, depth); return;
      case Type::kMap: CheckMap(s, v, path, depth); return;
      case Type::kString:
        if (jsonvalue && !v.is_string()) return;  // a JSON document sent inline
        if (!v.is_string()) return TypeError(s, v, path);
        CheckString(s, v, path);
        return;
      case Type::kInteger:
      case Type::kLong: CheckInteger(s, v, path); return;
      case Type::kDouble:
      case Type::kFloat:
        if (!v.is_number()) return TypeError(s, v, path);
        CheckRange(s, v, path, v.get<double>(), std::nullopt);
        return;
      case Type::kBoolean:
        if (!v.is_boolean()) TypeError(s, v, path);
        return;
      case Type::kTimestamp:
        if (!v.is_number() && !v.is_string()) TypeError(s, v, path);
        return;
      case Type::kBlob: CheckBlob(s, v, path); return;
      case Type::kOther: return;
    }
  }

  Status Result() const {
    if (errors_.empty()) return Status::Ok();
    std::string msg = std::to_string(errors_.size()) + " validation error" +
                      (errors_.size() == 1 ? "" : "s") + " detected: ";
    size_t listed = std::min(errors_.size(), kMaxListedErrors);
    for (size_t i = 0; i < listed; ++i) {
      if (i) msg += "; ";
      msg += errors_[i];
    }
    if (listed < errors_.size()) msg += "; ...";
    return InvalidArgument(std::move(msg));
  }

 private:
  void Fail(const json* v, const std::string& path, const Shape& s, const std::string& rule) {
    std::string e = "Value ";
    if (v == nullptr || v->is_null()) {
      e += "null";
    } else {
      e += '\'';
      e += s.sensitive ? std::string("***") : Show(*v);
      e += '\'';
    }
    e += " at '" + path + "' failed to satisfy constraint: Member must " + rule;
    errors_.push_back(std::move(e));
  }

  void TypeError(const Shape& s, const json& v, const std::string& path) {
    Fail(&v, path, s, "be of type " + s.type_name);
  }

  void CheckStructure(const Shape& s, const json& v, const std::string& path, int depth,
                      bool body_only) {
    if (!v.is_object()) return TypeError(s, v, path);
    int set = 0;
    for (const Member& m : s.members) {
      // The top level's URI, query and header members are looked up in bound_, not the body.
      const json* from = &v;
      if (body_only && !m.in_body) {
        if (bound_ == nullptr || !bound_->is_object()) continue;
        from = bound_;
      }
      auto it = from->find(m.name);
      std::string member_path = JoinPath(path, m.name);
      if (it == from->end() || it->is_null()) {
        if (m.required) Fail(nullptr, member_path, shapes_[m.shape], "not be null");
        continue;
      }
      ++set;
      Check(m.shape, *it, member_path, depth + 1, false, m.jsonvalue);
    }
    if (s.is_union && set != 1) Fail(&v, path, s, "have exactly one member set");
  }

  void CheckLength(const Shape& s, const json& v, const std::string& path, size_t length) {
    if (s.min && (s.min->is_int ? int64_t(length) < s.min->i : double(length) < s.min->d)) {
      Fail(&v, path, s, "have length greater than or equal to " + s.min->text);
    }
    if (s.max && (s.max->is_int ? int64_t(length) > s.max->i : double(length) > s.max->d)) {
      Fail(&v, path, s, "have length less than or equal to " + s.max->text);
    }
  }

  void CheckList(const Shape& s, const json& v, const std::string& path, int depth) {
    if (!v.is_array()) return TypeError(s, v, path);
    CheckLength(s, v, path, v.size());
    if (s.member == kNoShape) return;
    for (size_t i = 0; i < v.size(); ++i) {
      std::string item_path = path + "[" + std::to_string(i) + "]";
      if (v[i].is_null()) {
        Fail(nullptr, item_path, shapes_[s.member], "not be null");
      } else {
        Check(s.member, v[i], item_path, depth + 1, false);
      }
    }
  }

  void CheckMap(const Shape& s, const json& v, const std::string& path, int depth) {
    if (!v.is_object()) return TypeError(s, v, path);
    CheckLength(s, v, path, v.size());
    for (auto it = v.begin(); it != v.end(); ++it) {
      std::string entry_path = JoinPath(path, it.key());
      if (s.key != kNoShape) Check(s.key, json(it.key()), entry_path, depth + 1, false);
      if (s.value == kNoShape) continue;
      if (it->is_null()) {
        Fail(nullptr, entry_path, shapes_[s.value], "not be null");
      } else {
        Check(s.value, *it, entry_path, depth + 1, false);
      }
    }
  }

  void CheckString(const Shape& s, const json& v, const std::string& path) {
    const std::string& str = v.get_ref<const std::string&>();
    if (s.min || s.max) CheckLength(s, v, path, CodePoints(str));
    if (!s.enum_values.empty() && !s.enum_values.count(str)) {
      Fail(&v, path, s, "satisfy enum value set: " + s.enum_text);
    }
    if (s.pattern_id >= 0) {
      const CompiledPattern& p = patterns_[s.pattern_id];
      if (p.ok && !p.Matches(str)) {
        Fail(&v, path, s, "satisfy regular expression pattern: " + s.pattern);
      }
    }
  }

  // A blob travels base64-encoded in the JSON protocols; its length is that of the decoded bytes.
  void CheckBlob(const Shape& s, const json& v, const std::string& path) {
    if (!v.is_string()) return TypeError(s, v, path);
    const std::string& text = v.get_ref<const std::string&>();
    auto base64 = [](unsigned char c) { return std::isalnum(c) || c == '+' || c == '/'; };
    size_t pad = 0;
    while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
    if (text.size() % 4 != 0 ||
        !std::all_of(text.begin(), text.end() - static_cast<std::ptrdiff_t>(pad),
                     [&](char c) { return base64(static_cast<unsigned char>(c)); })) {
      return Fail(&v, path, s, "be base64-encoded binary data");
    }
    if (s.min || s.max) CheckLength(s, v, path, text.size() / 4 * 3 - pad);
  }

  void CheckInteger(const Shape& s, const json& v, const std::string& path) {
    if (!v.is_number_integer()) return TypeError(s, v, path);
    int64_t x;
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > uint64_t(std::numeric_limits<int64_t>::max())) return TypeError(s, v, path);
      x = static_cast<int64_t>(u);
    } else {
      x = v.get<int64_t>();
    }
    if (s.type == Type::kInteger &&
        (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())) {
      return TypeError(s, v, path);
    }
    CheckRange(s, v, path, static_cast<double>(x), x);
  }

  void CheckRange(const Shape& s, const json& v, const std::string& path, double d,
                  std::optional<int64_t> i) {
    auto below = [&](const Bound& b) { return (i && b.is_int) ? *i < b.i : d < b.d; };
    auto above = [&](const Bound& b) { return (i && b.is_int) ? *i > b.i : d > b.d; };
    if (s.min && below(*s.min)) {
      Fail(&v, path, s, "have value greater than or equal to " + s.min->text);
    }
    if (s.max && above(*s.max)) {
      Fail(&v, path, s, "have value less than or equal to " + s.max->text);
    }
  }

  const std::vector<Shape>& shapes_;
  const std::vector<CompiledPattern>& patterns_;
  const json* bound_;
  std::vector<std::string> errors_;
};

std::string StringField(const ojson& obj, const char* key) {
  auto it = obj.find(key);
  return (it != obj.end() && it->is_string()) ? it->get<std::string>() : std::string();
}

const ServiceModel* LoadEmbedded(const char* what, const char* begin, const char* end,
                                 std::span<const ServiceModel::DocumentedRule> rules = {}) {
  auto parsed = ServiceModel::Parse(std::string_view(begin, static_cast<size_t>(end - begin)), rules);
  if (!parsed.ok()) {
    std::fprintf(stderr, "trainyard: embedded %s model is broken: %s\n", what,
                 parsed.status().message().c_str());
    std::abort();
  }
  return std::move(parsed).value().release();  // lives for the whole process
}

}  // namespace

ServiceModel::ServiceModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ServiceModel::~ServiceModel() = default;

StatusOr<std::unique_ptr<ServiceModel>> ServiceModel::Parse(std::string_view json_text,
                                                            std::span<const DocumentedRule> rules) {
  try {
    ojson doc = ojson::parse(json_text.begin(), json_text.end(), nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
      return InvalidArgument("service model: not a JSON object");
    }
    auto impl = std::make_unique<Impl>();
    auto meta = doc.find("metadata");
    auto ops = doc.find("operations");
    auto shapes = doc.find("shapes");
    if (meta == doc.end() || !meta->is_object() || ops == doc.end() || !ops->is_object() ||
        shapes == doc.end() || !shapes->is_object()) {
      return InvalidArgument("service model: metadata, operations and shapes are required");
    }
    impl->protocol = StringField(*meta, "protocol");
    impl->target_prefix = StringField(*meta, "targetPrefix");
    impl->signing_name = StringField(*meta, "signingName");
    if (impl->signing_name.empty()) impl->signing_name = StringField(*meta, "endpointPrefix");
    impl->api_version = StringField(*meta, "apiVersion");

    // Pass 1: names, so that references can be resolved in any order.
    for (auto it = shapes->begin(); it != shapes->end(); ++it) {
      if (!it->is_object()) return InvalidArgument("service model: shape " + it.key() + " is not an object");
      impl->shape_index.emplace(it.key(), impl->shapes.size());
      Shape s;
      s.name = it.key();
      impl->shapes.push_back(std::move(s));
    }
    auto resolve = [&](const ojson& ref, const std::string& where) -> StatusOr<size_t> {
      if (!ref.is_object() || !ref.contains("shape") || !ref["shape"].is_string()) {
        return InvalidArgument("service model: bad shape reference in " + where);
      }
      size_t id = impl->FindShape(ref["shape"].get_ref<const std::string&>());
      if (id == kNoShape) {
        return InvalidArgument("service model: " + where + " refers to undefined shape " +
                               ref["shape"].get<std::string>());
      }
      return id;
    };

    // Pass 2: contents.
    for (auto it = shapes->begin(); it != shapes->end(); ++it) {
      const ojson& js = *it;
      Shape& s = impl->shapes[impl->shape_index.at(it.key())];
      s.type_name = StringField(js, "type");
      s.type = TypeFromName(s.type_name);
      s.is_union = js.value("union", false);
      s.sensitive = js.value("sensitive", false);
      s.min = ReadBound(js, "min");
      s.max = ReadBound(js, "max");
      s.pattern = StringField(js, "pattern");
      if (auto e = js.find("enum"); e != js.end() && e->is_array()) {
        s.enum_text = "[";
        for (const auto& v : *e) {
          if (!v.is_string()) continue;
          if (s.enum_text.size() > 1) s.enum_text += ", ";
          s.enum_text += v.get<std::string>();
          s.enum_values.insert(v.get<std::string>());
        }
        s.enum_text += "]";
      }
      for (const char* ref : {"member", "key", "value"}) {
        auto r = js.find(ref);
        if (r == js.end()) continue;
        auto id = resolve(*r, s.name + "." + ref);
        if (!id.ok()) return id.status();
        (ref[0] == 'm' ? s.member : ref[0] == 'k' ? s.key : s.value) = *id;
      }
      std::set<std::string> required;
      if (auto r = js.find("required"); r != js.end() && r->is_array()) {
        for (const auto& name : *r) {
          if (name.is_string()) required.insert(name.get<std::string>());
        }
      }
      if (auto ms = js.find("members"); ms != js.end() && ms->is_object()) {
        for (auto m = ms->begin(); m != ms->end(); ++m) {
          auto id = resolve(*m, s.name + "." + m.key());
          if (!id.ok()) return id.status();
          Member member;
          std::string location = StringField(*m, "location");
          std::string location_name = StringField(*m, "locationName");
          // In the json protocols the body key is locationName when one is given.
          member.name = (location.empty() && !location_name.empty()) ? location_name : m.key();
          member.shape = *id;
          member.required = required.count(m.key()) > 0;
          member.in_body = location.empty() || location == "body";
          member.location = location;
          member.location_name = location_name.empty() ? m.key() : location_name;
          member.jsonvalue = m->value("jsonvalue", false);
          s.members.push_back(std::move(member));
        }
      }
    }

    // Rules stated in prose: the member gets its own copy of its shape (shapes such as "String"
    // are shared by hundreds of members) with the rule's traits added.
    for (const DocumentedRule& rule : rules) {
      size_t dot = rule.member.find('.');
      size_t owner = dot == std::string_view::npos ? kNoShape : impl->FindShape(rule.member.substr(0, dot));
      Member* member = nullptr;
      if (owner != kNoShape) {
        for (Member& m : impl->shapes[owner].members) {
          if (m.name == rule.member.substr(dot + 1)) member = &m;
        }
      }
      if (member == nullptr) {
        return InvalidArgument("service model: a documented rule names " + std::string(rule.member) +
                               ", which the model does not have");
      }
      Shape copy = impl->shapes[member->shape];
      copy.name = std::string(rule.member);
      auto bound = [](double d) {
        Bound b;
        b.d = d;
        b.is_int = d == std::floor(d) && std::fabs(d) < 1e15;
        b.i = b.is_int ? static_cast<int64_t>(d) : 0;
        b.text = FormatDouble(d);
        return b;
      };
      if (rule.min) copy.min = bound(*rule.min);
      if (rule.max) copy.max = bound(*rule.max);
      if (!rule.pattern.empty()) copy.pattern = std::string(rule.pattern);
      member->shape = impl->shapes.size();  // `member` is not used past the push_back
      impl->shapes.push_back(std::move(copy));
    }

    // Patterns: each distinct one compiled once, now, so that validation is lock-free. A pattern's
    // length bound is the largest max length of the shapes that use it (none if one has none).
    std::map<std::string, std::optional<size_t>, std::less<>> length_bounds;
    for (const Shape& s : impl->shapes) {
      if (s.pattern.empty()) continue;
      std::optional<size_t> bound;
      if (s.max && s.max->is_int && s.max->i >= 0) bound = static_cast<size_t>(s.max->i);
      auto [it, first] = length_bounds.emplace(s.pattern, bound);
      if (!first && it->second) it->second = bound ? std::max(*it->second, *bound) : bound;
    }
    for (Shape& s : impl->shapes) {
      if (s.pattern.empty()) continue;
      auto [pit, inserted] = impl->pattern_index.emplace(s.pattern, int(impl->patterns.size()));
      if (inserted) {
        impl->patterns.push_back(CompilePattern(s.pattern, length_bounds.at(s.pattern)));
        if (!impl->patterns.back().ok) impl->unsupported.push_back(s.pattern);
      }
      s.pattern_id = pit->second;
    }
    std::sort(impl->unsupported.begin(), impl->unsupported.end());

    for (auto it = ops->begin(); it != ops->end(); ++it) {
      const ojson& jo = *it;
      if (!jo.is_object()) return InvalidArgument("service model: operation " + it.key() + " is not an object");
      Operation op;
      op.name = it.key();
      if (auto h = jo.find("http"); h != jo.end() && h->is_object()) {
        op.http_method = StringField(*h, "method");
        op.request_uri = StringField(*h, "requestUri");
      }
      using Ref = std::pair<const char*, std::string*>;
      for (auto [key, field] : {Ref{"input", &op.input_shape}, Ref{"output", &op.output_shape}}) {
        auto r = jo.find(key);
        if (r == jo.end()) continue;
        auto id = resolve(*r, op.name + "." + key);
        if (!id.ok()) return id.status();
        *field = impl->shapes[*id].name;
      }
      impl->operations.push_back(std::move(op));
      impl->operation_index.emplace(impl->operations.back().name, &impl->operations.back());
    }
    return std::unique_ptr<ServiceModel>(new ServiceModel(std::move(impl)));
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("service model: ") + e.what());
  }
}

std::span<const ServiceModel::DocumentedRule> ServiceModel::BatchDocumentedRules() {
  // From the Batch API reference's member documentation (botocore's Batch model carries it; the
  // embedded copy has it stripped). Names: "can be up to 128 characters long and can contain
  // letters, numbers, hyphens (-), and underscores (_)"; a job's name must also start with a
  // letter or digit, as SubmitJob's does. Only the rules that change what is accepted are here.
  static constexpr const char* kName = "[a-zA-Z0-9_-]+";
  static constexpr const char* kJobName = "[a-zA-Z0-9][a-zA-Z0-9_-]*";
  static const DocumentedRule kRules[] = {
      {"CreateServiceEnvironmentRequest.serviceEnvironmentName", 1, 128, kName},
      {"CreateJobQueueRequest.jobQueueName", 1, 128, kName},
      {"CreateSchedulingPolicyRequest.name", 1, 128, kName},
      {"CreateQuotaShareRequest.quotaShareName", 1, 128, kName},
      {"SubmitServiceJobRequest.jobName", 1, 128, kJobName},
      // "This value can be between 1 and 100."
      {"DescribeServiceEnvironmentsRequest.maxResults", 1, 100, ""},
      {"DescribeJobQueuesRequest.maxResults", 1, 100, ""},
      {"ListServiceJobsRequest.maxResults", 1, 100, ""},
      {"ListSchedulingPoliciesRequest.maxResults", 1, 100, ""},
      {"ListQuotaSharesRequest.maxResults", 1, 100, ""},
      // "A list of up to 100 queue names or ... ARN entries."
      {"DescribeJobQueuesRequest.jobQueues", std::nullopt, 100, ""},
      {"DescribeSchedulingPoliciesRequest.arns", std::nullopt, 100, ""},
      // "You can associate up to three compute environments with a job queue."
      {"CreateJobQueueRequest.computeEnvironmentOrder", std::nullopt, 3, ""},
      // "The minimum value is 600 (10 minutes) and the maximum value is 86,400 (24 hours)."
      {"JobStateTimeLimitAction.maxTimeSeconds", 600, 86400, ""},
      // "You can specify between 1 and 10 attempts."
      {"ServiceJobRetryStrategy.attempts", 1, 10, ""},
      // "The pattern can contain up to 512 characters"
      {"ServiceJobEvaluateOnExit.onStatusReason", std::nullopt, 512, ""},
      // "Valid values are integers between 0 and 9999." / "minimum ... 0 and the maximum ... 9999"
      {"SubmitServiceJobRequest.schedulingPriority", 0, 9999, ""},
      {"UpdateServiceJobRequest.schedulingPriority", 0, 9999, ""},
      // "The maximum supported value is 604800 (1 week)."; "The minimum value is 0 and the maximum
      // value is 99."; "The smallest supported value is 0.0001, and the largest ... 999.9999."
      {"FairsharePolicy.shareDecaySeconds", 0, 604800, ""},
      {"FairsharePolicy.computeReservation", 0, 99, ""},
      {"ShareAttributes.weightFactor", 0.0001, 999.9999, ""},
      // "The string is limited to 255 alphanumeric characters, and can be followed by an asterisk
      // (*)." The length is enforced; "alphanumeric" is not: SubmitServiceJob states no rule for the
      // shareIdentifier a job names, and identifiers with hyphens ("team-a") are common there.
      {"ShareAttributes.shareIdentifier", 1, std::nullopt, "[^*]{1,255}\\*?"},
  };
  return kRules;
}

const ServiceModel& ServiceModel::Batch() {
  static const ServiceModel* model =
      LoadEmbedded("Batch", ty_batch_model_begin, ty_batch_model_end, BatchDocumentedRules());
  return *model;
}

const ServiceModel& ServiceModel::SageMaker() {
  static const ServiceModel* model =
      LoadEmbedded("SageMaker", ty_sagemaker_model_begin, ty_sagemaker_model_end);
  return *model;
}

const ServiceModel::Operation* ServiceModel::FindOperation(std::string_view name) const {
  auto it = impl_->operation_index.find(name);
  return it == impl_->operation_index.end() ? nullptr : it->second;
}

namespace {

std::string_view StripQuery(std::string_view s) {
  size_t q = s.find('?');
  return q == std::string_view::npos ? s : s.substr(0, q);
}

std::vector<std::string_view> Segments(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t slash = s.find('/', start);
    out.push_back(s.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) return out;
    start = slash + 1;
  }
}

bool TemplateMatches(std::string_view uri, std::string_view path) {
  auto t = Segments(uri), p = Segments(path);
  for (size_t i = 0; i < t.size(); ++i) {
    std::string_view seg = t[i];
    bool param = seg.size() >= 2 && seg.front() == '{' && seg.back() == '}';
    if (param && seg.size() >= 3 && seg[seg.size() - 2] == '+' && i + 1 == t.size()) {
      return i < p.size() && !p[i].empty();  // greedy label: the rest of the path
    }
    if (i >= p.size()) return false;
    if (param ? p[i].empty() : seg != p[i]) return false;
  }
  return t.size() == p.size();
}

}  // namespace

const ServiceModel::Operation* ServiceModel::FindByHttp(std::string_view method,
                                                        std::string_view path) const {
  path = StripQuery(path);
  for (const Operation& op : impl_->operations) {
    if (op.http_method == method && StripQuery(op.request_uri) == path) return &op;
  }
  for (const Operation& op : impl_->operations) {
    std::string_view uri = StripQuery(op.request_uri);
    if (op.http_method == method && uri.find('{') != std::string_view::npos &&
        TemplateMatches(uri, path)) {
      return &op;
    }
  }
  return nullptr;
}

const std::string& ServiceModel::target_prefix() const { return impl_->target_prefix; }
const std::string& ServiceModel::signing_name() const { return impl_->signing_name; }
const std::string& ServiceModel::protocol() const { return impl_->protocol; }
const std::string& ServiceModel::api_version() const { return impl_->api_version; }

Status ServiceModel::ValidateInput(const Operation& op, const nlohmann::json& input,
                                   const nlohmann::json* bound) const {
  if (op.input_shape.empty()) return Status::Ok();
  size_t id = impl_->FindShape(op.input_shape);
  if (id == kNoShape) return Internal("operation " + op.name + " has no input shape " + op.input_shape);
  try {
    Validator v(impl_->shapes, impl_->patterns, bound);
    static const json kEmptyBody = json::object();
    v.Check(id, input.is_null() ? kEmptyBody : input, "", 0, /*body_only=*/true);
    return v.Result();
  } catch (const std::exception& e) {
    return Internal(std::string("validating ") + op.name + ": " + e.what());
  }
}

Status ServiceModel::ValidateShape(std::string_view shape_name, const nlohmann::json& value,
                                   std::string_view path) const {
  size_t id = impl_->FindShape(shape_name);
  if (id == kNoShape) return NotFound("no shape named " + std::string(shape_name));
  try {
    Validator v(impl_->shapes, impl_->patterns);
    v.Check(id, value, std::string(path), 0, /*body_only=*/false);
    return v.Result();
  } catch (const std::exception& e) {
    return Internal(std::string("validating ") + std::string(shape_name) + ": " + e.what());
  }
}

std::vector<std::string> ServiceModel::MemberNames(std::string_view structure_shape) const {
  std::vector<std::string> out;
  size_t id = impl_->FindShape(structure_shape);
  if (id == kNoShape) return out;
  for (const Member& m : impl_->shapes[id].members) out.push_back(m.name);
  return out;
}

std::vector<std::vector<std::string>> ServiceModel::MemberPathsEndingWith(std::string_view structure_shape,
                                                                         std::string_view suffix) const {
  std::vector<std::vector<std::string>> out;
  const size_t root = impl_->FindShape(structure_shape);
  if (root == kNoShape || impl_->shapes[root].type != Type::kStructure) return out;
  auto ends_with = [&](const std::string& name) {
    if (name.size() < suffix.size()) return false;
    for (size_t i = 0; i < suffix.size(); ++i) {
      char a = name[name.size() - suffix.size() + i], b = suffix[i];
      if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
      if (b >= 'A' && b <= 'Z') b = static_cast<char>(b - 'A' + 'a');
      if (a != b) return false;
    }
    return true;
  };
  std::vector<std::string> steps;
  std::vector<size_t> on_path;
  // Depth-first; a shape already on the path is not entered again (recursive shapes).
  std::function<void(size_t)> walk = [&](size_t id) {
    if (id == kNoShape || std::find(on_path.begin(), on_path.end(), id) != on_path.end()) return;
    const Shape& shape = impl_->shapes[id];
    on_path.push_back(id);
    if (shape.type == Type::kStructure) {
      for (const Member& m : shape.members) {
        steps.push_back(m.name);
        if (ends_with(m.name)) out.push_back(steps);
        walk(m.shape);
        steps.pop_back();
      }
    } else if (shape.type == Type::kList || shape.type == Type::kMap) {
      steps.push_back(shape.type == Type::kList ? "[]" : "{}");
      walk(shape.type == Type::kList ? shape.member : shape.value);
      steps.pop_back();
    }
    on_path.pop_back();
  };
  walk(root);
  return out;
}

std::vector<ServiceModel::HttpMember> ServiceModel::HttpMembers(std::string_view structure_shape) const {
  std::vector<HttpMember> out;
  size_t id = impl_->FindShape(structure_shape);
  if (id == kNoShape) return out;
  for (const Member& m : impl_->shapes[id].members)
    if (!m.in_body) out.push_back({m.name, m.location, m.location_name, impl_->shapes[m.shape].type == Type::kList});
  return out;
}

std::vector<std::string> ServiceModel::OperationNames() const {
  std::vector<std::string> out;
  for (const auto& [name, op] : impl_->operation_index) out.push_back(name);
  return out;
}

bool ServiceModel::HasShape(std::string_view shape_name) const {
  return impl_->FindShape(shape_name) != kNoShape;
}

std::vector<std::string> ServiceModel::PatternsFor(std::string_view operation_name) const {
  const Operation* op = FindOperation(operation_name);
  if (op == nullptr) return {};
  std::vector<bool> seen(impl_->shapes.size(), false);
  std::vector<size_t> stack;
  for (const std::string* root : {&op->input_shape, &op->output_shape}) {
    size_t id = impl_->FindShape(*root);
    if (id != kNoShape) stack.push_back(id);
  }
  std::set<std::string> patterns;
  while (!stack.empty()) {
    size_t id = stack.back();
    stack.pop_back();
    if (seen[id]) continue;
    seen[id] = true;
    const Shape& s = impl_->shapes[id];
    if (!s.pattern.empty()) patterns.insert(s.pattern);
    for (const Member& m : s.members) stack.push_back(m.shape);
    for (size_t ref : {s.member, s.key, s.value}) {
      if (ref != kNoShape) stack.push_back(ref);
    }
  }
  return {patterns.begin(), patterns.end()};
}

bool ServiceModel::PatternSupported(std::string_view pattern) const {
  auto it = impl_->pattern_index.find(pattern);
  return it != impl_->pattern_index.end() && impl_->patterns[it->second].ok;
}

const std::vector<std::string>& ServiceModel::unsupported_patterns() const {
  return impl_->unsupported;
}

}  // namespace ty::api
