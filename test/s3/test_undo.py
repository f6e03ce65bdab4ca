"""Undo over S3 with boto3 on a 3-node cluster (design 0007): a versioned
bucket's overwrite and delete, its versions listed, an old version read
by versionId, a delete marker and a version deleted; and a snapshot read
through the keys under .snapshots/NAME/. Each step goes through another
node than the one before."""
import time

import pytest
from botocore.exceptions import ClientError

from test_clients import eventually, make_bucket, s3client


def retry(fn, bound=30):
    """fn until it stops failing for the cluster's log version (a new
    cluster raises it right after it starts)."""
    deadline = time.time() + bound
    while True:
        try:
            return fn()
        except (ClientError, RuntimeError) as e:
            if time.time() > deadline or "pgrade" not in str(e) and "ServiceUnavailable" not in str(e):
                raise
            time.sleep(0.2)


def versions(s3, bucket):
    """[(kind, key, version id, is latest)] newest first within a key,
    over every page (MaxKeys 2)."""
    out, kw = [], {"Bucket": bucket, "MaxKeys": 2}
    while True:
        page = s3.list_object_versions(**kw)
        items = [("V", v["Key"], v["VersionId"], v["IsLatest"], v["LastModified"]) for v in page.get("Versions", [])]
        items += [("M", m["Key"], m["VersionId"], m["IsLatest"], m["LastModified"]) for m in page.get("DeleteMarkers", [])]
        items.sort(key=lambda i: (i[1], -i[4].timestamp()))
        out += [i[:4] for i in items]
        if not page["IsTruncated"]:
            return out
        kw["KeyMarker"], kw["VersionIdMarker"] = page["NextKeyMarker"], page.get("NextVersionIdMarker", "")


def current(s3, bucket, key, version):
    """GetObject of key, once its current version is version."""
    got = s3.get_object(Bucket=bucket, Key=key)
    if got["VersionId"] != version:
        raise AssertionError(f"current version {got['VersionId']}, want {version}")
    return got


def test_boto3_versioning(cluster, key):
    b = make_bucket(cluster, key, "versions")
    s = [s3client(u, key) for u in cluster.urls]
    assert s[0].get_bucket_versioning(Bucket=b).get("Status") is None
    retry(lambda: s[0].put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"}))
    assert eventually(lambda: s[1].get_bucket_versioning(Bucket=b)["Status"]) == "Enabled"
    with pytest.raises(ClientError) as e:
        s[0].put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Suspended"})
    assert e.value.response["Error"]["Code"] == "NotImplemented"

    # An overwrite keeps the old version; a delete makes a delete marker.
    v1 = s[0].put_object(Bucket=b, Key="site/index.html", Body=b"<h1>v1</h1>")["VersionId"]
    eventually(lambda: s[1].head_object(Bucket=b, Key="site/index.html"))
    v2 = s[1].put_object(Bucket=b, Key="site/index.html", Body=b"<h1>v2, broken</h1>")["VersionId"]
    assert v1 and v2 and v1 != v2
    eventually(lambda: s[2].head_object(Bucket=b, Key="site/index.html", VersionId=v2))
    d = s[2].delete_object(Bucket=b, Key="site/index.html")
    assert d["DeleteMarker"] is True
    marker = d["VersionId"]
    want = [("M", "site/index.html", marker, True), ("V", "site/index.html", v2, False), ("V", "site/index.html", v1, False)]
    assert eventually(lambda: versions(s[0], b) == want and versions(s[0], b)) == want
    with pytest.raises(ClientError) as e:
        s[0].get_object(Bucket=b, Key="site/index.html")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"

    # Read an old version by its ID, through each node.
    for c in s:
        assert c.get_object(Bucket=b, Key="site/index.html", VersionId=v1)["Body"].read() == b"<h1>v1</h1>"
    assert s[1].head_object(Bucket=b, Key="site/index.html", VersionId=v2)["ContentLength"] == len(b"<h1>v2, broken</h1>")

    # Undo the delete: deleting the marker makes v2 current again.
    s[1].delete_object(Bucket=b, Key="site/index.html", VersionId=marker)
    got = eventually(lambda: current(s[2], b, "site/index.html", v2))
    assert got["Body"].read() == b"<h1>v2, broken</h1>"
    # Undo the overwrite: deleting the current version makes v1 current.
    s[2].delete_object(Bucket=b, Key="site/index.html", VersionId=v2)
    got = eventually(lambda: current(s[0], b, "site/index.html", v1))
    assert got["Body"].read() == b"<h1>v1</h1>"
    assert versions(s[0], b) == [("V", "site/index.html", v1, True)]
    with pytest.raises(ClientError) as e:
        s[0].get_object(Bucket=b, Key="site/index.html", VersionId=v2)
    assert e.value.response["Error"]["Code"] == "NoSuchVersion"

    # A copy of a version onto its key restores it as a new version.
    v3 = s[0].put_object(Bucket=b, Key="site/index.html", Body=b"<h1>v3</h1>")["VersionId"]
    cp = s[1].copy_object(Bucket=b, Key="site/index.html", CopySource={"Bucket": b, "Key": "site/index.html", "VersionId": v1})
    assert cp["CopySourceVersionId"] == v1
    assert s[1].get_object(Bucket=b, Key="site/index.html")["Body"].read() == b"<h1>v1</h1>"
    assert [i[2] for i in versions(s[1], b)][1:] == [v3, v1]

    # Empty the bucket version by version, then delete it.
    objs = [{"Key": k, "VersionId": v} for _, k, v, _ in versions(s[2], b)]
    res = s[2].delete_objects(Bucket=b, Delete={"Objects": objs})
    assert len(res["Deleted"]) == len(objs) and not res.get("Errors")
    assert versions(s[0], b) == []
    s[0].delete_bucket(Bucket=b)


def test_boto3_snapshot_keys(cluster, key):
    b = make_bucket(cluster, key, "snapkeys")
    s = [s3client(u, key) for u in cluster.urls]
    s[0].put_object(Bucket=b, Key="img/logo.png", Body=b"logo v1")
    s[0].put_object(Bucket=b, Key="index.html", Body=b"home v1")
    retry(lambda: cluster.cli("snapshot", "create", b, "before"))
    s[1].put_object(Bucket=b, Key="index.html", Body=b"home v2")
    s[1].delete_object(Bucket=b, Key="img/logo.png")

    # The snapshot's files, through every node.
    for c in s:
        got = eventually(lambda: c.get_object(Bucket=b, Key=".snapshots/before/index.html"))
        assert got["Body"].read() == b"home v1"
        assert c.get_object(Bucket=b, Key=".snapshots/before/img/logo.png", Range="bytes=5-6")["Body"].read() == b"v1"
    names = s[2].list_objects_v2(Bucket=b, Prefix=".snapshots/", Delimiter="/")
    assert [p["Prefix"] for p in names["CommonPrefixes"]] == [".snapshots/before/"]
    tree = s[2].list_objects_v2(Bucket=b, Prefix=".snapshots/before/")
    assert [o["Key"] for o in tree["Contents"]] == [".snapshots/before/img/logo.png", ".snapshots/before/index.html"]
    # Hidden from the bucket's own listing; read-only.
    top = s[2].list_objects_v2(Bucket=b, Delimiter="/")
    assert [o["Key"] for o in top.get("Contents", [])] == ["index.html"] and not top.get("CommonPrefixes")
    with pytest.raises(ClientError) as e:
        s[0].put_object(Bucket=b, Key=".snapshots/before/index.html", Body=b"x")
    assert e.value.response["Error"]["Code"] == "AccessDenied"
    with pytest.raises(ClientError) as e:
        s[0].delete_object(Bucket=b, Key=".snapshots/before/index.html")
    assert e.value.response["Error"]["Code"] == "AccessDenied"
    # Restore a deleted file by copying it out of the snapshot.
    s[0].copy_object(Bucket=b, Key="img/logo.png", CopySource={"Bucket": b, "Key": ".snapshots/before/img/logo.png"})
    assert eventually(lambda: s[1].get_object(Bucket=b, Key="img/logo.png"))["Body"].read() == b"logo v1"
