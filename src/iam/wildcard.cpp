#include "iam/wildcard.h"

#include <array>

namespace ty::iam {
namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

// The first (or last) index of `v` in `s` at or after `from`, or kNone.
size_t Find(std::span<const int16_t> s, int16_t v, size_t from = 0) {
  for (size_t i = from; i < s.size(); ++i) {
    if (s[i] == v) return i;
  }
  return kNone;
}
size_t FindLast(std::span<const int16_t> s, int16_t v) {
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == v) return i;
  }
  return kNone;
}

inline unsigned char Lower(unsigned char c) { return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c; }

}  // namespace

void Wildcard::AppendPattern(std::string_view pattern) {
  for (char c : pattern) {
    if (c == '*') {
      // `**` is `*`: collapsing keeps the segments non-empty.
      if (chars_.empty() || chars_.back() != kStar) chars_.push_back(kStar);
    } else if (c == '?') {
      chars_.push_back(kOne);
    } else {
      chars_.push_back(static_cast<unsigned char>(c));
    }
  }
}

void Wildcard::AppendLiteral(std::string_view text) {
  for (char c : text) chars_.push_back(static_cast<unsigned char>(c));
}

bool Wildcard::Matches(std::string_view text, bool ignore_case) const {
  return MatchSpan(Span(chars_), text, ignore_case);
}

bool Wildcard::MatchSpan(Span p, std::string_view t, bool ignore_case) {
  auto same = [ignore_case](int16_t pc, char tc) {
    if (pc == kOne) return true;
    unsigned char u = static_cast<unsigned char>(tc);
    return pc == (ignore_case ? Lower(u) : u);
  };
  // Whether the literal run `seg` (no kStar) matches `t` at `at`.
  auto run_at = [&](Span seg, size_t at) {
    for (size_t i = 0; i < seg.size(); ++i) {
      if (!same(seg[i], t[at + i])) return false;
    }
    return true;
  };

  size_t first_star = Find(p, kStar);
  if (first_star == kNone) return p.size() == t.size() && run_at(p, 0);
  size_t last_star = FindLast(p, kStar);
  Span head = p.first(first_star);
  Span tail = p.subspan(last_star + 1);
  if (head.size() + tail.size() > t.size()) return false;
  if (!run_at(head, 0) || !run_at(tail, t.size() - tail.size())) return false;

  // The runs between the first and last star, each at its leftmost place in what is left.
  size_t pos = head.size();
  size_t end = t.size() - tail.size();
  size_t i = first_star + 1;
  while (i < last_star) {
    size_t next = Find(p, kStar, i);
    Span seg = p.subspan(i, next - i);
    i = next + 1;
    bool found = false;
    while (pos + seg.size() <= end) {
      if (run_at(seg, pos)) {
        found = true;
        break;
      }
      ++pos;
    }
    if (!found) return false;
    pos += seg.size();
  }
  return true;
}

bool Wildcard::MatchesArn(std::string_view arn) const {
  if (IsMatchAll()) return true;
  // Cut both sides into their six fields; the sixth runs to the end.
  std::array<Span, 6> pf;
  std::array<std::string_view, 6> tf;
  Span p(chars_);
  for (size_t f = 0; f < 5; ++f) {
    size_t pc = Find(p, static_cast<int16_t>(':'));
    size_t tc = arn.find(':');
    if (pc == kNone || tc == std::string_view::npos) return false;
    pf[f] = p.first(pc);
    tf[f] = arn.substr(0, tc);
    p = p.subspan(pc + 1);
    arn = arn.substr(tc + 1);
  }
  pf[5] = p;
  tf[5] = arn;
  for (size_t f = 0; f < 6; ++f) {
    if (!MatchSpan(pf[f], tf[f], /*ignore_case=*/false)) return false;
  }
  return true;
}

}  // namespace ty::iam
