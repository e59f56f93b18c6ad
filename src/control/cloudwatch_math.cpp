#include "control/cloudwatch_math.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <optional>
#include <variant>

namespace ty::control {

namespace {

using List = std::vector<CwTimeSeries>;
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
        if (auto* s = std::get_if<CwTimeSeries>(&*v)) list.push_back(std::move(*s));
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
        if (auto it = vars_.find(id); it != vars_.end()) list.push_back(it->second);
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
        for (auto& s : *l) s = fill(s);
        return Value(std::move(*l));
      }
      return Error("FILL's first argument must be a time series");
    }
    pos_ = at;
    return Error("unknown function " + name + " (this server evaluates SUM, AVG, MIN, MAX, FILL and METRICS)");
  }

  static double Combine(const std::string& name, const std::vector<double>& xs) {
    if (name == "MIN") return *std::min_element(xs.begin(), xs.end());
    if (name == "MAX") return *std::max_element(xs.begin(), xs.end());
    double sum = 0;
    for (double x : xs) sum += x;
    return name == "AVG" ? sum / static_cast<double>(xs.size()) : sum;
  }

  StatusOr<Value> Reduce(const std::string& name, Value arg) {
    if (auto* s = std::get_if<CwTimeSeries>(&arg)) {
      if (s->empty()) return Value(std::nan(""));
      std::vector<double> xs;
      for (const auto& [t, x] : *s) xs.push_back(x);
      return Value(Combine(name, xs));
    }
    if (auto* l = std::get_if<List>(&arg)) {
      std::map<EpochMs, std::vector<double>> at;
      for (const auto& s : *l)
        for (const auto& [t, x] : s) at[t].push_back(x);
      CwTimeSeries out;
      for (const auto& [t, xs] : at) out[t] = Combine(name, xs);
      return Value(std::move(out));
    }
    return Error(name + " takes a time series or an array of them, not a number");
  }

  StatusOr<Value> Apply(char op, const Value& a, const Value& b) {
    auto f = [op](double x, double y) {
      switch (op) {
        case '+': return x + y;
        case '-': return x - y;
        case '*': return x * y;
        default: return y == 0 ? std::nan("") : x / y;
      }
    };
    auto drop_nan = [](CwTimeSeries& s) { std::erase_if(s, [](const auto& p) { return std::isnan(p.second); }); };
    if (std::holds_alternative<List>(a) || std::holds_alternative<List>(b)) {
      const bool left = std::holds_alternative<List>(a);
      const List& l = std::get<List>(left ? a : b);
      const Value& other = left ? b : a;
      List out;
      for (const auto& s : l) {
        auto r = left ? Apply(op, Value(s), other) : Apply(op, other, Value(s));
        if (!r.ok()) return r;
        if (!std::holds_alternative<CwTimeSeries>(*r)) return Error("arithmetic between two arrays is not supported");
        out.push_back(std::get<CwTimeSeries>(std::move(*r)));
      }
      return Value(std::move(out));
    }
    if (auto* x = std::get_if<double>(&a)) {
      if (auto* y = std::get_if<double>(&b)) return Value(f(*x, *y));
      CwTimeSeries out;
      for (const auto& [t, v] : std::get<CwTimeSeries>(b)) out[t] = f(*x, v);
      drop_nan(out);
      return Value(std::move(out));
    }
    const CwTimeSeries& s = std::get<CwTimeSeries>(a);
    CwTimeSeries out;
    if (auto* y = std::get_if<double>(&b)) {
      for (const auto& [t, v] : s) out[t] = f(v, *y);
    } else {
      const CwTimeSeries& r = std::get<CwTimeSeries>(b);
      for (const auto& [t, v] : s)
        if (auto it = r.find(t); it != r.end()) out[t] = f(v, it->second);
    }
    drop_nan(out);
    return Value(std::move(out));
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
