"""Single sign-on test parts: the real OpenID Provider (tests/oidc/provider.mjs,
npm oidc-provider) on loopback, a fake provider that signs whatever ID token a
test asks for (openssl's command line signs it: Debian's python3 has no JOSE
library), and a browser-like client that follows redirects and keeps cookies
per origin. Standard library only."""

import base64
import hashlib
import http.client
import http.server
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse

from labd_harness import REPO, SLOW, free_port, wait_until

OIDC_DIR = os.path.join(REPO, "tests", "oidc")
SECRET = "test-client-secret-0123456789"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# ---- the real provider ----------------------------------------------------

class Provider:
    """tests/oidc/provider.mjs on 127.0.0.1:port; clients labd (RS256) and
    labd-es (ES256) accept redirect_uris."""

    def __init__(self, redirect_uris, logout_uris=()):
        if not os.path.isdir(os.path.join(OIDC_DIR, "node_modules", "oidc-provider")):
            # what deploy/install-deps.sh does, for a checkout that skipped it
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--silent"], cwd=OIDC_DIR,
                           check=True)
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="labd-oidc-", suffix=".log", delete=False)
        env = dict(os.environ, OIDC_PORT=str(self.port), OIDC_CLIENT_SECRET=SECRET,
                   OIDC_REDIRECT_URIS=",".join(redirect_uris),
                   OIDC_LOGOUT_URIS=",".join(logout_uris))
        self.proc = subprocess.Popen(["node", os.path.join(OIDC_DIR, "provider.mjs")], env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        try:
            wait_until(lambda: self._ready(), 30 * SLOW,
                       lambda: "the test OpenID Provider to listen; its output:\n" +
                       self.log_text())
        except BaseException:
            self.stop()
            raise

    def _ready(self):
        assert self.proc.poll() is None, "provider.mjs exited:\n" + self.log_text()
        return "ready " in self.log_text()

    def log_text(self):
        with open(self.log.name, errors="replace") as fh:
            return fh.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        os.unlink(self.log.name)


# ---- a browser ------------------------------------------------------------

class Browser:
    """Cookies per host:port (paths ignored), redirects followed by hand.
    localhost is reached on 127.0.0.1 with its own Host header, as a browser
    resolving it would."""

    def __init__(self):
        self.jars = {}
        self.trail = []  # every URL visited, in order

    def request(self, method, url, form=None, headers=None):
        u = urllib.parse.urlsplit(url)
        host = u.hostname if u.hostname != "localhost" else "127.0.0.1"
        conn = http.client.HTTPConnection(host, u.port, timeout=20)
        h = {"Host": u.netloc}
        h.update(headers or {})
        jar = self.jars.setdefault(u.netloc, {})
        if jar:
            h["Cookie"] = "; ".join(f"{k}={v}" for k, v in jar.items())
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            h["Content-Type"] = "application/x-www-form-urlencoded"
            h["Origin"] = f"{u.scheme}://{u.netloc}"
        path = u.path + (f"?{u.query}" if u.query else "")
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        r.text = r.read().decode(errors="replace")
        conn.close()
        self.trail.append(url)
        for value in r.headers.get_all("Set-Cookie") or []:
            name, _, rest = value.partition("=")
            val = rest.split(";", 1)[0]
            if "max-age=0" in value.lower() or "expires=thu, 01 jan 1970" in value.lower():
                jar.pop(name.strip(), None)
            else:
                jar[name.strip()] = val
        r.url = url
        return r

    def go(self, url, method="GET", form=None, headers=None, stop=None):
        """Requests url and follows redirects; returns the first answer that is not
        one, or the redirect whose target stop(url) is true (not followed)."""
        r = self.request(method, url, form=form, headers=headers)
        for _ in range(20):
            if r.status not in (301, 302, 303, 307, 308):
                return r
            target = urllib.parse.urljoin(r.url, r.headers["Location"])
            if stop and stop(target):
                r.target = target
                return r
            r = self.request("GET", target)
        raise AssertionError("too many redirects: " + " -> ".join(self.trail[-20:]))


def form_action(page, base):
    m = re.search(r'<form[^>]*action="([^"]+)"', page.text)
    assert m, f"no form on {page.url}: {page.text[:500]}"
    return urllib.parse.urljoin(base, m.group(1).replace("&amp;", "&"))


def sign_in_real(browser, labd_url, login, password, next_path=None, stop=None):
    """The whole sign-in at the real provider: labd's start, the provider's login
    and consent forms, back to labd. Returns the last answer (labd's page, or a
    redirect whose target stop accepts)."""
    start = f"{labd_url}/oidc/login" + (f"?next={urllib.parse.quote(next_path)}" if next_path else "")
    page = browser.go(start)
    assert page.status == 200 and 'name="login"' in page.text, (page.status, page.text[:500])
    page = browser.go(form_action(page, page.url), "POST", {"login": login, "password": password})
    assert page.status == 200 and 'id="allow"' in page.text, (page.status, page.text[:500])
    return browser.go(form_action(page, page.url), "POST", {}, stop=stop)


# ---- a fake provider that signs what it is told ------------------------------

class Signer:
    """An RSA key made and used through the openssl command line."""

    def __init__(self, kid):
        self.kid = kid
        self.dir = tempfile.mkdtemp(prefix="labd-oidc-key-")
        self.pem = os.path.join(self.dir, "key.pem")
        subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt",
                        "rsa_keygen_bits:2048", "-out", self.pem], check=True,
                       capture_output=True)
        out = subprocess.run(["openssl", "rsa", "-in", self.pem, "-noout", "-modulus"],
                             check=True, capture_output=True, text=True).stdout
        n = bytes.fromhex(out.strip().split("=", 1)[1])
        self.jwk = {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid, "n": b64url(n),
                    "e": b64url((65537).to_bytes(3, "big"))}

    def sign(self, header, claims):
        signing_input = (b64url(json.dumps(header).encode()) + "." +
                         b64url(json.dumps(claims).encode())).encode()
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", self.pem],
                             input=signing_input, check=True, capture_output=True).stdout
        return signing_input.decode() + "." + b64url(sig)

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class FakeProvider:
    """Discovery, keys, an authorization endpoint that signs in at once, and a
    token endpoint whose ID token is made by self.make_token(claims, header) —
    what a test sets to break one thing. Codes are good once."""

    def __init__(self, client_id="labd"):
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.client_id = client_id
        self.key = Signer("fake-1")
        self.other = Signer("fake-2")  # never published
        self.published = [self.key.jwk]  # the key set /jwks serves
        self.jwks_calls = []  # time.monotonic() of each fetch of /jwks
        self.codes = {}
        self.claims = {}
        self.tamper = lambda claims, header: (claims, header, self.key)
        self.token_calls = 0
        self.token_delay = 0.0  # seconds the token endpoint waits before answering
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def base_claims(self, nonce):
        now = int(time.time())
        c = {"iss": self.issuer, "aud": self.client_id, "sub": "fake-subject", "nonce": nonce,
             "iat": now, "exp": now + 300}
        c.update(self.claims)
        return c

    def _handler(self):
        fake = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def reply(self, status, obj=None, location=None):
                body = json.dumps(obj).encode() if obj is not None else b""
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                u = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(u.query))
                if u.path == "/.well-known/openid-configuration":
                    return self.reply(200, {
                        "issuer": fake.issuer,
                        "authorization_endpoint": f"{fake.issuer}/authorize",
                        "token_endpoint": f"{fake.issuer}/token",
                        "jwks_uri": f"{fake.issuer}/jwks"})
                if u.path == "/jwks":
                    fake.jwks_calls.append(time.monotonic())
                    return self.reply(200, {"keys": list(fake.published)})
                if u.path == "/authorize":
                    assert q.get("code_challenge_method") == "S256", q
                    code = secrets.token_urlsafe(16)
                    fake.codes[code] = q
                    sep = "&" if "?" in q["redirect_uri"] else "?"
                    loc = (f"{q['redirect_uri']}{sep}code={code}&state="
                           f"{urllib.parse.quote(q['state'])}")
                    return self.reply(302, location=loc)
                return self.reply(404, {"error": "not_found"})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(n).decode()))
                fake.token_calls += 1
                time.sleep(fake.token_delay)
                q = fake.codes.pop(form.get("code"), None)
                if q is None:
                    return self.reply(400, {"error": "invalid_grant"})
                challenge = b64url(hashlib.sha256(form["code_verifier"].encode()).digest())
                if challenge != q["code_challenge"]:
                    return self.reply(400, {"error": "invalid_grant",
                                            "error_description": "PKCE"})
                claims, header, key = fake.tamper(fake.base_claims(q["nonce"]),
                                                  {"alg": "RS256", "kid": fake.key.kid})
                return self.reply(200, {"access_token": "at", "token_type": "Bearer",
                                        "id_token": key.sign(header, claims)})

        return H

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.key.cleanup()
        self.other.cleanup()
