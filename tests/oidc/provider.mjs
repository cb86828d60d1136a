// labd's test OpenID Provider: oidc-provider (a certified implementation) on
// loopback, with labd registered as a client and a few test users.
//
//   node tests/oidc/provider.mjs   (environment below)
//   OIDC_PORT            port on 127.0.0.1 (the issuer is http://127.0.0.1:PORT)
//   OIDC_REDIRECT_URIS   comma-separated redirect URIs labd uses (…/oidc/callback)
//   OIDC_LOGOUT_URIS     comma-separated post-logout redirect URIs (…/login)
//   OIDC_CLIENT_SECRET   the clients' secret
//
// Clients: "labd" signs ID tokens with RS256, "labd-es" with ES256. Its pages
// (login, consent, logout) are plain HTML forms that load nothing from
// elsewhere. It prints "ready <issuer>" once it listens.
import crypto from "node:crypto";
import http from "node:http";
import Provider from "oidc-provider";

const port = Number(process.env.OIDC_PORT);
const issuer = `http://127.0.0.1:${port}`;
const list = (v) => (v || "").split(",").filter(Boolean);

// Test users: password, e-mail and groups (the "groups" claim).
const ACCOUNTS = {
  alice: { password: "alice-password", email: "alice@example.org", groups: ["students", "physics"] },
  bob: { password: "bob-password", email: "bob@example.org", groups: ["staff"] },
  mallory: { password: "mallory-password", email: "mallory@elsewhere.test", groups: ["students"] },
  "Bad Name": { password: "bad-password", email: "bad@example.org", groups: [] },
};

function signingKey(type, kid) {
  const { privateKey } = type === "rsa"
    ? crypto.generateKeyPairSync("rsa", { modulusLength: 2048 })
    : crypto.generateKeyPairSync("ec", { namedCurve: "P-256" });
  return { ...privateKey.export({ format: "jwk" }), kid, use: "sig", alg: type === "rsa" ? "RS256" : "ES256" };
}

const client = (id, alg) => ({
  client_id: id,
  client_secret: process.env.OIDC_CLIENT_SECRET,
  redirect_uris: list(process.env.OIDC_REDIRECT_URIS),
  post_logout_redirect_uris: list(process.env.OIDC_LOGOUT_URIS),
  response_types: ["code"],
  grant_types: ["authorization_code"],
  token_endpoint_auth_method: "client_secret_basic",
  id_token_signed_response_alg: alg,
});

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const page = (title, body) => `<!doctype html><html><head><meta charset="utf-8"><title>${esc(title)}</title></head><body><h1>${esc(title)}</h1>${body}</body></html>`;

const provider = new Provider(issuer, {
  clients: [client("labd", "RS256"), client("labd-es", "ES256")],
  jwks: { keys: [signingKey("rsa", "rsa-1"), signingKey("ec", "ec-1")] },
  cookies: { keys: [crypto.randomBytes(32).toString("hex")] },
  claims: {
    openid: ["sub"],
    profile: ["preferred_username", "name"],
    email: ["email", "email_verified"],
    groups: ["groups"],
  },
  // the claims of the scopes go into the ID token, which is all labd reads
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: {
      enabled: true,
      logoutSource: async (ctx, form) => {
        ctx.body = page("Sign out", `${form}<button type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>`);
      },
      postLogoutSuccessSource: async (ctx) => { ctx.body = page("Signed out", "<p>You are signed out.</p>"); },
    },
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  async findAccount(ctx, id) {
    const a = ACCOUNTS[id];
    if (!a) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, preferred_username: id, name: id, email: a.email, email_verified: true, groups: a.groups };
      },
    };
  },
  renderError: async (ctx, out) => { ctx.type = "html"; ctx.body = page("Error", `<p id="error">${esc(out.error)}: ${esc(out.error_description || "")}</p>`); },
});

async function readForm(req) {
  let body = "";
  for await (const chunk of req) body += chunk;
  return new URLSearchParams(body);
}

const loginForm = (uid, error) => page("Sign in to the test provider",
  `${error ? `<p id="error">${esc(error)}</p>` : ""}<form method="post" action="/interaction/${esc(uid)}/login">` +
  `<label>Login <input name="login" id="login"></label><label>Password <input type="password" name="password" id="password"></label>` +
  `<button type="submit" id="sign-in">Sign in</button></form>`);
const consentForm = (uid, client) => page(`Allow ${client}?`,
  `<form method="post" action="/interaction/${esc(uid)}/confirm"><button type="submit" id="allow">Allow</button></form>`);

// The interactions (login, then consent) as plain forms.
async function interaction(req, res) {
  const [, , uid, action] = req.url.split("?")[0].split("/");
  const details = await provider.interactionDetails(req, res);
  const send = (html) => { res.writeHead(200, { "content-type": "text/html; charset=utf-8" }); res.end(html); };
  if (req.method === "GET") {
    return send(details.prompt.name === "login" ? loginForm(uid) : consentForm(uid, details.params.client_id));
  }
  if (action === "login") {
    const form = await readForm(req);
    const a = ACCOUNTS[form.get("login")];
    if (!a || a.password !== form.get("password")) return send(loginForm(uid, "wrong login or password"));
    return provider.interactionFinished(req, res, { login: { accountId: form.get("login") } }, { mergeWithLastSubmission: false });
  }
  if (action === "confirm") {
    const { prompt: { details: missing }, params, session, grantId } = details;
    const grant = grantId ? await provider.Grant.find(grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(" "));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    return provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
  }
  res.writeHead(404);
  res.end();
}

const callback = provider.callback();
http.createServer((req, res) => {
  if (req.url.startsWith("/interaction/")) {
    interaction(req, res).catch((e) => { res.writeHead(400, { "content-type": "text/plain" }); res.end(String(e)); });
    return;
  }
  callback(req, res);
}).listen(port, "127.0.0.1", () => console.log(`ready ${issuer}`));
