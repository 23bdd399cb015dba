"""Reads Loom checkpoints with numpy alone (no compiled extension needed).

    from loom.checkpoint import read_checkpoint
    step, tensors = read_checkpoint("ckpt")        # a --save root (its latest) or a step directory
    kind, array = tensors["fc1.weight"]

A checkpoint's manifest (format 3) lists per tensor its shards: the blocks a partitioned run's
ranks wrote, each a .npy file with its place in the global tensor. read_checkpoint assembles
every tensor from them, checking each file's size and CRC-32 against the manifest. Formats 1
and 2 (one file per tensor) are read too. See docs/reliability.md.

This file imports nothing from the rest of the package, so scripts may load it by path.
"""

import json
import os
import zlib

import numpy as np

__all__ = ["read_checkpoint", "step_directory"]


def step_directory(path):
    """The step directory `path` names: itself when it holds manifest.json, else its `latest`."""
    if os.path.isfile(os.path.join(path, "manifest.json")):
        return path
    latest = os.path.join(path, "latest")
    if os.path.islink(latest) or os.path.isdir(latest):
        return os.path.join(path, os.readlink(latest)) if os.path.islink(latest) else latest
    raise ValueError(f"{path}: not a checkpoint (no manifest.json, no latest)")


def _shards(entry, fmt):
    if fmt >= 3:
        return entry["shards"]
    return [{"file": entry["file"], "offsets": [0] * len(entry["shape"]), "shape": entry["shape"],
             "bytes": entry.get("bytes"), "crc32": entry.get("crc32")}]


def _read_file(directory, shard, verify):
    path = os.path.join(directory, shard["file"])
    with open(path, "rb") as f:
        data = f.read()
    if verify and (len(data) != shard["bytes"] or zlib.crc32(data) != shard["crc32"]):
        raise ValueError(f"{path}: size or CRC-32 differs from the manifest's: the checkpoint "
                         "is damaged or mixed from two saves")
    array = np.load(path)
    if list(array.shape) != list(shard["shape"]):
        raise ValueError(f"{path}: holds shape {list(array.shape)}, the manifest says "
                         f"{shard['shape']}")
    return array


def read_checkpoint(path, names=None):
    """Returns (step, {name: (kind, array)}) of the checkpoint at `path`, every tensor whole
    (of the names in `names`, when given). Raises ValueError on a damaged checkpoint."""
    directory = step_directory(path)
    with open(os.path.join(directory, "manifest.json")) as f:
        manifest = json.load(f)
    fmt = manifest.get("format")
    if fmt not in (1, 2, 3):
        raise ValueError(f"{directory}/manifest.json: unknown format {fmt!r}")
    tensors = {}
    for entry in manifest["tensors"]:
        if names is not None and entry["name"] not in names:
            continue
        whole = None
        for shard in _shards(entry, fmt):
            block = _read_file(directory, shard, fmt >= 2)
            if whole is None:
                whole = np.zeros(entry["shape"], dtype=block.dtype)
            where = tuple(slice(o, o + n) for o, n in zip(shard["offsets"], shard["shape"]))
            whole[where] = block
        tensors[entry["name"]] = (entry["kind"], whole)
    return manifest["step"], tensors
