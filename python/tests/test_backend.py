"""rmacc.distributed: backend="rmacc" against gloo (CPU) or NCCL (CUDA) on the same data, on
real rank processes (ranks.py). CPU (CI): 1 x 4 and 2 x 2 emulated nodes. CUDA
(RMACC_TEST_DEVICE=cuda, python/tests/run_gpu.sh): one rank, and every GPU's rank on one and
two emulated nodes when there are two GPUs or more (the inner NCCL group needs a GPU a rank).
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402

CUDA = ranks.device_kind() == "cuda"


def _shapes():
    if not CUDA:
        return [(4, 1), (4, 2)]
    import torch
    g = torch.cuda.device_count()
    return [(1, 1)] + ([(g, 1), (g, 2)] if g >= 2 and g % 2 == 0 else [])


SHAPES = _shapes()
ERROR_SHAPE = SHAPES[-1]


def run(scenario, n, nodes, **kwargs):
    return ranks.run(scenario, n, nodes, backend="rmacc", module="backend_scenarios", **kwargs)


class BackendCorrectness(unittest.TestCase):
    """all_to_all_single / all_to_all of dist on an rmacc group equal gloo's / NCCL's."""

    def run_shape(self, n, nodes):
        results = run("backend_correctness", n, nodes)
        self.assertEqual(len(results), n)
        self.assertGreaterEqual(min(results.values()), 15)  # compared calls per rank


class BackendDelegated(unittest.TestCase):
    def test_other_collectives(self):
        n, nodes = SHAPES[-1]
        results = run("backend_delegated", n, nodes)
        names = [name for name, _ in results[0]]
        self.assertIn("all_reduce", names)
        self.assertEqual(len(names), 12)


class BackendErrors(unittest.TestCase):
    def test_mismatch(self):
        if ERROR_SHAPE[0] < 2:
            self.skipTest("a mismatch needs two ranks")
        messages = run("backend_errors", *ERROR_SHAPE)
        self.assertEqual(len(messages), ERROR_SHAPE[0])  # every rank raised

    def test_dead_peer(self):
        n, nodes = (2, 2) if CUDA else (3, 1)
        if CUDA and SHAPES[-1][0] < 2:
            self.skipTest("a dead peer needs two GPUs")
        elapsed = run("backend_dead_peer", n, nodes, pg_timeout_s=5,
                      env={"RMACC_TIMEOUT_S": None}, expect_exit={n - 1: 3})
        self.assertEqual(len(elapsed), n - 1)


class BackendCompiled(unittest.TestCase):
    def test_functional_all_to_all_single(self):
        n, nodes = SHAPES[-1]
        results = run("backend_compiled", n, nodes)
        if None in results.values():
            self.skipTest("this PyTorch has no functional all_to_all_single")


@unittest.skipUnless(CUDA, "CUDA graphs need a GPU")
class BackendCudaGraph(unittest.TestCase):
    def test_capture(self):
        n, nodes = SHAPES[-1]
        self.assertEqual(len(run("backend_cuda_graph", n, nodes)), n)


def _add_shape_tests():
    for n, nodes in SHAPES:
        name = "test_%dx%d" % (nodes, n // nodes)
        setattr(BackendCorrectness, name, lambda self, n=n, nodes=nodes: self.run_shape(n, nodes))


_add_shape_tests()

if __name__ == "__main__":
    unittest.main()
