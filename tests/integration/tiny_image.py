"""Tiny OCI images built offline for the tests and the bench: an OCI image layout directory (the
form `oci:/path:tag` names) whose one layer holds Debian's static busybox and the files given.

The layout is written directly (tar layer, config and manifest blobs, index.json), the way any
image builder writes one, so a test can also craft a hostile layer (entries with `../`, absolute
symlinks) that no well-behaved builder would make.
"""
import gzip
import hashlib
import io
import json
import os
import tarfile

BUSYBOX = "/bin/busybox"
# The busybox applets a job script needs, as links to /bin/busybox.
APPLETS = ["sh", "cat", "echo", "mkdir", "ls", "env", "pwd", "sleep", "true", "false", "id", "grep", "test",
           "sed", "head", "wc", "rm", "cp", "touch", "stat"]


def _blob(layout, data):
    digest = hashlib.sha256(data).hexdigest()
    os.makedirs(os.path.join(layout, "blobs", "sha256"), exist_ok=True)
    with open(os.path.join(layout, "blobs", "sha256", digest), "wb") as f:
        f.write(data)
    return "sha256:" + digest, len(data)


def _add(tar, name, data=None, mode=0o644, kind=tarfile.REGTYPE, link=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = 1700000000
    if kind == tarfile.SYMTYPE:
        info.linkname = link
        tar.addfile(info)
    elif kind == tarfile.DIRTYPE:
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def layer(files=None, raw_entries=None, busybox=True):
    """An uncompressed layer tar. files: path -> text or (text, mode); raw_entries: (name, kind,
    data, link) tuples added as they are (hostile layers)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = set()

        def parents(path):
            parts = path.strip("/").split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    _add(tar, d, kind=tarfile.DIRTYPE, mode=0o755)

        for d in ("bin", "tmp", "etc", "usr/local/bin"):
            parents(d + "/x")
        if busybox:
            with open(BUSYBOX, "rb") as f:
                _add(tar, "bin/busybox", f.read(), mode=0o755)
            for applet in APPLETS:
                _add(tar, "bin/" + applet, kind=tarfile.SYMTYPE, link="busybox")
        for path, content in (files or {}).items():
            text, mode = content if isinstance(content, tuple) else (content, 0o644)
            parents(path)
            _add(tar, path.strip("/"), text.encode() if isinstance(text, str) else text, mode=mode)
        for name, kind, data, link in raw_entries or []:
            _add(tar, name, data, mode=0o644 if kind != tarfile.DIRTYPE else 0o755, kind=kind, link=link)
    return buf.getvalue()


def build(layout, tag="latest", files=None, entrypoint=None, cmd=None, env=None, working_dir=None,
          raw_entries=None):
    """Writes (or adds `tag` to) the OCI layout at `layout`; returns the manifest digest."""
    os.makedirs(layout, exist_ok=True)
    with open(os.path.join(layout, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    tar = layer(files, raw_entries)
    gz = gzip.compress(tar, mtime=0)
    layer_digest, layer_size = _blob(layout, gz)
    cfg = {}
    if entrypoint is not None:
        cfg["Entrypoint"] = entrypoint
    if cmd is not None:
        cfg["Cmd"] = cmd
    cfg["Env"] = ["PATH=/usr/local/bin:/bin"] + list(env or [])
    if working_dir:
        cfg["WorkingDir"] = working_dir
    config = {"architecture": "amd64", "os": "linux", "config": cfg,
              "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(tar).hexdigest()]},
              "history": [{"created_by": "tests/integration/tiny_image.py"}]}
    config_digest, config_size = _blob(layout, json.dumps(config).encode())
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": config_digest, "size": config_size},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                            "digest": layer_digest, "size": layer_size}]}
    manifest_digest, manifest_size = _blob(layout, json.dumps(manifest).encode())
    index_path = os.path.join(layout, "index.json")
    index = {"schemaVersion": 2, "manifests": []}
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
    index["manifests"] = [m for m in index["manifests"]
                          if m.get("annotations", {}).get("org.opencontainers.image.ref.name") != tag]
    index["manifests"].append({"mediaType": "application/vnd.oci.image.manifest.v1+json",
                               "digest": manifest_digest, "size": manifest_size,
                               "annotations": {"org.opencontainers.image.ref.name": tag}})
    with open(index_path, "w") as f:
        json.dump(index, f)
    return manifest_digest


if __name__ == "__main__":
    import sys
    out = sys.argv[1] if len(sys.argv) > 1 else "tiny-image"
    print(build(out, files={"usr/local/bin/train": ("#!/bin/sh\necho hello from the image\n", 0o755)}))
