// Gaussian process (filled in with the Bayesian strategy).
