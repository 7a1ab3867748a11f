# Makes a PKCS#12 file without a MAC whose safes are encrypted with the absent password (NULL: no
# password bytes at all in the PKCS#12 key derivation), the other reading of an empty passphrase, which
# `openssl pkcs12 -export -passout pass:` cannot write (it writes the empty BMPString, two zero bytes).
# OpenSSL's own PKCS12_create, called through ctypes with a NULL password and mac_iter -1 (no MAC).
#     python3 absent-passphrase.py cert.pem key.pem NAME CERT-PBE-OID KEY-PBE-OID OUT.p12
import ctypes, sys
cert_path, key_path, name, cert_pbe, key_pbe, out = sys.argv[1:7]
crypto = ctypes.CDLL('libcrypto.so.3')
for fn, res, args in [
    ('OSSL_PROVIDER_load', ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]),
    ('BIO_new_file', ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_char_p]),
    ('BIO_free', ctypes.c_int, [ctypes.c_void_p]),
    ('PEM_read_bio_PrivateKey', ctypes.c_void_p, [ctypes.c_void_p] * 4),
    ('PEM_read_bio_X509', ctypes.c_void_p, [ctypes.c_void_p] * 4),
    ('OBJ_txt2nid', ctypes.c_int, [ctypes.c_char_p]),
    ('PKCS12_create', ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                        ctypes.c_int]),
    ('i2d_PKCS12_bio', ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]),
]:
    getattr(crypto, fn).restype, getattr(crypto, fn).argtypes = res, args
# RC2-40 is in the legacy provider; the default one for everything else.
assert crypto.OSSL_PROVIDER_load(None, b'legacy') and crypto.OSSL_PROVIDER_load(None, b'default')
bio = crypto.BIO_new_file(key_path.encode(), b'r')
key = crypto.PEM_read_bio_PrivateKey(bio, None, None, None)
crypto.BIO_free(bio)
bio = crypto.BIO_new_file(cert_path.encode(), b'r')
cert = crypto.PEM_read_bio_X509(bio, None, None, None)
crypto.BIO_free(bio)
assert key and cert
nid_cert, nid_key = crypto.OBJ_txt2nid(cert_pbe.encode()), crypto.OBJ_txt2nid(key_pbe.encode())
assert nid_cert > 0 and nid_key > 0
p12 = crypto.PKCS12_create(None, name.encode(), key, cert, None, nid_key, nid_cert, 2048, -1, 0)
assert p12
bio = crypto.BIO_new_file(out.encode(), b'wb')
assert crypto.i2d_PKCS12_bio(bio, p12) == 1
crypto.BIO_free(bio)
