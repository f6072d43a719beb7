"""Which GPUs does the CUDA driver see in this process?  Prints one ``CUDA_PROBE {json}`` line.

:func:`helpers.gpus.probe_cuda` runs it in a fresh process: the driver via ctypes, no TensorFlow.
"""

import ctypes
import json
import os


def probe() -> dict:
    """The variables, the driver library, an error (or None) and every device CUDA reports."""
    out = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
           "CUDA_DEVICE_ORDER": os.environ.get("CUDA_DEVICE_ORDER"),
           "driver": None, "error": None, "devices": []}
    lib = None
    for name in ("libcuda.so.1", "libcuda.so"):   # Linux (Windows: WSL); a Mac has no CUDA driver
        try:
            lib = ctypes.CDLL(name)
            out["driver"] = name
            break
        except OSError:
            pass
    if lib is None:
        out["error"] = "no CUDA driver (libcuda) on this machine"
        return out
    rc = lib.cuInit(0)
    if rc == 100:
        out["error"] = "cuInit: CUDA_ERROR_NO_DEVICE (no visible GPU)"
    elif rc != 0:
        out["error"] = "cuInit returned CUDA error %d" % rc
    else:
        count = ctypes.c_int(0)
        lib.cuDeviceGetCount(ctypes.byref(count))
        for i in range(count.value):
            dev = ctypes.c_int(0)
            lib.cuDeviceGet(ctypes.byref(dev), i)
            name = ctypes.create_string_buffer(256)
            bus = ctypes.create_string_buffer(64)
            raw = (ctypes.c_ubyte * 16)()
            lib.cuDeviceGetName(name, 256, dev)
            lib.cuDeviceGetPCIBusId(bus, 64, dev)
            uuid = None
            if lib.cuDeviceGetUuid(raw, dev) == 0:
                h = bytes(raw).hex()
                uuid = "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])
            out["devices"].append({"ordinal": i, "name": name.value.decode(errors="replace"),
                                   "pci_bus_id": bus.value.decode(errors="replace"), "uuid": uuid})
    return out


if __name__ == "__main__":
    print("CUDA_PROBE " + json.dumps(probe()))
