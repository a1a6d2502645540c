"""``fastmq-bench run`` on a real standalone Spark cluster: a ``spark-class`` Master and Worker
(pip's pyspark has no sbin start scripts) on loopback. The Worker runs fastmq without its
compiled extensions, so the run is refused unless ``--allow-pure``, and then says so."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fastmq.testing import free_port, wait_port

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]

WORKLOAD = """\
name: standalone
topics: 1
queues_per_topic: 2
message_size: 100
producers_per_topic: 1
consumer_groups_per_topic: 1
consumers_per_group: 1
producer_rate: 200
send_mode: async
in_flight: 8
warmup_s: 1
duration_s: 2
"""


def _spark_class() -> str:
    import pyspark
    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


class _Daemon:
    """A spark-class daemon, stopped by its PID."""

    def __init__(self, argv: list[str], port: int, log: Path, env: dict[str, str]) -> None:
        self.out = open(log, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT, env={**os.environ, **env},
                                     start_new_session=True)
        try:
            wait_port(port, 120, self.proc)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.out.close()


def test_standalone_cluster_refuses_pure_executors_unless_allowed(tmp_path: Path) -> None:
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "PYSPARK_PYTHON": sys.executable}
    port = free_port()
    master = _Daemon([_spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                      "--port", str(port), "--webui-port", "0"], port, tmp_path / "master.log", env)
    try:
        wport = free_port()
        worker = _Daemon([_spark_class(), "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                          "--cores", "2", "--memory", "1G", "--host", "127.0.0.1", "--port", str(wport),
                          "--webui-port", "0", "--work-dir", str(tmp_path / "work")], wport, tmp_path / "worker.log",
                         {**env, "FASTMQ_NO_EXTENSIONS": "1"})
        try:
            wl = tmp_path / "w.yaml"
            wl.write_text(WORKLOAD)
            bench = [str(Path(sys.executable).with_name("fastmq-bench")), "run", str(wl),
                     "--master", f"spark://127.0.0.1:{port}"]
            proc = subprocess.run([*bench, "--out", str(tmp_path / "refused")], capture_output=True, text=True,
                                  timeout=400, env={**os.environ, **env}, cwd=tmp_path)
            assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
            r = json.loads((tmp_path / "refused" / "standalone-fastmq" / "result.json").read_text())
            assert r["status"] == "failed" and "without its compiled extensions" in r["reason"]
            assert "--allow-pure" in r["reason"] and r["publish"] is None and r["env"]["compiled"] is False
            assert "without its compiled extensions" in proc.stdout

            proc = subprocess.run([*bench, "--out", str(tmp_path / "pure"), "--allow-pure"], capture_output=True,
                                  text=True, timeout=400, env={**os.environ, **env}, cwd=tmp_path)
            r = json.loads((tmp_path / "pure" / "standalone-fastmq" / "result.json").read_text())
            assert proc.returncode == 0, r["reason"]
            assert r["status"] == "ok" and r["env"]["compiled"] is False and r["env"]["executors"] >= 1
            assert r["env"]["master"] == f"spark://127.0.0.1:{port}" and r["env"]["cores"] == 2
            assert r["sent_ok"] == r["received"] == r["broker"]["stored"] > 0
            assert "PURE-PYTHON" in proc.stdout
        finally:
            worker.stop()
    finally:
        master.stop()
