#!/usr/bin/env python3
"""Generates src/schema/data/: the Go types of every built-in kind, per Kubernetes release.

kube-apiserver decodes every object into its Go type and encodes it again; what that does to an
object follows from the Go struct definitions: field order, `omitempty`, pointers, inline
(embedded) structs, the types with their own JSON form (Time, Quantity, IntOrString, ...), and the
markers that strategic merge and server-side apply read (+listType, +listMapKey, +mapType,
+structType, patchStrategy, patchMergeKey).

Inputs are git repositories, read at release tags with `git show` (no work tree needed):
  kubernetes/api           the versioned types (`<group>/<version>/*.go`)
  kubernetes/apimachinery  meta/v1 (ObjectMeta, LabelSelector, ...) and the special types

Usage:
  python3 src/schema/generate.py --api PATH/TO/api.git --apimachinery PATH/TO/apimachinery.git

It writes one file per release, `src/schema/data/1.<minor>.json.zz` (zlib-compressed JSON; its
shape is described in src/schema/mod.rs), for the releases and tags listed in RELEASES below.
The output is deterministic: re-running it on the same tags gives the same bytes.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import zlib

# The release modelled -> the tag of kubernetes/api and kubernetes/apimachinery read for it: the
# newest patch release of each minor at the time of generation (1.37 had only pre-releases).
RELEASES = {
    28: "kubernetes-1.28.15",
    29: "kubernetes-1.29.15",
    30: "kubernetes-1.30.14",
    31: "kubernetes-1.31.14",
    32: "kubernetes-1.32.13",
    33: "kubernetes-1.33.13",
    34: "kubernetes-1.34.10",
    35: "kubernetes-1.35.7",
    36: "kubernetes-1.36.3",
    37: "kubernetes-1.37.0-beta.0",
}

# Types whose JSON form is their own (MarshalJSON/UnmarshalJSON), by Go import path and name.
META = "k8s.io/apimachinery/pkg/apis/meta/v1"
SPECIAL = {
    (META, "Time"): "time",
    (META, "MicroTime"): "microtime",
    (META, "Duration"): "duration",
    (META, "FieldsV1"): "raw",
    ("k8s.io/apimachinery/pkg/runtime", "RawExtension"): "raw",
    ("k8s.io/apimachinery/pkg/api/resource", "Quantity"): "quantity",
    ("k8s.io/apimachinery/pkg/util/intstr", "IntOrString"): "intorstring",
    ("k8s.io/apimachinery/pkg/types", "UID"): "string",
    ("k8s.io/apimachinery/pkg/types", "NodeName"): "string",
}

PRIMITIVES = {
    "string": "string",
    "bool": "bool",
    "int": "int64",
    "int32": "int32",
    "int64": "int64",
    "uint": "uint64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "int8": "int8",
    "int16": "int16",
    "float32": "float32",
    "float64": "float64",
    "byte": "uint8",
    "interface{}": "any",
    "any": "any",
}

# meta/v1 and friends: the files whose types objects embed.
APIMACHINERY_FILES = [
    "pkg/apis/meta/v1/types.go",
    "pkg/apis/meta/v1/time.go",
    "pkg/apis/meta/v1/micro_time.go",
    "pkg/apis/meta/v1/duration.go",
    "pkg/apis/meta/v1/group_version.go",
]


def git(repo, *args):
    return subprocess.run(
        ["git", "-C", repo, *args], check=True, capture_output=True, text=True
    ).stdout


class GoFile:
    """The type declarations of one Go file, with the comment markers that precede them."""

    def __init__(self, path, text, pkg_path):
        self.path = path
        self.pkg_path = pkg_path
        self.imports = {}
        self.types = {}  # name -> ("struct", fields, markers) | ("named", expr, markers) | ("alias", expr, markers)
        self.consts = {}
        self._parse(text)

    def _parse(self, text):
        text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        lines = text.split("\n")
        i = 0
        markers = []
        in_import = False
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if in_import:
                if stripped == ")":
                    in_import = False
                else:
                    self._import(stripped)
                i += 1
                continue
            if stripped.startswith("import ("):
                in_import = True
                i += 1
                continue
            if stripped.startswith("import "):
                self._import(stripped[len("import "):])
                i += 1
                continue
            if line.startswith("//"):
                markers.append(stripped)
                i += 1
                continue
            m = re.match(r"^const (\w+)\s*=\s*\"([^\"]*)\"", line)
            if m:
                self.consts[m.group(1)] = m.group(2)
            m = re.match(r"^type (\w+) struct \{\s*$", line)
            if m:
                name = m.group(1)
                fields, i = self._struct_body(lines, i + 1)
                self.types[name] = ("struct", fields, markers)
                markers = []
                continue
            m = re.match(r"^type (\w+) struct\{\}", line)
            if m:
                self.types[m.group(1)] = ("struct", [], markers)
                markers = []
                i += 1
                continue
            m = re.match(r"^type (\w+)\s*=\s*(\S.*?)\s*(//.*)?$", line)
            if m:
                self.types[m.group(1)] = ("alias", m.group(2), markers)
            else:
                m = re.match(r"^type (\w+) (\S.*?)\s*(//.*)?$", line)
                if m and not m.group(2).startswith("interface"):
                    self.types[m.group(1)] = ("named", m.group(2), markers)
            if stripped == "" or not line.startswith("//"):
                markers = []
            i += 1

    def _import(self, spec):
        spec = spec.split("//")[0].strip()
        if not spec:
            return
        m = re.match(r'^(?:(\w+|\.|_)\s+)?"([^"]+)"$', spec)
        if not m:
            return
        alias, path = m.group(1), m.group(2)
        if alias is None:
            alias = path.rsplit("/", 1)[-1]
        self.imports[alias] = path

    def _struct_body(self, lines, i):
        fields = []
        markers = []
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            i += 1
            if line.startswith("}"):
                return fields, i
            if stripped.startswith("//"):
                markers.append(stripped)
                continue
            if stripped == "":
                markers = []
                continue
            m = re.match(r"^(\w+)?\s*([^`]*?)\s*(`[^`]*`)?\s*(//.*)?$", stripped)
            tag = ""
            m2 = re.search(r"`([^`]*)`", stripped)
            if m2:
                tag = m2.group(1)
            head = stripped.split("`")[0].split("//")[0].strip()
            parts = head.split(None, 1)
            if len(parts) == 1:
                fields.append({"embedded": True, "go": parts[0], "type": parts[0], "tag": tag, "markers": markers})
            else:
                fields.append({"embedded": False, "go": parts[0], "type": parts[1].strip(), "tag": tag, "markers": markers})
            markers = []
        raise ValueError("unterminated struct")


def tag_value(tag, key):
    m = re.search(key + r':"([^"]*)"', tag)
    return m.group(1) if m else None


def marker(markers, name):
    for m in markers:
        mm = re.match(r"^//\s*\+" + re.escape(name) + r"(?:=(.*))?$", m)
        if mm:
            return mm.group(1) if mm.group(1) is not None else True
    return None


def markers_all(markers, name):
    out = []
    for m in markers:
        mm = re.match(r"^//\s*\+" + re.escape(name) + r"=(.*)$", m)
        if mm:
            out.append(mm.group(1).strip())
    return out


class Universe:
    """Every package read for one release: Go import path -> {type name -> declaration}."""

    def __init__(self):
        self.packages = {}  # path -> {name: (decl, file)}
        self.groups = {}  # path -> (group, version)

    def add(self, gofile):
        pkg = self.packages.setdefault(gofile.pkg_path, {})
        for name, decl in gofile.types.items():
            pkg[name] = (decl, gofile)

    def lookup(self, pkg_path, name):
        return self.packages.get(pkg_path, {}).get(name)


class Emitter:
    """Turns Go declarations into the schema's type table."""

    def __init__(self, universe):
        self.u = universe
        self.types = {}  # "pkg.Name" -> entry
        self.problems = []

    def type_id(self, pkg_path, name):
        short = pkg_path.replace("k8s.io/api/", "").replace("k8s.io/apimachinery/pkg/apis/", "")
        return short + "." + name

    def resolve(self, expr, gofile):
        """A Go type expression in `gofile` -> the schema's type reference."""
        expr = expr.strip()
        if expr.startswith("*"):
            return {"ptr": self.resolve(expr[1:], gofile)}
        if expr.startswith("[]"):
            inner = expr[2:]
            if inner in ("byte", "uint8"):
                return "bytes"
            return {"list": self.resolve(inner, gofile)}
        m = re.match(r"^\[(\d+)\](.*)$", expr)
        if m:
            return {"list": self.resolve(m.group(2), gofile)}
        if expr.startswith("map["):
            depth = 0
            for j, c in enumerate(expr):
                if c == "[":
                    depth += 1
                elif c == "]":
                    depth -= 1
                    if depth == 0:
                        break
            key = expr[4:j]
            key_ref = self.resolve(key, gofile)
            return {"map": self.resolve(expr[j + 1:], gofile), "key": key_ref}
        if expr in PRIMITIVES:
            return PRIMITIVES[expr]
        if "." in expr:
            alias, name = expr.split(".", 1)
            pkg_path = gofile.imports.get(alias)
            if pkg_path is None:
                self.problems.append(f"{gofile.path}: unknown import {alias} in {expr}")
                return "any"
        else:
            pkg_path, name = gofile.pkg_path, expr
        if (pkg_path, name) in SPECIAL:
            return SPECIAL[(pkg_path, name)]
        found = self.u.lookup(pkg_path, name)
        if found is None:
            self.problems.append(f"{gofile.path}: unresolved type {expr} ({pkg_path})")
            return "any"
        decl, declfile = found
        kind = decl[0]
        if kind in ("named", "alias"):
            return self.resolve(decl[1], declfile)
        tid = self.type_id(pkg_path, name)
        if tid not in self.types:
            self.types[tid] = None  # in progress (recursive types)
            self.types[tid] = self.struct(decl, declfile)
        return "@" + tid

    def struct(self, decl, gofile):
        _, fields, markers = decl
        out = []
        for f in self.fields(fields, gofile):
            out.append(f)
        entry = {"fields": out}
        if marker(markers, "structType") == "atomic":
            entry["atomic"] = True
        return entry

    def fields(self, fields, gofile):
        for f in fields:
            go_name = f["go"]
            tag = f["tag"]
            json_tag = tag_value(tag, "json")
            if json_tag == "-":
                continue
            name, _, opts = (json_tag or "").partition(",")
            opts = opts.split(",") if opts else []
            typ = f["type"]
            if f["embedded"]:
                if name == "" and (json_tag is None or "inline" in opts or name == ""):
                    ref = self.resolve(typ, gofile)
                    if isinstance(ref, str) and ref.startswith("@"):
                        for inner in self.types[ref[1:]]["fields"]:
                            yield inner
                        continue
                    self.problems.append(f"{gofile.path}: embedded non-struct {typ}")
                    continue
                go_name = typ.split(".")[-1].lstrip("*")
            if not go_name[:1].isupper():
                continue
            if name == "":
                name = go_name
            entry = {"name": name, "type": self.resolve(typ, gofile)}
            if "omitempty" in opts:
                entry["omitempty"] = True
            if "omitzero" in opts:
                entry["omitzero"] = True
            if "string" in opts:
                entry["string"] = True
            ms = f["markers"]
            if marker(ms, "optional") is True:
                entry["optional"] = True
            strategy = tag_value(tag, "patchStrategy") or marker(ms, "patchStrategy")
            if strategy:
                entry["patchStrategy"] = strategy
            merge_key = tag_value(tag, "patchMergeKey") or marker(ms, "patchMergeKey")
            if merge_key:
                entry["patchMergeKey"] = merge_key
            list_type = marker(ms, "listType")
            if list_type:
                entry["listType"] = list_type
            keys = markers_all(ms, "listMapKey")
            if keys:
                entry["listMapKeys"] = keys
            map_type = marker(ms, "mapType")
            if map_type:
                entry["mapType"] = map_type
            struct_type = marker(ms, "structType")
            if struct_type:
                entry["structType"] = struct_type
            default = marker(ms, "default")
            if isinstance(default, str):
                entry["default"] = default
            union = marker(ms, "unionDiscriminator")
            if union:
                entry["unionDiscriminator"] = True
            yield entry


CONVERSION_TYPES = [
    ("k8s.io/api/autoscaling/v1", "MetricSpec"),
    ("k8s.io/api/autoscaling/v1", "MetricStatus"),
    ("k8s.io/api/autoscaling/v1", "HorizontalPodAutoscalerCondition"),
]


def read_release(api, apimachinery, tag):
    u = Universe()
    groups = {}
    for path in APIMACHINERY_FILES:
        try:
            text = git(apimachinery, "show", f"{tag}:{path}")
        except subprocess.CalledProcessError:
            continue
        u.add(GoFile(path, text, "k8s.io/apimachinery/" + os.path.dirname(path)))
    files = git(api, "ls-tree", "-r", "--name-only", tag).split("\n")
    for path in files:
        parts = path.split("/")
        if len(parts) != 3 or not path.endswith(".go"):
            continue
        base = parts[2]
        if base.endswith("_test.go") or base.startswith("zz_generated") or "generated" in base:
            continue
        text = git(api, "show", f"{tag}:{path}")
        pkg = "k8s.io/api/" + parts[0] + "/" + parts[1]
        gf = GoFile(path, text, pkg)
        u.add(gf)
        if "GroupName" in gf.consts:
            groups[pkg] = gf.consts["GroupName"]
    return u, groups


def generate(api, apimachinery, tag):
    u, groups = read_release(api, apimachinery, tag)
    em = Emitter(u)
    kinds = {}
    for pkg_path in sorted(u.packages):
        if not pkg_path.startswith("k8s.io/api/"):
            continue
        group = groups.get(pkg_path)
        if group is None:
            continue
        version = pkg_path.rsplit("/", 1)[-1]
        for name in sorted(u.packages[pkg_path]):
            decl, gf = u.packages[pkg_path][name]
            if decl[0] != "struct":
                continue
            embeds_type_meta = any(
                f["embedded"] and f["type"].endswith("TypeMeta") for f in decl[1]
            )
            if not embeds_type_meta:
                continue
            ref = em.resolve(name, gf)
            kinds[f"{group}/{version}/{name}"] = ref[1:]
    # meta.k8s.io/v1: the options of writes (CreateOptions, UpdateOptions, ...) and Status, which
    # admission reviews and responses carry.
    meta = "k8s.io/apimachinery/pkg/apis/meta/v1"
    for name in sorted(u.packages.get(meta, {})):
        decl, gf = u.packages[meta][name]
        if decl[0] == "struct" and any(
            f["embedded"] and f["type"] == "TypeMeta" for f in decl[1]
        ):
            kinds[f"meta.k8s.io/v1/{name}"] = em.resolve(name, gf)[1:]
    # Types no kind reaches that the scheme's conversions marshal into annotations (autoscaling
    # v1 carries v2's metrics, current metrics and conditions as JSON of these).
    for pkg_path, name in CONVERSION_TYPES:
        found = u.packages.get(pkg_path, {}).get(name)
        if found is not None:
            em.resolve(name, found[1])
    return {"kinds": kinds, "types": {k: em.types[k] for k in sorted(em.types)}}, em.problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--api", required=True, help="git directory of kubernetes/api")
    ap.add_argument("--apimachinery", required=True, help="git directory of kubernetes/apimachinery")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "data"))
    ap.add_argument("--json", action="store_true", help="also write the uncompressed JSON")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for minor, tag in sorted(RELEASES.items()):
        schema, problems = generate(args.api, args.apimachinery, tag)
        schema = {"release": f"1.{minor}", "source": tag, **schema}
        for p in sorted(set(problems)):
            print(f"1.{minor}: {p}", file=sys.stderr)
        text = json.dumps(schema, separators=(",", ":"), sort_keys=False).encode()
        path = os.path.join(args.out, f"1.{minor}.json.zz")
        with open(path, "wb") as f:
            f.write(zlib.compress(text, 9))
        if args.json:
            with open(path[:-3], "wb") as f:
                f.write(text)
        print(f"1.{minor} ({tag}): {len(schema['kinds'])} kinds, {len(schema['types'])} types, "
              f"{len(text)} bytes of JSON, {os.path.getsize(path)} compressed")


if __name__ == "__main__":
    main()


def openapi_name(type_id):
    pkg, name = type_id.rsplit(".", 1)
    if pkg.startswith("meta/"):
        return "io.k8s.apimachinery.pkg.apis." + pkg.replace("/", ".") + "." + name
    return "io.k8s.api." + pkg.replace("/", ".") + "." + name


def check_openapi(schema, openapi_dir):
    """Compares the generated types with the OpenAPI documents kube-apiserver serves: the field
    names and the list, map and patch metadata of every struct that both describe. Returns the
    differences, one line each."""
    defs = {}
    for fname in sorted(os.listdir(openapi_dir)):
        if fname.endswith(".json"):
            with open(os.path.join(openapi_dir, fname)) as f:
                defs.update(json.load(f).get("components", {}).get("schemas", {}))
    out = []
    seen = 0
    for tid, entry in schema["types"].items():
        d = defs.get(openapi_name(tid))
        if d is None or "properties" not in d and entry["fields"]:
            continue
        seen += 1
        props = d.get("properties", {})
        ours = {f["name"]: f for f in entry["fields"]}
        for name in sorted(set(props) ^ set(ours)):
            where = "only in Go" if name in ours else "only in OpenAPI"
            out.append(f"{tid}.{name}: {where}")
        for name in sorted(set(props) & set(ours)):
            p, f = props[name], ours[name]
            pairs = [
                ("x-kubernetes-list-type", "listType"),
                ("x-kubernetes-list-map-keys", "listMapKeys"),
                ("x-kubernetes-patch-strategy", "patchStrategy"),
                ("x-kubernetes-patch-merge-key", "patchMergeKey"),
                ("x-kubernetes-map-type", "mapType"),
            ]
            for o_key, g_key in pairs:
                ours_value = f.get(g_key)
                if g_key == "mapType" and ours_value is None:
                    ours_value = f.get("structType")
                if p.get(o_key) != ours_value:
                    out.append(f"{tid}.{name}: {o_key} {p.get(o_key)!r} in OpenAPI, {f.get(g_key)!r} in Go")
        if d.get("x-kubernetes-map-type") == "atomic" and not entry.get("atomic"):
            out.append(f"{tid}: atomic in OpenAPI only")
    return seen, out
