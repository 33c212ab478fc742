"""GitHub adapter (PyGithub): pull requests, check runs, annotations, approvals."""
