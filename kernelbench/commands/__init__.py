"""One module per CLI command, each exposing a click `command`."""
