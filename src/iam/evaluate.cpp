#include "iam/evaluate.h"

#include <cstring>

#include "iam/values.h"

namespace ty::iam {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    unsigned char x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
    if (x >= 'A' && x <= 'Z') x += 'a' - 'A';
    if (y >= 'A' && y <= 'Z') y += 'a' - 'A';
    if (x != y) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Builds a value from policy text with its `${...}` variables replaced from the request. Text
// written in the policy keeps its wildcards; a variable's value is literal, and so are `${*}`,
// `${?}` and `${$}` (IAM's escapes for those characters). `${key, 'default'}` falls back to the
// default when the request lacks the key. Answers false when a variable has no value: the
// caller's value then matches nothing.
class Substitution {
 public:
  explicit Substitution(const Request& r) : r_(r) {}

  bool Into(std::string_view text, Wildcard* out) {
    return Run(text, [&](std::string_view s, bool literal) {
      if (literal) {
        out->AppendLiteral(s);
      } else {
        out->AppendPattern(s);
      }
    });
  }
  bool Into(std::string_view text, std::string* out) {
    return Run(text, [&](std::string_view s, bool) { out->append(s); });
  }

 private:
  template <typename Sink>
  bool Run(std::string_view text, Sink sink) {
    while (!text.empty()) {
      size_t open = text.find("${");
      size_t close = open == std::string_view::npos ? open : text.find('}', open + 2);
      if (close == std::string_view::npos) {
        sink(text, false);
        return true;
      }
      sink(text.substr(0, open), false);
      std::string_view inner = Trim(text.substr(open + 2, close - open - 2));
      text.remove_prefix(close + 1);
      if (inner == "*" || inner == "?" || inner == "$") {
        sink(inner, true);
        continue;
      }
      std::string_view fallback;
      bool has_fallback = false;
      if (size_t comma = inner.find(','); comma != std::string_view::npos) {
        std::string_view d = Trim(inner.substr(comma + 1));
        if (d.size() < 2 || d.front() != '\'' || d.back() != '\'') return false;
        fallback = d.substr(1, d.size() - 2);
        has_fallback = true;
        inner = Trim(inner.substr(0, comma));
      }
      const std::vector<std::string>* v = r_.Find(inner);
      if (v != nullptr && !v->empty()) {
        sink((*v)[0], true);
      } else if (has_fallback) {
        sink(fallback, true);
      } else {
        return false;
      }
    }
    return true;
  }

  const Request& r_;
};

bool Compare(Operator op, double have, double want) {
  switch (op) {
    case Operator::kNumericEquals: return have == want;
    case Operator::kNumericLessThan: return have < want;
    case Operator::kNumericLessThanEquals: return have <= want;
    case Operator::kNumericGreaterThan: return have > want;
    case Operator::kNumericGreaterThanEquals: return have >= want;
    default: return false;
  }
}

bool CompareDate(Operator op, int64_t have, int64_t want) {
  switch (op) {
    case Operator::kDateEquals: return have == want;
    case Operator::kDateLessThan: return have < want;
    case Operator::kDateLessThanEquals: return have <= want;
    case Operator::kDateGreaterThan: return have > want;
    case Operator::kDateGreaterThanEquals: return have >= want;
    default: return false;
  }
}

bool InNetwork(const unsigned char net[16], int bits, const unsigned char addr[16]) {
  int whole = bits / 8;
  if (std::memcmp(net, addr, static_cast<size_t>(whole)) != 0) return false;
  if (bits % 8 == 0) return true;
  unsigned char mask = static_cast<unsigned char>(0xff << (8 - bits % 8));
  return (net[whole] & mask) == (addr[whole] & mask);
}

class Evaluator {
 public:
  explicit Evaluator(const Request& r) : r_(r) {}

  bool Applies(const Statement& st) {
    bool action = false;
    for (const Pattern& p : st.actions) {
      if (p.compiled.Matches(r_.action, /*ignore_case=*/true)) {
        action = true;
        break;
      }
    }
    if (action == st.not_action) return false;
    if (st.trust) {
      if (!PrincipalMatches(st)) return false;
    } else {
      bool resource = false;
      for (const Pattern& p : st.resources) {
        if (ResourceMatches(p)) {
          resource = true;
          break;
        }
      }
      if (resource == st.not_resource) return false;
    }
    for (const Condition& c : st.conditions) {
      if (!Holds(c)) return false;
    }
    return true;
  }

 private:
  bool PrincipalMatches(const Statement& st) const {
    for (const std::string& p : st.principals) {
      if (p == "*") return true;
      for (const std::string& id : r_.principal_ids)
        if (id == p) return true;
    }
    return false;
  }

  bool ResourceMatches(const Pattern& p) {
    if (!p.has_variables) return p.compiled.MatchesArn(r_.resource);
    Wildcard w;
    return Substitution(r_).Into(p.text, &w) && w.MatchesArn(r_.resource);
  }

  // Whether the policy value `v` matches the request value `have` under the positive form of
  // the operator.
  bool MatchOne(const Condition& c, const ConditionValue& v, const std::string& have) {
    switch (c.op) {
      case Operator::kStringEquals:
      case Operator::kStringEqualsIgnoreCase: {
        std::string want;
        std::string_view w = v.text;
        if (v.has_variables) {
          if (!Substitution(r_).Into(v.text, &want)) return false;
          w = want;
        }
        return c.op == Operator::kStringEquals ? have == w : EqualsIgnoreCase(have, w);
      }
      case Operator::kStringLike:
      case Operator::kArnLike: {
        Wildcard built;
        const Wildcard* w = &v.pattern;
        if (v.has_variables) {
          if (!Substitution(r_).Into(v.text, &built)) return false;
          w = &built;
        }
        return c.op == Operator::kStringLike ? w->Matches(have) : w->MatchesArn(have);
      }
      case Operator::kBool:
        return (EqualsIgnoreCase(have, "true") && v.flag) || (EqualsIgnoreCase(have, "false") && !v.flag);
      case Operator::kNumericEquals:
      case Operator::kNumericLessThan:
      case Operator::kNumericLessThanEquals:
      case Operator::kNumericGreaterThan:
      case Operator::kNumericGreaterThanEquals: {
        double n;
        return ParseNumber(have, &n) && Compare(c.op, n, v.number);
      }
      case Operator::kDateEquals:
      case Operator::kDateLessThan:
      case Operator::kDateLessThanEquals:
      case Operator::kDateGreaterThan:
      case Operator::kDateGreaterThanEquals: {
        int64_t ms;
        return ParseDate(have, &ms) && CompareDate(c.op, ms, v.epoch_ms);
      }
      case Operator::kIpAddress: {
        unsigned char addr[16];
        int bits;
        return ParseCidr(have, addr, &bits) && InNetwork(v.address, v.prefix_bits, addr);
      }
      case Operator::kNull:
        return false;  // handled in Holds
    }
    return false;
  }

  // One request value against the condition: any policy value matches (OR), negated for the
  // Not operators.
  bool Satisfies(const Condition& c, const std::string& have) {
    bool any = false;
    for (const ConditionValue& v : c.values) {
      if (MatchOne(c, v, have)) {
        any = true;
        break;
      }
    }
    return any != c.negated;
  }

  bool Holds(const Condition& c) {
    const std::vector<std::string>* have = r_.Find(c.key);
    bool absent = have == nullptr || have->empty();
    if (c.op == Operator::kNull) {
      for (const ConditionValue& v : c.values) {
        if (v.flag == absent) return true;
      }
      return false;
    }
    if (absent) {
      if (c.if_exists) return true;
      switch (c.qualifier) {
        case SetQualifier::kForAnyValue: return false;
        case SetQualifier::kForAllValues: return true;
        // IAM: an absent key matches nothing, so a negated operator holds.
        case SetQualifier::kNone: return c.negated;
      }
    }
    if (c.qualifier == SetQualifier::kForAllValues) {
      for (const std::string& h : *have) {
        if (!Satisfies(c, h)) return false;
      }
      return true;
    }
    if (c.qualifier == SetQualifier::kNone && c.negated) {
      // A negated test of a key with several values holds when none of them matches.
      for (const std::string& h : *have) {
        if (!Satisfies(c, h)) return false;
      }
      return true;
    }
    for (const std::string& h : *have) {
      if (Satisfies(c, h)) return true;
    }
    return false;
  }

  const Request& r_;
};

}  // namespace

void Request::Set(std::string_view key, std::string value) {
  keys[Lower(key)] = std::vector<std::string>{std::move(value)};
}

void Request::Set(std::string_view key, std::vector<std::string> values) {
  keys[Lower(key)] = std::move(values);
}

void SetPrincipalKeys(Request* r, const PrincipalKeys& who) {
  r->principal = who.arn;
  r->Set("aws:PrincipalArn", who.principal_arn.empty() ? who.arn : who.principal_arn);
  if (!who.username.empty()) r->Set("aws:username", who.username);
  if (!who.user_id.empty()) r->Set("aws:userid", who.user_id);
  for (const auto& [k, v] : who.tags) r->Set("aws:PrincipalTag/" + k, v);
}

const std::vector<std::string>* Request::Find(std::string_view key) const {
  auto it = keys.find(key);
  if (it == keys.end()) {
    bool lower = true;
    for (char c : key) lower = lower && !(c >= 'A' && c <= 'Z');
    if (lower) return nullptr;
    it = keys.find(Lower(key));
    if (it == keys.end()) return nullptr;
  }
  return &it->second;
}

std::string_view Decision::sid() const {
  if (policy == nullptr || statement < 0) return {};
  return policy->statements[static_cast<size_t>(statement)].sid;
}

Decision Evaluate(const Request& request, std::span<const Policy* const> policies) {
  Decision allow;
  Evaluator ev(request);
  for (const Policy* policy : policies) {
    for (size_t i = 0; i < policy->statements.size(); ++i) {
      const Statement& st = policy->statements[i];
      // Once an Allow is known, only a Deny can change the outcome.
      if (st.effect == Effect::kAllow && allow.allowed()) continue;
      if (!ev.Applies(st)) continue;
      if (st.effect == Effect::kDeny) return {Outcome::kExplicitDeny, policy, static_cast<int>(i)};
      allow = {Outcome::kAllow, policy, static_cast<int>(i)};
    }
  }
  return allow;
}

std::string DenialMessage(const Request& request, const Decision& decision) {
  std::string m = "User: " + request.principal + " is not authorized to perform: " + request.action +
                  " on resource: " + request.resource;
  if (decision.outcome == Outcome::kExplicitDeny && decision.policy != nullptr) {
    m += " with an explicit deny in an identity-based policy";
    if (!decision.policy->name.empty()) m += ": " + decision.policy->name;
  } else {
    m += " because no identity-based policy allows the " + request.action + " action";
  }
  return m;
}

}  // namespace ty::iam
