"""Real S3 clients against a 3-node Cairn cluster: boto3, the aws CLI,
rclone and s3cmd each put, get, list, upload in parts, delete and
presign. Objects written through one node are read through another."""
import hashlib
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import boto3
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

MIB = 1 << 20


def s3client(url, key, **cfg):
    return boto3.client("s3", endpoint_url=url, aws_access_key_id=key["id"],
                        aws_secret_access_key=key["secret"], region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                                      retries={"max_attempts": 8, "mode": "standard"}, **cfg))


def bucket_name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def make_bucket(cluster, key, prefix):
    s3 = s3client(cluster.urls[0], key)
    name = bucket_name(prefix)
    deadline = time.time() + 30
    while True:
        try:
            s3.create_bucket(Bucket=name)
            return name
        except ClientError as e:
            if time.time() > deadline or e.response["Error"]["Code"] not in ("ServiceUnavailable", "503"):
                raise
            time.sleep(0.2)


def eventually(fn, bound=10):
    deadline = time.time() + bound
    while True:
        try:
            return fn()
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


def data(n, seed):
    out = bytearray()
    h = hashlib.sha256(seed.encode()).digest()
    while len(out) < n:
        h = hashlib.sha256(h).digest()
        out += h * 64
    return bytes(out[:n])


def test_boto3(cluster, key, tmp_path):
    b = make_bucket(cluster, key, "boto3")
    w, r = s3client(cluster.urls[0], key), s3client(cluster.urls[2], key)
    w.put_object(Bucket=b, Key="dir/a.txt", Body=b"hello", ContentType="text/plain",
                 Metadata={"color": "blue"}, CacheControl="max-age=60")
    got = eventually(lambda: r.get_object(Bucket=b, Key="dir/a.txt"))
    assert got["Body"].read() == b"hello"
    assert got["Metadata"] == {"color": "blue"}
    assert got["ContentType"] == "text/plain" and got["CacheControl"] == "max-age=60"
    # Checksums the SDK computes (CRC32 by default, and others on request;
    # CRC32C and CRC64NVME need awscrt here: the Go e2e test covers them
    # with aws-sdk-go-v2).
    for alg in ("CRC32", "SHA1", "SHA256"):
        w.put_object(Bucket=b, Key=f"sum/{alg}", Body=b"x" * 1000, ChecksumAlgorithm=alg)
    # Multipart through the transfer manager.
    big = data(13 * MIB, "boto3")
    src = tmp_path / "big.bin"
    src.write_bytes(big)
    cfg = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB)
    w.upload_file(str(src), b, "big.bin", Config=cfg)
    head = eventually(lambda: r.head_object(Bucket=b, Key="big.bin"))
    assert head["ContentLength"] == len(big) and head["ETag"].endswith('-3"')
    dst = tmp_path / "back.bin"
    r.download_file(b, "big.bin", str(dst))
    assert dst.read_bytes() == big
    assert r.get_object(Bucket=b, Key="big.bin", Range="bytes=100-199")["Body"].read() == big[100:200]
    # Listing, with a delimiter and in pages.
    keys = [o["Key"] for o in r.list_objects_v2(Bucket=b)["Contents"]]
    assert keys == sorted(keys) and "big.bin" in keys and "dir/a.txt" in keys
    top = r.list_objects_v2(Bucket=b, Delimiter="/")
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["dir/", "sum/"]
    pages = list(r.get_paginator("list_objects_v2").paginate(Bucket=b, PaginationConfig={"PageSize": 2}))
    assert sum(len(p.get("Contents", [])) for p in pages) == len(keys) and len(pages) > 2
    # Copy, server side.
    w.copy_object(Bucket=b, Key="copy.txt", CopySource={"Bucket": b, "Key": "dir/a.txt"})
    assert eventually(lambda: r.get_object(Bucket=b, Key="copy.txt"))["Body"].read() == b"hello"
    # Presigned GET and PUT (the signature covers the host: the URL names
    # the node it was made for).
    url = r.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "dir/a.txt"}, ExpiresIn=300)
    assert urllib.request.urlopen(url).read() == b"hello"
    put_url = w.generate_presigned_url("put_object", Params={"Bucket": b, "Key": "presigned.txt"}, ExpiresIn=300)
    req = urllib.request.Request(put_url, data=b"via presigned put", method="PUT")
    assert urllib.request.urlopen(req).status == 200
    assert eventually(lambda: r.get_object(Bucket=b, Key="presigned.txt"))["Body"].read() == b"via presigned put"
    # Errors clients rely on.
    with pytest.raises(ClientError) as e:
        r.get_object(Bucket=b, Key="nope")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"
    with pytest.raises(ClientError) as e:
        w.delete_bucket(Bucket=b)
    assert e.value.response["Error"]["Code"] == "BucketNotEmpty"
    # Delete everything, then the bucket.
    objs = [{"Key": o["Key"]} for o in r.list_objects_v2(Bucket=b)["Contents"]]
    res = w.delete_objects(Bucket=b, Delete={"Objects": objs})
    assert len(res["Deleted"]) == len(objs) and not res.get("Errors")
    w.delete_bucket(Bucket=b)
    with pytest.raises(ClientError) as e:
        eventually(lambda: r.head_bucket(Bucket=b) and (_ for _ in ()).throw(AssertionError("still there")))
    assert e.value.response["Error"]["Code"] in ("404", "NoSuchBucket")


def fast_path_requests(url):
    """The node's count of S3 requests its fast path answered."""
    with urllib.request.urlopen(url + "/_cairn/metrics") as r:
        for line in r.read().decode().splitlines():
            if line.startswith("cairn_s3_fast_path_requests_total "):
                return float(line.split()[1])
    raise AssertionError("no cairn_s3_fast_path_requests_total")


def test_boto3_get_on_fast_path(cluster, key):
    """boto3's GetObject and HeadObject, signed in the Authorization
    header, of plain objects are answered by the node's fast path (issue
    24), with what boto3 expects; its errors, conditionals and objects with
    metadata are left to the S3 handler, as before."""
    b = make_bucket(cluster, key, "fastget")
    w = s3client(cluster.urls[0], key)
    body = data(15000, "fastget")
    w.put_object(Bucket=b, Key="d/f.css", Body=body)
    w.put_object(Bucket=b, Key="meta.txt", Body=b"m", Metadata={"color": "blue"})
    # A reader of its own: a connection that carried a request the fast
    # path leaves to net/http (a PUT, an error) stays with net/http.
    s3 = s3client(cluster.urls[0], key)
    before = fast_path_requests(cluster.urls[0])
    for _ in range(5):
        got = s3.get_object(Bucket=b, Key="d/f.css")
        assert got["Body"].read() == body
    assert got["ContentLength"] == len(body) and got["ETag"] == '"' + hashlib.md5(body).hexdigest() + '"'
    assert got["AcceptRanges"] == "bytes" and got["ResponseMetadata"]["RequestId"]
    part = s3.get_object(Bucket=b, Key="d/f.css", Range="bytes=100-199")
    assert part["Body"].read() == body[100:200] and part["ContentRange"] == f"bytes 100-199/{len(body)}"
    head = s3.head_object(Bucket=b, Key="d/f.css")
    assert head["ContentLength"] == len(body) and head["ETag"] == got["ETag"]
    assert fast_path_requests(cluster.urls[0]) - before == 7
    # Left to the S3 handler: an error, a conditional, metadata.
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=b, Key="nope")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=b, Key="d/f.css", IfNoneMatch=got["ETag"])
    assert e.value.response["Error"]["Code"] == "304"
    assert s3.get_object(Bucket=b, Key="meta.txt")["Metadata"] == {"color": "blue"}
    assert fast_path_requests(cluster.urls[0]) - before == 7


def test_boto3_wrong_secret_and_revocation(cluster, key):
    b = make_bucket(cluster, key, "revoke")
    k = cluster.new_key("short-lived", "--bucket", b)
    s3 = s3client(cluster.urls[2], k)
    eventually(lambda: s3.put_object(Bucket=b, Key="x", Body=b"1"))
    bad = s3client(cluster.urls[2], {"id": k["id"], "secret": "wrong" + k["secret"][5:]})
    with pytest.raises(ClientError) as e:
        bad.get_object(Bucket=b, Key="x")
    assert e.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    cluster.cli("key", "revoke", k["id"], node=1)
    t0 = time.time()
    while True:
        try:
            s3.get_object(Bucket=b, Key="x")
        except ClientError as e:
            assert e.response["Error"]["Code"] in ("InvalidAccessKeyId", "AccessDenied")
            break
        assert time.time() - t0 < 1.0, "a revoked key still works after 1 s"
        time.sleep(0.01)


def aws_env(cluster, key, home):
    return clean_env(AWS_ACCESS_KEY_ID=key["id"], AWS_SECRET_ACCESS_KEY=key["secret"],
                AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=str(home / "config"),
                AWS_SHARED_CREDENTIALS_FILE=str(home / "credentials"), HOME=str(home))


def clean_env(**extra):
    """The environment for a client: no CA bundle or proxy of the machine's
    (they are for the internet; these clients talk to loopback)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("AWS_CA_BUNDLE", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
           and not k.lower().endswith("_proxy")}
    env.update(extra)
    return env


def run(args, env, **kw):
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, **kw)
    assert out.returncode == 0, f"{' '.join(args)}:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def test_aws_cli(cluster, key, tmp_path):
    aws = shutil.which("aws")
    assert aws, "the aws CLI is not installed (make test-s3 installs it)"
    b = make_bucket(cluster, key, "awscli")
    env = aws_env(cluster, key, tmp_path)
    (tmp_path / "config").write_text("[default]\ns3 =\n  multipart_threshold = 5MB\n  multipart_chunksize = 5MB\n  addressing_style = path\n")
    ep = ["--endpoint-url", cluster.urls[0]]
    ep2 = ["--endpoint-url", cluster.urls[1]]
    small = tmp_path / "small.txt"
    small.write_text("small file\n")
    big = tmp_path / "big.bin"
    big.write_bytes(data(12 * MIB, "aws"))
    run([aws, *ep, "s3", "cp", str(small), f"s3://{b}/docs/small.txt"], env)
    run([aws, *ep, "s3", "cp", str(big), f"s3://{b}/big.bin"], env)
    listing = run([aws, *ep2, "s3", "ls", "--recursive", f"s3://{b}/"], env)
    assert "docs/small.txt" in listing and "big.bin" in listing
    head = json.loads(run([aws, *ep2, "s3api", "head-object", "--bucket", b, "--key", "big.bin"], env))
    assert head["ContentLength"] == 12 * MIB and head["ETag"].endswith('-3"'), head
    back = tmp_path / "back.bin"
    run([aws, *ep2, "s3", "cp", f"s3://{b}/big.bin", str(back)], env)
    assert back.read_bytes() == big.read_bytes()
    url = run([aws, *ep, "s3", "presign", f"s3://{b}/docs/small.txt", "--expires-in", "300"], env).strip()
    assert urllib.request.urlopen(url).read() == b"small file\n"
    run([aws, *ep, "s3", "rm", "--recursive", f"s3://{b}/"], env)
    assert run([aws, *ep2, "s3", "ls", "--recursive", f"s3://{b}/"], env).strip() == ""
    run([aws, *ep, "s3", "rb", f"s3://{b}"], env)


def test_rclone(cluster, key, tmp_path):
    rclone = shutil.which("rclone")
    assert rclone, "rclone is not installed (make test-s3 installs it)"
    b = make_bucket(cluster, key, "rclone")
    env = clean_env(RCLONE_CONFIG=str(tmp_path / "rclone.conf"),
               RCLONE_CONFIG_C1_TYPE="s3", RCLONE_CONFIG_C1_PROVIDER="Other",
               RCLONE_CONFIG_C1_ACCESS_KEY_ID=key["id"], RCLONE_CONFIG_C1_SECRET_ACCESS_KEY=key["secret"],
               RCLONE_CONFIG_C1_ENDPOINT=cluster.urls[0], RCLONE_CONFIG_C1_FORCE_PATH_STYLE="true",
               RCLONE_CONFIG_C3_TYPE="s3", RCLONE_CONFIG_C3_PROVIDER="Other",
               RCLONE_CONFIG_C3_ACCESS_KEY_ID=key["id"], RCLONE_CONFIG_C3_SECRET_ACCESS_KEY=key["secret"],
               RCLONE_CONFIG_C3_ENDPOINT=cluster.urls[2], RCLONE_CONFIG_C3_FORCE_PATH_STYLE="true")
    src = tmp_path / "tree"
    for i in range(30):
        p = src / f"d{i % 3}" / f"f{i}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data(1000 + i * 37, f"r{i}"))
    (src / "big.bin").write_bytes(data(11 * MIB, "rclone"))
    up = ["--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M"]
    run([rclone, "copy", *up, str(src), f"c1:{b}/tree"], env)
    out = run([rclone, "lsf", "-R", f"c3:{b}/tree"], env)
    assert "big.bin" in out and "d2/f29.txt" in out
    run([rclone, "check", str(src), f"c3:{b}/tree"], env)
    dst = tmp_path / "back"
    run([rclone, "copy", f"c3:{b}/tree", str(dst)], env)
    assert (dst / "big.bin").read_bytes() == (src / "big.bin").read_bytes()
    link = run([rclone, "link", "--expire", "5m", f"c1:{b}/tree/d0/f0.txt"], env).strip()
    assert urllib.request.urlopen(link).read() == (src / "d0" / "f0.txt").read_bytes()
    run([rclone, "delete", f"c1:{b}/tree/d1"], env)
    assert "d1/" not in run([rclone, "lsf", "-R", f"c3:{b}/tree"], env)
    run([rclone, "purge", f"c1:{b}"], env)


def test_s3cmd(cluster, key, tmp_path):
    s3cmd = shutil.which("s3cmd")
    assert s3cmd, "s3cmd is not installed (make test-s3 installs it)"
    b = make_bucket(cluster, key, "s3cmd")
    host = cluster.urls[0].removeprefix("http://")
    cfg = tmp_path / "s3cfg"
    cfg.write_text(f"""[default]
access_key = {key['id']}
secret_key = {key['secret']}
host_base = {host}
host_bucket = {host}
use_https = False
signature_v2 = False
bucket_location = us-east-1
multipart_chunk_size_mb = 5
""")
    env = clean_env(HOME=str(tmp_path))
    s = [s3cmd, "-c", str(cfg)]
    small = tmp_path / "small.txt"
    small.write_text("s3cmd small\n")
    big = tmp_path / "big.bin"
    big.write_bytes(data(11 * MIB, "s3cmd"))
    run([*s, "put", str(small), f"s3://{b}/small.txt"], env)
    run([*s, "put", str(big), f"s3://{b}/big.bin"], env)
    out = run([*s, "ls", f"s3://{b}/"], env)
    assert "small.txt" in out and "big.bin" in out
    back = tmp_path / "back.bin"
    run([*s, "get", "--force", f"s3://{b}/big.bin", str(back)], env)
    assert back.read_bytes() == big.read_bytes()
    url = run([*s, "signurl", f"s3://{b}/small.txt", "+300"], env).strip()
    assert urllib.request.urlopen(url).read() == b"s3cmd small\n"
    run([*s, "del", f"s3://{b}/small.txt", f"s3://{b}/big.bin"], env)
    assert run([*s, "ls", f"s3://{b}/"], env).strip() == ""
    run([*s, "rb", f"s3://{b}"], env)


def test_same_object_over_native_http(cluster, key):
    b = make_bucket(cluster, key, "native")
    s3 = s3client(cluster.urls[0], key)
    s3.put_object(Bucket=b, Key="page.html", Body=b"<p>hi</p>", ContentType="text/html")
    req = urllib.request.Request(f"{cluster.urls[2]}/{b}/page.html",
                                 headers={"Authorization": f"Bearer {key['id']}:{key['secret']}"})
    resp = eventually(lambda: urllib.request.urlopen(req))
    assert resp.read() == b"<p>hi</p>" and resp.headers["Content-Type"] == "text/html"
    # The CLI's signed URL works the same way.
    url = cluster.cli("url", "sign", f"{b}/page.html", "--expires", "5m", node=1).strip()
    assert urllib.request.urlopen(url).read() == b"<p>hi</p>"
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{cluster.urls[1]}/{b}/page.html")
    assert e.value.code == 401


def test_rclone_webdav(cluster, tmp_path):
    """rclone's webdav backend syncs a tree into a bucket over WebDAV (and
    deletes what the source no longer has)."""
    from conftest import ADMIN_KEY
    rclone = shutil.which("rclone")
    assert rclone, "rclone is not installed (make test-s3 installs it)"
    b = bucket_name("davsync")
    eventually(lambda: cluster.cli("bucket", "create", b), bound=30)
    obscured = run([rclone, "obscure", ADMIN_KEY], clean_env()).strip()
    env = clean_env(RCLONE_CONFIG=str(tmp_path / "rclone.conf"),
                    RCLONE_CONFIG_W_TYPE="webdav", RCLONE_CONFIG_W_URL=f"{cluster.urls[0]}/_dav/{b}/",
                    RCLONE_CONFIG_W_VENDOR="other", RCLONE_CONFIG_W_USER="anyone", RCLONE_CONFIG_W_PASS=obscured)
    src = tmp_path / "tree"
    for i in range(40):
        p = src / f"d{i % 4}" / f"f{i}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data(500 + i * 101, f"w{i}"))
    run([rclone, "sync", str(src), "w:"], env)
    run([rclone, "check", str(src), "w:"], env)
    (src / "d1" / "f1.txt").unlink()
    (src / "d2" / "f2.txt").write_bytes(b"changed")
    run([rclone, "sync", str(src), "w:"], env)
    run([rclone, "check", str(src), "w:"], env)
    # The same files over native HTTP, through another node.
    req = urllib.request.Request(f"{cluster.urls[2]}/{b}/d2/f2.txt", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    assert eventually(lambda: urllib.request.urlopen(req)).read() == b"changed"
    gone = urllib.request.Request(f"{cluster.urls[2]}/{b}/d1/f1.txt", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    with pytest.raises(urllib.error.HTTPError) as e:
        eventually(lambda: urllib.request.urlopen(gone).read() and (_ for _ in ()).throw(AssertionError("still there")))
    assert e.value.code == 404


def test_boto3_over_https(tls_node, tmp_path):
    """boto3 over HTTPS sends uploads as aws-chunked with a trailing CRC32
    (its default since 2025): put, multipart, get, presign, delete."""
    url, ca, key = tls_node
    s3 = boto3.client("s3", endpoint_url=url, aws_access_key_id=key["id"], aws_secret_access_key=key["secret"],
                      region_name="us-east-1", verify=ca,
                      config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
    b = bucket_name("https")
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="a.txt", Body=b"over tls", ContentType="text/plain")
    assert s3.get_object(Bucket=b, Key="a.txt")["Body"].read() == b"over tls"
    big = data(11 * MIB, "tls")
    src = tmp_path / "big.bin"
    src.write_bytes(big)
    s3.upload_file(str(src), b, "big.bin", Config=TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB))
    head = s3.head_object(Bucket=b, Key="big.bin")
    assert head["ContentLength"] == len(big) and head["ETag"].endswith('-3"')
    dst = tmp_path / "back.bin"
    s3.download_file(b, "big.bin", str(dst))
    assert dst.read_bytes() == big
    import ssl
    u = s3.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "a.txt"}, ExpiresIn=60)
    assert urllib.request.urlopen(u, context=ssl.create_default_context(cafile=ca)).read() == b"over tls"
    s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "a.txt"}, {"Key": "big.bin"}]})
    s3.delete_bucket(Bucket=b)
