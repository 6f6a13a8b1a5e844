"""Decode raw 64 kbit/s G.722 (.g722) to 16 kHz mono 16-bit WAV with libspandsp (through ctypes).

libspandsp.so.2 comes from Debian's `libspandsp2` package (apt-get install libspandsp2).
Usage as a tool: python g722dec.py IN.g722 OUT.wav [LIBPATH]
"""
import ctypes
import ctypes.util
import sys
import wave

_lib = None


def find_library():
    """Return a loadable name for libspandsp, or None."""
    for name in ("libspandsp.so.2", ctypes.util.find_library("spandsp")):
        if not name:
            continue
        try:
            ctypes.CDLL(name)
            return name
        except OSError:
            pass
    return None


def load(path=None):
    global _lib
    path = path or find_library()
    if path is None:
        raise OSError("libspandsp.so.2 not found; install it with: apt-get install libspandsp2")
    lib = ctypes.CDLL(path)
    lib.g722_decode_init.restype = ctypes.c_void_p
    lib.g722_decode_init.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.g722_decode.restype = ctypes.c_int
    lib.g722_decode.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int16), ctypes.c_char_p, ctypes.c_int]
    lib.g722_decode_free.argtypes = [ctypes.c_void_p]
    _lib = lib


def decode(src, dst):
    """Decode src (.g722, 64 kbit/s, no header) into dst (.wav). Returns the duration in seconds."""
    if _lib is None:
        load()
    with open(src, "rb") as f:
        data = f.read()
    st = _lib.g722_decode_init(None, 64000, 0)
    out = (ctypes.c_int16 * (2 * len(data) + 16))()
    n = _lib.g722_decode(st, out, data, len(data))
    _lib.g722_decode_free(st)
    with wave.open(dst, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(bytes(memoryview(out).cast("B")[: 2 * n]))
    return n / 16000.0


if __name__ == "__main__":
    load(sys.argv[3] if len(sys.argv) > 3 else None)
    print(decode(sys.argv[1], sys.argv[2]))
