/* Unit tests of the client module's parts that need no network: the configuration file, /token's
 * JSON, the mechanism plans (message or digest mode, parameters) and the answer → CKR_* table. */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "http.h"
#include "keys.h"
#include "mech.h"


static void test_config(void) {
  client_config cfg;
  char why[256];
  CHECK(config_parse("# two slots\n[endpoint]\nurl = sign.example.org:8443/\ncacert = /ca.pem\n"
                     "timeout = 5\n[endpoint]\nurl=http://127.0.0.1:1\nmax_body = 2048\n",
                     &cfg, why, sizeof why) == CKR_OK);
  CHECK(cfg.count == 2);
  CHECK(strcmp(cfg.ep[0].url, "https://sign.example.org:8443") == 0);
  CHECK(strcmp(cfg.ep[0].cacert, "/ca.pem") == 0);
  CHECK(cfg.ep[0].timeout_ms == 5000);
  CHECK(cfg.ep[1].max_body == 2048 && cfg.ep[1].max_body_set);
  CHECK(cfg.ep[0].max_body == SVCP11_DEFAULT_MAX_BODY && !cfg.ep[0].max_body_set);
  CHECK(cfg.ep[1].timeout_ms == SVCP11_DEFAULT_TIMEOUT_MS);
  CHECK(config_parse("[endpoint]\nurl = x\nkey_types = ec-p256 , rsa-3072\n", &cfg, why,
                     sizeof why) == CKR_OK);
  CHECK(cfg.ep[0].key_types == ((1u << KT_EC_P256) | (1u << KT_RSA_3072)));
  CHECK(config_parse("[endpoint]\nurl = x\nkey_types = dsa\n", &cfg, why, sizeof why) ==
        CKR_GENERAL_ERROR);
  CHECK(config_parse("url = x\n", &cfg, why, sizeof why) == CKR_GENERAL_ERROR);
  CHECK(config_parse("[endpoint]\nbogus = 1\n", &cfg, why, sizeof why) == CKR_GENERAL_ERROR);
  CHECK(strstr(why, "unknown setting 'bogus'") != NULL);
  CHECK(config_parse("[endpoint]\nurl = ftp://x\n", &cfg, why, sizeof why) == CKR_GENERAL_ERROR);
  CHECK(config_parse("[endpoint]\ntimeout = 0\nurl = x\n", &cfg, why, sizeof why) ==
        CKR_GENERAL_ERROR);
  CHECK(config_parse("[endpoint]\ncacert = /x\n", &cfg, why, sizeof why) == CKR_GENERAL_ERROR);
  CHECK(config_parse("", &cfg, why, sizeof why) == CKR_GENERAL_ERROR);
}

/* An Ed25519 key (RFC 8032 test 1's public key) and an ML-DSA-44-sized dummy. */
static const char *ED_SPKI = "MCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
static const char *ED_RAW = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";

static char *token_json(const char *digests) {
  static char buf[8192];
  static const unsigned char zeros[1312];
  char mldsa[1312 / 3 * 4 + 8];
  EVP_EncodeBlock((unsigned char *)mldsa, zeros, sizeof zeros);
  snprintf(buf, sizeof buf,
           "{\"token\":{\"label\":\"svcd\",\"serialNumber\":\"0123456789abcdef\"},\"keys\":["
           "{\"label\":\"ed\",\"key_type\":\"ed25519\",\"mechanism\":\"CKM_EDDSA\","
           "\"public_key\":\"%s\",\"public_key_raw\":\"%s\"%s},"
           "{\"label\":\"broken\",\"error\":\"not offered\"},"
           "{\"label\":\"pq\",\"key_type\":\"ml-dsa-44\",\"mechanism\":\"CKM_ML_DSA\","
           "\"public_key\":null,\"public_key_raw\":\"%s\"%s},"
           "{\"label\":\"future\",\"key_type\":\"slh-dsa\",\"public_key_raw\":\"AAAA\"}]}",
           ED_SPKI, ED_RAW, digests ? ",\"digests\":[]" : "", mldsa,
           digests ? ",\"digests\":[\"ml-dsa-mu\"]" : "");
  return buf;
}

static void test_token(void) {
  token_listing t;
  char *json = token_json(NULL);
  CHECK(token_parse(json, strlen(json), &t) == CKR_OK);
  CHECK(t.count == 2); /* the errored and the unknown type are left out */
  CHECK(strcmp(t.token_label, "svcd") == 0 && strcmp(t.serial, "0123456789abcdef") == 0);
  CHECK(!t.has_digests_field);
  CHECK(t.keys[0]->type == KT_ED25519 && t.keys[0]->raw_len == 32 && t.keys[0]->pkey != NULL);
  CHECK(t.keys[0]->ec_point_len == 34 && t.keys[0]->ec_point[0] == 0x04);
  CHECK(t.keys[1]->type == KT_ML_DSA_44 && t.keys[1]->raw_len == 1312 && t.keys[1]->digests == 0);
  CHECK(key_signature_length(t.keys[1]) == 2420);

  CK_MECHANISM_TYPE list[16];
  size_t n = mech_list(&t, list, 16);
  CHECK(n == 2 && list[0] == CKM_EDDSA && list[1] == CKM_ML_DSA);

  sign_plan plan;
  CK_MECHANISM m = {CKM_ML_DSA, NULL, 0};
  CHECK(mech_plan(t.keys[1], &m, &plan) == CKR_OK && plan.mode == MODE_MESSAGE && !plan.mu);
  CK_SIGN_ADDITIONAL_CONTEXT ctx = {CKH_HEDGE_REQUIRED, NULL, 0};
  m.pParameter = &ctx;
  m.ulParameterLen = sizeof ctx;
  CHECK(mech_plan(t.keys[1], &m, &plan) == CKR_OK);
  ctx.hedgeVariant = CKH_DETERMINISTIC_REQUIRED;
  CHECK(mech_plan(t.keys[1], &m, &plan) == CKR_MECHANISM_PARAM_INVALID);
  unsigned char c = 1;
  ctx = (CK_SIGN_ADDITIONAL_CONTEXT){CKH_HEDGE_PREFERRED, &c, 1};
  CHECK(mech_plan(t.keys[1], &m, &plan) == CKR_MECHANISM_PARAM_INVALID);
  m = (CK_MECHANISM){CKM_ECDSA_SHA256, NULL, 0};
  CHECK(mech_plan(t.keys[0], &m, &plan) == CKR_KEY_TYPE_INCONSISTENT);
  CK_EDDSA_PARAMS ph = {CK_TRUE, 0, NULL};
  m = (CK_MECHANISM){CKM_EDDSA, &ph, sizeof ph};
  CHECK(mech_plan(t.keys[0], &m, &plan) == CKR_MECHANISM_PARAM_INVALID);
  token_listing_free(&t);

  json = token_json("yes");
  CHECK(token_parse(json, strlen(json), &t) == CKR_OK);
  CHECK(t.has_digests_field && t.keys[1]->digests == DG_MLDSA_MU);
  m = (CK_MECHANISM){CKM_ML_DSA, NULL, 0};
  CHECK(mech_plan(t.keys[1], &m, &plan) == CKR_OK && plan.mu);
  token_listing_free(&t);

  const char *limits[][2] = {{"{\"max_body\":65536,\"keys\":[]}", "65536"},
                             {"{\"keys\":[]}", "0"},
                             {"{\"max_body\":\"65536\",\"keys\":[]}", "0"},
                             {"{\"max_body\":-1,\"keys\":[]}", "0"}};
  for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
    CHECK(token_parse(limits[i][0], strlen(limits[i][0]), &t) == CKR_OK);
    CHECK(t.max_body == strtoul(limits[i][1], NULL, 10));
    token_listing_free(&t);
  }

  CHECK(token_parse("{\"keys\":", 8, &t) == CKR_DEVICE_ERROR);
  CHECK(token_parse("[]", 2, &t) == CKR_DEVICE_ERROR);
}

/* A P-256 key in message mode and in digest mode: which mechanisms, and how. */
static void test_ec_plans(void) {
  static const char *SPKI =
      "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAERmzwJufrhXMFiPlUCE5lvlzf9Wg6Lz7bPDCGY0f1ts5FPOsIW16Ocp8r"
      "4DEwC3m4mtn+T2Ex6KVHvGZC/ULDPQ==";
  char raw[128], json[1024];
  /* the raw point is the SPKI's last 65 bytes */
  unsigned char der[91];
  EVP_DecodeBlock(der, (const unsigned char *)SPKI, (int)strlen(SPKI));
  EVP_EncodeBlock((unsigned char *)raw, der + 26, 65);
  for (int digests = 0; digests <= 1; digests++) {
    snprintf(json, sizeof json,
             "{\"keys\":[{\"label\":\"ec\",\"key_type\":\"ec-p256\",\"public_key\":\"%s\","
             "\"public_key_raw\":\"%s\"%s}]}",
             SPKI, raw, digests ? ",\"digests\":[\"sha-256\",\"sha-384\",\"sha-512\"]" : "");
    token_listing t;
    CHECK(token_parse(json, strlen(json), &t) == CKR_OK && t.count == 1);
    if (t.count != 1) return;
    CK_MECHANISM_TYPE list[16];
    size_t n = mech_list(&t, list, 16);
    CHECK(n == (digests ? 4u : 1u));
    sign_plan plan;
    CK_MECHANISM m = {CKM_ECDSA_SHA256, NULL, 0};
    CHECK(mech_plan(t.keys[0], &m, &plan) == CKR_OK);
    CHECK(plan.mode == (digests ? MODE_DIGEST : MODE_MESSAGE));
    m.mechanism = CKM_ECDSA;
    CHECK(mech_plan(t.keys[0], &m, &plan) == (digests ? CKR_OK : CKR_KEY_TYPE_INCONSISTENT));
    m.mechanism = CKM_ECDSA_SHA384;
    CHECK(mech_plan(t.keys[0], &m, &plan) == (digests ? CKR_OK : CKR_KEY_TYPE_INCONSISTENT));
    CK_MECHANISM_INFO info;
    CHECK(mech_info(&t, CKM_ECDSA_SHA256, &info) == CKR_OK && info.ulMinKeySize == 256 &&
          (info.flags & (CKF_SIGN | CKF_VERIFY)) == (CKF_SIGN | CKF_VERIFY));
    CHECK(mech_info(&t, CKM_EDDSA, &info) == CKR_MECHANISM_INVALID);
    token_listing_free(&t);
  }
}

static void test_status_table(void) {
  CHECK(status_to_rv(200, "sign") == CKR_OK);
  CHECK(status_to_rv(403, "sign") == CKR_KEY_FUNCTION_NOT_PERMITTED);
  CHECK(status_to_rv(403, "token") == CKR_TOKEN_NOT_RECOGNIZED);
  CHECK(status_to_rv(413, "sign") == CKR_DATA_LEN_RANGE);
  CHECK(status_to_rv(422, "verify") == CKR_SIGNATURE_INVALID);
  CHECK(status_to_rv(429, "sign") == CKR_FUNCTION_FAILED);
  CHECK(status_to_rv(503, "sign") == CKR_FUNCTION_FAILED);
  CHECK(status_to_rv(502, "sign") == CKR_DEVICE_ERROR);
  CHECK(status_to_rv(500, "sign") == CKR_DEVICE_ERROR);
}

int main(void) {
  test_config();
  test_token();
  test_ec_plans();
  test_status_table();
  if (failures) {
    fprintf(stderr, "unit_test: %d failure(s)\n", failures);
    return 1;
  }
  printf("unit_test: ok\n");
  return 0;
}
