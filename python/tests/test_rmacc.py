"""rmacc's Python package against torch.distributed's semantics, on real rank processes.

CPU (CI): host backend, gloo carrying the id, 1 x 4 and 2 x 2 emulated nodes.
CUDA (RMACC_TEST_DEVICE=cuda, python/tests/run_gpu.sh): CUDA backend, NCCL carrying the id,
1 x 2, 2 x 1 and 2 x 2 (ranks share GPUs when there are fewer than 4).
Runs under `python3 -m unittest` or pytest; ctest runs it per class (tests/CMakeLists.txt).
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402

CUDA = ranks.device_kind() == "cuda"
# (ranks, emulated nodes)
SHAPES = [(2, 1), (2, 2), (4, 2)] if CUDA else [(4, 1), (4, 2)]


class Correctness(unittest.TestCase):
    """Every dtype, random / zero / skewed / equal splits, trailing shapes, all_to_all,
    rmacc.empty, barrier, torch.compile (PyTorch >= 2.4), close semantics."""

    def run_shape(self, n, nodes):
        results = ranks.run("correctness", n, nodes)
        self.assertEqual(len(results), n)
        self.assertGreater(min(results.values()), 20)  # calls checked per rank


class Errors(unittest.TestCase):
    def test_arguments_and_mismatch(self):
        n, nodes = (2, 2) if CUDA else (4, 2)
        messages = ranks.run("errors", n, nodes)
        self.assertEqual(len(messages), n)  # every rank raised RmaccError
        for m in messages.values():
            self.assertTrue(m)

    def test_dead_peer(self):
        n, nodes = (2, 2) if CUDA else (3, 1)
        elapsed = ranks.run("dead_peer", n, nodes, env={"RMACC_TIMEOUT_S": "3"},
                            expect_exit={n - 1: 3})
        self.assertEqual(len(elapsed), n - 1)


class MoeWork(unittest.TestCase):
    """examples/moe_dispatch.py's step without host sync must not do a multiple of the work of
    a dense pass over its receive buffer: it ran every row through every local expert's MLP
    (e_local = 4 dense passes here; 15x the step time of the synchronised step on the 2-core
    CI machine). The tiled version does at most 1.5 passes (capacity + e_local tiles of
    capacity / (2 e_local) rows); the bound, 2 passes, sits between them (FLOP counts from
    torch.profiler, no timing)."""

    def test_2x2(self):
        for rank, f in ranks.run("moe_work", 4, 2).items():
            expert_work = f["no_sync"] - f["router"]
            self.assertEqual(f["experts_per_rank"], 4)
            self.assertGreater(f["sync"], f["router"], "rank %d: the sync step ran no GEMM" % rank)
            self.assertLessEqual(expert_work, 2 * f["dense_pass"],
                                 "rank %d: the no-sync step's GEMMs did %.2f dense passes over "
                                 "its receive buffer" % (rank, expert_work / f["dense_pass"]))


def _add_shape_tests():
    for n, nodes in SHAPES:
        name = "test_%dx%d" % (nodes, n // nodes)
        setattr(Correctness, name, lambda self, n=n, nodes=nodes: self.run_shape(n, nodes))


_add_shape_tests()

if __name__ == "__main__":
    unittest.main()
