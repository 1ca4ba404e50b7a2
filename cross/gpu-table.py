#!/usr/bin/env python3
"""The table of cross/gpu-check.sh: reads the benchmark outputs in a results
directory (latency-<model>-<provider>.txt/.log, multicam-<model>-<provider>.txt,
card.txt) and prints markdown: per model and provider the frame-to-MQTT latency,
the inference time, fps, the depth and AuxUE times and the AuxUE's share, the
CUDA speed-up over the same machine's CPU provider, ONNX Runtime's node
placement, and the multi-camera rows. Standard library only (the device has
PyTorch's Python, the build machine Debian's)."""

import glob
import os
import re
import sys

UNITS = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def ms(text):
    """Milliseconds of a Go duration ("12.3ms", "1m2.5s", "850µs")."""
    parts = re.findall(r"([0-9.]+)(ns|µs|us|ms|s|m|h)", text)
    if not parts:
        raise ValueError("not a duration: %r" % text)
    return sum(float(v) * UNITS[u] for v, u in parts)


DUR = r"([0-9.]+(?:ns|µs|us|ms|s|m|h)(?:[0-9.]+(?:ns|µs|us|ms|s))*)"


def latency(path):
    t = open(path, encoding="utf-8").read()
    r = {}
    m = re.search(r"frames measured (\d+), assessed ([0-9.]+) fps.*provider (\S+)", t)
    if not m:
        return None
    r["frames"], r["fps"], r["provider"] = int(m.group(1)), float(m.group(2)), m.group(3)
    m = re.search(r"capture -> MQTT subscriber: p50 " + DUR + r"\s+p99 " + DUR, t)
    r["lat50"], r["lat99"] = ms(m.group(1)), ms(m.group(2))
    m = re.search(r"inference \(depth \+ AuxUE\): p50 " + DUR + r"\s+p99 " + DUR, t)
    r["inf50"], r["inf99"] = ms(m.group(1)), ms(m.group(2))
    for st in ("depth", "auxue", "preprocess", "readout"):
        m = re.search(r" " + st + r" " + DUR, t.split("stages:", 1)[1])
        r[st] = ms(m.group(1))
    r["copies"] = copies(t)
    return r


def copies(text):
    """The host/device copy line of bench latency or multicam (device-resident tensors)."""
    m = re.search(r"host/device copies per frame \(device-resident tensors\): " + DUR + r", ([0-9.]+) of inference", text)
    if m:
        return "%.3f ms, %.3f of inference" % (ms(m.group(1)), float(m.group(2)))
    if "host/device copies per frame: none separate" in text:
        return "inside the runs (host tensors)"
    return "not reported"


def placement(path):
    """The nodes= of the "model session" log lines: depth's, then the AuxUE's."""
    if not os.path.exists(path):
        return []
    out = []
    for line in open(path, encoding="utf-8"):
        if 'msg="model session"' in line:
            m = re.search(r'nodes="([^"]*)"|nodes=(\S+)', line)
            if m:
                out.append(m.group(1) or m.group(2))
    return out


def multicam(path):
    rows = []
    for line in open(path, encoding="utf-8"):
        f = line.split()
        if len(f) >= 10 and f[0].isdigit() and f[1].isdigit():
            rows.append({"cameras": int(f[0]), "batch": int(f[1]), "aggregate": float(f[2]), "bound": float(f[3]),
                         "ratio": float(f[4]), "p50": ms(f[6]), "p99": ms(f[7])})
    return rows


def main(d):
    card = open(os.path.join(d, "card.txt")).read().strip() if os.path.exists(os.path.join(d, "card.txt")) else "none"
    print("card: %s" % card)
    print()
    print("| model | provider | frame->MQTT p50 / p99 ms | inference p50 / p99 ms | fps | depth ms | AuxUE ms | AuxUE/depth | host/device copies | nodes (depth; AuxUE) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    lat = {}
    for path in sorted(glob.glob(os.path.join(d, "latency-*.txt"))):
        tag = os.path.basename(path)[len("latency-"):-len(".txt")]
        r = latency(path)
        if r is None:
            print("| %s | (failed: see %s) |" % (tag, os.path.basename(path)))
            continue
        lat[tag] = r
        model = tag.rsplit("-", 1)[0]
        nodes = "; ".join(placement(path[:-4] + ".log")) or "unknown"
        prov = r["provider"]
        for dt in ("off", "on"):
            if tag.endswith("_" + dt):
                prov += " (device_tensors %s)" % dt
        print("| %s | %s | %.1f / %.1f | %.1f / %.1f | %.2f | %.2f | %.2f | %.3f | %s | %s |" % (
            model, prov, r["lat50"], r["lat99"], r["inf50"], r["inf99"], r["fps"], r["depth"], r["auxue"],
            r["auxue"] / r["depth"] if r["depth"] else float("nan"), r["copies"], nodes))
    print()
    for model in sorted({t.rsplit("-", 1)[0] for t in lat}):
        g, c = lat.get(model + "-cuda"), lat.get(model + "-cpu")
        if g and c:
            print("%s: CUDA inference (depth + AuxUE, p50) %.2f ms vs CPU %.2f ms: %.1fx" % (model, g["inf50"], c["inf50"], c["inf50"] / g["inf50"]))
        h = lat.get(model + "-cuda_off")
        if g and h:
            print("%s: CUDA frame->MQTT p50 %.2f ms with device-resident tensors, %.2f ms with host tensors" % (model, g["lat50"], h["lat50"]))
    print()
    print("| model | provider | cameras | batch | aggregate fps | bound fps | /bound | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in sorted(glob.glob(os.path.join(d, "multicam-*.txt"))):
        tag = os.path.basename(path)[len("multicam-"):-len(".txt")]
        model, prov = tag.rsplit("-", 1)
        rows = multicam(path)
        if not rows:
            print("| %s | %s | (failed: see %s) |" % (model, prov, os.path.basename(path)))
        for r in rows:
            print("| %s | %s | %d | %d | %.2f | %.2f | %.3f | %.1f | %.1f |" % (
                model, prov, r["cameras"], r["batch"], r["aggregate"], r["bound"], r["ratio"], r["p50"], r["p99"]))
    print()
    for path in sorted(glob.glob(os.path.join(d, "multicam-*.txt"))):
        tag = os.path.basename(path)[len("multicam-"):-len(".txt")]
        print("%s, single-session bound: host/device copies %s" % (tag, copies(open(path, encoding="utf-8").read())))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/gpu-check")
