"""reach_gpu.py -- NCCL reached on a real GPU the ways frameworks other than PyTorch reach it,
one rank, one communicator, REPS all-reduces of COUNT floats in place:

  cupy    CuPy's nccl module (cupy.cuda.nccl.NcclCommunicator)
  ctypes  ctypes.CDLL on the libnccl.so.2 PyTorch ships (RTLD_LOCAL), every function looked up
          by name with dlsym, as vLLM's pynccl does

Usage: reach_gpu.py cupy|ctypes [REPS [COUNT]]. Prints one line: the mode, the library and
the calls made; tests/gpu/run.py compares them with the trace the shim wrote."""
import ctypes
import os
import sys

MODE = sys.argv[1]
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
COUNT = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
NCCL_FLOAT32, NCCL_SUM = 7, 0


def run_cupy():
    import cupy
    from cupy.cuda import nccl
    uid = nccl.get_unique_id()
    comm = nccl.NcclCommunicator(1, uid, 0)
    x = cupy.ones(COUNT, dtype=cupy.float32)
    s = cupy.cuda.Stream()
    for _ in range(REPS):
        comm.allReduce(x.data.ptr, x.data.ptr, COUNT, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, s.ptr)
    s.synchronize()
    comm.destroy()
    return "cupy " + cupy.__version__


def run_ctypes():
    import torch
    import nvidia.nccl
    lib = os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2")
    nccl = ctypes.CDLL(lib, mode=os.RTLD_LOCAL)
    comm = ctypes.c_void_p()
    devs = (ctypes.c_int * 1)(0)
    r = nccl.ncclCommInitAll(ctypes.byref(comm), 1, devs)
    if r != 0:
        sys.exit(f"reach_gpu: ncclCommInitAll returned {r}")
    x = torch.ones(COUNT, dtype=torch.float32, device="cuda:0")
    stream = torch.cuda.current_stream().cuda_stream
    for _ in range(REPS):
        r = nccl.ncclAllReduce(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(x.data_ptr()),
                               ctypes.c_size_t(COUNT), NCCL_FLOAT32, NCCL_SUM, comm,
                               ctypes.c_void_p(stream))
        if r != 0:
            sys.exit(f"reach_gpu: ncclAllReduce returned {r}")
    torch.cuda.synchronize()
    nccl.ncclCommDestroy(comm)
    return "ctypes " + lib


def main():
    what = {"cupy": run_cupy, "ctypes": run_ctypes}[MODE]()
    print(f"reach_gpu: {what}: {REPS} AllReduce of {COUNT} fp32", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
