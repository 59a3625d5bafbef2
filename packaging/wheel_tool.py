#!/usr/bin/env python3
"""wheel_tool.py -- tags lockstep's wheel for manylinux and checks that it deserves the tag
(scripts/wheel runs both; docs/install.md). Standard library and binutils' readelf only.

  wheel_tool.py tag WHEEL PLATFORM OUTDIR [FILE...]
                                            writes the wheel retagged for PLATFORM (say
                                            manylinux_2_28_x86_64) to OUTDIR, with each FILE
                                            added to its dist-info; prints its path
  wheel_tool.py check WHEEL                 exit 0 when every rule holds, else 1 with one line
                                            per rule broken

What `check` asks, as auditwheel would of a manylinux_2_28 wheel:
  - the name's platform tag and the WHEEL file's Tag lines agree, and the tag's architecture is
    the machine of every ELF inside;
  - no ELF needs a symbol version newer than the tag's glibc (GLIBC_2.28), nor another library's
    versions (libgcc_s's GCC_ up to 7.0.0 are allowed);
  - every library an ELF needs is one the manylinux policy lets a wheel take from the system, or
    one the wheel carries, found through a run path relative to $ORIGIN (never an absolute one);
  - the dist-info holds LICENSE (Apache-2.0), and RECORD's hash of each member is right.
"""
import base64
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile

# What manylinux lets a wheel need from the system (the policy's libraries, less the graphics
# ones lockstep never needs).
SYSTEM_LIBS = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
               "libutil.so.1", "libresolv.so.2", "libnsl.so.1", "libgcc_s.so.1",
               "libstdc++.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
MACHINES = {"x86_64": "Advanced Micro Devices X86-64", "aarch64": "AArch64"}
GCC_MAX = (7, 0, 0)


def version_tuple(text):
    return tuple(int(x) for x in text.split("."))


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def tag(path, platform, outdir, extra=()):
    """Rewrites the wheel for `platform`: its name, its WHEEL file's Tag lines and RECORD's line
    for WHEEL; every other member as it was, its mode too (the commands stay executable); each
    file of `extra` added to the dist-info (and to RECORD)."""
    name = os.path.basename(path)
    m = re.match(r"(.+-py3-none-)([A-Za-z0-9_]+)\.whl$", name)
    if not m:
        raise SystemExit(f"wheel_tool.py: {name} is not a py3-none-PLATFORM wheel")
    out = os.path.join(outdir, m.group(1) + platform + ".whl")
    tmp = out + ".part"
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
        infos = zin.infolist()
        wheel_file = next(i.filename for i in infos if i.filename.endswith(".dist-info/WHEEL"))
        data = re.sub(r"^(Tag: py3-none-)\S+$", r"\g<1>" + platform,
                      zin.read(wheel_file).decode(), flags=re.M).encode()
        for info in infos:
            body = data if info.filename == wheel_file else zin.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                text = re.sub(rf"^{re.escape(wheel_file)},[^\n]*$",
                              f"{wheel_file},{record_hash(data)},{len(data)}", body.decode(),
                              flags=re.M)
                for f in extra:
                    added = open(f, "rb").read()
                    name = os.path.join(os.path.dirname(wheel_file), os.path.basename(f))
                    text = text.replace(f"{info.filename},,",
                                        f"{name},{record_hash(added)},{len(added)}\n"
                                        f"{info.filename},,")
                    notice = zipfile.ZipInfo(name, date_time=info.date_time)
                    notice.external_attr = (0o100644) << 16
                    notice.compress_type = zipfile.ZIP_DEFLATED
                    zout.writestr(notice, added)
                body = text.encode()
            zout.writestr(info, body)
    os.replace(tmp, out)
    return out


def readelf(path, *args):
    p = subprocess.run(["readelf", "--wide", *args, path], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"readelf {' '.join(args)} {path}: {p.stderr.strip()}")
    return p.stdout


def elf_facts(path):
    """(machine, needed, run paths, [(library, version)] required) of the ELF at path."""
    machine = re.search(r"^\s*Machine:\s*(.+)$", readelf(path, "-h"), re.M).group(1).strip()
    dyn = readelf(path, "-d")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    runpaths = []
    for kind, value in re.findall(r"\((RPATH|RUNPATH)\)\s+Library \w*path: \[([^\]]*)\]", dyn):
        runpaths += [(kind, p) for p in value.split(":") if p]
    required, lib = [], None
    in_verneed = False
    for line in readelf(path, "-V").splitlines():
        if line.startswith("Version needs section"):
            in_verneed = True
            continue
        if line.startswith("Version") and in_verneed:
            in_verneed = False
        if not in_verneed:
            continue
        m = re.search(r"File:\s*(\S+)", line)
        if m:
            lib = m.group(1)
            continue
        m = re.search(r"Name:\s*(\S+)", line)
        if m:
            required.append((lib, m.group(1)))
    return machine, needed, runpaths, required


def check(path):
    problems = []
    name = os.path.basename(path)
    m = re.match(r"[^-]+-[^-]+-py3-none-manylinux_(\d+)_(\d+)_(x86_64|aarch64)\.whl$", name)
    if not m:
        return [f"{name}: the name is not NAME-VERSION-py3-none-manylinux_X_Y_ARCH.whl"]
    glibc_max, arch = (int(m.group(1)), int(m.group(2))), m.group(3)
    platform = f"manylinux_{m.group(1)}_{m.group(2)}_{arch}"
    with zipfile.ZipFile(path) as z, tempfile.TemporaryDirectory() as tmp:
        infos = z.infolist()
        names = [i.filename for i in infos]
        dist_info = {n.split("/")[0] for n in names if ".dist-info/" in n}
        if len(dist_info) != 1:
            return problems + [f"{name}: {len(dist_info)} dist-info folders"]
        dist_info = dist_info.pop()
        tags = re.findall(r"^Tag: (\S+)$", z.read(dist_info + "/WHEEL").decode(), re.M)
        if tags != [f"py3-none-{platform}"]:
            problems.append(f"WHEEL's tags {tags} are not the name's py3-none-{platform}")
        lic = dist_info + "/LICENSE"
        if lic not in names:
            problems.append(f"{dist_info} holds no LICENSE")
        elif b"Apache License" not in z.read(lic) or b"Version 2.0" not in z.read(lic):
            problems.append(f"{lic} is not the Apache License 2.0")
        record = z.read(dist_info + "/RECORD").decode()
        for line in record.splitlines():
            member, digest, _ = line.rsplit(",", 2)
            if digest and member in names and record_hash(z.read(member)) != digest:
                problems.append(f"RECORD's hash of {member} is not its content's")
        carried = {os.path.normpath(n) for n in names}
        elves = 0
        for info in infos:
            if info.is_dir():
                continue
            data = z.read(info)
            if not data.startswith(b"\x7fELF"):
                continue
            elves += 1
            local = os.path.join(tmp, "elf")
            with open(local, "wb") as f:
                f.write(data)
            machine, needed, runpaths, required = elf_facts(local)
            where = info.filename
            if machine != MACHINES[arch]:
                problems.append(f"{where}: code for {machine}, not {arch} as the tag says")
            for lib, version in required:
                vm = re.match(r"(GLIBC|GCC)_([\d.]+)$", version)
                if not vm:
                    problems.append(f"{where}: needs {version} of {lib}, which manylinux does "
                                    f"not promise")
                elif vm.group(1) == "GLIBC" and version_tuple(vm.group(2))[:2] > glibc_max:
                    problems.append(f"{where}: needs {version} (of {lib}), newer than the "
                                    f"tag's glibc {glibc_max[0]}.{glibc_max[1]}")
                elif vm.group(1) == "GCC" and version_tuple(vm.group(2)) > GCC_MAX:
                    problems.append(f"{where}: needs {version} of {lib}, newer than manylinux's "
                                    f"libgcc_s")
            dirs = []
            for kind, rp in runpaths:
                if not rp.startswith("$ORIGIN"):
                    problems.append(f"{where}: {kind} {rp} is not relative to $ORIGIN")
                else:
                    dirs.append(os.path.normpath(os.path.join(os.path.dirname(where),
                                                              rp[len("$ORIGIN"):].lstrip("/"))))
            for lib in needed:
                if lib in SYSTEM_LIBS:
                    continue
                if not any(os.path.join(d, lib) in carried for d in dirs):
                    problems.append(f"{where}: needs {lib}, which is neither in the manylinux "
                                    f"set nor carried in the wheel beside a $ORIGIN run path")
        if elves == 0:
            problems.append(f"{name}: no ELF file inside (not lockstep's wheel?)")
    return problems


def main(argv):
    if len(argv) >= 5 and argv[1] == "tag":
        print(tag(argv[2], argv[3], argv[4], argv[5:]))
        return 0
    if len(argv) == 3 and argv[1] == "check":
        problems = check(argv[2])
        for p in problems:
            print(f"wheel_tool.py check: {p}", file=sys.stderr)
        if problems:
            print(f"wheel_tool.py check: {os.path.basename(argv[2])}: {len(problems)} "
                  f"problem(s): not a manylinux wheel", file=sys.stderr)
            return 1
        print(f"wheel_tool.py check: {os.path.basename(argv[2])}: every ELF needs GLIBC_2.28 "
              f"or older and only the manylinux libraries; tag, LICENSE and RECORD right")
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
