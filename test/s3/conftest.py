"""Fixtures: a real 3-node Cairn cluster on loopback, and access keys."""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAIRN = os.environ.get("CAIRN_BIN", os.path.join(ROOT, "bin", "cairn"))
ADMIN_KEY = "s3-e2e-admin-key-0123456789"
SECRET = "s3-e2e-cluster-secret-0123456789abcdef"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url, proc, log, bound=30):
    deadline = time.time() + bound
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("cairn exited:\n" + open(log).read())
        try:
            with urllib.request.urlopen(url + "/_cairn/health", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.05)
    raise RuntimeError("cairn not healthy in time:\n" + open(log).read())


class Cluster:
    def __init__(self, base):
        self.base = base
        self.procs = []
        self.urls = []
        self.logs = []

    def start(self, n=3):
        for i in range(n):
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            d = os.path.join(self.base, f"n{i+1}")
            log = os.path.join(self.base, f"n{i+1}.log")
            args = [CAIRN, "server", "--data", d, "--listen", f"127.0.0.1:{port}",
                    "--gossip-listen", f"127.0.0.1:{free_port()}"]
            if i > 0:
                args += ["--join", self.urls[0]]
            env = dict(os.environ, CAIRN_ADMIN_KEY=ADMIN_KEY, CAIRN_CLUSTER_SECRET=SECRET)
            p = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
            self.procs.append(p)
            self.urls.append(url)
            self.logs.append(log)
            wait_healthy(url, p, log)
        return self

    def cli(self, *args, node=0):
        env = dict(os.environ, CAIRN_ADMIN_KEY=ADMIN_KEY, CAIRN_SERVER=self.urls[node])
        out = subprocess.run([CAIRN, *args], env=env, capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise RuntimeError(f"cairn {' '.join(args)}: {out.stderr}")
        return out.stdout

    def new_key(self, name, *extra):
        # The cluster may still be electing its first leader: retry.
        deadline = time.time() + 30
        while True:
            try:
                return json.loads(self.cli("key", "create", name, "--json", *extra))
            except RuntimeError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture(scope="session")
def cluster():
    base = tempfile.mkdtemp(prefix="cairn-s3-e2e-")
    c = Cluster(base).start(3)
    yield c
    c.stop()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def key(cluster):
    """An access key that may create buckets (and owns what it creates)."""
    return cluster.new_key("s3-e2e", "--allow", "admin")
