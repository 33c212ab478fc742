"""The faces: the command line, the GitHub Action and the demo."""
