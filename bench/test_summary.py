#!/usr/bin/env python3
"""Tests of bench/summary.py on logs written in the tools' own formats (table.cc's row printf,
nccl_peer.py's rows, nccl-perf's path markers, rmacc-overlap's rows, the call-cost INFO line),
so a change of a format that breaks the GPU summary fails here, on the CPU machine."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def table_row(size, time_us, busbw, wrong="0", prefix="[0] "):
    # tools/perf/table.cc: "  %10zu %12zu %8s %10.2f %8.2f %8.2f %7s"
    return prefix + "  %10d %12d %8s %10.2f %8.2f %8.2f %7s" % (size, size // 4, "float", time_us, busbw, busbw, wrong)


def write(d, name, lines):
    with open(os.path.join(d, name), "w") as f:
        f.write("\n".join(lines) + "\n")


def summarise(d):
    out = subprocess.run([sys.executable, os.path.join(HERE, "summary.py"), d], capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(out.stderr)
    return out.stdout


def row_of(text, first):
    for line in text.splitlines():
        if line.split()[:1] == [first]:
            return line.split()
    raise AssertionError(f"no row {first!r} in:\n{text}")


class SummaryTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_ratios_against_every_peer(self):
        mib16 = 16 << 20
        write(self.d, "perf-alltoall-1node.log", ["[0] # rmacc-perf alltoall", "[1] [rmacc] INFO noise 1 2 3",
                                                  table_row(mib16, 100.0, 200.0)])
        write(self.d, "perf-alltoall-1node-m0.log", [table_row(mib16, 110.0, 190.0)])
        write(self.d, "nccl-perf.log", ["[0] # nccl-perf path: kernel", table_row(mib16, 50.0, 100.0),
                                        "[0] # nccl-perf path: ce", table_row(mib16, 40.0, 400.0)])
        write(self.d, "nccl-peer.log", ["# copy-engine ceiling: cuda:0 -> cuda:1 (one way)",
                                        "  %12d %10.2f %8.2f" % (mib16, 40.0, 250.0),
                                        "# NCCL (2, 28, 9) all_to_all_single, 2 ranks",
                                        "  %12d %12d %6s %10.2f %8.2f %8.2f" % (mib16, mib16 // 4, "float", 80.0, 300, 160.0)])
        row = row_of(summarise(self.d), "16M")
        # size rmacc us torch x kern x ce x -m0 m0/m1 ceil x wrong
        self.assertEqual(row[1], "200.0")
        self.assertEqual(row[3], "160.0")
        self.assertEqual(row[4], "1.25")   # 200 / 160
        self.assertEqual(row[6], "2.00")   # 200 / 100 (kernel)
        self.assertEqual(row[8], "0.50")   # 200 / 400 (ce)
        self.assertEqual(row[10], "0.95")  # -m 0 / -m 1
        self.assertEqual(row[12], "0.80")  # 200 / 250 (ceiling)
        self.assertEqual(row[13], "0")
        text = summarise(self.d)
        self.assertIn("torch all_to_all_single from 64K: PASS (worst 1.25 at 16M)", text)
        self.assertIn("C API kernel from 16M: PASS (worst 2.00 at 16M)", text)
        self.assertIn("C API ce from 16M: FAIL (worst 0.50 at 16M)", text)
        self.assertIn("ceiling from 256M: not measured", text)
        self.assertIn("-m 1 from 1M: PASS (worst 0.95 at 16M)", text)
        self.assertIn("zipf >= 0.90 x uniform from 16M: not measured", text)

    def test_targets_take_the_worst_size_in_range(self):
        small, big = 4 << 10, 64 << 20
        write(self.d, "perf-alltoall-1node.log", [table_row(small, 10.0, 1.0), table_row(big, 10.0, 90.0)])
        write(self.d, "nccl-perf.log", ["[0] # nccl-perf path: kernel", table_row(small, 10.0, 100.0),
                                        table_row(big, 10.0, 100.0)])
        # 4K is below the kernel target's 16M floor: only 64M (0.90) counts.
        self.assertIn("C API kernel from 16M: FAIL (worst 0.90 at 64M)", summarise(self.d))

    def test_wrong_values_are_shown(self):
        write(self.d, "perf-alltoall-1node.log", [table_row(4096, 10.0, 1.0, wrong="3")])
        self.assertEqual(row_of(summarise(self.d), "4K")[-1], "3")

    def test_missing_logs_leave_dashes(self):
        write(self.d, "perf-alltoall-1node.log", [table_row(1 << 30, 1000.0, 500.0)])
        row = row_of(summarise(self.d), "1G")
        self.assertEqual(row[3:9], ["-"] * 6)

    def test_zipf_small_calls_cost_overlap(self):
        mib64 = 64 << 20
        write(self.d, "perf-alltoallv-uniform-1node.log", [table_row(mib64, 10.0, 300.0)])
        write(self.d, "perf-alltoallv-zipf-1node.log", [table_row(mib64, 10.0, 240.0)])
        write(self.d, "perf-alltoall-8B.log", [table_row(16, 9.0, 0.0)])
        write(self.d, "perf-putsignal-1node.log",
              ["[0] # 8-byte ping-pong latency (put + signal + wait, half round trip): 4.00 us"])
        cost = "[0] [rmacc] INFO COLL call: queued 1.0 us, count exchange %.1f us, plan+enqueue %.1f us"
        write(self.d, "cost-2x1.log", [cost % (50.0, 50.0)] + [cost % (3.0, 4.0)] * 9)
        write(self.d, "overlap.log", [
            "[0] # rmacc-overlap: 2 ranks, rmacc 100, NCCL 2.28.9 (/x/libnccl.so.2)",
            "[0] #    size buffers        library         N",
            "[0]        16 cudaMalloc     rmacc         300     27.40     73.80  2.69*     58.00     61.00    5.17      0 FAIL ratio gemm",
            "[0] # overlap target: rmacc beside <= 1.25 x alone at 16-256 MiB: FAIL (1 of 1 rows fail, worst 2.69 x)",
            "[1] [rmacc] INFO something else"])
        text = summarise(self.d)
        self.assertIn("0.80", row_of(text, "64M"))
        self.assertIn("ratio 2.25 (target <= 2): FAIL", text)
        self.assertIn("= 7.0 us", text)  # the warm-up tenth (the 100 us call) is left out
        self.assertIn("target <= 10): PASS", text)
        self.assertIn("16 cudaMalloc     rmacc", text)
        self.assertIn("FAIL (1 of 1 rows fail", text)
        self.assertNotIn("something else", text)

    def test_empty_directory(self):
        self.assertIn("no tables found", summarise(self.d))


if __name__ == "__main__":
    unittest.main()
