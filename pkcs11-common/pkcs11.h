/* The PKCS#11 v3.2 declarations of both of the project's modules — the client module
 * (libsvcd-pkcs11.so) and the test module (tests/module, svcmod) — written from the OASIS v3.2 base
 * specification (LP64: CK_ULONG is 8 bytes, natural alignment; ffi/pkcs11/layouts_test.ts checks
 * the layouts against it and against NSS's header). Only what the two modules use is declared; the
 * rest of each function table is filled with one stub answering CKR_FUNCTION_NOT_SUPPORTED. */
#ifndef SVCD_PKCS11_H
#define SVCD_PKCS11_H

#include <stddef.h>

typedef unsigned char CK_BYTE;
typedef CK_BYTE CK_CHAR;
typedef CK_BYTE CK_UTF8CHAR;
typedef CK_BYTE CK_BBOOL;
typedef unsigned long CK_ULONG;
typedef long CK_LONG;
typedef CK_ULONG CK_FLAGS;
typedef CK_ULONG CK_RV;
typedef CK_ULONG CK_SLOT_ID;
typedef CK_ULONG CK_SESSION_HANDLE;
typedef CK_ULONG CK_OBJECT_HANDLE;
typedef CK_ULONG CK_OBJECT_CLASS;
typedef CK_ULONG CK_KEY_TYPE;
typedef CK_ULONG CK_ATTRIBUTE_TYPE;
typedef CK_ULONG CK_MECHANISM_TYPE;
typedef CK_ULONG CK_USER_TYPE;
typedef CK_ULONG CK_STATE;
typedef CK_ULONG CK_HEDGE_TYPE;
typedef void *CK_VOID_PTR;

#define CK_TRUE 1
#define CK_FALSE 0
#define CK_UNAVAILABLE_INFORMATION (~0UL)
#define CK_EFFECTIVELY_INFINITE 0UL
#define CK_INVALID_HANDLE 0UL

typedef struct {
  CK_BYTE major;
  CK_BYTE minor;
} CK_VERSION;

typedef struct {
  CK_VERSION cryptokiVersion;
  CK_UTF8CHAR manufacturerID[32];
  CK_FLAGS flags;
  CK_UTF8CHAR libraryDescription[32];
  CK_VERSION libraryVersion;
} CK_INFO;

typedef struct {
  CK_UTF8CHAR slotDescription[64];
  CK_UTF8CHAR manufacturerID[32];
  CK_FLAGS flags;
  CK_VERSION hardwareVersion;
  CK_VERSION firmwareVersion;
} CK_SLOT_INFO;

typedef struct {
  CK_UTF8CHAR label[32];
  CK_UTF8CHAR manufacturerID[32];
  CK_UTF8CHAR model[16];
  CK_CHAR serialNumber[16];
  CK_FLAGS flags;
  CK_ULONG ulMaxSessionCount;
  CK_ULONG ulSessionCount;
  CK_ULONG ulMaxRwSessionCount;
  CK_ULONG ulRwSessionCount;
  CK_ULONG ulMaxPinLen;
  CK_ULONG ulMinPinLen;
  CK_ULONG ulTotalPublicMemory;
  CK_ULONG ulFreePublicMemory;
  CK_ULONG ulTotalPrivateMemory;
  CK_ULONG ulFreePrivateMemory;
  CK_VERSION hardwareVersion;
  CK_VERSION firmwareVersion;
  CK_CHAR utcTime[16];
} CK_TOKEN_INFO;

typedef struct {
  CK_SLOT_ID slotID;
  CK_STATE state;
  CK_FLAGS flags;
  CK_ULONG ulDeviceError;
} CK_SESSION_INFO;

typedef struct {
  CK_ATTRIBUTE_TYPE type;
  CK_VOID_PTR pValue;
  CK_ULONG ulValueLen;
} CK_ATTRIBUTE;

typedef struct {
  CK_MECHANISM_TYPE mechanism;
  CK_VOID_PTR pParameter;
  CK_ULONG ulParameterLen;
} CK_MECHANISM;

typedef struct {
  CK_ULONG ulMinKeySize;
  CK_ULONG ulMaxKeySize;
  CK_FLAGS flags;
} CK_MECHANISM_INFO;

typedef struct {
  void *CreateMutex, *DestroyMutex, *LockMutex, *UnlockMutex;
  CK_FLAGS flags;
  CK_VOID_PTR pReserved;
} CK_C_INITIALIZE_ARGS;

typedef struct {
  CK_HEDGE_TYPE hedgeVariant;
  CK_BYTE *pContext;
  CK_ULONG ulContextLen;
} CK_SIGN_ADDITIONAL_CONTEXT;

typedef struct {
  CK_BBOOL phFlag;
  CK_ULONG ulContextDataLen;
  CK_BYTE *pContextData;
} CK_EDDSA_PARAMS;

typedef struct {
  CK_UTF8CHAR *pInterfaceName;
  CK_VOID_PTR pFunctionList;
  CK_FLAGS flags;
} CK_INTERFACE;

/* Return values. */
#define CKR_OK 0x0UL
#define CKR_HOST_MEMORY 0x2UL
#define CKR_SLOT_ID_INVALID 0x3UL
#define CKR_GENERAL_ERROR 0x5UL
#define CKR_FUNCTION_FAILED 0x6UL
#define CKR_ARGUMENTS_BAD 0x7UL
#define CKR_CANT_LOCK 0xAUL
#define CKR_ATTRIBUTE_READ_ONLY 0x10UL
#define CKR_ATTRIBUTE_SENSITIVE 0x11UL
#define CKR_ATTRIBUTE_TYPE_INVALID 0x12UL
#define CKR_ATTRIBUTE_VALUE_INVALID 0x13UL
#define CKR_DATA_LEN_RANGE 0x21UL
#define CKR_DEVICE_ERROR 0x30UL
#define CKR_DEVICE_REMOVED 0x32UL
#define CKR_FUNCTION_NOT_SUPPORTED 0x54UL
#define CKR_KEY_HANDLE_INVALID 0x60UL
#define CKR_KEY_SIZE_RANGE 0x62UL
#define CKR_KEY_TYPE_INCONSISTENT 0x63UL
#define CKR_KEY_FUNCTION_NOT_PERMITTED 0x68UL
#define CKR_MECHANISM_INVALID 0x70UL
#define CKR_MECHANISM_PARAM_INVALID 0x71UL
#define CKR_OBJECT_HANDLE_INVALID 0x82UL
#define CKR_OPERATION_ACTIVE 0x90UL
#define CKR_OPERATION_NOT_INITIALIZED 0x91UL
#define CKR_PIN_INCORRECT 0xA0UL
#define CKR_PIN_INVALID 0xA1UL
#define CKR_PIN_LEN_RANGE 0xA2UL
#define CKR_PIN_LOCKED 0xA4UL
#define CKR_SESSION_CLOSED 0xB0UL
#define CKR_SESSION_COUNT 0xB1UL
#define CKR_SESSION_HANDLE_INVALID 0xB3UL
#define CKR_SESSION_PARALLEL_NOT_SUPPORTED 0xB4UL
#define CKR_SESSION_READ_ONLY 0xB5UL
#define CKR_SESSION_EXISTS 0xB6UL
#define CKR_SESSION_READ_ONLY_EXISTS 0xB7UL
#define CKR_SESSION_READ_WRITE_SO_EXISTS 0xB8UL
#define CKR_SIGNATURE_INVALID 0xC0UL
#define CKR_SIGNATURE_LEN_RANGE 0xC1UL
#define CKR_TEMPLATE_INCOMPLETE 0xD0UL
#define CKR_TEMPLATE_INCONSISTENT 0xD1UL
#define CKR_TOKEN_NOT_PRESENT 0xE0UL
#define CKR_USER_ALREADY_LOGGED_IN 0x100UL
#define CKR_USER_NOT_LOGGED_IN 0x101UL
#define CKR_USER_PIN_NOT_INITIALIZED 0x102UL
#define CKR_USER_TYPE_INVALID 0x103UL
#define CKR_USER_ANOTHER_ALREADY_LOGGED_IN 0x104UL
#define CKR_RANDOM_SEED_NOT_SUPPORTED 0x120UL
#define CKR_CURVE_NOT_SUPPORTED 0x140UL
#define CKR_BUFFER_TOO_SMALL 0x150UL
#define CKR_CRYPTOKI_NOT_INITIALIZED 0x190UL
#define CKR_CRYPTOKI_ALREADY_INITIALIZED 0x191UL
#define CKR_TOKEN_NOT_INITIALIZED 0x208UL
#define CKR_PARAMETER_SET_NOT_SUPPORTED 0x209UL

/* Flags. */
#define CKF_TOKEN_PRESENT 0x1UL
#define CKF_RNG 0x1UL
#define CKF_LOGIN_REQUIRED 0x4UL
#define CKF_USER_PIN_INITIALIZED 0x8UL
#define CKF_RESTORE_KEY_NOT_NEEDED 0x20UL
#define CKF_TOKEN_INITIALIZED 0x400UL
#define CKF_USER_PIN_COUNT_LOW 0x10000UL
#define CKF_USER_PIN_FINAL_TRY 0x20000UL
#define CKF_USER_PIN_LOCKED 0x40000UL
#define CKF_SO_PIN_COUNT_LOW 0x100000UL
#define CKF_SO_PIN_FINAL_TRY 0x200000UL
#define CKF_SO_PIN_LOCKED 0x400000UL
#define CKF_RW_SESSION 0x2UL
#define CKF_SERIAL_SESSION 0x4UL
#define CKF_OS_LOCKING_OK 0x2UL
#define CKF_INTERFACE_FORK_SAFE 0x1UL
#define CKF_DIGEST 0x400UL
#define CKF_SIGN 0x800UL
#define CKF_VERIFY 0x2000UL
#define CKF_GENERATE 0x8000UL
#define CKF_GENERATE_KEY_PAIR 0x10000UL
#define CKF_EC_F_P 0x100000UL
#define CKF_EC_OID 0x800000UL
#define CKF_EC_UNCOMPRESS 0x1000000UL

/* Users and session states. */
#define CKU_SO 0UL
#define CKU_USER 1UL
#define CKU_CONTEXT_SPECIFIC 2UL
#define CKS_RO_PUBLIC_SESSION 0UL
#define CKS_RO_USER_FUNCTIONS 1UL
#define CKS_RW_PUBLIC_SESSION 2UL
#define CKS_RW_USER_FUNCTIONS 3UL
#define CKS_RW_SO_FUNCTIONS 4UL

/* Object classes and key types. */
#define CKO_DATA 0x0UL
#define CKO_PUBLIC_KEY 0x2UL
#define CKO_PRIVATE_KEY 0x3UL
#define CKO_SECRET_KEY 0x4UL
#define CKK_EC 0x3UL
#define CKK_GENERIC_SECRET 0x10UL
#define CKK_EC_EDWARDS 0x40UL
#define CKK_ML_DSA 0x4AUL
#define CKK_COMPOSITE_MLDSA65_ED25519 0x80004202UL /* vendor: same number as the mechanism */

/* Attributes. */
#define CKA_CLASS 0x0UL
#define CKA_TOKEN 0x1UL
#define CKA_PRIVATE 0x2UL
#define CKA_LABEL 0x3UL
#define CKA_UNIQUE_ID 0x4UL
#define CKA_APPLICATION 0x10UL
#define CKA_VALUE 0x11UL
#define CKA_TRUSTED 0x86UL
#define CKA_KEY_TYPE 0x100UL
#define CKA_SUBJECT 0x101UL
#define CKA_ID 0x102UL
#define CKA_SENSITIVE 0x103UL
#define CKA_ENCRYPT 0x104UL
#define CKA_DECRYPT 0x105UL
#define CKA_WRAP 0x106UL
#define CKA_UNWRAP 0x107UL
#define CKA_SIGN 0x108UL
#define CKA_SIGN_RECOVER 0x109UL
#define CKA_VERIFY 0x10AUL
#define CKA_VERIFY_RECOVER 0x10BUL
#define CKA_DERIVE 0x10CUL
#define CKA_START_DATE 0x110UL
#define CKA_END_DATE 0x111UL
#define CKA_VALUE_LEN 0x161UL
#define CKA_EXTRACTABLE 0x162UL
#define CKA_LOCAL 0x163UL
#define CKA_NEVER_EXTRACTABLE 0x164UL
#define CKA_ALWAYS_SENSITIVE 0x165UL
#define CKA_KEY_GEN_MECHANISM 0x166UL
#define CKA_MODIFIABLE 0x170UL
#define CKA_COPYABLE 0x171UL
#define CKA_DESTROYABLE 0x172UL
#define CKA_EC_PARAMS 0x180UL
#define CKA_EC_POINT 0x181UL
#define CKA_ALWAYS_AUTHENTICATE 0x202UL
#define CKA_WRAP_WITH_TRUSTED 0x210UL
#define CKA_PARAMETER_SET 0x61DUL
#define CKA_SEED 0x637UL

/* Mechanisms. */
#define CKM_ML_DSA_KEY_PAIR_GEN 0x1CUL
#define CKM_ML_DSA 0x1DUL
#define CKM_ML_DSA_EXTERNAL_MU 0x403CUL /* PKCS#11 3.3 working draft: ML-DSA over a given mu */
#define CKM_SHA256 0x250UL
#define CKM_SHA256_HMAC 0x251UL
#define CKM_SHA384 0x260UL
#define CKM_SHA512 0x270UL
#define CKM_GENERIC_SECRET_KEY_GEN 0x350UL
#define CKM_EC_KEY_PAIR_GEN 0x1040UL
#define CKM_ECDSA 0x1041UL
#define CKM_ECDSA_SHA256 0x1044UL
#define CKM_EC_EDWARDS_KEY_PAIR_GEN 0x1055UL
#define CKM_EDDSA 0x1057UL
#define CKM_COMPOSITE_MLDSA65_ED25519 0x80004202UL /* vendor: draft-19 id-MLDSA65-Ed25519-SHA512 */

#define CKP_ML_DSA_44 0x1UL
#define CKP_ML_DSA_65 0x2UL
#define CKP_ML_DSA_87 0x3UL
#define CKH_HEDGE_PREFERRED 0x0UL
#define CKH_HEDGE_REQUIRED 0x1UL
#define CKH_DETERMINISTIC_REQUIRED 0x2UL

/* The function table: 68 entries in v2.40, 92 in 3.0, 104 in 3.2. Entries the module does not
 * implement point at one stub that ignores its arguments and answers CKR_FUNCTION_NOT_SUPPORTED
 * (safe with the x86-64 and AArch64 C calling conventions, where the caller owns the arguments). */
typedef void (*CK_ANY_FN)(void);

typedef struct {
  CK_VERSION version;
  CK_ANY_FN fn[104];
} CK_FUNCTION_LIST_3_2;

#define CK_TABLE_ENTRIES_2_40 68
#define CK_TABLE_ENTRIES_3_0 92
#define CK_TABLE_ENTRIES_3_2 104

/* What the client module needs besides: RSA keys and PSS, the other hash-and-sign ECDSA
 * mechanisms, the return codes it maps HTTP answers to. */
#define CKR_ACTION_PROHIBITED 0x1BUL
#define CKR_DEVICE_MEMORY 0x31UL
#define CKR_FUNCTION_CANCELED 0x50UL
#define CKR_KEY_NOT_NEEDED 0x64UL
#define CKR_OPERATION_CANCEL_FAILED 0x202UL
#define CKR_TOKEN_NOT_RECOGNIZED 0xE1UL
#define CKR_TOKEN_WRITE_PROTECTED 0xE2UL
#define CKF_HW_SLOT 0x4UL
#define CKF_WRITE_PROTECTED 0x2UL
#define CKF_PROTECTED_AUTHENTICATION_PATH 0x100UL
#define CKF_HW 0x1UL
#define CKK_RSA 0x0UL
#define CKA_MODULUS 0x120UL
#define CKA_MODULUS_BITS 0x121UL
#define CKA_PUBLIC_EXPONENT 0x122UL
#define CKA_PUBLIC_KEY_INFO 0x129UL
#define CKA_ALLOWED_MECHANISMS 0x40000600UL
#define CKM_RSA_PKCS_PSS 0x0DUL
#define CKM_SHA256_RSA_PKCS_PSS 0x43UL
#define CKM_SHA384_RSA_PKCS_PSS 0x44UL
#define CKM_SHA512_RSA_PKCS_PSS 0x45UL
#define CKM_ECDSA_SHA384 0x1045UL
#define CKM_ECDSA_SHA512 0x1046UL
#define CKG_MGF1_SHA256 0x2UL
#define CKG_MGF1_SHA384 0x3UL
#define CKG_MGF1_SHA512 0x4UL

/* Certificate objects: the X.509 certificate of a key, beside it with its CKA_ID and CKA_LABEL. */
#define CKO_CERTIFICATE 0x1UL
#define CKC_X_509 0x0UL
#define CKA_CERTIFICATE_TYPE 0x80UL
#define CKA_ISSUER 0x81UL
#define CKA_SERIAL_NUMBER 0x82UL
#define CKA_CERTIFICATE_CATEGORY 0x87UL
#define CKA_JAVA_MIDP_SECURITY_DOMAIN 0x88UL
#define CKA_URL 0x89UL
#define CKA_HASH_OF_SUBJECT_PUBLIC_KEY 0x8AUL
#define CKA_HASH_OF_ISSUER_PUBLIC_KEY 0x8BUL
#define CKA_CHECK_VALUE 0x90UL
#define CK_CERTIFICATE_CATEGORY_TOKEN_USER 0x1UL
#define CK_SECURITY_DOMAIN_UNSPECIFIED 0x0UL

typedef struct {
  CK_MECHANISM_TYPE hashAlg;
  CK_ULONG mgf;
  CK_ULONG sLen;
} CK_RSA_PKCS_PSS_PARAMS;

#endif
