#!/usr/bin/env python3
"""compact_trace.py -- rewrites real lockstep traces with their tables cut to what is used,
so that they make small fuzzing seeds (a default trace is mostly empty table space).

Usage: compact_trace.py OUT IN.trace...   OUT gets the compacted traces back to back (the fuzz
target splits an input by each header's file_size: one input = one job).
"""
import struct
import sys

HEADER = 4096
COMM, PEER, RECORD = 224, 32, 128


def layout(comm_cap, peer_cap, site_cap, site_entry, str_cap, ring_cap):
    """Section offsets as ls_layout_for() computes them."""
    at = HEADER
    comm_off = at
    at += comm_cap * COMM
    peer_off = at
    at += peer_cap * PEER
    site_off = at
    at += site_cap * site_entry
    str_off = at
    at += str_cap
    at = (at + 4095) & ~4095
    ring_off = at
    at += ring_cap * RECORD
    return comm_off, peer_off, site_off, str_off, ring_off, at


def compact(data):
    h = bytearray(data[:HEADER])
    u64 = lambda off: struct.unpack_from("<Q", h, off)[0]
    u32 = lambda off: struct.unpack_from("<I", h, off)[0]
    comm_off, comm_cap, peer_off, peer_cap = u64(32), u32(40), u64(48), u32(56)
    site_off, site_cap, site_entry = u64(64), u32(72), u32(76)
    str_off, ring_off, ring_cap = u64(80), u64(96), u64(104)
    ncomm, npeer = min(u32(856), comm_cap), min(u32(860), peer_cap)
    nsite, nstr = min(u32(864), site_cap), u64(872)
    c_off, p_off, s_off, t_off, r_off, size = layout(ncomm, npeer, nsite, site_entry, nstr,
                                                     ring_cap)
    for off, val in ((40, ncomm), (56, npeer), (72, nsite), (856, ncomm), (860, npeer),
                     (864, nsite)):
        struct.pack_into("<I", h, off, val)
    for off, val in ((24, size), (32, c_off), (48, p_off), (64, s_off), (80, t_off),
                     (88, nstr), (96, r_off)):
        struct.pack_into("<Q", h, off, val)
    out = bytearray(size)
    out[:HEADER] = h
    out[c_off:c_off + ncomm * COMM] = data[comm_off:comm_off + ncomm * COMM]
    out[p_off:p_off + npeer * PEER] = data[peer_off:peer_off + npeer * PEER]
    out[s_off:s_off + nsite * site_entry] = data[site_off:site_off + nsite * site_entry]
    out[t_off:t_off + nstr] = data[str_off:str_off + nstr]
    ring = data[ring_off:ring_off + ring_cap * RECORD]
    out[r_off:r_off + len(ring)] = ring
    return bytes(out)


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], "wb") as f:
        for path in sys.argv[2:]:
            f.write(compact(open(path, "rb").read()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
