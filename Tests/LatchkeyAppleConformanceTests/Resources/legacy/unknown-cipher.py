# Makes a PKCS#12 file whose certificate bag is encrypted with an algorithm no OpenSSL provider knows:
# the PBE OID pbeWithSHA1And40BitRC2-CBC (1.2.840.113549.1.12.1.6) becomes 1.2.840.113549.1.12.1.99,
# and the MAC is recomputed (PKCS#12 KDF, ID 3, SHA-1; HMAC-SHA1 over the authSafe content), so the
# passphrase still verifies and only the cipher is unreadable.
import hashlib, hmac, sys
src, dst, password = sys.argv[1], sys.argv[2], sys.argv[3]
data = bytearray(open(src, 'rb').read())
old = bytes.fromhex('06 0a 2a 86 48 86 f7 0d 01 0c 01 06'.replace(' ', ''))
new = old[:-1] + bytes([99])
assert data.count(old) == 1, data.count(old)
data[data.find(old):data.find(old) + len(old)] = new

def tlv(buf, pos):
    tag = buf[pos]; pos += 1
    length = buf[pos]; pos += 1
    if length & 0x80:
        n = length & 0x7f
        length = int.from_bytes(buf[pos:pos + n], 'big'); pos += n
    return tag, pos, length

def children(buf, start, end):
    out = []
    pos = start
    while pos < end:
        tag, body, length = tlv(buf, pos)
        out.append((tag, pos, body, length))
        pos = body + length
    return out

# PFX ::= SEQUENCE { version, authSafe ContentInfo, macData MacData }
_, body, length = tlv(data, 0)
version, auth, mac = children(data, body, body + length)
_, _, auth_body, auth_len = auth
oid, explicit = children(data, auth_body, auth_body + auth_len)
_, _, exp_body, exp_len = explicit
(_, _, octets_body, octets_len), = children(data, exp_body, exp_body + exp_len)
content = bytes(data[octets_body:octets_body + octets_len])
_, _, mac_body, mac_len = mac
digest_info, salt, iterations = children(data, mac_body, mac_body + mac_len)
salt_bytes = bytes(data[salt[2]:salt[2] + salt[3]])
iter_count = int.from_bytes(data[iterations[2]:iterations[2] + iterations[3]], 'big')
(_, _, di_body, di_len) = digest_info
alg, digest = children(data, di_body, di_body + di_len)

def pkcs12_kdf(password, salt, ident, iterations, n):
    u, v = 20, 64
    pw = (password + '\0').encode('utf-16-be') if password else b''
    D = bytes([ident]) * v
    S = (salt * ((v + len(salt) - 1) // len(salt)))[:v * ((len(salt) + v - 1) // v)] if salt else b''
    P = (pw * ((v + len(pw) - 1) // len(pw)))[:v * ((len(pw) + v - 1) // v)] if pw else b''
    I = bytearray(S + P)
    out = b''
    while len(out) < n:
        A = hashlib.sha1(D + bytes(I)).digest()
        for _ in range(iterations - 1):
            A = hashlib.sha1(A).digest()
        out += A
        B = (A * ((v + u - 1) // u))[:v]
        for j in range(0, len(I), v):
            block = int.from_bytes(I[j:j + v], 'big') + int.from_bytes(B, 'big') + 1
            I[j:j + v] = (block % (1 << (8 * v))).to_bytes(v, 'big')
    return out[:n]

key = pkcs12_kdf(password, salt_bytes, 3, iter_count, 20)
assert digest[3] == 20
data[digest[2]:digest[2] + 20] = hmac.new(key, content, hashlib.sha1).digest()
open(dst, 'wb').write(bytes(data))
