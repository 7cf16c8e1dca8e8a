"""What scripts/slurm_cluster.sh makes the node of its single-node cluster (without starting
it: `up` takes the machine's CPUs), and the line the SLURM tests give for a node too small."""

import os
import subprocess
from pathlib import Path

from tests.integration.test_slurm import node_shortfall

ROOT = Path(__file__).resolve().parents[2]


def test_the_node_is_the_whole_machine_whatever_omp_num_threads_says():
    """`nproc` would say 1 here."""
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "slurm_cluster.sh"), "node"],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    memory_mb = int(meminfo["MemTotal"].split()[0]) // 1024
    assert result.stdout == f"CPUs={os.cpu_count()} RealMemory={memory_mb}\n"


def test_a_node_too_small_for_the_slurm_tests_is_named_in_one_line():
    assert node_shortfall(2, 2048) is None
    assert node_shortfall(1, 24000) == (
        "the cluster's node has 1 CPU(s) of the 2 needed to run 2 jobs at once: "
        "scripts/slurm_cluster.sh down, then up (it sizes the node from the machine)"
    )
    assert node_shortfall(1, 1000) == (
        "the cluster's node has 1 CPU(s) of the 2 needed and 1000 MB of the 2048 needed to run "
        "2 jobs at once: scripts/slurm_cluster.sh down, then up (it sizes the node from the "
        "machine)"
    )
