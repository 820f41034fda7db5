"""Python WebHDFS clients against Nimbus: the `hdfs` package (HdfsCLI) and
fsspec's WebHDFS file system as pandas uses it.

Needs NIMBUS_WEBHDFS=host:port of a running server (run.sh starts a dev server
when it is unset). NIMBUS_WEBHDFS_USER (default: the OS user) is the user the
suite acts as; it must be able to create a directory in "/". Every test works in
its own fresh directory under /pytest-<random>/.
"""
import getpass
import hashlib
import io
import os
import struct
import uuid

import fsspec
import pandas as pd
import pytest
import requests
from hdfs import InsecureClient
from hdfs.util import HdfsError

ADDR = os.environ.get("NIMBUS_WEBHDFS", "")
USER = os.environ.get("NIMBUS_WEBHDFS_USER") or getpass.getuser()
BASE = "/pytest-" + uuid.uuid4().hex[:12]

pytestmark = pytest.mark.skipif(not ADDR, reason="NIMBUS_WEBHDFS is not set (use tests/python/run.sh)")


@pytest.fixture(scope="session")
def client():
    c = InsecureClient("http://" + ADDR, user=USER)
    c.makedirs(BASE)
    yield c
    c.delete(BASE, recursive=True)


@pytest.fixture
def d(client, request):
    """A fresh directory for one test."""
    path = BASE + "/" + request.node.name.replace("[", "_").replace("]", "_")
    client.makedirs(path)
    return path


@pytest.fixture
def webfs():
    host, port = ADDR.rsplit(":", 1)
    return fsspec.filesystem("webhdfs", host=host, port=int(port), user=USER)


# ---------------------------------------------------------------- hdfs package


def test_write_read_status_list(client, d):
    data = bytes(range(256)) * 40
    client.write(d + "/a.bin", data=data)
    with client.read(d + "/a.bin") as r:
        assert r.read() == data
    st = client.status(d + "/a.bin")
    assert st["type"] == "FILE"
    assert st["length"] == len(data)
    assert st["owner"] == USER
    assert st["pathSuffix"] == ""
    assert client.status(d)["type"] == "DIRECTORY"
    client.makedirs(d + "/sub/deeper")
    assert client.list(d) == ["a.bin", "sub"]
    listed = dict(client.list(d, status=True))
    assert listed["a.bin"]["length"] == len(data)
    assert listed["sub"]["type"] == "DIRECTORY"


def test_write_streams_generator_chunked(client, d):
    # A generator body makes requests send Transfer-Encoding: chunked.
    parts = [bytes([i]) * 9000 for i in range(10)]
    client.write(d + "/gen.bin", data=iter(parts))
    with client.read(d + "/gen.bin") as r:
        assert r.read() == b"".join(parts)


def test_write_context_manager_text(client, d):
    with client.write(d + "/t.txt", encoding="utf-8") as w:
        w.write("héllo\n")
        w.write("wörld\n")
    with client.read(d + "/t.txt", encoding="utf-8") as r:
        assert r.read() == "héllo\nwörld\n"


def test_read_offset_length(client, d):
    data = bytes(i % 251 for i in range(5000))
    client.write(d + "/f", data=data)
    with client.read(d + "/f", offset=1000, length=777) as r:
        assert r.read() == data[1000:1777]
    with client.read(d + "/f", offset=4990) as r:
        assert r.read() == data[4990:]
    with client.read(d + "/f", chunk_size=1000) as chunks:
        assert b"".join(chunks) == data


def test_append(client, d):
    client.write(d + "/log", data=b"one\n")
    client.write(d + "/log", data=b"two\n", append=True)
    client.write(d + "/log", data=b"three\n", append=True)
    with client.read(d + "/log") as r:
        assert r.read() == b"one\ntwo\nthree\n"


def test_overwrite_and_exists(client, d):
    client.write(d + "/f", data=b"v1")
    with pytest.raises(HdfsError) as e:
        client.write(d + "/f", data=b"v2")
    assert e.value.exception == "FileAlreadyExistsException"
    client.write(d + "/f", data=b"v2", overwrite=True)
    with client.read(d + "/f") as r:
        assert r.read() == b"v2"


def test_rename_delete(client, d):
    client.write(d + "/a", data=b"x")
    client.rename(d + "/a", d + "/b")
    assert client.status(d + "/a", strict=False) is None
    assert client.status(d + "/b")["length"] == 1
    client.makedirs(d + "/dir")
    client.rename(d + "/b", d + "/dir")  # into an existing directory, as hdfs dfs -mv
    assert client.status(d + "/dir/b")["length"] == 1
    with pytest.raises(HdfsError):
        client.rename(d + "/missing", d + "/c")
    with pytest.raises(HdfsError) as e:
        client.delete(d + "/dir")  # not empty
    assert e.value.exception == "PathIsNotEmptyDirectoryException"
    assert client.delete(d + "/dir", recursive=True) is True
    assert client.delete(d + "/dir", recursive=True) is False


def test_set_permission_owner_times_replication(client, d):
    client.write(d + "/f", data=b"x", permission="640")
    assert client.status(d + "/f")["permission"] == "640"
    client.set_permission(d + "/f", "600")
    assert client.status(d + "/f")["permission"] == "600"
    client.set_times(d + "/f", modification_time=1_600_000_000_000)
    assert client.status(d + "/f")["modificationTime"] == 1_600_000_000_000
    client.set_replication(d + "/f", 2)
    assert client.status(d + "/f")["replication"] == 2
    client.set_owner(d + "/f", group="staff")
    assert client.status(d + "/f")["group"] == "staff"


def test_content_summary(client, d):
    client.write(d + "/x", data=b"12345")
    client.write(d + "/s/y", data=b"123")
    cs = client.content(d)
    assert cs["directoryCount"] == 2
    assert cs["fileCount"] == 2
    assert cs["length"] == 8
    assert client.content(d + "/nope", strict=False) is None


def crc32c(data, _table=[]):
    if not _table:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            _table.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = _table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def hdfs_checksum(data, block_size):
    """HDFS's MD5-of-MD5-of-CRC32C for a file written with block_size."""
    if not data:
        return "MD5-of-0MD5-of-0CRC32", (struct.pack(">iq", 0, 0) + hashlib.md5(b"\0" * 32).digest()).hex()
    blocks = [data[i:i + block_size] for i in range(0, len(data), block_size)]
    md5s = b"".join(
        hashlib.md5(b"".join(struct.pack(">I", crc32c(b[j:j + 512])) for j in range(0, len(b), 512))).digest()
        for b in blocks)
    cap = 32
    while cap < len(md5s):
        cap *= 2
    cpb = (block_size + 511) // 512 if len(blocks) > 1 else 0
    return ("MD5-of-%dMD5-of-512CRC32C" % cpb,
            (struct.pack(">iq", 512, cpb) + hashlib.md5(md5s + b"\0" * (cap - len(md5s))).digest()).hex())


@pytest.mark.parametrize("size,block_size", [(0, 134217728), (1, 134217728), (3000, 134217728), (5000, 1024)])
def test_checksum(client, d, size, block_size):
    data = bytes((i * 31 + 7) % 256 for i in range(size))
    client.write(d + "/f", data=data, blocksize=block_size)
    cs = client.checksum(d + "/f")
    alg, hexbytes = hdfs_checksum(data, block_size)
    assert cs == {"algorithm": alg, "bytes": hexbytes, "length": 28}


def test_errors_are_remote_exceptions(client, d):
    with pytest.raises(HdfsError) as e:
        client.status(d + "/missing")
    assert e.value.exception == "FileNotFoundException"
    client.write(d + "/file", data=b"x")
    with pytest.raises(HdfsError) as e:
        client.makedirs(d + "/file/sub")
    assert e.value.exception == "ParentNotDirectoryException"
    with pytest.raises(HdfsError) as e:
        with client.read(d) as r:
            r.read()
    assert e.value.exception == "FileNotFoundException"


def test_raw_protocol_details(d):
    base = "http://%s/webhdfs/v1%s" % (ADDR, d)
    # noredirect gives the data URL in JSON; unknown parameters are ignored.
    r = requests.put(base + "/raw", params={"op": "CREATE", "user.name": USER, "noredirect": "true",
                                            "no.such.param": "1"})
    assert r.status_code == 200, r.text
    loc = r.json()["Location"]
    r = requests.put(loc, data=b"raw bytes")  # no Content-Type
    assert r.status_code == 201, r.text
    r = requests.get(base + "/raw", params={"op": "OPEN", "user.name": USER, "offset": 4})
    assert r.status_code == 200 and r.content == b"bytes"
    r = requests.get(base, params={"op": "NOSUCHOP", "user.name": USER})
    assert r.status_code == 400
    assert r.json()["RemoteException"]["exception"] == "IllegalArgumentException"
    r = requests.get(base + "/raw", params={"op": "GETFILESTATUS", "user.name": "nobody-" + USER, "doas": USER})
    assert r.status_code == 403
    assert r.json()["RemoteException"]["javaClassName"] == "org.apache.hadoop.security.AccessControlException"


def test_acls(client, d):
    # The hdfs package's ACL calls; expected values as HDFS 3.4.1 answers.
    client.makedirs(d + "/a", permission="750")
    client.set_acl(d + "/a", "user:bob:rwx,default:group:staff:r-x", clear=False)  # MODIFYACLENTRIES
    st = client.acl_status(d + "/a")
    assert st["entries"] == ["user:bob:rwx", "group::r-x", "default:user::rwx", "default:group::r-x",
                             "default:group:staff:r-x", "default:mask::r-x", "default:other::---"]
    assert st["permission"] == "770" and st["stickyBit"] is False and st["owner"] == USER
    assert client.status(d + "/a")["aclBit"] is True
    client.remove_acl_entries(d + "/a", "user:bob")
    client.remove_default_acl(d + "/a")
    assert client.acl_status(d + "/a")["entries"] == ["group::r-x"]
    client.remove_acl(d + "/a")
    assert client.acl_status(d + "/a")["entries"] == []
    assert "aclBit" not in client.status(d + "/a")
    client.set_acl(d + "/a", "user::rwx,user:carol:r--,group::---,other::---")  # SETACL
    assert client.acl_status(d + "/a")["entries"] == ["user:carol:r--", "group::---"]
    with pytest.raises(HdfsError) as e:
        client.set_acl(d + "/a", "user:bob:rwx")
    assert e.value.exception == "AclException"


def test_xattrs_raw(d):
    # The hdfs package has no xattr calls: the raw protocol, shapes as HDFS 3.4.1's JsonUtil.
    base = "http://%s/webhdfs/v1%s/x" % (ADDR, d)
    p = {"user.name": USER}
    assert requests.put(base, params=dict(p, op="MKDIRS")).status_code == 200
    r = requests.put(base, params=dict(p, op="SETXATTR", **{"xattr.name": "user.k", "xattr.value": "0x0aff",
                                                             "flag": "CREATE"}))
    assert r.status_code == 200, r.text
    r = requests.get(base, params=dict(p, op="GETXATTRS", encoding="hex"))
    assert r.json() == {"XAttrs": [{"name": "user.k", "value": "0x0aff"}]}
    r = requests.get(base, params=dict(p, op="GETXATTRS", encoding="base64", **{"xattr.name": "user.k"}))
    assert r.json() == {"XAttrs": [{"name": "user.k", "value": "0sCv8="}]}
    r = requests.get(base, params=dict(p, op="LISTXATTRS"))
    assert r.json() == {"XAttrNames": '["user.k"]'}
    r = requests.put(base, params=dict(p, op="SETXATTR", **{"xattr.name": "user.k", "xattr.value": "x",
                                                             "flag": "CREATE"}))
    assert r.status_code == 403 and r.json()["RemoteException"]["exception"] == "IOException"
    r = requests.put(base, params=dict(p, op="REMOVEXATTR", **{"xattr.name": "user.k"}))
    assert r.status_code == 200
    assert requests.get(base, params=dict(p, op="LISTXATTRS")).json() == {"XAttrNames": "[]"}


def test_unsupported_op_is_illegal_argument(d):
    # As HDFS answers an op it does not know: Hadoop's client raises an IOException for it.
    base = "http://%s/webhdfs/v1%s" % (ADDR, d)
    r = requests.put(base, params={"op": "CREATESNAPSHOT", "user.name": USER, "snapshotname": "s"})
    assert r.status_code == 400
    assert r.json()["RemoteException"]["javaClassName"] == "java.lang.IllegalArgumentException"


# ---------------------------------------------------------------- fsspec / pandas


def test_fsspec_basics(webfs, d):
    with webfs.open(d + "/f.bin", "wb") as f:
        f.write(b"abc" * 1000)
    assert webfs.info(d + "/f.bin")["size"] == 3000
    assert webfs.cat(d + "/f.bin") == b"abc" * 1000
    with webfs.open(d + "/f.bin", "rb") as f:
        f.seek(1500)
        assert f.read(6) == b"abcabc"
    assert [os.path.basename(p) for p in webfs.ls(d, detail=False)] == ["f.bin"]
    assert webfs.exists(d + "/f.bin")
    assert not webfs.exists(d + "/nope")
    with pytest.raises(FileNotFoundError):
        webfs.info(d + "/nope")
    webfs.mv(d + "/f.bin", d + "/g.bin")
    assert webfs.exists(d + "/g.bin") and not webfs.exists(d + "/f.bin")
    webfs.rm(d + "/g.bin")
    assert not webfs.exists(d + "/g.bin")


def test_fsspec_create_then_many_appends(webfs, d):
    # A small block size makes fsspec CREATE an empty file and POST each
    # buffered block to one reused APPEND URL.
    payload = os.urandom(50_000)
    with webfs.open(d + "/multi.bin", "wb", block_size=4096) as f:
        for i in range(0, len(payload), 3000):
            f.write(payload[i:i + 3000])
    assert webfs.cat(d + "/multi.bin") == payload


def test_pandas_csv_roundtrip(d):
    df = pd.DataFrame({"id": range(500), "name": ["n%d" % i for i in range(500)], "x": [i / 7 for i in range(500)]})
    url = "webhdfs://%s%s/frame.csv" % (ADDR, d)
    opts = {"user": USER}
    df.to_csv(url, index=False, storage_options=opts)
    back = pd.read_csv(url, storage_options=opts)
    pd.testing.assert_frame_equal(df, back)


def test_pandas_parquet_roundtrip(d):
    df = pd.DataFrame({"id": range(1000), "v": [float(i) * 1.5 for i in range(1000)],
                       "s": ["row-%d" % i for i in range(1000)]})
    url = "webhdfs://%s%s/frame.parquet" % (ADDR, d)
    opts = {"user": USER}
    df.to_parquet(url, index=False, storage_options=opts)
    back = pd.read_parquet(url, storage_options=opts)
    pd.testing.assert_frame_equal(df, back)
