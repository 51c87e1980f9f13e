#!/usr/bin/env python3
"""Fails when modules of one crate import each other in a cycle (a -> b -> ... -> a).

A module is one .rs file (mod.rs and lib.rs/main.rs name their directory's module). An
edge a -> b is a `crate::`, `super::` or `self::` path in a that names an item of b, where
b is neither a nor an ancestor or descendant of a: a parent declaring its children and a
child using its parent's items are how Rust modules nest, not cycles. Test modules
(`tests.rs`, `*_tests.rs`, `#[cfg(test)]` blocks) are left out: tests may reach anywhere.

Usage: scripts/check-module-cycles.py [CRATE_DIR ...]   (default: every crates/*)
"""
import os
import re
import sys

PATH_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP_RE = re.compile(r"\buse\s+(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


def strip_tests(text):
    """Drops `#[cfg(test)] mod x { ... }` blocks and comments."""
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text[i:])
        if not m:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i : i + m.start()])
        j, depth = i + m.end(), 1
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j


def check(crate):
    src = os.path.join(crate, "src")
    files = {}
    for root, _, names in os.walk(src):
        for n in names:
            if n.endswith(".rs") and n != "tests.rs" and not n.endswith("_tests.rs"):
                p = os.path.join(root, n)
                files[module_of(src, p)] = p
    modules = set(files)
    edges = {m: set() for m in modules}
    for mod, p in files.items():
        text = strip_tests(open(p, encoding="utf-8").read())
        refs = []
        for m in USE_GROUP_RE.finditer(text):
            for item in re.split(r"[,{}]", m.group(3)):
                item = item.strip().split(" as ")[0]
                if item and item != "self":
                    refs.append((m.group(1), m.group(2) + "::" + item.replace(" ", "")))
                elif item == "self":
                    refs.append((m.group(1), m.group(2)))
        for m in PATH_RE.finditer(text):
            refs.append((m.group(1), m.group(2)))
        for kind, rest in refs:
            segs = [s for s in rest.split("::") if s]
            extra = 0
            while segs and segs[0] == "super":
                segs, extra = segs[1:], extra + 1
            base = mod if kind != "super" else mod[:-1]
            if kind == "super":
                base = base[: len(base) - extra] if extra <= len(base) else ()
            elif kind == "crate":
                base = ()
            full = base + tuple(segs)
            target = None
            for n in range(len(full), -1, -1):
                if full[:n] in modules:
                    target = full[:n]
                    break
            if target is None or target == mod:
                continue
            if target == mod[: len(target)] or mod == target[: len(mod)]:
                continue  # ancestor or descendant
            edges[mod].add(target)
    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(modules):
        if v not in index:
            visit(v)
    return sccs


def main():
    crates = sys.argv[1:] or sorted(
        os.path.join("crates", d) for d in os.listdir("crates") if os.path.isdir(os.path.join("crates", d, "src"))
    )
    bad = 0
    for c in crates:
        for comp in check(c):
            bad += 1
            names = ", ".join("::".join(m) or "(root)" for m in comp)
            print(f"{c}: modules import each other in a cycle: {names}")
    if bad:
        sys.exit(1)
    print(f"no module import cycles in {len(crates)} crates")


if __name__ == "__main__":
    main()
