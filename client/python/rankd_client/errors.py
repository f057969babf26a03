"""RankdError: what every failed call raises."""


class RankdError(Exception):
    """A failed call: `code` is a grpc.StatusCode, `message` the server's text
    (unchanged; with " (after N attempts)" when retries ran out), `attempts`
    how many calls were made."""

    def __init__(self, code, message, attempts=1):
        super().__init__("%s: %s" % (code.name, message))
        self.code = code
        self.message = message
        self.attempts = attempts
