"""A model server that needs nothing but Python's standard library.

The engine starts it with PORT set; the scoring router forwards
POST <scoring_uri> to POST /score here, and the probes GET /.

The "model" is a logistic regression whose weights come from model.json, so a
deployment's version is its code: change the weights and `terraform apply`
rolls the new version out.
"""

import json
import math
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))

with open(os.path.join(HERE, "model.json"), encoding="utf-8") as f:
    MODEL = json.load(f)

VERSION = os.environ.get("MODEL_VERSION", MODEL.get("version", "unknown"))


def predict(rows):
    """Returns the probability of the positive class for each row of features."""
    weights, bias = MODEL["weights"], MODEL["bias"]
    out = []
    for row in rows:
        if len(row) != len(weights):
            raise ValueError(f"each row needs {len(weights)} features, got {len(row)}")
        z = bias + sum(w * float(x) for w, x in zip(weights, row))
        out.append(1.0 / (1.0 + math.exp(-z)))
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the router reuses connections

    def do_GET(self):
        # Liveness and readiness probes.
        self.reply(200, {"status": "ok", "version": VERSION})

    def do_POST(self):
        if self.path.split("?")[0] != "/score":
            self.reply(404, {"error": f"no route {self.path}; POST /score"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            rows = body["data"]
            self.reply(200, {"predictions": predict(rows), "version": VERSION})
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
        # One line per request on stderr, which the engine keeps in the instance's log.
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))


if __name__ == "__main__":
    port = int(os.environ["PORT"])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"serving model {VERSION} on port {port}", flush=True)
    server.serve_forever()
