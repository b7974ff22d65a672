"""PyTorch checkpoints and numpy pickles read into numpy arrays, without torch and without running
pickled code.

A `.pth` file is a pickle: loading one with plain `pickle.load` (or `torch.load` without
`weights_only`) runs whatever callable it names. Here the unpickler resolves only an allowlist of
names that rebuild containers, tensors and arrays (`find_class`), as `torch.load(weights_only=True)`
does; any other name is an EdgegazeError. Tensors become numpy arrays, so `edgegaze convert` needs
no torch. Both of torch's file formats are read:
- legacy (torch < 1.6, e.g. 3DDFA_V2's weights): pickles in a row (magic number, protocol,
  system info, the object, the storage keys), then each storage's raw bytes after an int64 count;
- zip (torch >= 1.6): `<name>/data.pkl` and one `<name>/data/<key>` file per storage.
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.errors import EdgegazeError

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER
LEGACY_PROTOCOL = 1001
STORAGE_DTYPES = {"DoubleStorage": np.float64, "FloatStorage": np.float32, "HalfStorage": np.float16,
                  "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
                  "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_}


@dataclass
class _Storage:
    key: str
    dtype: type


@dataclass
class _Tensor:
    """A tensor whose storage bytes may come after the pickle (legacy format): made an array later."""

    storage: _Storage
    offset: int
    shape: tuple
    stride: tuple

    def array(self, storages: dict[str, np.ndarray]) -> np.ndarray:
        flat = storages[self.storage.key]
        item = flat.itemsize
        return np.lib.stride_tricks.as_strided(flat[self.offset:], self.shape, [s * item for s in self.stride]).copy()


def _rebuild_tensor(storage, offset, shape, stride, *_):  # torch._utils._rebuild_tensor_v2
    return _Tensor(storage, int(offset), tuple(shape), tuple(stride))


def _rebuild_parameter(data, *_):  # torch._utils._rebuild_parameter: an nn.Parameter is its data here
    return data


def _reconstruct(cls, shape, dtype):  # numpy.core.multiarray._reconstruct: the array before its __setstate__
    if cls is not np.ndarray:
        raise pickle.UnpicklingError(f"array subclass {cls}")
    return np.ndarray.__new__(np.ndarray, shape, dtype)


class _Unpickler(pickle.Unpickler):
    ALLOWED = {("collections", "OrderedDict"): collections.OrderedDict,
               ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
               ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
               ("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
               ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
               ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
               **{("torch", name): name for name in STORAGE_DTYPES}}

    def __init__(self, fh):
        super().__init__(fh)
        self.storages: dict[str, _Storage] = {}  # key -> storage, filled by persistent_load

    def find_class(self, module, name):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which a file of weights has no need of")
        return self.ALLOWED[(module, name)]

    def persistent_load(self, pid):
        """('storage', type, key, location, numel[, view]) -> the storage, made once per key."""
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage" and pid[1] in STORAGE_DTYPES):
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r:.80}")
        if len(pid) > 5 and pid[5] is not None:
            raise pickle.UnpicklingError("storage views (torch < 0.4 files) are not read")
        key = str(pid[2])
        return self.storages.setdefault(key, _Storage(key, STORAGE_DTYPES[pid[1]]))


def _arrays(obj, storages: dict[str, np.ndarray]):
    """The unpickled object with every tensor made a numpy array."""
    if isinstance(obj, _Tensor):
        return obj.array(storages)
    if isinstance(obj, dict):
        return type(obj)((k, _arrays(v, storages)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_arrays(v, storages) for v in obj)
    return obj


def _legacy(fh) -> object:
    if _Unpickler(fh).load() != LEGACY_MAGIC or _Unpickler(fh).load() != LEGACY_PROTOCOL:
        raise pickle.UnpicklingError("not a PyTorch checkpoint (wrong magic number or protocol)")
    _Unpickler(fh).load()  # system info: byte order and type sizes
    unpickler = _Unpickler(fh)
    obj = unpickler.load()
    keys = _Unpickler(fh).load()
    storages = {}
    for key in keys:  # each: int64 element count, then the elements (little-endian, as written on x86/ARM)
        dtype = np.dtype(unpickler.storages[key].dtype)
        count = int(np.frombuffer(fh.read(8), "<i8")[0])
        data = fh.read(count * dtype.itemsize)
        if len(data) != count * dtype.itemsize:
            raise pickle.UnpicklingError("truncated storage data")
        storages[key] = np.frombuffer(data, dtype.newbyteorder("<"))
    return _arrays(obj, storages)


def _zip(path: Path) -> object:
    with zipfile.ZipFile(path) as zf:
        pkl = next((n for n in zf.namelist() if n.endswith("/data.pkl")), None)
        if pkl is None:
            raise pickle.UnpicklingError("a zip file without data.pkl")
        unpickler = _Unpickler(io.BytesIO(zf.read(pkl)))
        obj = unpickler.load()
        root = pkl[: -len("data.pkl")]
        storages = {k: np.frombuffer(zf.read(f"{root}data/{k}"), np.dtype(s.dtype).newbyteorder("<"))
                    for k, s in unpickler.storages.items()}
    return _arrays(obj, storages)


def load(path: str | Path) -> object:
    """A PyTorch checkpoint (either format) or a pickle of numpy arrays, tensors as numpy arrays.
    EdgegazeError for anything else, including a pickle that names code outside the allowlist."""
    path = Path(path)
    try:
        if zipfile.is_zipfile(path):
            return _zip(path)
        with open(path, "rb") as fh:
            head = _Unpickler(fh).load()
            if head == LEGACY_MAGIC:
                fh.seek(0)
                return _legacy(fh)
            return _arrays(head, {})
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, AttributeError, IndexError,
            zipfile.BadZipFile) as e:
        raise EdgegazeError(f"{path}: not a file of weights edgegaze can read ({type(e).__name__}: {e}); "
                            "edgegaze reads PyTorch checkpoints and pickles of numpy arrays, and runs no code "
                            "from them") from None
