#!/usr/bin/env python3
"""Offline checks of deploy/k8s/ingero.yaml (no cluster: kubectl's client dry run still
downloads the API server's OpenAPI document).

  k8s_manifest_test.py MANIFEST SCHEMA INGERO_BINARY PROMETHEUS_YML

1. Every document validates against tests/deploy/k8s.schema.json (unknown fields are errors).
2. What the agent needs is there: hostPID, exactly the five capabilities and nothing else,
   read-only host mounts of /sys/kernel/btf and /sys/fs/cgroup, a hostPath state volume
   holding the trace file, the Prometheus port, --node from spec.nodeName, the ConfigMap
   mounted where --config points, and what the API server would refuse (selector vs
   template labels, mounts without volumes) is absent.
3. The embedded ingero.toml passes `ingero check --config`.
4. The schema and the checks are not vacuous: broken copies of the manifest fail them.
"""
import copy
import json
import subprocess
import sys
import tempfile
import tomllib
import unittest

import jsonschema
import yaml

MANIFEST, SCHEMA, INGERO, PROM = sys.argv[1:5]
CAPS = {"BPF", "PERFMON", "SYS_PTRACE", "SYS_RESOURCE", "DAC_READ_SEARCH"}


def load():
    with open(MANIFEST) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def by_kind(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    if len(found) != 1:
        raise AssertionError(f"expected one {kind}, found {len(found)}")
    return found[0]


def schema_errors(docs):
    with open(SCHEMA) as f:
        schema = json.load(f)
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{d.get('kind')}: {'/'.join(map(str, e.absolute_path))}: {e.message}"
            for d in docs for e in validator.iter_errors(d)]


def semantic_errors(docs):
    """What the agent needs, and what the API server would refuse beyond the schema."""
    errs = []
    ds, cm = by_kind(docs, "DaemonSet"), by_kind(docs, "ConfigMap")
    pod = ds["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    ns = ds["metadata"].get("namespace")
    if cm["metadata"].get("namespace") != ns:
        errs.append("the ConfigMap is not in the DaemonSet's namespace")
    labels = ds["spec"]["template"]["metadata"].get("labels", {})
    for k, v in ds["spec"]["selector"]["matchLabels"].items():
        if labels.get(k) != v:
            errs.append(f"selector {k}={v} does not match the template's labels")
    if pod.get("hostPID") is not True:
        errs.append("hostPID is not true")
    sc = c.get("securityContext", {})
    if sc.get("privileged"):
        errs.append("the container is privileged")
    add = set(sc.get("capabilities", {}).get("add", []))
    if add != CAPS:
        errs.append(f"capabilities add {sorted(add)}, want exactly {sorted(CAPS)}")
    if sc.get("capabilities", {}).get("drop") != ["ALL"]:
        errs.append("capabilities do not drop ALL")
    # The rest of the sandbox docs/deploy.md and security.md promise.
    if sc.get("allowPrivilegeEscalation") is not False:
        errs.append("allowPrivilegeEscalation is not false")
    if sc.get("readOnlyRootFilesystem") is not True:
        errs.append("readOnlyRootFilesystem is not true")
    if pod.get("automountServiceAccountToken") is not False:
        errs.append("automountServiceAccountToken is not false")
    if pod.get("terminationGracePeriodSeconds") != 30:
        errs.append("terminationGracePeriodSeconds is not 30 (SIGTERM flushes the last batch)")
    limits = c.get("resources", {}).get("limits", {})
    if limits.get("memory") != "1Gi":
        errs.append(f"memory limit {limits.get('memory')}, want 1Gi")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    for name in mounts.keys() - volumes.keys():
        errs.append(f"volumeMount {name} has no volume")
    for name in volumes.keys() - mounts.keys():
        errs.append(f"volume {name} is not mounted")
    by_path = {m["mountPath"]: (m, volumes.get(m["name"], {})) for m in mounts.values()}
    for path in ("/sys/kernel/btf", "/sys/fs/cgroup"):
        m, v = by_path.get(path, ({}, {}))
        if v.get("hostPath", {}).get("path") != path or m.get("readOnly") is not True:
            errs.append(f"{path} is not the host's, read-only")
    env = {e["name"]: e for e in c.get("env", [])}
    args = c.get("args", [])

    def arg(flag):
        return args[args.index(flag) + 1] if flag in args[:-1] else None

    node_var = (arg("--node") or "").removeprefix("$(").removesuffix(")")
    if env.get(node_var, {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "spec.nodeName":
        errs.append("--node is not the downward API's spec.nodeName")
    # After an upgrade a node's file may be an earlier ingero's: moved aside, not refused at
    # every restart of the pod (docs/deploy.md, Upgrades).
    if arg("--older-schema") != "move-aside":
        errs.append("--older-schema is not move-aside")
    config = arg("--config") or ""
    m, v = by_path.get(config.rsplit("/", 1)[0], ({}, {}))
    key = config.rsplit("/", 1)[-1]
    if v.get("configMap", {}).get("name") != cm["metadata"]["name"] or key not in cm.get("data", {}):
        errs.append(f"--config {config} is not the ConfigMap's key")
        return errs
    toml = tomllib.loads(cm["data"][key])["trace"]
    db_dir = toml.get("db", "").rsplit("/", 1)[0]
    m, v = by_path.get(db_dir, ({}, {}))
    if "hostPath" not in v or m.get("readOnly"):
        errs.append(f"the trace file's folder {db_dir} is not a writable hostPath volume")
    port = int(toml.get("prometheus", ":0").rsplit(":", 1)[-1])
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    if ports.get("metrics") != port:
        errs.append(f"no container port named metrics = {port} (the config's prometheus port)")
    return errs


class Manifest(unittest.TestCase):
    def test_schema(self):
        self.assertEqual(schema_errors(load()), [])

    def test_agent_needs(self):
        self.assertEqual(semantic_errors(load()), [])

    def test_config_map_validates(self):
        cm = by_kind(load(), "ConfigMap")
        with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
            f.write(cm["data"]["ingero.toml"])
            f.flush()
            r = subprocess.run([INGERO, "check", "--config", f.name], capture_output=True,
                               text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("valid, 3 settings", r.stdout)

    def test_scrape_config_uses_the_port_name(self):
        with open(PROM) as f:
            prom = yaml.safe_load(f)
        (job,) = [j for j in prom["scrape_configs"] if j["job_name"] == "ingero-kubernetes"]
        keeps = [r for r in job["relabel_configs"] if r.get("action") == "keep"]
        port_rule = [r for r in keeps if "__meta_kubernetes_pod_container_port_name" in r["source_labels"]]
        self.assertEqual([r["regex"] for r in port_rule], ["metrics"])
        label_rule = [r for r in keeps
                      if "__meta_kubernetes_pod_label_app_kubernetes_io_name" in r["source_labels"]]
        self.assertEqual([r["regex"] for r in label_rule], ["ingero"])

    def mutated(self, edit):
        docs = load()
        edit(docs)
        return schema_errors(docs), semantic_errors(docs)

    def test_broken_copies_fail(self):
        def pod(d):
            return by_kind(d, "DaemonSet")["spec"]["template"]["spec"]

        def ctr(d):
            return pod(d)["containers"][0]

        cases = {
            "misspelt field": (lambda d: pod(d).update(hostPid=True), "schema"),
            "CAP_ prefix": (lambda d: ctr(d)["securityContext"]["capabilities"]["add"].append("CAP_BPF"),
                            "schema"),
            "bad hostPath type": (lambda d: pod(d)["volumes"][1]["hostPath"].update(type="Dir"), "schema"),
            "bad quantity": (lambda d: ctr(d)["resources"]["limits"].update(memory="1 GB"), "schema"),
            "bad downward field": (lambda d: ctr(d)["env"][0]["valueFrom"]["fieldRef"].update(
                fieldPath="spec.node"), "schema"),
            "no hostPID": (lambda d: pod(d).pop("hostPID"), "semantic"),
            "SYS_ADMIN added": (lambda d: ctr(d)["securityContext"]["capabilities"]["add"].append("SYS_ADMIN"),
                                "semantic"),
            "writable btf": (lambda d: [m.pop("readOnly") for m in ctr(d)["volumeMounts"]
                                        if m["mountPath"] == "/sys/kernel/btf"], "semantic"),
            "mount without volume": (lambda d: ctr(d)["volumeMounts"].append(
                {"name": "nope", "mountPath": "/nope"}), "semantic"),
            "selector mismatch": (lambda d: by_kind(d, "DaemonSet")["spec"]["selector"]["matchLabels"].update(
                app="x"), "semantic"),
            "node from pod name": (lambda d: ctr(d)["env"][0]["valueFrom"]["fieldRef"].update(
                fieldPath="metadata.name"), "semantic"),
        }
        for name, (edit, kind) in cases.items():
            with self.subTest(name):
                schema, semantic = self.mutated(edit)
                self.assertTrue(schema if kind == "schema" else semantic,
                                f"{name}: not caught (schema {schema}, semantic {semantic})")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
