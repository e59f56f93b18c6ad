#include "tune/gp.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

namespace ty::tune::internal {

struct GaussianProcess::Impl {
  Eigen::MatrixXd x;             // n x d, inputs in the unit cube (one-hot for categoricals)
  Eigen::VectorXd y;             // standardized
  double y_mean = 0, y_scale = 1;
  Eigen::VectorXd inv_length;    // 1 / lengthscale per feature
  double noise = 1e-6;           // noise variance relative to the signal variance
  double signal = 1;             // signal variance (of standardized y)
  Eigen::LLT<Eigen::MatrixXd> llt;  // of signal * (C + noise I)
  Eigen::VectorXd alpha;         // K^-1 y
  double best = 0;               // min of the observed standardized y

  // Matern 5/2 correlation of two rows.
  double Corr(const Eigen::VectorXd& a, const Eigen::VectorXd& b) const {
    const double r = (a - b).cwiseProduct(inv_length).norm();
    const double s5r = std::sqrt(5.0) * r;
    return (1.0 + s5r + 5.0 * r * r / 3.0) * std::exp(-s5r);
  }
  Eigen::MatrixXd CorrMatrix() const {
    const Eigen::Index n = x.rows();
    Eigen::MatrixXd c(n, n);
    for (Eigen::Index i = 0; i < n; ++i) {
      c(i, i) = 1.0;
      for (Eigen::Index j = 0; j < i; ++j) c(i, j) = c(j, i) = Corr(x.row(i).transpose(), x.row(j).transpose());
    }
    return c;
  }
  // Negative log marginal likelihood with the signal variance profiled out (its optimum is
  // y^T (C + gI)^-1 y / n); +inf where the factorization fails.
  double NegLogLikelihood() const {
    const Eigen::Index n = x.rows();
    Eigen::MatrixXd c = CorrMatrix();
    c.diagonal().array() += noise;
    Eigen::LLT<Eigen::MatrixXd> f(c);
    if (f.info() != Eigen::Success) return std::numeric_limits<double>::infinity();
    const double quad = y.dot(f.solve(y));
    const double s2 = std::max(quad / static_cast<double>(n), 1e-12);
    const double logdet = 2.0 * f.matrixL().toDenseMatrix().diagonal().array().log().sum();
    return 0.5 * static_cast<double>(n) * std::log(s2) + 0.5 * logdet;
  }
  void Factor() {
    const Eigen::Index n = x.rows();
    Eigen::MatrixXd c = CorrMatrix();
    c.diagonal().array() += noise;
    Eigen::LLT<Eigen::MatrixXd> f(c);
    signal = std::max(y.dot(f.solve(y)) / static_cast<double>(n), 1e-12);
    llt.compute(signal * c);
    alpha = llt.solve(y);
  }
};

namespace {

Eigen::VectorXd Row(const std::vector<double>& v) {
  return Eigen::Map<const Eigen::VectorXd>(v.data(), static_cast<Eigen::Index>(v.size()));
}

}  // namespace

GaussianProcess::GaussianProcess(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GaussianProcess::GaussianProcess(GaussianProcess&&) noexcept = default;
GaussianProcess& GaussianProcess::operator=(GaussianProcess&&) noexcept = default;
GaussianProcess::~GaussianProcess() = default;

GaussianProcess GaussianProcess::Fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y) {
  auto m = std::make_unique<Impl>();
  const auto n = static_cast<Eigen::Index>(x.size());
  const auto d = static_cast<Eigen::Index>(x[0].size());
  m->x.resize(n, d);
  for (Eigen::Index i = 0; i < n; ++i) m->x.row(i) = Row(x[static_cast<size_t>(i)]).transpose();
  Eigen::VectorXd raw = Row(y);
  m->y_mean = raw.mean();
  const double var = (raw.array() - m->y_mean).square().sum() / static_cast<double>(n);
  m->y_scale = var > 0 ? std::sqrt(var) : 1.0;
  m->y = (raw.array() - m->y_mean) / m->y_scale;
  m->best = m->y.minCoeff();

  // 1. A shared lengthscale and the noise on a grid.
  static constexpr double kLengths[] = {0.05, 0.1, 0.2, 0.35, 0.6, 1.0, 2.0};
  static constexpr double kNoises[] = {1e-6, 1e-4, 1e-3, 1e-2, 1e-1};
  double best_nll = std::numeric_limits<double>::infinity();
  double best_length = 0.35, best_noise = 1e-4;
  for (double l : kLengths) {
    for (double g : kNoises) {
      m->inv_length = Eigen::VectorXd::Constant(d, 1.0 / l);
      m->noise = g;
      const double nll = m->NegLogLikelihood();
      if (nll < best_nll) {
        best_nll = nll;
        best_length = l;
        best_noise = g;
      }
    }
  }
  m->inv_length = Eigen::VectorXd::Constant(d, 1.0 / best_length);
  m->noise = best_noise;
  // 2. Two sweeps of coordinate steps on each lengthscale (halve or double, within [0.02, 20]),
  // which lets irrelevant features grow long (automatic relevance determination).
  if (n >= 2 * d) {
    for (int sweep = 0; sweep < 2; ++sweep) {
      for (Eigen::Index j = 0; j < d; ++j) {
        for (double factor : {2.0, 0.5}) {
          const double old = m->inv_length[j];
          const double next = old * factor;
          if (next < 1.0 / 20 || next > 1.0 / 0.02) continue;
          m->inv_length[j] = next;
          const double nll = m->NegLogLikelihood();
          if (nll < best_nll) {
            best_nll = nll;
          } else {
            m->inv_length[j] = old;
          }
        }
      }
    }
  }
  m->Factor();
  return GaussianProcess(std::move(m));
}

GaussianProcess GaussianProcess::WithBelievers(const std::vector<std::vector<double>>& pending) const {
  auto m = std::make_unique<Impl>(*impl_);
  if (pending.empty()) return GaussianProcess(std::move(m));
  const Eigen::Index n = impl_->x.rows(), p = static_cast<Eigen::Index>(pending.size());
  m->x.conservativeResize(n + p, Eigen::NoChange);
  m->y.conservativeResize(n + p);
  for (Eigen::Index i = 0; i < p; ++i) {
    double mean = 0, sd = 0;
    Predict(pending[static_cast<size_t>(i)], &mean, &sd);
    m->x.row(n + i) = Row(pending[static_cast<size_t>(i)]).transpose();
    m->y[n + i] = (mean - impl_->y_mean) / impl_->y_scale;
  }
  // Keep the fitted signal variance: refactor K with the same hyperparameters.
  const double signal = m->signal;
  Eigen::MatrixXd c = m->CorrMatrix();
  c.diagonal().array() += m->noise;
  m->llt.compute(signal * c);
  m->alpha = m->llt.solve(m->y);
  return GaussianProcess(std::move(m));
}

void GaussianProcess::Predict(const std::vector<double>& xs, double* mean, double* sd) const {
  const Impl& m = *impl_;
  const Eigen::VectorXd x = Row(xs);
  const Eigen::Index n = m.x.rows();
  Eigen::VectorXd k(n);
  for (Eigen::Index i = 0; i < n; ++i) k[i] = m.signal * m.Corr(x, m.x.row(i).transpose());
  const double mu = k.dot(m.alpha);
  const Eigen::VectorXd v = m.llt.matrixL().solve(k);
  const double var = std::max(m.signal - v.squaredNorm(), 1e-12);
  *mean = m.y_mean + m.y_scale * mu;
  *sd = m.y_scale * std::sqrt(var);
}

double GaussianProcess::ExpectedImprovement(const std::vector<double>& x) const {
  const Impl& m = *impl_;
  double mean = 0, sd = 0;
  Predict(x, &mean, &sd);
  const double mu = (mean - m.y_mean) / m.y_scale, s = sd / m.y_scale;
  const double z = (m.best - mu) / s;
  const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
  const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
  return std::max(0.0, (m.best - mu) * cdf + s * pdf);
}

}  // namespace ty::tune::internal
