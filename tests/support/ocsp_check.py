# Reads an OCSP response with Python `cryptography` (Debian's python3-cryptography), verifies its
# signature with the signer certificate's public key, and prints what it says as JSON.
# Usage: ocsp_check.py RESPONSE.der SIGNER.pem
import json
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.x509 import ocsp

resp = ocsp.load_der_ocsp_response(open(sys.argv[1], "rb").read())
if resp.response_status != ocsp.OCSPResponseStatus.SUCCESSFUL:
    print(json.dumps({"status": resp.response_status.name}))
    sys.exit(0)
pub = x509.load_pem_x509_certificate(open(sys.argv[2], "rb").read()).public_key()
data, sig = resp.tbs_response_bytes, resp.signature
if isinstance(pub, ec.EllipticCurvePublicKey):
    pub.verify(sig, data, ec.ECDSA(resp.signature_hash_algorithm))
elif isinstance(pub, ed25519.Ed25519PublicKey):
    pub.verify(sig, data)
elif isinstance(pub, rsa.RSAPublicKey) and resp.signature_algorithm_oid == x509.SignatureAlgorithmOID.RSASSA_PSS:
    pub.verify(sig, data, padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32), hashes.SHA256())
elif isinstance(pub, rsa.RSAPublicKey):
    # PKCS #1 v1.5 with the hash the response's signatureAlgorithm names (sha256WithRSAEncryption).
    pub.verify(sig, data, padding.PKCS1v15(), resp.signature_hash_algorithm)
else:
    raise SystemExit("unexpected key type")


def ts(d):
    return None if d is None else int(d.replace(tzinfo=__import__("datetime").timezone.utc).timestamp() * 1000)


try:
    nonce = resp.extensions.get_extension_for_class(x509.OCSPNonce).value.nonce.hex()
except x509.ExtensionNotFound:
    nonce = None
print(json.dumps({
    "status": resp.response_status.name,
    "verified": True,
    "responderKeyHash": resp.responder_key_hash.hex(),
    "certs": len(resp.certificates),
    "nonce": nonce,
    "responses": [{
        "serial": format(s.serial_number, "X"),
        "hash": s.hash_algorithm.name,
        "status": s.certificate_status.name,
        "revokedAt": ts(s.revocation_time),
        "reason": None if s.revocation_reason is None else s.revocation_reason.value,
        "thisUpdate": ts(s.this_update),
        "nextUpdate": ts(s.next_update),
    } for s in resp.responses],
}))
