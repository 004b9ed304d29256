#include "key_type.h"

#include <string.h>

static const struct {
  const char *name;
  key_type type;
} KEY_TYPE_NAMES[] = {
    {"ec-p256", KT_EC_P256},     {"ec-p384", KT_EC_P384},     {"ed25519", KT_ED25519},
    {"rsa-3072", KT_RSA_3072},   {"rsa-3072-pkcs1v15", KT_RSA_3072_PKCS1V15},
    {"ml-dsa-44", KT_ML_DSA_44}, {"ml-dsa-65", KT_ML_DSA_65},
    {"ml-dsa-87", KT_ML_DSA_87}, {"composite-mldsa65-ed25519", KT_COMPOSITE},
};

key_type key_type_from_name(const char *name) {
  for (size_t i = 0; i < sizeof KEY_TYPE_NAMES / sizeof KEY_TYPE_NAMES[0]; i++)
    if (strcmp(name, KEY_TYPE_NAMES[i].name) == 0) return KEY_TYPE_NAMES[i].type;
  return KT_UNKNOWN;
}

size_t key_type_raw_length(key_type t) {
  switch (t) {
    case KT_EC_P256:
      return 65;
    case KT_EC_P384:
      return 97;
    case KT_ED25519:
      return 32;
    case KT_ML_DSA_44:
      return 1312;
    case KT_ML_DSA_65:
      return 1952;
    case KT_ML_DSA_87:
      return 2592;
    case KT_COMPOSITE:
      return 1952 + 32;
    default:
      return 0;
  }
}

const unsigned char *key_ec_params(key_type t, size_t *len) {
  static const unsigned char P256[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
  static const unsigned char P384[] = {0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22};
  static const unsigned char ED25519[] = {0x06, 0x03, 0x2b, 0x65, 0x70};
  const unsigned char *p = t == KT_EC_P256 ? P256 : t == KT_EC_P384 ? P384 : t == KT_ED25519 ? ED25519 : NULL;
  *len = p == P256 ? sizeof P256 : p == P384 ? sizeof P384 : p == ED25519 ? sizeof ED25519 : 0;
  return p;
}

CK_KEY_TYPE key_type_ckk(key_type t) {
  switch (t) {
    case KT_EC_P256:
    case KT_EC_P384:
      return CKK_EC;
    case KT_ED25519:
      return CKK_EC_EDWARDS;
    case KT_RSA_3072:
    case KT_RSA_3072_PKCS1V15:
      return CKK_RSA;
    case KT_COMPOSITE:
      return CKK_COMPOSITE_MLDSA65_ED25519;
    default:
      return CKK_ML_DSA;
  }
}

CK_ULONG key_type_parameter_set(key_type t) {
  return t == KT_ML_DSA_44 ? CKP_ML_DSA_44 : t == KT_ML_DSA_65 ? CKP_ML_DSA_65 : CKP_ML_DSA_87;
}

int key_type_is_rsa(key_type t) { return t == KT_RSA_3072 || t == KT_RSA_3072_PKCS1V15; }

int key_type_verified_here(key_type t) {
  return t == KT_EC_P256 || t == KT_EC_P384 || t == KT_ED25519 || key_type_is_rsa(t);
}
