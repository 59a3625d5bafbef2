"""lockstep: finds which rank and which NCCL call hung a distributed GPU job.

The wheel installs the `lockstep` command (a native program) with its shim and profiler plugin;
this package only lets `python -m lockstep` run it (docs/install.md)."""
