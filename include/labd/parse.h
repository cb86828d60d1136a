/* parse.h - the one parser for each kind of value labd takes as text: user
 * names, tokens, whole numbers, sizes, durations and CPU counts, wherever they
 * come from (labd.ini, labbox options, API bodies, the supervisor's messages).
 * Shared by the server and the sandbox so both accept exactly the same syntax
 * (docs/config.md lists it).
 *
 * Pure functions, no logging: the caller says what was wrong and where. The
 * number parsers return 0, -EINVAL for malformed text (empty, a sign, spaces,
 * an unknown suffix) or -ERANGE for a value out of range or too large for the
 * type; *out is written only on success. */
#ifndef LABD_PARSE_H
#define LABD_PARSE_H

#include <stdbool.h>
#include <stdint.h>

#define PARSE_USER_NAME_MAX 32
/* The rule parse_user_name_ok applies, as error messages and docs state it. */
#define PARSE_USER_NAME_RULE "^[a-z0-9][a-z0-9._-]{0,31}$"
/* labd's secrets are the unpadded base64url of 32 random bytes (crypto_random_token). */
#define PARSE_TOKEN_LEN 43
/* CPU counts are kept in thousandths of a CPU ("milli-CPUs": 2000 = 2 CPUs). */
#define PARSE_CPUS_MAX_MILLI (1024u * 1000u)

/* A lab user name: ^[a-z0-9][a-z0-9._-]{0,31}$, as universities issue them
 * (student numbers "20231234", "john.doe", "jd_smith"). It becomes a Unix-style
 * host name, a cgroup, a file name and a URL segment, so it is lowercase ASCII,
 * starts with a letter or digit (never '.', '_' or '-': no "..", no option-like
 * or hidden name) and holds nothing else that needs quoting. Its per-user
 * origin label is derived from it (auth/origin.h), not the name itself.
 * Plan and group names follow the same rule. NULL is not a name. */
bool parse_user_name_ok(const char *s);
/* A secret as labd generates it: exactly PARSE_TOKEN_LEN characters of the
 * base64url alphabet [A-Za-z0-9_-]. NULL is not a token. */
bool parse_token_ok(const char *s);
/* Decimal digits only ("0" to "18446744073709551615"; no sign, spaces or
 * suffix), within min..max. */
int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Bytes: digits with an optional binary unit K, M, G or T (either case, powers
 * of 1024), which may be followed by "B" or "iB": "4096", "64K", "512k",
 * "4MiB", "15G", "1TB". */
int parse_size_bytes(const char *s, uint64_t *out);
/* Seconds: digits with an optional unit s, m, h or d: "90", "90s", "30m",
 * "12h", "7d"; at most INT32_MAX days. */
int parse_duration_s(const char *s, int64_t *out);
/* A CPU count as a decimal with up to three decimals, in milli-CPUs: "2" ->
 * 2000, "0.5" -> 500, "1.25" -> 1250, "0.001" -> 1; 1..PARSE_CPUS_MAX_MILLI
 * (1024 CPUs). No exponent, sign or spaces. */
int parse_cpus_milli(const char *s, uint32_t *out);

#endif
