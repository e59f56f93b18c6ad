// A Gaussian process regressor for the Bayesian strategy (internal to src/tune; Eigen stays in
// gp.cpp). Matern 5/2 kernel with one lengthscale per feature, outputs standardized, a noise term;
// the hyperparameters maximize the marginal likelihood (signal variance in closed form, then a
// grid over a shared lengthscale and the noise, then coordinate steps on each lengthscale).
#pragma once

#include <memory>
#include <vector>

namespace ty::tune::internal {

class GaussianProcess {
 public:
  // REQUIRES: x non-empty, all rows of one width, y.size() == x.size().
  static GaussianProcess Fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y);
  // The same hyperparameters over the data plus `pending` points believed to score the current
  // posterior mean (kriging believer): their uncertainty collapses, so the next maximum of the
  // acquisition lies elsewhere.
  GaussianProcess WithBelievers(const std::vector<std::vector<double>>& pending) const;

  GaussianProcess(GaussianProcess&&) noexcept;
  GaussianProcess& operator=(GaussianProcess&&) noexcept;
  ~GaussianProcess();

  // Expected improvement over the best observed y (minimization), in units of y's standard
  // deviation.
  double ExpectedImprovement(const std::vector<double>& x) const;
  // Posterior mean and standard deviation of the latent function, in y's units.
  void Predict(const std::vector<double>& x, double* mean, double* sd) const;

 private:
  struct Impl;
  explicit GaussianProcess(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ty::tune::internal
