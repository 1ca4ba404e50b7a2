# The PyTorch side of `didoedge bench kernels` (pkg/nn/nnbench): reads one
# JSON request per line on stdin, answers one JSON line on stdout.
#
#   {"op": "time", "case": {...}, "threads": T, "min_time": S}
#       -> {"sec": seconds per step, "iters": N}
#   {"op": "check", "case": {...}, "x": b64, "w": b64, "b": b64, "dy": b64}
#       -> {"y": b64, "dx": b64, "dw": b64, "db": b64}
#
# Arrays are little-endian float32, base64. A step is one forward and one
# backward pass, as the Go side times it. Run by /usr/bin/python3 (Debian's
# python3-torch).
import base64
import json
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def arr(s, shape):
    return torch.from_numpy(np.frombuffer(base64.b64decode(s), dtype="<f4").copy()).reshape(shape)


def b64(t):
    return base64.b64encode(t.detach().contiguous().numpy().astype("<f4").tobytes()).decode()


def shapes(c):
    op = c["op"]
    if op == "conv":
        return (c["n"], c["in"], c["h"], c["w"]), (c["out"], c["in"], c["k"], c["k"]), (c["out"],)
    if op == "linear":
        return (c["n"], c["in"]), (c["out"], c["in"]), (c["out"],)
    if op == "cosine":
        return (c["n"], c["in"], c["h"], c["w"]), (c["out"], c["in"]), None
    raise ValueError("unknown op %r" % op)


def forward(c, x, w, b):
    op = c["op"]
    if op == "conv":
        return F.conv2d(x, w, b, stride=c["stride"], padding=c["pad"], dilation=c["dil"])
    if op == "linear":
        return F.linear(x, w, b)
    # y_o = (w_o . x) / (|w_o| |x| + eps) per pixel (pkg/nn CosineSimilarity)
    dot = F.conv2d(x, w[:, :, None, None])
    xn = x.norm(dim=1, keepdim=True)
    wn = w.norm(dim=1).view(1, -1, 1, 1)
    return dot / (wn * xn + 1e-8)


def setup(c, g):
    xs, ws, bs = shapes(c)
    x = (torch.rand(xs, generator=g) * 2 - 1).requires_grad_(True)
    w = (torch.rand(ws, generator=g) * 2 - 1).requires_grad_(True)
    b = (torch.rand(bs, generator=g) * 2 - 1).requires_grad_(True) if bs else None
    return x, w, b


def timed(req):
    c = req["case"]
    torch.set_num_threads(int(req["threads"]))
    g = torch.Generator().manual_seed(1)
    x, w, b = setup(c, g)
    with torch.no_grad():
        y = forward(c, x, w, b)
    dy = torch.rand(y.shape, generator=g) * 2 - 1

    def step():
        x.grad = None
        forward(c, x, w, b).backward(dy)

    step()
    step()
    iters, start = 0, time.perf_counter()
    while True:
        step()
        iters += 1
        el = time.perf_counter() - start
        if el >= req["min_time"]:
            return {"sec": el / iters, "iters": iters}


def check(req):
    c = req["case"]
    xs, ws, bs = shapes(c)
    x = arr(req["x"], xs).requires_grad_(True)
    w = arr(req["w"], ws).requires_grad_(True)
    b = arr(req["b"], bs).requires_grad_(True) if bs else None
    y = forward(c, x, w, b)
    y.backward(arr(req["dy"], y.shape))
    out = {"y": b64(y), "dx": b64(x.grad), "dw": b64(w.grad)}
    if b is not None:
        out["db"] = b64(b.grad)
    return out


def main():
    hello = {"torch": torch.__version__, "mkldnn": bool(torch.backends.mkldnn.is_available()),
             "capability": torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") else ""}
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            if req["op"] == "time":
                resp = timed(req)
            elif req["op"] == "check":
                resp = check(req)
            else:
                resp = {"error": "unknown request %r" % req["op"]}
        except Exception as e:  # reported to the Go side, which names the case
            resp = {"error": "%s: %s" % (type(e).__name__, e)}
        print(json.dumps(resp), flush=True)


if __name__ == "__main__":
    main()
