"""Serves the model a training job made, with Python's standard library alone.

The engine starts it with PORT set and AZUREML_MODEL_DIR naming the directory that holds
the deployment's model_path (here a job's output: model.json), as Azure ML does. The
scoring router forwards POST <scoring_uri> to POST /score here; the probes GET /.
"""

import json
import math
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

with open(os.path.join(os.environ["AZUREML_MODEL_DIR"], "model.json"), encoding="utf-8") as f:
    MODEL = json.load(f)


def predict(rows):
    """Returns the probability of churn for each row of features."""
    weights, bias = MODEL["weights"], MODEL["bias"]
    out = []
    for row in rows:
        if len(row) != len(weights):
            raise ValueError(f"each row needs {len(weights)} features, got {len(row)}")
        z = bias + sum(w * float(x) for w, x in zip(weights, row))
        out.append(round(1.0 / (1.0 + math.exp(-z)), 6))
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the router reuses connections

    def do_GET(self):
        # Liveness and readiness probes.
        self.reply(200, {"status": "ok"})

    def do_POST(self):
        if self.path.split("?")[0] != "/score":
            self.reply(404, {"error": f"no route {self.path}; POST /score"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            rows = json.loads(self.rfile.read(length) or b"{}")["data"]
            self.reply(200, {"predictions": predict(rows), "model": MODEL})
        except (KeyError, TypeError, ValueError) as e:
            self.reply(400, {"error": f'expected {{"data": [[feature, ...], ...]}}: {e}'})

    def reply(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))


if __name__ == "__main__":
    port = int(os.environ["PORT"])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"serving {os.environ['AZUREML_MODEL_DIR']} on port {port}", flush=True)
    server.serve_forever()
