/* fuzz_oidc.c - an OpenID Provider's key set (auth/oidc_keys.c) and ID token
 * (auth/oidc_jwt.c). Input: the JWK Set's JSON on the first line, the token
 * after. Promises: every result is one of the enum's; claims come back with
 * OIDC_JWT_OK and only then; the same key set parsed twice finds the same
 * keys; nothing leaks. */
#include "auth/oidc_jwt.h"
#include "auth/oidc_keys.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *jwks_text = fuzz_take_line(&data, &size), *token = fuzz_cstr(data, size);
	json_t *jwks = json_loads(jwks_text, 0, NULL), *claims = NULL;
	struct oidc_keys *keys = oidc_keys_parse(jwks), *again = oidc_keys_parse(jwks);
	struct oidc_expect want = {.issuer = "https://idp.example", .client_id = "labd",
				   .nonce = "n0nce", .now_s = 1800000000, .skew_s = 60};

	FUZZ_ASSERT(!keys == !again);
	if (keys) {
		FUZZ_ASSERT(keys->n == again->n && keys->n <= OIDC_KEYS_MAX);
		for (size_t i = 0; i < keys->n; i++)
			FUZZ_ASSERT(keys->key[i].pkey && !strcmp(keys->key[i].kid, again->key[i].kid));
	}
	enum oidc_jwt_result res = oidc_jwt_verify(token, keys, &want, &claims);
	FUZZ_ASSERT(res >= OIDC_JWT_OK && res <= OIDC_JWT_SUBJECT);
	FUZZ_ASSERT((res == OIDC_JWT_OK) == (claims != NULL));
	FUZZ_ASSERT(strlen(oidc_jwt_result_text(res)) > 0 && strlen(oidc_jwt_result_code(res)) > 0);
	json_decref(claims);
	oidc_keys_unref(keys);
	oidc_keys_unref(again);
	json_decref(jwks);
	free(jwks_text);
	free(token);
	return 0;
}
