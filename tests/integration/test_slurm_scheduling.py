"""The scheduler's scenarios, unchanged, on the Slurm executor: fair-share order and priority
inside a share (test_fairshare), borrowing and reclaim, in-share preemption and the minimum
runtime (test_quota_shares), with every attempt a Slurm job on a private 4-node cluster
(16 one-CPU slices of ml.m5.large). trainyard decides the order and the preemptions; Slurm only
places and runs what it is given.
"""
import unittest

import test_fairshare
import test_quota_shares
import test_slurm
# The module's own private cluster, started and stopped as test_slurm's is.
from test_slurm import setUpModule, slurm_config, tearDownModule  # noqa: F401


class SlurmFairShareTest(test_fairshare.FairShareTest):
    @property
    def server_config(self):
        return slurm_config(test_slurm.CLUSTER)


class SlurmQuotaShareTest(test_quota_shares.QuotaShareTest):
    @property
    def server_config(self):
        return slurm_config(test_slurm.CLUSTER)


if __name__ == "__main__":
    unittest.main()
