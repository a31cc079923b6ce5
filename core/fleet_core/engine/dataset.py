"""The selected dataset as a handle object in the sandbox, never pasted into the prompt."""

from __future__ import annotations

import json

from dspy.primitives.sandbox_serializable import SandboxSerializable

from fleet_core.models import DatasetContext

# Stdlib-only code defining the handle class inside the sandbox (cwd is the workspace root).
_SETUP = '''
import hashlib as _fleet_hashlib, json as _fleet_json
class FleetDataset:
    """The selected dataset: .path, .metadata, .preview(), .chunks(), .lines(), .search()."""
    def __init__(self, meta):
        self.metadata = dict(meta)
        self.path = meta["path"]
        digest = _fleet_hashlib.sha256()
        with open(self.path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() != meta["sha256"]:
            raise RuntimeError("dataset source changed; select the new revision")
    def __repr__(self):
        return "FleetDataset(%r, %d bytes)" % (self.path, self.metadata["size_bytes"])
    def preview(self, max_bytes=2000):
        with open(self.path, "rb") as handle:
            return handle.read(max(0, min(int(max_bytes), 1 << 20))).decode("utf-8", "replace")
    def chunks(self, chunk_bytes=1 << 20):
        size = max(1, min(int(chunk_bytes), 1 << 20))
        with open(self.path, "rb") as handle:
            for block in iter(lambda: handle.read(size), b""):
                yield block.decode("utf-8", "replace")
    def lines(self):
        with open(self.path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if len(line) > 1_000_000:
                    raise ValueError("a line is longer than 1,000,000 characters; use chunks()")
                yield line.rstrip("\\n")
    def search(self, query, limit=20):
        limit = max(1, min(int(limit), 1000))
        found = []
        needle = str(query).lower()
        for number, line in enumerate(self.lines(), 1):
            if needle in line.lower():
                found.append((number, line[:2000]))
                if len(found) >= limit:
                    break
        return found
'''


class DatasetHandle(SandboxSerializable):  # type: ignore[misc]
    """Metadata of the selected dataset; the sandbox gets a ``FleetDataset`` view of the file."""

    def __init__(self, dataset: DatasetContext) -> None:
        self.dataset = dataset

    def sandbox_setup(self) -> str:
        return ""  # the class is defined by the assignment, so the prompt stays short

    def to_sandbox(self) -> bytes:
        return json.dumps(self.dataset.model_dump(mode="json")).encode()

    def sandbox_assignment(self, var_name: str, data_expr: str) -> str:
        return f"{_SETUP}\n{var_name} = FleetDataset(_fleet_json.loads({data_expr}))"

    def rlm_preview(self, max_chars: int = 500) -> str:
        d = self.dataset
        text = (
            f"FleetDataset {d.path} ({d.size_bytes} bytes)"
            + (f": {d.description}" if d.description else "")
            + "; methods: .preview(max_bytes), .lines(), .chunks(chunk_bytes), "
            ".search(query, limit), .path, .metadata"
        )
        return text[: min(max_chars, 500)]

    def __str__(self) -> str:
        return self.rlm_preview()
