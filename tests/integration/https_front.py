"""The shipped nginx front (deploy/nginx/) on loopback, for the tests: a test CA
and certificates made with the openssl CLI, and deploy/nginx/labd.conf itself
with only its ports, addresses, names and paths replaced.

Also a command for the browser test (tests/e2e/https_front.test.mjs):
    python3 https_front.py DIR LABD_PORT
starts nginx in front of 127.0.0.1:LABD_PORT, prints one JSON line (the ports
and the CA's path) and serves until stdin closes."""

import json
import os
import re
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NGINX_DIR = os.path.join(REPO, "deploy", "nginx")
LAB_HOST = "lab.test"  # labd's host name in the tests
USER_DOMAIN = "users.test"  # labd's [server] user_domain behind the front


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def make_certs(d):
    """A test CA (ca.crt) and two server certificates it signs: lab.crt for
    LAB_HOST and users.crt for *.USER_DOMAIN (P-256 keys: cheap handshakes)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=labd test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    for name, san in (("lab", LAB_HOST), ("users", f"*.{USER_DOMAIN}")):
        with open(os.path.join(d, f"{name}.ext"), "w") as fh:
            fh.write(f"subjectAltName=DNS:{san}\nbasicConstraints=CA:FALSE\n"
                     "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n")
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN={san}", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext",
                 "-out", f"{name}.crt", cwd=d)
    return os.path.join(d, "ca.crt")


def render(d, labd_port, https_port, http_port):
    """deploy/nginx/labd.conf for this test: the example names, ports, paths and
    labd's address replaced, nothing else. Returns nginx.conf's path."""
    text = open(os.path.join(NGINX_DIR, "labd.conf")).read()
    subs = [
        (r"listen 443 ", f"listen 127.0.0.1:{https_port} "),
        (r"listen \[::\]:443 ", f"listen [::1]:{https_port} "),
        (r"listen 80;", f"listen 127.0.0.1:{http_port};"),
        (r"listen \[::\]:80;", f"listen [::1]:{http_port};"),
        (r"127\.0\.0\.1:8080", f"127.0.0.1:{labd_port}"),
        (r"/etc/ssl/labd/lab\.example\.org\.", os.path.join(d, "lab.")),
        (r"/etc/ssl/labd/wildcard\.example-labusers\.org\.", os.path.join(d, "users.")),
        (r"snippets/labd-proxy\.conf", os.path.join(NGINX_DIR, "labd-proxy.conf")),
        (r"lab\.example\.org", LAB_HOST),
        (r"example-labusers\.org", USER_DOMAIN),
    ]
    for pattern, repl in subs:
        text, n = re.subn(pattern, repl.replace("\\", "\\\\"), text)
        assert n, f"deploy/nginx/labd.conf no longer has {pattern!r}"
    with open(os.path.join(d, "labd.conf"), "w") as fh:
        fh.write(text)
    # nginx's own main file: what /etc/nginx/nginx.conf is on a host
    main = os.path.join(d, "nginx.conf")
    with open(main, "w") as fh:
        fh.write(f"""daemon off;
master_process on;
worker_processes 2;
worker_rlimit_nofile 8192;
user root;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {d}/tmp-body;
    proxy_temp_path {d}/tmp-proxy;
    include {d}/labd.conf;
}}
""")
    return main


class Front:
    """nginx with deploy/nginx/labd.conf in front of labd at labd_port."""

    def __init__(self, d, labd_port):
        self.dir = d
        self.ca = make_certs(d)
        self.https_port = _free_port()
        self.http_port = _free_port()
        self.conf = render(d, labd_port, self.https_port, self.http_port)
        subprocess.run(["nginx", "-t", "-q", "-p", d, "-c", self.conf], check=True)
        self.proc = subprocess.Popen(["nginx", "-p", d, "-c", self.conf],
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.https_port), 1).close()
                break
            except OSError:
                assert self.proc.poll() is None, f"nginx exited: {self.error_log()}"
                assert time.monotonic() < deadline, "nginx did not listen within 10 s"
                time.sleep(0.05)

    def error_log(self):
        try:
            return open(os.path.join(self.dir, "error.log")).read()[-4000:]
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()  # nginx: SIGTERM is a fast shutdown
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()


def main():
    d, labd_port = sys.argv[1], int(sys.argv[2])
    front = Front(d, labd_port)
    try:
        print(json.dumps({"https_port": front.https_port, "http_port": front.http_port,
                          "ca": front.ca, "lab_host": LAB_HOST,
                          "user_domain": USER_DOMAIN}), flush=True)
        sys.stdin.read()
    finally:
        front.stop()


if __name__ == "__main__":
    main()
