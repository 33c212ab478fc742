"""The faces: the command line, the Action, the demo and the text they print."""
