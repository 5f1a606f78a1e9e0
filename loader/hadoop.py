"""Files of the output through Hadoop's FileSystem API in the JVM (py4j).

Everything the loader does to the warehouse (its state directory, the staged
and published Parquet files) goes through here rather than Python's ``os``, so
the same code is correct on ``hdfs://`` as on ``file://``: create-exclusive
and rename are the NameNode's atomic operations there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession


@dataclass(frozen=True, slots=True)
class FileStatus:
    uri: str
    length: int
    is_dir: bool

    @property
    def name(self) -> str:
        return self.uri.rstrip("/").rsplit("/", 1)[-1]


class FileExists(Exception):
    """A create-exclusive found the file already there."""


class HadoopFS:
    """One Hadoop FileSystem, addressed by URIs (or paths relative to ``root``)."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        jvm: Any = spark._jvm  # py4j: the documented way to reach Hadoop
        self._jvm = jvm
        self._conf = spark._jsc.hadoopConfiguration()
        self.root = root.rstrip("/")
        self._fs = self._path(self.root).getFileSystem(self._conf)

    def _path(self, uri: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(uri)

    def uri(self, relative: str) -> str:
        """The URI of ``relative`` (a path under the root, '/'-separated)."""
        return f"{self.root}/{relative.lstrip('/')}" if relative else self.root

    def qualify(self, uri: str) -> str:
        """The fully qualified form Hadoop reports in listings (``file:/x`` for ``file:///x``)."""
        return str(self._fs.makeQualified(self._path(uri)).toString())

    def exists(self, uri: str) -> bool:
        return bool(self._fs.exists(self._path(uri)))

    def mkdirs(self, uri: str) -> None:
        if not self._fs.mkdirs(self._path(uri)):
            raise OSError(f"cannot create directory {uri}")

    def delete(self, uri: str, *, recursive: bool = False) -> bool:
        return bool(self._fs.delete(self._path(uri), recursive))

    def rename(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst`` (which must not exist); its parent is created."""
        parent = self._path(dst).getParent()
        if parent is not None:
            self._fs.mkdirs(parent)
        if not self._fs.rename(self._path(src), self._path(dst)):
            raise OSError(f"cannot rename {src} to {dst}")

    def modification_time(self, uri: str) -> float:
        """The file's modification time, in seconds since the epoch."""
        return int(self._fs.getFileStatus(self._path(uri)).getModificationTime()) / 1000.0

    def set_modification_time(self, uri: str, seconds: float) -> None:
        """Set the file's modification time (its access time stays as it is)."""
        self._fs.setTimes(self._path(uri), int(seconds * 1000), -1)

    def list_dir(self, uri: str) -> list[FileStatus]:
        """The entries of a directory ([] when it does not exist)."""
        path = self._path(uri)
        if not self._fs.exists(path):
            return []
        return [
            FileStatus(str(s.getPath().toString()), int(s.getLen()), bool(s.isDirectory()))
            for s in self._fs.listStatus(path)
        ]

    def list_files(self, uri: str) -> list[FileStatus]:
        """Every file under a directory, recursively ([] when it does not exist)."""
        path = self._path(uri)
        if not self._fs.exists(path):
            return []
        found = []
        iterator = self._fs.listFiles(path, True)
        while iterator.hasNext():
            s = iterator.next()
            found.append(FileStatus(str(s.getPath().toString()), int(s.getLen()), False))
        return found

    def read_bytes(self, uri: str) -> bytes:
        stream = self._fs.open(self._path(uri))
        try:
            out = self._jvm.java.io.ByteArrayOutputStream()
            self._jvm.org.apache.hadoop.io.IOUtils.copyBytes(stream, out, 65536, False)
            return bytes(out.toByteArray())
        finally:
            stream.close()

    def create_exclusive(self, uri: str, data: bytes) -> None:
        """Create ``uri`` holding ``data``; FileExists if it is already there.

        The create itself is the atomic step (the NameNode's create with
        overwrite=false); a crash before close may leave the file shorter, which
        readers of state files detect (they are JSON) and repair."""
        path = self._path(uri)
        try:
            stream = self._fs.create(path, False)
        except Exception as exc:  # py4j's Py4JJavaError wrapping FileAlreadyExistsException
            if "FileAlreadyExistsException" in str(exc) or self._fs.exists(path):
                raise FileExists(uri) from None
            raise
        try:
            stream.write(bytearray(data))
            stream.hflush()
        finally:
            stream.close()

    def write_replace(self, uri: str, data: bytes) -> None:
        """Replace ``uri`` with ``data`` all at once: write a side file, then rename it over."""
        side = f"{uri}.writing"
        self.delete(side)
        stream = self._fs.create(self._path(side), True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()
        self.delete(uri)
        self.rename(side, uri)
