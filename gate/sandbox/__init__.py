"""Docker clean room: resolve the image digest, run each check in a fresh container."""
