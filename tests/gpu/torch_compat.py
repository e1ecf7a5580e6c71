#!/usr/bin/env python3
"""Compiles and links faultline-train against LibTorch versions this machine does not have: the
newest CPU LibTorch in Debian sid and the CUDA LibTorch in Debian's contrib (with the CUDA and
NCCL code paths on), fetched as packages into a cache. The GPU machine's PyTorch wheel is newer
than Debian bookworm's 1.13, and device time is short: this finds its compile and link errors here.

    python3 tests/gpu/torch_compat.py [--build build] [--cache DIR] [--only cpu|cuda]

Needs a configured build (its compile_commands.json, and the LibTorch-free static libraries built)
and Debian's package archive. Nothing runs: the fetched libraries want a newer glibc. Exit 1 when a
unit fails to compile, warns in the project's own code, or the link leaves an undefined reference.
"""
import argparse, concurrent.futures, json, os, re, shlex, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# Each configuration: the -dev package, the defines the matching CMake checks would set, and
# whether cuda_device.cpp is built.
CONFIGS = {
    "cpu": dict(dev="libtorch-dev", defines=[], cuda=False),
    "cuda": dict(dev="libtorch-cuda-dev",
                 defines=["FAULTLINE_TORCH_CUDA", "FAULTLINE_TORCH_NCCL", "USE_C10D_NCCL"], cuda=True),
}
# The objects of faultline-train that include LibTorch (the rest are linked from the build).
# The trainer's unit tests are compiled too (tests/gpu/run.sh runs two of them on the GPU).
TORCH_TARGETS = ("faultline_trainer_lib.dir", "faultline_probes_inprocess.dir", "faultline-train.dir")
OTHER_LIBS = ["src/trainer/libfaultline_trainer_config.a", "src/data/libfaultline_data.a",
              "src/common/libfaultline_common.a", "src/trainer/libfaultline_blas_kernel.a"]


def apt(cache, *args):
    state = cache / "apt"
    opts = [f"-oDir::Etc::SourceList={state}/sources.list", f"-oDir::Etc::SourceParts={state}/parts",
            f"-oDir::Etc::Preferences={state}/preferences", f"-oDir::Etc::PreferencesParts={state}/parts",
            f"-oDir::State={state}", f"-oDir::State::status={state}/status", f"-oDir::Cache={state}/cache",
            "-oDebug::NoLocking=1", "-oAPT::Sandbox::User=root"]
    result = subprocess.run(["apt-get", *opts, *args], cwd=cache / "debs", capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"torch_compat: apt-get {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout


def fetch(cache, dev):
    """Downloads DEV and the runtime library it depends on; returns the extracted tree's usr/ and
    the version."""
    for sub in ("apt/lists/partial", "apt/parts", "apt/cache/archives/partial"):
        (cache / sub).mkdir(parents=True, exist_ok=True)
    (cache / "debs").mkdir(exist_ok=True)
    sources = cache / "apt/sources.list"
    if not sources.exists():
        sources.write_text("".join(f"deb [signed-by={KEYRING}] {ARCHIVE} {suite} main contrib\n"
                                   for suite in ("sid", "trixie")))
        (cache / "apt/status").touch()
        apt(cache, "update")
    apt(cache, "download", dev)
    dev_deb = max((cache / "debs").glob(f"{dev}_*.deb"), key=os.path.getmtime)
    depends = subprocess.run(["dpkg-deb", "-f", dev_deb, "Depends"], check=True,
                             capture_output=True, text=True).stdout
    runtime = re.search(r"(libtorch(?:-cuda)?-?2\.\d+)\b", depends).group(1)
    apt(cache, "download", runtime)
    tree = cache / dev_deb.stem
    if not tree.exists():
        for deb in (dev_deb, max((cache / "debs").glob(f"{runtime}_*.deb"), key=os.path.getmtime)):
            print(f"  extracting {deb.name}", flush=True)
            subprocess.run(["dpkg-deb", "-x", deb, tree], check=True)
    return tree / "usr", dev_deb.stem.split("_")[1].split("+")[0]


def torch_standard(usr):
    config = next(usr.glob("lib/*/cmake/Torch/TorchConfig.cmake")).read_text()
    found = re.search(r"CXX_STANDARD (\d+)", config)
    return max(17, int(found.group(1))) if found else 17


def compile_jobs(build, usr, config, standard, objdir):
    jobs, compiler = [], "c++"
    for entry in json.loads((build / "compile_commands.json").read_text()):
        args = shlex.split(entry["command"])
        compiler = args[0]
        is_test = "/tests/unit/trainer/" in entry["file"]
        if not is_test and not any(t in args[args.index("-o") + 1] for t in TORCH_TARGETS):
            continue
        kept, skip = [], False
        for i, a in enumerate(args[1:], 1):
            if skip:
                skip = False
            elif a in ("-include", "-o", "-isystem") and (a == "-o" or "cmake_pch" in args[i + 1]
                                                          or "torch" in args[i + 1]):
                skip = True
            elif a not in ("-Winvalid-pch", "-O3", "-c") and not a.startswith("-std="):
                kept.append(a)
        jobs.append((entry["file"], entry["directory"], kept, is_test))
    if config["cuda"]:
        device = next(j for j in jobs if j[0].endswith("/src/trainer/device.cpp"))
        cuda_src = str(ROOT / "src/trainer/cuda_device.cpp")
        jobs.append((cuda_src, device[1], [cuda_src if a == device[0] else a for a in device[2]], False))
    head = [compiler, "-O0", f"-std=c++{standard}", "-isystem", f"{usr}/include/torch/csrc/api/include",
            "-isystem", f"{usr}/include", "-isystem", "/usr/local/cuda/include"]
    head += [f"-D{d}" for d in config["defines"]]
    # Test objects go to a folder of their own: only the trainer's are linked.
    return [(src, cwd, head + rest + ["-c", "-o", str(objdir / ("tests" if test else "") /
                                                       (Path(src).name + ".o"))])
            for src, cwd, rest, test in jobs]


def check(name, build, cache, jobs_n):
    config = CONFIGS[name]
    print(f"== {name}: fetching {config['dev']}", flush=True)
    usr, version = fetch(cache, config["dev"])
    standard = torch_standard(usr)
    objdir = cache / f"obj-{name}"
    (objdir / "tests").mkdir(parents=True, exist_ok=True)
    jobs = compile_jobs(build, usr, config, standard, objdir)
    print(f"== {name}: LibTorch {version}, C++{standard}, {len(jobs)} units", flush=True)
    problems = 0

    def run(job):
        return job, subprocess.run(job[2], cwd=job[1], capture_output=True, text=True)

    with concurrent.futures.ThreadPoolExecutor(jobs_n) as pool:
        for (src, _, _), result in pool.map(run, jobs):
            ours = [l for l in result.stderr.splitlines()
                    if str(ROOT) in l and ("error" in l or "warning" in l) and "/build" not in l]
            bad = result.returncode != 0 or ours
            problems += bool(bad)
            print(f"  {'FAIL' if bad else 'ok  '} {Path(src).relative_to(ROOT)}", flush=True)
            if bad:
                print("\n".join(ours or result.stderr.splitlines()[-20:]))
    lib = next(usr.glob("lib/*/libtorch_cpu.so")).parent
    torch_libs = [f"{lib}/lib{n}.so" for n in
                  (["torch_cuda", "c10_cuda"] if config["cuda"] else []) + ["torch_cpu", "torch", "c10"]]
    link = ["c++", "-o", str(objdir / "faultline-train"), *sorted(map(str, objdir.glob("*.o"))),
            *[str(build / l) for l in OTHER_LIBS], "-lfmt", "-ltomlplusplus",
            "-Wl,--no-as-needed", *torch_libs, "-Wl,--as-needed", "-Wl,--allow-shlib-undefined",
            "-pthread", "-ldl"]
    if (build / "CMakeCache.txt").read_text().find("FAULTLINE_DNNL_LIBRARY:FILEPATH=/") >= 0:
        link.append("-ldnnl")
    if config["cuda"]:
        link += ["-L/usr/local/cuda/lib64", "-lcudart"]
    result = subprocess.run(link, capture_output=True, text=True)
    undefined = [l for l in result.stderr.splitlines() if "undefined reference" in l]
    linked = result.returncode == 0
    print(f"  {'ok  ' if linked else 'FAIL'} link faultline-train")
    if not linked:
        print("\n".join(undefined or result.stderr.splitlines()[-20:]))
    summary = (f"{name}: LibTorch {version} (C++{standard}): {len(jobs) - problems}/{len(jobs)} units "
               f"clean, link {'ok' if linked else 'FAILED'}")
    return summary, problems == 0 and linked


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--cache", default=os.environ.get(
        "FAULTLINE_TORCH_COMPAT_CACHE", str(Path.home() / ".cache/faultline/torch-compat")))
    parser.add_argument("--only", choices=sorted(CONFIGS))
    parser.add_argument("-j", type=int, default=os.cpu_count())
    args = parser.parse_args()
    build, cache = Path(args.build).resolve(), Path(args.cache)
    if not (build / "compile_commands.json").exists():
        sys.exit(f"torch_compat: no compile_commands.json in {build}; build the project first (make build)")
    cache.mkdir(parents=True, exist_ok=True)
    results = [check(n, build, cache, args.j) for n in ([args.only] if args.only else CONFIGS)]
    print("\n".join(s for s, _ in results))
    sys.exit(0 if all(ok for _, ok in results) else 1)


if __name__ == "__main__":
    main()
