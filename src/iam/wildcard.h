// Wildcard patterns as IAM writes them: `*` matches any run of characters (none included), `?`
// exactly one, every other character itself. Used for actions, ARN fields and the *Like
// condition operators.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ty::iam {

// A compiled pattern. Characters that came from a policy variable's value are literal even when
// they are `*` or `?` (AppendLiteral), so a user named `*` cannot widen a policy written for
// `${aws:username}`.
//
// Matching places each literal run between two `*` at its leftmost possible position and never
// revisits it (that is exact for `*`/`?` patterns: a later placement cannot help, since the
// `*` after a run absorbs whatever the earlier one skipped). The cost is at most
// |text| x the longest literal run, with no backtracking: `a*a*a*...*b` against a long run of
// `a` is linear in the text.
class Wildcard {
 public:
  Wildcard() = default;
  // Every `*` and `?` of `pattern` is a wildcard.
  explicit Wildcard(std::string_view pattern) { AppendPattern(pattern); }

  void AppendPattern(std::string_view pattern);
  void AppendLiteral(std::string_view text);

  // REQUIRES for ignore_case: the pattern was written in lower case (ASCII); `text` is compared
  // as if lowered.
  bool Matches(std::string_view text, bool ignore_case = false) const;

  // ARN matching (Resource, NotResource, ArnEquals, ArnLike): the pattern and `arn` are each cut
  // into six fields at their first five ':' (arn:partition:service:region:account:resource) and
  // matched field by field, so a wildcard does not cross into another field except within the
  // resource, which may itself contain ':'. The pattern `*` alone matches any ARN. Fewer than six
  // fields on either side: no match.
  bool MatchesArn(std::string_view arn) const;

  bool IsMatchAll() const { return chars_.size() == 1 && chars_[0] == kStar; }
  size_t size() const { return chars_.size(); }

 private:
  // Byte values are 0..255; the two wildcards are kept apart from every byte.
  static constexpr int16_t kStar = 256;
  static constexpr int16_t kOne = 257;
  using Span = std::span<const int16_t>;

  static bool MatchSpan(Span pattern, std::string_view text, bool ignore_case);

  std::vector<int16_t> chars_;
};

}  // namespace ty::iam
