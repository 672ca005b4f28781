"""SCRAM (RFC 5802, RFC 7677) as ``auth.scram`` serves it: the RFC 7677 test vector, a client
computed here from the RFC's formulas for SHA-512, and the refusals of malformed messages."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from rill.server.auth import scram

# RFC 7677 §3: user "user", password "pencil"
VECTOR_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
VECTOR_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
VECTOR_SALT = "W22ZaJ0SNY7soEsUEjb6gQ=="
VECTOR_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                       b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
VECTOR_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                       b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
VECTOR_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def vector_exchange(password: str = "pencil") -> scram.ScramExchange:
    credential = scram.derive(scram.SHA256, password, base64.b64decode(VECTOR_SALT), 4096)
    return scram.ScramExchange(scram.SHA256, scram.parse_client_first(VECTOR_CLIENT_FIRST),
                               credential, server_nonce=VECTOR_SERVER_NONCE)


def test_rfc_7677_vector_for_scram_sha_256():
    exchange = vector_exchange()
    assert exchange.server_first_message() == VECTOR_SERVER_FIRST
    assert exchange.verify(VECTOR_CLIENT_FINAL) == VECTOR_SERVER_FINAL


def test_librdkafka_before_2_6_1_repeats_its_nonce_in_client_final_and_is_accepted():
    exchange = vector_exchange()
    server_first = exchange.server_first_message().decode()
    client_nonce = "rOprNGfwEbeRWgbNEkqO"
    for nonce, accepted in ((client_nonce + exchange.nonce, True),
                            ("other" + exchange.nonce, False)):
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"n=user,r={client_nonce},{server_first},{without_proof}"
        final = proof_for("sha256", "pencil", VECTOR_SALT, 4096, auth_message, without_proof)
        if accepted:
            assert exchange.verify(final.encode()).startswith(b"v=")
        else:
            with pytest.raises(scram.ScramError, match="nonce"):
                exchange.verify(final.encode())


def proof_for(algorithm: str, password: str, salt: str, iterations: int, auth_message: str,
              without_proof: str) -> str:
    salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), base64.b64decode(salt), iterations)
    client_key = hmac.new(salted, b"Client Key", algorithm).digest()
    stored_key = hashlib.new(algorithm, client_key).digest()
    signature = hmac.new(stored_key, auth_message.encode(), algorithm).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


def test_the_vector_fails_with_another_password():
    with pytest.raises(scram.ScramError, match="Authentication failed"):
        vector_exchange("pencil2").verify(VECTOR_CLIENT_FINAL)


def client_final(algorithm: str, password: str, client_first_bare: str, server_first: str
                 ) -> tuple[str, bytes]:
    """RFC 5802 §3 from the client's side: (client-final message, expected ServerSignature)."""
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", algorithm).digest()
    stored_key = hashlib.new(algorithm, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, algorithm).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    server_key = hmac.new(salted, b"Server Key", algorithm).digest()
    return (f"{without_proof},p={base64.b64encode(proof).decode()}",
            hmac.new(server_key, auth_message, algorithm).digest())


@pytest.mark.parametrize("mechanism,algorithm", [(scram.SHA256, "sha256"),
                                                 (scram.SHA512, "sha512")])
def test_a_full_exchange_with_stored_credentials(mechanism, algorithm):
    credentials = scram.decode(scram.encode(scram.derive_all("s3cret")))  # as stored
    exchange = scram.ScramExchange(mechanism, scram.parse_client_first(b"n,,n=alice,r=abc123"),
                                   credentials[mechanism])
    server_first = exchange.server_first_message().decode()
    assert server_first.startswith("r=abc123") and len(server_first.split(",")[0]) > 12
    assert int(dict(p.split("=", 1) for p in server_first.split(","))["i"]) >= 4096
    final, server_signature = client_final(algorithm, "s3cret", "n=alice,r=abc123", server_first)
    assert exchange.verify(final.encode()) == b"v=" + base64.b64encode(server_signature)
    wrong, _ = client_final(algorithm, "s3cret!", "n=alice,r=abc123", server_first)
    with pytest.raises(scram.ScramError, match="Authentication failed"):
        exchange.verify(wrong.encode())


def test_stored_credentials_hold_no_password_and_a_new_salt_each_time():
    first, second = scram.derive_all("pencil-pencil"), scram.derive_all("pencil-pencil")
    text = scram.encode(first)
    assert "pencil" not in text and set(first) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert first["SCRAM-SHA-256"].salt != second["SCRAM-SHA-256"].salt
    assert all(c.iterations >= 4096 for c in first.values())
    with pytest.raises(ValueError):
        scram.derive(scram.SHA256, "pencil", iterations=1000)


def test_escaped_usernames_and_a_matching_authzid():
    first = scram.parse_client_first(b"n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=xyz")
    assert first.username == "a,b=c"


@pytest.mark.parametrize("token,message", [
    (b"p=tls-unique,,n=user,r=abc", "channel binding"),
    (b"n,a=other,n=user,r=abc", "authorization id"),
    (b"n,,n=user,r=abc,e=ext", "extensions"),
    (b"n,,r=abc,n=user", "malformed"),
    (b"n,,n=us=er,r=abc", "malformed"),
    (b"n,,n=user", "malformed"),
    (b"\xff\xfe", "UTF-8"),
])
def test_malformed_client_first_messages_are_refused(token, message):
    with pytest.raises(scram.ScramError, match=message):
        scram.parse_client_first(token)


@pytest.mark.parametrize("final,message", [
    (b"c=biws,r=rOprNGfwEbeRWgbNEkqO-other,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
     "nonce"),
    (b"c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "channel binding"),
    (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=!!", "proof"),
    (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", "malformed"),
])
def test_malformed_client_final_messages_are_refused(final, message):
    with pytest.raises(scram.ScramError, match=message):
        vector_exchange().verify(final)


def test_an_unknown_user_gets_a_stable_made_up_salt_and_never_logs_in():
    one = scram.fake_credential(scram.SHA256, "ghost")
    again = scram.fake_credential(scram.SHA256, "ghost")
    assert one.salt == again.salt and one.salt != scram.fake_credential(scram.SHA256, "x").salt
    exchange = scram.ScramExchange(scram.SHA256, scram.parse_client_first(b"n,,n=ghost,r=n1"),
                                   one)
    final, _ = client_final("sha256", "anything", "n=ghost,r=n1",
                            exchange.server_first_message().decode())
    with pytest.raises(scram.ScramError):
        exchange.verify(final.encode())
