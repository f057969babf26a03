"""Channel settings shared by the sync and async clients: message limits,
TLS / mTLS credentials from PEM files and a bearer token from a file (the
same options as the C++ clients' --tls_ca_file, --tls_cert_file,
--tls_key_file, --token_file; client/tls.h)."""

import grpc

DEFAULT_MAX_MESSAGE_BYTES = 64 << 20
_MAX_FILE_BYTES = 1 << 20


def _read_small_file(name, path):
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_FILE_BYTES + 1)
    except OSError as e:
        raise ValueError("%s: %s: %s" % (name, path, e.strerror)) from e
    if len(data) > _MAX_FILE_BYTES:
        raise ValueError("%s: %s: larger than 1 MiB" % (name, path))
    return data


def tls_credentials(ca_file, cert_file=None, key_file=None):
    """grpc.ssl_channel_credentials from PEM files: the CAs of the server's
    certificate, and this client's certificate and key (mTLS) if given."""
    if bool(cert_file) != bool(key_file):
        raise ValueError("tls_cert_file and tls_key_file: give both or neither")
    root = _read_small_file("tls_ca_file", ca_file)
    if b"-----BEGIN CERTIFICATE-----" not in root:
        raise ValueError("tls_ca_file: %s: no PEM certificate in it" % ca_file)
    chain = _read_small_file("tls_cert_file", cert_file) if cert_file else None
    key = _read_small_file("tls_key_file", key_file) if key_file else None
    return grpc.ssl_channel_credentials(root_certificates=root, private_key=key,
                                        certificate_chain=chain)


def read_token(path):
    """The bearer token in `path` (surrounding whitespace stripped)."""
    token = _read_small_file("token_file", path).decode("ascii", "replace").strip()
    if not token or any(c <= " " or c > "~" for c in token):
        raise ValueError("token_file: %s: the token must be printable ASCII without spaces"
                         % path)
    return token


class ChannelSettings:
    """What a channel is made of: target, options, credentials (None =
    plaintext) and the bearer token ("" = none). Validates every argument,
    naming it."""

    def __init__(self, target, max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES, options=(),
                 credentials=None, tls_ca_file=None, tls_cert_file=None, tls_key_file=None,
                 token_file=None, tls_server_name=None):
        if not target:
            raise ValueError("target: must not be empty")
        if max_message_bytes <= 0 or max_message_bytes >= 1 << 31:
            raise ValueError("max_message_bytes: must be in [1, 2^31), got %r"
                             % (max_message_bytes,))
        self.target = target
        self.options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
        ] + list(options)
        if tls_ca_file:
            if credentials is not None:
                raise ValueError("give credentials or tls_ca_file, not both")
            credentials = tls_credentials(tls_ca_file, tls_cert_file, tls_key_file)
        elif tls_cert_file or tls_key_file:
            raise ValueError("tls_cert_file / tls_key_file: need tls_ca_file (mTLS is TLS first)")
        if tls_server_name:
            if credentials is None:
                raise ValueError("tls_server_name: needs TLS (tls_ca_file or credentials)")
            # The name the server's certificate must carry, when the target
            # is an address (or another name) that the certificate does not.
            self.options.append(("grpc.ssl_target_name_override", tls_server_name))
        self.credentials = credentials
        self.token = read_token(token_file) if token_file else ""

    def metadata(self, metadata):
        """`metadata` plus "authorization: Bearer <token>" when there is a token."""
        if not self.token:
            return metadata
        return list(metadata or ()) + [("authorization", "Bearer " + self.token)]

    def sync_channel(self):
        if self.credentials is None:
            return grpc.insecure_channel(self.target, options=self.options)
        return grpc.secure_channel(self.target, self.credentials, options=self.options)

    def aio_channel(self):
        if self.credentials is None:
            return grpc.aio.insecure_channel(self.target, options=self.options)
        return grpc.aio.secure_channel(self.target, self.credentials, options=self.options)
