package enginetest

// PythonScorer is the source of a model server in Python for endpoint tests that need a
// real interpreter (an environment's): it imports the modules in imports (comma-separated,
// such as "mlctest"), answers GET (the probes) with {} and POST with the JSON of reply, a
// Python expression evaluated per request, on the loopback port the engine gives in PORT.
func PythonScorer(imports, reply string) string {
	return `import http.server, json, os, shutil, ` + imports + `
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, body):
        raw = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)
    def do_GET(self):
        self.reply({})
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.reply(` + reply + `)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
`
}
