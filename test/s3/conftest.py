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


@pytest.fixture(scope="session")
def tls_node():
    """One node serving HTTPS with a self-signed certificate (openssl):
    yields (url, ca_file, key)."""
    base = tempfile.mkdtemp(prefix="cairn-s3-tls-")
    cert, key = os.path.join(base, "cert.pem"), os.path.join(base, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    log = os.path.join(base, "node.log")
    env = dict(os.environ, CAIRN_ADMIN_KEY=ADMIN_KEY)
    p = subprocess.Popen([CAIRN, "server", "--data", os.path.join(base, "data"), "--listen", f"127.0.0.1:{port}",
                          "--tls-cert", cert, "--tls-key", key], stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
    import ssl
    ctx = ssl.create_default_context(cafile=cert)
    deadline = time.time() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/_cairn/health", timeout=2, context=ctx) as r:
                if r.status == 200:
                    break
        except Exception:
            if p.poll() is not None or time.time() > deadline:
                raise RuntimeError("HTTPS node not healthy:\n" + open(log).read())
            time.sleep(0.05)
    out = subprocess.run([CAIRN, "key", "create", "tls", "--allow", "admin", "--json", "--server", url],
                         env=dict(env, SSL_CERT_FILE=cert), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    yield url, cert, json.loads(out.stdout)
    p.terminate()
    p.wait(10)
    shutil.rmtree(base, ignore_errors=True)
