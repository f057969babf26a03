#!/usr/bin/env python3
"""The house rules that a reader cannot see at a glance, checked on the tree.

Checks (docs/testing.md, "The house check"), on the files git tracks:
  functions   no function outside tests and benchmarks longer than 100 lines
              (C++ / CUDA from its declaration's first line to its closing
              brace; Python from `def` to its last line)
  layering    server/ includes no CUDA header and names no kernels:: type
              (the engine's backend factory stands between them); in BUILD
              files: server/ names no //engine/cuda or //kernels/cuda target,
              tests/gpu no //bench target, loadtest/ no //protos wire target
              (it reaches them through //client:wire_messages)
  cuda errors only kernels/cuda/cuda_status.h words a CUDA error (calls
              cudaGetErrorString / cudaGetErrorName): every other file goes
              through CudaErrorText / CudaStatus
  paths       no path into the workspace's shared folder (the repository
              must build from a fresh clone)
  results     bench/results (machine-readable results the docs cite) under
              200 KB in all

Usage: scripts/check_house.py [--root DIR] [--self_test]
Prints each finding, then the last line "house: PASS" or "house: FAIL <why>";
exits 0 on PASS, 1 on FAIL, 2 on a usage error. --self_test first checks the
function measure against sources made up for it, so that the check itself is
shown able to fail.
"""

import argparse
import ast
import os
import re
import subprocess
import sys

MAX_FUNCTION_LINES = 100
MAX_RESULTS_BYTES = 200 * 1024
CPP_SUFFIXES = (".cc", ".h", ".cu", ".cuh")
# Tests, test helpers and benchmarks are outside the function-length rule.
EXEMPT = re.compile(r"(^|/)(tests|testing)/|_test\.(cc|py)$|^bench/|_pb2(_grpc)?\.py$")
CUDA_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](cuda[^">]*|cublas[^">]*|curand[^">]*|'
                          r'kernels/cuda/[^">]*)[">]', re.M)
KERNELS_NAME = re.compile(r"\bkernels::")
CUDA_ERROR_WORDING = re.compile(r"\bcudaGetError(String|Name)\b")
CUDA_ERROR_HELPER = "kernels/cuda/cuda_status.h"
SHARED_PATH = ".." + "/shared"  # spelled in two parts so that this file passes
# BUILD-file edges the folder table of docs/architecture.md rules out:
# (folder prefix, a label it must not name, why).
FORBIDDEN_DEPS = [
    ("server/", re.compile(r'"//(engine|kernels)/cuda[:/"]'),
     "the CUDA backend goes through engine/gpu"),
    ("tests/gpu/", re.compile(r'"//bench[:/"]'), "tests do not depend on benchmarks"),
    ("loadtest/", re.compile(r'"//protos:(ranking|grpc_predict_v2|model_control|health)_cc_grpc"'),
     "the wire protos come through //client:wire_messages"),
]


def strip_cpp(text):
    """Comments, string and character literals blanked; line breaks kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        raw = re.match(r'R"([^(\s]{0,16})\(', text[i:i + 20]) if text[i] == "R" else None
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = ")" + raw.group(1) + '"'
            j = text.find(end, i)
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        c = text[i]
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def cpp_functions(text):
    """(first line, last line, lines) of each function body in C++ / CUDA text.

    A `{` opens a function body when the text before it (back to the last
    `;`, `{` or `}`) ends a parameter list, outside any other function; a
    namespace, class, struct, enum or union body is not one, and a lambda or
    block inside a function belongs to that function.
    """
    s = strip_cpp(text)
    stack, found, last, line = [], [], 0, 1
    for i, c in enumerate(s):
        if c == "\n":
            line += 1
        elif c == "{":
            pre = s[last:i]
            if any(kind == "fn" for kind, _ in stack):
                kind = "block"
            elif re.search(r"\bnamespace\b|\bextern\s*\"\"", pre):
                kind = "scope"
            elif re.search(r"\b(class|struct|enum|union)\b[^()]*$", pre):
                kind = "scope"
            elif ")" in pre:
                kind = "fn"
            else:
                kind = "block"
            stripped = pre.lstrip()
            start = line - stripped.count("\n")
            stack.append((kind, start))
            last = i + 1
        elif c == "}":
            if stack:
                kind, start = stack.pop()
                if kind == "fn":
                    found.append((start, line, line - start + 1))
            last = i + 1
        elif c == ";":
            last = i + 1
    return found


def python_functions(text):
    """(first line, last line, lines) of each def in Python text."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            found.append((first, node.end_lineno, node.end_lineno - first + 1))
    return found


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             capture_output=True).stdout.decode()
        return [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith(".") and not x.startswith("bazel-")]
            files += [os.path.relpath(os.path.join(d, x), root) for x in names]
        return files


def read(root, path):
    try:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None  # a tracked file deleted in the working tree


def check_tree(root):
    """Findings as 'rule: where: what' lines."""
    findings = []
    results_bytes = 0
    for path in tracked_files(root):
        if path.startswith("bench/results/"):
            try:
                results_bytes += os.path.getsize(os.path.join(root, path))
            except OSError:
                pass
        text = read(root, path)
        if text is None or "\0" in text:
            continue
        if SHARED_PATH in text:
            findings.append(f"paths: {path}: names {SHARED_PATH}")
        if os.path.basename(path) == "BUILD":
            for prefix, label, why in FORBIDDEN_DEPS:
                m = label.search(text) if path.startswith(prefix) else None
                if m:
                    findings.append(f"layering: {path}: names {m.group(0)} ({why})")
        if path.startswith("server/") and path.endswith(CPP_SUFFIXES):
            m = CUDA_INCLUDE.search(text)
            if m:
                findings.append(f"layering: {path}: includes {m.group(1)}")
            if KERNELS_NAME.search(strip_cpp(text)):
                findings.append(f"layering: {path}: names a kernels:: type")
        if path.endswith(CPP_SUFFIXES) and path != CUDA_ERROR_HELPER:
            m = CUDA_ERROR_WORDING.search(strip_cpp(text))
            if m:
                findings.append(f"cuda errors: {path}: calls {m.group(0)} "
                                f"(word CUDA errors through {CUDA_ERROR_HELPER})")
        if EXEMPT.search(path):
            continue
        if path.endswith(CPP_SUFFIXES):
            functions = cpp_functions(text)
        elif path.endswith(".py"):
            try:
                functions = python_functions(text)
            except SyntaxError as e:
                findings.append(f"functions: {path}: not parsed ({e})")
                continue
        else:
            continue
        for first, last, n in functions:
            if n > MAX_FUNCTION_LINES:
                findings.append(f"functions: {path}:{first}-{last}: {n} lines "
                                f"(at most {MAX_FUNCTION_LINES})")
    if results_bytes > MAX_RESULTS_BYTES:
        findings.append(f"results: bench/results: {results_bytes} bytes "
                        f"(at most {MAX_RESULTS_BYTES})")
    return findings


def self_test():
    """Failures of the function measure on made-up sources ([] = it works)."""
    body = lambda n: "".join(f"  x += {k};\n" for k in range(n))
    long_fn = "int F(int x) {\n" + body(119) + "  return x;\n}\n"  # 122 lines
    edge_fn = "int G(int x) {\n" + body(118) + "}\n"  # 120 lines
    cases = [
        ("a function of 122 lines", long_fn, [122]),
        ("a function of 120 lines", edge_fn, [120]),
        ("a namespace and a class around it", "namespace a {\nclass C {\n" + long_fn + "};\n}\n",
         [122]),
        ("a template line counts", "template <int N>\n" + long_fn, [123]),
        ("braces in strings and comments", 'void H() {\n  const char* s = "{{{";\n'
         "  // }}\n  /* { */\n  char c = '{';\n}\n", [6]),
        ("a lambda inside a function", "void L() {\n  auto f = [](int a) {\n    return a;\n"
         "  };\n  f(1);\n}\n", [6]),
        ("a raw string", 'void R() {\n  auto s = R"x(}{)x";\n}\n', [3]),
        ("a struct is not a function", "struct S {\n" + body(130) + "};\n", []),
    ]
    failures = []
    for what, text, want in cases:
        got = [n for _, _, n in cpp_functions(text)]
        if got != want:
            failures.append(f"self test: {what}: measured {got}, want {want}")
    py = "def f():\n" + "".join(f"    x = {k}\n" for k in range(125)) + "\n\ndef g():\n    pass\n"
    got = [n for _, _, n in python_functions(py)]
    if got != [126, 2]:
        failures.append(f"self test: Python functions: measured {got}, want [126, 2]")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    parser.add_argument("--self_test", action="store_true")
    args = parser.parse_args()
    if not os.path.isdir(args.root):
        print(f"--root: not a directory: {args.root}")
        print("house: FAIL usage")
        return 2
    findings = self_test() if args.self_test else []
    if findings:
        print("\n".join(findings))
        print("house: FAIL the check's own self test")
        return 1
    findings = check_tree(os.path.abspath(args.root))
    print("\n".join(findings) if findings else "house: functions, layering, cuda errors, paths, results: ok")
    if findings:
        print(f"house: FAIL {len(findings)} finding(s)")
        return 1
    print("house: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
