"""proofgate: prove a pull request's exact patch in a Docker clean room and sign a receipt."""

__version__ = "0.1.0"
