"""The scheduler's scenarios, unchanged, on the Slurm executor: fair-share order and priority
inside a share (test_fairshare), borrowing and reclaim, in-share preemption and the minimum
runtime (test_quota_shares), with every attempt a Slurm job on a private 4-node cluster
(16 one-CPU slices of ml.m5.large). trainyard decides the order and the preemptions; Slurm only
places and runs what it is given.
"""
import unittest

import test_fairshare
import test_quota_shares
from slurm_cluster import SlurmCluster
from test_slurm import slurm_config

CLUSTER = None


def setUpModule():
    global CLUSTER
    CLUSTER = SlurmCluster(nodes=4, cpus_per_node=4, gpus_per_node=2, memory_mib=8192)
    CLUSTER.start()


def tearDownModule():
    if CLUSTER:
        CLUSTER.stop()


class SlurmFairShareTest(test_fairshare.FairShareTest):
    @property
    def server_config(self):
        return slurm_config(CLUSTER)


class SlurmQuotaShareTest(test_quota_shares.QuotaShareTest):
    @property
    def server_config(self):
        return slurm_config(CLUSTER)


if __name__ == "__main__":
    unittest.main()
