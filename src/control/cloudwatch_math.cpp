#include "control/cloudwatch_math.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <deque>
#include <functional>
#include <optional>
#include <variant>

namespace ty::control {

namespace {

// An array of series. METRICS() points at the queries' own series, never copying them; a series
// computed here is owned (in a deque, where adding one moves none, and which a move of the List
// does not move either, so the pointers stay valid).
struct List {
  std::deque<CwTimeSeries> owned;
  std::vector<const CwTimeSeries*> items;

  void Own(CwTimeSeries s) {
    owned.push_back(std::move(s));
    items.push_back(&owned.back());
  }
};
using Value = std::variant<double, CwTimeSeries, List>;

class Parser {
 public:
  Parser(std::string_view text, const std::map<std::string, CwTimeSeries>& vars, const std::vector<std::string>& metric_ids,
         const std::vector<EpochMs>& grid)
      : text_(text), vars_(vars), metric_ids_(metric_ids), grid_(grid) {}

  StatusOr<Value> Parse() {
    auto v = Sum();
    if (!v.ok()) return v;
    Skip();
    if (pos_ != text_.size()) return Error("unexpected '" + std::string(1, text_[pos_]) + "'");
    return v;
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("Expression '" + std::string(text_.substr(0, 200)) + "' at position " + std::to_string(pos_ + 1) +
                           ": " + what);
  }
  void Skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Eat(char c) {
    Skip();
    if (pos_ < text_.size() && text_[pos_] == c) { ++pos_; return true; }
    return false;
  }
  std::string Word() {
    Skip();
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  StatusOr<Value> Sum() {
    auto left = Product();
    if (!left.ok()) return left;
    Value v = std::move(*left);
    for (;;) {
      char op = Eat('+') ? '+' : Eat('-') ? '-' : 0;
      if (!op) return v;
      auto right = Product();
      if (!right.ok()) return right;
      auto r = Apply(op, v, *right);
      if (!r.ok()) return r;
      v = std::move(*r);
    }
  }
  StatusOr<Value> Product() {
    auto left = Unary();
    if (!left.ok()) return left;
    Value v = std::move(*left);
    for (;;) {
      char op = Eat('*') ? '*' : Eat('/') ? '/' : 0;
      if (!op) return v;
      auto right = Unary();
      if (!right.ok()) return right;
      auto r = Apply(op, v, *right);
      if (!r.ok()) return r;
      v = std::move(*r);
    }
  }
  StatusOr<Value> Unary() {
    if (Eat('-')) {
      auto v = Unary();
      if (!v.ok()) return v;
      return Apply('*', Value(-1.0), *v);
    }
    return Primary();
  }

  StatusOr<Value> Primary() {
    Skip();
    if (pos_ >= text_.size()) return Error("an operand is missing");
    const char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      auto v = Sum();
      if (!v.ok()) return v;
      if (!Eat(')')) return Error("')' expected");
      return v;
    }
    if (c == '[') {
      ++pos_;
      List list;
      do {
        auto v = Sum();
        if (!v.ok()) return v;
        if (auto* s = std::get_if<CwTimeSeries>(&*v)) list.Own(std::move(*s));
        else return Error("an array holds time series only");
      } while (Eat(','));
      if (!Eat(']')) return Error("']' expected");
      return Value(std::move(list));
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      double d = 0;
      auto [end, ec] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), d);
      if (ec != std::errc()) return Error("not a number");
      pos_ = static_cast<size_t>(end - text_.data());
      return Value(d);
    }
    const size_t at = pos_;
    std::string word = Word();
    if (word.empty()) return Error("unexpected '" + std::string(1, c) + "'");
    if (Eat('(')) return Call(word, at);
    auto it = vars_.find(word);
    if (it == vars_.end()) {
      pos_ = at;
      return Error("no query has the id " + word);
    }
    return Value(it->second);
  }

  StatusOr<Value> Call(const std::string& name, size_t at) {
    if (name == "METRICS") {
      if (!Eat(')')) return Error("METRICS() takes no arguments here");
      List list;
      for (const auto& id : metric_ids_)
        if (auto it = vars_.find(id); it != vars_.end()) list.items.push_back(&it->second);
      return Value(std::move(list));
    }
    if (name == "SUM" || name == "AVG" || name == "MIN" || name == "MAX") {
      auto arg = Sum();
      if (!arg.ok()) return arg;
      if (!Eat(')')) return Error("')' expected after " + name + "'s argument");
      return Reduce(name, std::move(*arg));
    }
    if (name == "FILL") {
      auto arg = Sum();
      if (!arg.ok()) return arg;
      if (!Eat(',')) return Error("FILL takes two arguments: FILL(series, value | REPEAT)");
      Skip();
      const size_t mark = pos_;
      bool repeat = Word() == "REPEAT";
      double with = 0;
      if (!repeat) {
        pos_ = mark;
        auto v = Sum();
        if (!v.ok()) return v;
        if (!std::holds_alternative<double>(*v)) return Error("FILL's second argument must be a number or REPEAT");
        with = std::get<double>(*v);
      }
      if (!Eat(')')) return Error("')' expected after FILL's arguments");
      auto fill = [&](const CwTimeSeries& s) {
        CwTimeSeries out = s;
        std::optional<double> last;
        for (EpochMs t : grid_) {
          if (auto it = s.find(t); it != s.end()) { last = it->second; continue; }
          if (!repeat) out[t] = with;
          else if (last) out[t] = *last;
        }
        return out;
      };
      if (auto* s = std::get_if<CwTimeSeries>(&*arg)) return Value(fill(*s));
      if (auto* l = std::get_if<List>(&*arg)) {
        List filled;
        for (const CwTimeSeries* s : l->items) filled.Own(fill(*s));
        return Value(std::move(filled));
      }
      return Error("FILL's first argument must be a time series");
    }
    pos_ = at;
    return Error("unknown function " + name + " (this server evaluates SUM, AVG, MIN, MAX, FILL and METRICS)");
  }

  // SUM, AVG, MIN or MAX of an array, point by point, in one pass over its series: a timestamp's
  // running value and count are all that is held.
  StatusOr<Value> Reduce(const std::string& name, Value arg) {
    if (auto* s = std::get_if<CwTimeSeries>(&arg)) {
      if (s->empty()) return Value(std::nan(""));
      double acc = name == "MIN" || name == "MAX" ? s->begin()->second : 0;
      for (const auto& [t, x] : *s) acc = Combine(name, acc, x);
      return Value(name == "AVG" ? acc / static_cast<double>(s->size()) : acc);
    }
    if (auto* l = std::get_if<List>(&arg)) {
      std::map<EpochMs, std::pair<double, size_t>> at;  // running value, values seen
      for (const CwTimeSeries* s : l->items)
        for (const auto& [t, x] : *s) {
          auto [it, fresh] = at.try_emplace(t, x, 1);
          if (!fresh) {
            it->second.first = Combine(name, it->second.first, x);
            ++it->second.second;
          }
        }
      CwTimeSeries out;
      for (const auto& [t, v] : at)
        out.emplace_hint(out.end(), t, name == "AVG" ? v.first / static_cast<double>(v.second) : v.first);
      return Value(std::move(out));
    }
    return Error(name + " takes a time series or an array of them, not a number");
  }
  static double Combine(const std::string& name, double acc, double x) {
    if (name == "MIN") return std::min(acc, x);
    if (name == "MAX") return std::max(acc, x);
    return acc + x;  // SUM, and AVG's sum
  }

  // `s op other` (`other op s` when !left); `other` a number or a series. Arithmetic between
  // series keeps the timestamps both have; a NaN result (division by zero) is no point.
  static CwTimeSeries SeriesOp(char op, const CwTimeSeries& s, const Value& other, bool left) {
    CwTimeSeries out;
    auto put = [&](EpochMs t, double x, double y) {
      const double v = left ? Arith(op, x, y) : Arith(op, y, x);
      if (!std::isnan(v)) out.emplace_hint(out.end(), t, v);
    };
    if (auto* y = std::get_if<double>(&other)) {
      for (const auto& [t, v] : s) put(t, v, *y);
    } else {
      const CwTimeSeries& r = std::get<CwTimeSeries>(other);
      for (const auto& [t, v] : s)
        if (auto it = r.find(t); it != r.end()) put(t, v, it->second);
    }
    return out;
  }

  StatusOr<Value> Apply(char op, const Value& a, const Value& b) {
    const bool list_a = std::holds_alternative<List>(a), list_b = std::holds_alternative<List>(b);
    if (list_a && list_b) return Error("arithmetic between two arrays is not supported");
    if (list_a || list_b) {
      const List& l = std::get<List>(list_a ? a : b);
      List out;
      for (const CwTimeSeries* s : l.items) out.Own(SeriesOp(op, *s, list_a ? b : a, list_a));
      return Value(std::move(out));
    }
    if (auto* x = std::get_if<double>(&a)) {
      if (auto* y = std::get_if<double>(&b)) return Value(Arith(op, *x, *y));
      return Value(SeriesOp(op, std::get<CwTimeSeries>(b), a, /*left=*/false));
    }
    return Value(SeriesOp(op, std::get<CwTimeSeries>(a), b, /*left=*/true));
  }
  // x op y; division by zero is NaN.
  static double Arith(char op, double x, double y) {
    switch (op) {
      case '+': return x + y;
      case '-': return x - y;
      case '*': return x * y;
      default: return y == 0 ? std::nan("") : x / y;
    }
  }

  std::string_view text_;
  const std::map<std::string, CwTimeSeries>& vars_;
  const std::vector<std::string>& metric_ids_;
  const std::vector<EpochMs>& grid_;
  size_t pos_ = 0;
};

}  // namespace

StatusOr<CwTimeSeries> EvaluateCwExpression(std::string_view expression, const std::map<std::string, CwTimeSeries>& vars,
                                            const std::vector<std::string>& metric_ids, const std::vector<EpochMs>& grid) {
  Parser p(expression, vars, metric_ids, grid);
  auto v = p.Parse();
  if (!v.ok()) return v.status();
  if (auto* s = std::get_if<CwTimeSeries>(&*v)) return std::move(*s);
  if (auto* d = std::get_if<double>(&*v)) {
    CwTimeSeries out;
    if (!std::isnan(*d))
      for (EpochMs t : grid) out[t] = *d;
    return out;
  }
  return InvalidArgument("Expression '" + std::string(expression.substr(0, 200)) +
                         "' returns an array of time series; this server answers one series per expression "
                         "(wrap it in SUM, AVG, MIN or MAX)");
}

}  // namespace ty::control
