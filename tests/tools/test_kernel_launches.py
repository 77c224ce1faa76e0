#!/usr/bin/env python3
"""Every kernel of ours is launched through cuda::launchPdl or cuda::launchPlain (kernels/cuda/cuda_common.cuh).

Why: those two apply the SM limits (TS_CUDA_SM_LIMITS=gb10, kernels/cuda/cuda_partition.cu) — a kernel launched with
<<<>>> would keep the host GPU's per-SM limits and make the GB10 measurements silently optimistic, as the dense GEMVs,
norms and KDA kernels were before they moved to launchPlain. So this fails on any <<<...>>> launch in a CUDA source
of the repository (comments aside), naming file and line: any `<<<` outside a comment, since C++ gives it no other
meaning — so a launch whose configuration spans lines or holds `<` / `>` is caught too. It fails as well on a call
of the runtime's or the driver's launch functions (cudaLaunchKernel, cudaLaunchKernelEx, cuLaunchKernel, the
cooperative ones) anywhere but in launchPdl's file, which would skip the limits the same way. Standard library only;
CTest runs it (label unit).
"""
import os
import re
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCES = (".cu", ".cuh", ".cpp", ".h", ".hpp")
SKIP_DIRS = {".git", "node_modules", ".device-stash"}
LAUNCH = re.compile(r"<<<")
# The launch API a kernel could be started with directly (the runtime's and the driver's, ordinary and cooperative).
DIRECT = re.compile(r"\b(cudaLaunchKernel(ExC?)?|cudaLaunchCooperativeKernel\w*|cuLaunchKernel(Ex)?|"
                    r"cuLaunchCooperativeKernel\w*)\s*(<[^;()]*>)?\s*\(")
# The one file allowed to call them: launchPdl's.
LAUNCHER = os.path.join("kernels", "cuda", "cuda_common.cuh")


def code_of(line):
    """The line without its // comment (string literals holding // do not occur in these sources)."""
    cut = line.find("//")
    return line if cut < 0 else line[:cut]


def raw_launches(text, pattern=LAUNCH):
    """(line number, line) of each <<<>>> launch (or match of `pattern`) outside comments; /* */ comments are
    dropped first."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if pattern.search(code_of(line))]


def direct_launches(text):
    """(line number, line) of each direct call of a launch function outside comments."""
    return raw_launches(text, DIRECT)


def cuda_sources():
    for top in ("kernels", "engine", "app", "tests", "tools"):
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")]
            for f in files:
                if f.endswith(SOURCES):
                    yield os.path.join(d, f)


class KernelLaunches(unittest.TestCase):
    def test_the_detector(self):
        # What it must catch and what it must let pass, so that a broken pattern cannot pass the real check below.
        self.assertEqual(len(raw_launches("    k<<<grid, 256, 0, s>>>(x);\n")), 1)
        self.assertEqual(len(raw_launches("    k<T, 4><<<dim3(a, b), 128>>>(x, y);\n")), 1)
        self.assertEqual(len(raw_launches("    k<<<grid, std::max<int>(a, b), 0,\n       s>>>(x);\n")), 1)
        self.assertEqual(len(raw_launches("    k<T>\n        <<<g, a > b ? 64 : 32>>>(x);\n")), 1)
        self.assertEqual(raw_launches("// fn<<<grid, block, smem, stream>>>(args...)\n"), [])
        self.assertEqual(raw_launches("/* k<<<1, 1>>>() */\ncuda::launchPlain(k, 1, 1, 0, s);\n"), [])
        self.assertEqual(raw_launches("int a = b << 3; bool c = d >> 2;\n"), [])
        self.assertEqual(len(direct_launches("    TS_CUDA_CHECK(cudaLaunchKernelEx(&cfg, fn, x));\n")), 1)
        self.assertEqual(len(direct_launches("    cudaLaunchKernel((void*)k, g, b, args, 0, s);\n")), 1)
        self.assertEqual(len(direct_launches("    cudaLaunchKernel<void>(k, g, b, args);\n")), 1)
        self.assertEqual(len(direct_launches("    cudaLaunchCooperativeKernel(k, g, b, args, 0, s);\n")), 1)
        self.assertEqual(len(direct_launches("    r = cuLaunchKernelEx (&cfg, f, params, nullptr);\n")), 1)
        self.assertEqual(direct_launches("// cudaLaunchKernelEx(&cfg, ...) in launchPdl\n"), [])
        self.assertEqual(direct_launches("cudaLaunchConfig_t cfg; cudaLaunchAttribute a[1];\n"), [])

    def test_no_raw_launch_in_the_sources(self):
        files = list(cuda_sources())
        self.assertGreater(len(files), 10, "no CUDA sources found under " + ROOT)
        found = []
        for path in files:
            with open(path, encoding="utf-8") as f:
                for n, line in raw_launches(f.read()):
                    found.append(f"{os.path.relpath(path, ROOT)}:{n}: {line}")
        self.assertEqual(found, [], "kernels launched with <<<>>> (use cuda::launchPlain or cuda::launchPdl, "
                                    "cuda_common.cuh, so that TS_CUDA_SM_LIMITS reaches them):\n" + "\n".join(found))

    def test_no_direct_launch_outside_the_launcher(self):
        found, launcher = [], 0
        for path in cuda_sources():
            rel = os.path.relpath(path, ROOT)
            with open(path, encoding="utf-8") as f:
                hits = direct_launches(f.read())
            if rel == LAUNCHER:
                launcher = len(hits)
                continue
            found += [f"{rel}:{n}: {line}" for n, line in hits]
        self.assertGreater(launcher, 0,
                           "launchPdl's launch call not found in " + LAUNCHER + " (the detector or the file moved)")
        self.assertEqual(found, [], "kernels launched with the runtime's or driver's launch functions outside "
                                    "cuda::launchPdl (cuda_common.cuh), so TS_CUDA_SM_LIMITS does not reach them:\n" +
                         "\n".join(found))


if __name__ == "__main__":
    sys.exit(unittest.main())
